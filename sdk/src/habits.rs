//! What the kernel's per-process schedulers learn of a submitter from its requests: how
//! often it seeks, and how long it thinks between a completion and its next request
//! (`cfq_update_io_seektime` and `cfq_update_io_thinktime`, bfq's alike). cfq decides its
//! idle window by them, bfq whether idling pays and whether a queue is slow.

use crate::Sector;

/// A request is a seek when it starts more than this many sectors from where the
/// submitter's last one ended (`CFQQ_SEEK_THR`, `BFQQ_SEEK_THR`: 800 sectors).
pub const SEEK_THRESHOLD: u64 = 8 * 100;
/// On flash a request under this many sectors counts as a seek (`CFQQ_SECT_THR_NONROT`,
/// `BFQQ_SECT_THR_NONROT`: 64): small requests are what cost a device without a head.
pub const SMALL_ON_FLASH: u32 = 2 * 32;

/// What makes a request a seek.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeekRule {
    /// Far from the last one: a disk (cfq and bfq on a rotational device).
    Far,
    /// Small, wherever it lies: cfq on flash (`cfq_update_io_seektime`).
    Small,
    /// Far and small: bfq on flash (`BFQ_RQ_SEEKY`).
    FarAndSmall,
}

impl SeekRule {
    /// Whether a request of `sectors` starting `distance` sectors from the last one's end
    /// is a seek.
    fn seek(self, distance: Option<u64>, sectors: u32) -> bool {
        let far = distance.is_some_and(|d| d > SEEK_THRESHOLD);
        let small = sectors < SMALL_ON_FLASH;
        match self {
            Self::Far => far,
            Self::Small => small,
            Self::FarAndSmall => far && small,
        }
    }
}
/// Decayed think-time samples before the mean counts (cfq's and bfq's `sample_valid`).
const VALID_SAMPLES: u64 = 80;

/// A submitter's seeks and think time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Habits {
    /// One bit per request, newest lowest: it lay more than [`SEEK_THRESHOLD`] from the
    /// last.
    seek_history: u32,
    /// Where its last request ended.
    last_end: Option<Sector>,
    /// When its last request completed.
    last_completion: Option<u64>,
    /// Think time: decayed sample count and total (×256), as `cfq_ttime` keeps them.
    ttime_samples: u64,
    ttime_total: u64,
}

impl Habits {
    /// More than 4 of its last 32 requests were seeks (`CFQQ_SEEKY`).
    pub fn seeky(&self) -> bool {
        self.seeks() > 32 / 8
    }

    /// How many of its last 32 requests were seeks (bfq's `BFQQ_SEEKY` asks for more than
    /// 19 since Linux 4.19).
    pub fn seeks(&self) -> u32 {
        self.seek_history.count_ones()
    }

    /// Its mean think time in ns, once it has enough samples.
    pub fn think_time(&self) -> Option<u64> {
        (self.ttime_samples > VALID_SAMPLES)
            .then(|| (self.ttime_total + 128) / self.ttime_samples.max(1))
    }

    /// When its last request completed, if one has.
    pub fn last_completion(&self) -> Option<u64> {
        self.last_completion
    }

    /// Its think time is known and longer than `limit_ns` (bfq's `!has_short_ttime`,
    /// cfq's reason to close the idle window).
    pub fn thinks_longer_than(&self, limit_ns: u64) -> bool {
        self.think_time().is_some_and(|t| t > limit_ns)
    }

    /// A request of its at `start` for `sectors` arrived at `now_ns`: a seek sample by
    /// `rule` and, if one of its requests completed before, a think-time sample, capped at
    /// `cap_ns` as the kernel caps it (twice `slice_idle`).
    pub fn arrived(
        &mut self,
        now_ns: u64,
        (start, sectors): (Sector, u32),
        rule: SeekRule,
        cap_ns: u64,
    ) {
        let distance = self.last_end.map(|end| end.0.abs_diff(start.0));
        let seek = rule.seek(distance, sectors);
        self.seek_history = (self.seek_history << 1) | u32::from(seek);
        self.last_end = Some(Sector(start.0.saturating_add(u64::from(sectors))));
        if let Some(done) = self.last_completion {
            let ttime = now_ns.saturating_sub(done).min(cap_ns);
            self.ttime_samples = (7 * self.ttime_samples + 256) / 8;
            self.ttime_total = (7 * self.ttime_total + 256 * ttime) / 8;
        }
    }

    /// One of its requests completed at `now_ns`.
    pub fn completed(&mut self, now_ns: u64) {
        self.last_completion = Some(now_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_random_submitter_turns_seeky_and_a_slow_thinker_is_known_by_its_samples() {
        let mut h = Habits::default();
        for i in 0..5u64 {
            h.arrived(0, (Sector(i * 1_000_000), 8), SeekRule::Far, 16_000_000);
        }
        assert!(!h.seeky(), "4 seeks in 32 are not yet seeky");
        h.arrived(0, (Sector(99_000_000), 8), SeekRule::Far, 16_000_000);
        assert!(h.seeky());
        let mut t = Habits::default();
        let mut now = 0;
        for i in 0..40u64 {
            t.completed(now);
            now += 10_000_000;
            t.arrived(now, (Sector(i * 8), 8), SeekRule::Far, 16_000_000);
        }
        assert!(!t.seeky(), "sequential");
        assert!(t.thinks_longer_than(8_000_000) && !t.thinks_longer_than(11_000_000));
    }

    #[test]
    fn on_flash_a_seek_is_a_small_request_for_cfq_and_a_far_small_one_for_bfq() {
        let far_small = (Some(10_000), 8);
        let near_small = (Some(0), 8);
        let far_large = (Some(10_000), 256);
        let seeks =
            |rule: SeekRule| [far_small, near_small, far_large].map(|(d, s)| rule.seek(d, s));
        assert_eq!(seeks(SeekRule::Far), [true, false, true]);
        assert_eq!(seeks(SeekRule::Small), [true, true, false]);
        assert_eq!(seeks(SeekRule::FarAndSmall), [true, false, false]);
    }
}
