//! What the scheduler knows of each process's habits (the kernel's `as_io_context`) and of
//! processes new to it: think time and seek distance, each a mean decayed by 7/8 per
//! sample in fixed point (1.0 = 256), as `as_update_thinktime` and `as_update_seekdist`.

/// Longest think time counted, in µs (`MAX_THINKTIME`, 20 ms): a process in a non-I/O phase
/// pays a small penalty, and one that always thinks long is still caught.
pub const MAX_THINKTIME_US: u64 = 20_000;

/// One fixed-point decay step: `(7 * total + 256 * sample) / 8`.
fn decayed(total: u64, sample: u64) -> u64 {
    total
        .saturating_mul(7)
        .saturating_add(sample.saturating_mul(256))
        / 8
}

/// One submitter's I/O history.
#[derive(Debug, Default, Clone)]
pub struct History {
    /// Its requests waiting in the scheduler.
    pub nr_queued: u32,
    /// It has queued a sync request (`AS_TASK_IOSTARTED`).
    pub io_started: bool,
    /// A sync request of it has completed (`AS_TASK_IORUNNING`).
    pub io_running: bool,
    /// When its last sync request completed.
    pub last_end_request_ns: u64,
    /// Decayed think-time samples and total (fixed point), and their mean in µs.
    pub ttime_samples: u64,
    ttime_total: u64,
    pub ttime_mean_us: u64,
    /// Decayed seek samples and total (fixed point), and their mean in sectors.
    pub seek_samples: u64,
    seek_total: u64,
    pub seek_mean: u64,
    /// Where its last sync request ended.
    pub last_request_pos: u64,
}

/// What the scheduler expects of a process it has no samples of yet, learnt from the first
/// samples of every process (`new_ttime_mean`, `new_seek_mean`, `exit_prob`).
#[derive(Debug, Default, Clone)]
pub struct Newcomers {
    ttime_total: u64,
    /// Mean first think time, in µs.
    pub ttime_mean_us: u64,
    seek_total: u64,
    /// Mean first seek, in sectors.
    pub seek_mean: u64,
    /// Probability (of 256) that an anticipated process has gone away.
    pub exit_prob: u64,
}

impl Newcomers {
    /// An anticipation of a process with no think-time samples ran out
    /// (`as_antic_timeout`): it may have gone away.
    pub fn timed_out_unknown(&mut self) {
        self.exit_prob = decayed(self.exit_prob, 1);
    }
}

impl History {
    /// A think time of `ttime_us` before this process's next sync request.
    pub fn think(&mut self, new: &mut Newcomers, ttime_us: u64) {
        if self.ttime_samples == 0 {
            new.ttime_total = decayed(new.ttime_total, ttime_us);
            new.ttime_mean_us = new.ttime_total / 256;
            new.exit_prob = new.exit_prob.saturating_mul(7) / 8;
        }
        self.ttime_samples = decayed(self.ttime_samples, 1);
        self.ttime_total = decayed(self.ttime_total, ttime_us);
        self.ttime_mean_us = self.ttime_total.saturating_add(128) / self.ttime_samples;
    }

    /// A seek of `sdist` sectors to this process's next sync request, clamped so that an odd
    /// fragment or page-in does not swamp the mean.
    pub fn seek(&mut self, new: &mut Newcomers, sdist: u64) {
        if self.seek_samples == 0 {
            new.seek_total = decayed(new.seek_total, sdist);
            new.seek_mean = new.seek_total / 256;
        }
        let slack = if self.seek_samples <= 60 {
            2 * 1024 * 1024
        } else {
            2 * 1024 * 64
        };
        let sdist = sdist.min(self.seek_mean.saturating_mul(4).saturating_add(slack));
        self.seek_samples = decayed(self.seek_samples, 1);
        self.seek_total = decayed(self.seek_total, sdist);
        self.seek_mean = self.seek_total.saturating_add(self.seek_samples / 2) / self.seek_samples;
    }

    /// A sync request of this process, `sector`..`end`, enters the scheduler at `now_ns`
    /// (`as_update_iohist`): its think time since the last completion, if nothing of it was
    /// waiting, and its seek from where its last request ended.
    pub fn queued_sync(&mut self, new: &mut Newcomers, now_ns: u64, sector: u64, end: u64) {
        if self.io_running || self.io_started {
            let ttime_us = if self.io_running && self.nr_queued == 0 {
                (now_ns.saturating_sub(self.last_end_request_ns) / 1000).min(MAX_THINKTIME_US - 1)
            } else {
                0
            };
            self.think(new, ttime_us);
            self.seek(new, self.last_request_pos.abs_diff(sector));
        }
        self.last_request_pos = end;
        self.io_started = true;
    }

    /// A sync request of this process left the scheduler's hands for good, completed or
    /// merged away (`as_put_io_context`).
    pub fn ended_sync(&mut self, now_ns: u64) {
        self.io_running = true;
        self.last_end_request_ns = now_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_time_mean_converges_to_the_samples() {
        let (mut h, mut new) = (History::default(), Newcomers::default());
        for _ in 0..64 {
            h.think(&mut new, 3000);
        }
        // The integer decay of the sample count settles at 249 of 256, so the mean settles
        // at 256/249 of the samples, as the kernel's does.
        assert!(
            h.ttime_mean_us.abs_diff(3000 * 256 / 249) <= 2,
            "{}",
            h.ttime_mean_us
        );
        // Only the first sample speaks for newcomers: 3000 decayed in once.
        assert_eq!(new.ttime_mean_us, 3000 * 256 / 8 / 256);
    }

    #[test]
    fn a_huge_seek_is_clamped_after_the_first_samples() {
        let (mut h, mut new) = (History::default(), Newcomers::default());
        for _ in 0..40 {
            h.seek(&mut new, 8);
        }
        h.seek(&mut new, u64::MAX);
        // Clamped to 4 × mean + 128 Ki sectors, decayed in at 1/8 (over 249 samples of 256).
        let clamped = (7 * 8 * 256 / 8 + (4 * 8 + 2 * 1024 * 64) * 256 / 8) / 249;
        assert!(
            h.seek_mean.abs_diff(clamped) <= 8,
            "{} vs {clamped}",
            h.seek_mean
        );
    }

    #[test]
    fn think_time_counts_only_when_nothing_of_the_process_waits() {
        let (mut h, mut new) = (History::default(), Newcomers::default());
        h.queued_sync(&mut new, 0, 0, 8);
        assert_eq!(
            h.ttime_samples, 0,
            "the first request has no think time before it"
        );
        h.ended_sync(1_000_000);
        h.queued_sync(&mut new, 5_000_000, 8, 16);
        // 4000 µs, plus the fixed point's rounding (128 over 32 samples so far).
        assert_eq!(h.ttime_mean_us, 4004);
        // Far past MAX_THINKTIME: counted as just under it (and the mean settles at 256/249
        // of that).
        h.ended_sync(10_000_000);
        for _ in 0..64 {
            h.queued_sync(&mut new, u64::MAX, 16, 24);
        }
        assert!(
            (19_000..21_000).contains(&h.ttime_mean_us),
            "{}",
            h.ttime_mean_us
        );
    }
}
