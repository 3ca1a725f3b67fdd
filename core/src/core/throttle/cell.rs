//! One limit as a generic cell rate algorithm (virtual scheduling) in exact integer
//! arithmetic, over blk-throttle's slice: a bio conforms once `now` reaches its theoretical
//! arrival time less the burst tolerance, and pushes that time on by its cost over the
//! rate; a group that fell behind for less than a slice may use the rate it left unused.

/// blk-throttle's slice (`throtl_slice`): 100 ms on a disk, 20 ms on flash
/// (`DFL_THROTL_SLICE_HD`, `DFL_THROTL_SLICE_SSD`). A group that left its rate unused for
/// less than a slice may still use it, as blk-throttle lets it within the slice.
pub(super) const SLICE_ROTATIONAL_NS: u64 = 100_000_000;
pub(super) const SLICE_FLASH_NS: u64 = 20_000_000;

/// One limit's state: the theoretical arrival time, scaled by the rate so that every step
/// is an integer (`tat × rate`, in ns·units/s).
#[derive(Debug, Clone, Copy)]
pub(super) struct Cell {
    pub(super) rate: u64,
    /// Tolerance: burst units, scaled as `tat`.
    pub(super) tolerance: u128,
    pub(super) tat: u128,
    /// Whether a bio went yet: before the first, the group left nothing unused.
    pub(super) started: bool,
}

impl Cell {
    pub(super) fn new(rate: u64, burst: u64) -> Self {
        Self {
            rate: rate.max(1),
            tolerance: u128::from(burst) * 1_000_000_000,
            tat: 0,
            started: false,
        }
    }

    /// When the next bio may go: the first nanosecond it conforms.
    pub(super) fn due(&self) -> u64 {
        let earliest = self.tat.saturating_sub(self.tolerance);
        u64::try_from(earliest.div_ceil(u128::from(self.rate))).unwrap_or(u64::MAX)
    }

    /// A bio costing `units` goes at `now_ns`, under a slice of `slice_ns`. Its cost runs from the theoretical time if
    /// the group was idle for less than a slice (and so from the nanosecond it became due,
    /// rounding never drifting the rate), else from a slice before `now_ns`: a group whose
    /// submitter fell behind for a moment (a client starved of CPU beside a busy tenant)
    /// gets its rate over the slice, and never more than a slice's worth at once.
    pub(super) fn charge(&mut self, now_ns: u64, units: u64, slice_ns: u64) {
        // The limit's one promise: nothing goes before it conforms.
        assert!(
            now_ns >= self.due(),
            "a bio let go at {now_ns} ns, before its limit allowed it at {} ns",
            self.due()
        );
        let now = u128::from(now_ns) * u128::from(self.rate);
        let reach = if self.started {
            u128::from(slice_ns) * u128::from(self.rate)
        } else {
            0
        };
        self.started = true;
        let base = self.tat.max(now.saturating_sub(reach));
        self.tat = base + u128::from(units) * 1_000_000_000;
    }

    /// This cell as it goes on under `rate` and `burst` from `now_ns`: unchanged when
    /// neither changed; otherwise the units it is owed (the debt past `now_ns`) are
    /// carried over at the new rate, so a change never forgives what was already spent.
    pub(super) fn retuned(self, now_ns: u64, rate: u64, burst: u64) -> Self {
        let fresh = Self::new(rate, burst);
        if fresh.rate == self.rate && fresh.tolerance == self.tolerance {
            return self;
        }
        // `tat` is ns × rate, so past `now` it is the units charged ahead, × 1e9, whatever
        // the rate: the same debt, repaid at the new one.
        let owed = self
            .tat
            .saturating_sub(u128::from(now_ns) * u128::from(self.rate));
        Self {
            tat: u128::from(now_ns) * u128::from(fresh.rate) + owed,
            ..fresh
        }
    }
}
