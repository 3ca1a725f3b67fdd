//! The bound's floor, learnt: while the device runs at about the floor, a trial now and then
//! lets it hold twice the floor, and the floor rises if the device completes 5 % more there
//! (`device_share`'s note says why).

use super::{DeviceShare, WINDOW};

/// Windows each side of a floor trial is measured over: a window's rate is a few percent
/// off from one to the next, about the gain the trial looks for.
const TRIAL_WINDOWS: u32 = 4;
/// The floor rises where twice it completes this many twentieths more (5 %).
const GAIN_AT_DEPTH: u64 = 21;
/// Windows between floor trials, at first and at most: a trial that finds no gain doubles
/// the wait, so a floor that is right costs a trial's windows ever more rarely.
const TRIAL_WAIT: u32 = 8;
const TRIAL_WAIT_MAX: u32 = 1024;

/// What the device completes at a depth, summed over windows: by Little's law its rate is
/// the mean number on it over the mean service time, `depth_sum / service_sum_ns` (the
/// windows' counts cancel). The number is what each request found on the device when it
/// was sent, itself included: counted at completions instead, the requests sent while a
/// trial filled the device to its depth, each served behind fewer than that, made a device
/// that serves one at a time look a third faster at twice the floor.
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    depth_sum: u64,
    service_sum_ns: u64,
    windows: u32,
}

impl Rate {
    fn add(&mut self, depth_sum: u64, service_sum_ns: u64) {
        self.depth_sum = self.depth_sum.saturating_add(depth_sum);
        self.service_sum_ns = self.service_sum_ns.saturating_add(service_sum_ns);
        self.windows += 1;
    }

    /// Whether `self` completes [`GAIN_AT_DEPTH`] twentieths of `other`'s rate or more.
    fn gains_over(&self, other: &Rate) -> bool {
        let (a, b) = (u128::from(self.depth_sum), u128::from(self.service_sum_ns));
        let (c, d) = (
            u128::from(other.depth_sum),
            u128::from(other.service_sum_ns),
        );
        // a / b ≥ 21/20 × c / d, cross-multiplied.
        a * d * 20 >= c * b * u128::from(GAIN_AT_DEPTH)
    }

    /// The mean number on the device.
    fn mean_depth(&self) -> u32 {
        let completions = u64::from(self.windows) * u64::from(WINDOW);
        u32::try_from(self.depth_sum / completions.max(1)).unwrap_or(u32::MAX)
    }
}

/// The floor's trials: windows at the floor are measured, and now and then the device may
/// hold twice the floor for [`TRIAL_WINDOWS`] windows.
#[derive(Debug, Clone, Copy)]
pub(super) struct Knee {
    /// Windows at about the floor since the last trial (the last [`TRIAL_WINDOWS`] kept).
    at_floor: Rate,
    /// Windows to go before the next trial, and the wait after a trial that found nothing.
    wait: u32,
    backoff: u32,
    /// The trial under way: the depth it allows and what it measured so far.
    trial: Option<(u32, Rate)>,
    /// A trial's first completions not measured: the requests sent while the device
    /// filled to its depth, each served behind fewer than that.
    ramp: u32,
}

impl Knee {
    /// Whether a trial is under way.
    pub(super) fn in_trial(&self) -> bool {
        self.trial.is_some()
    }

    /// Whether the wait before the next trial has grown (a trial found nothing).
    #[cfg(test)]
    pub(super) fn backed_off(&self) -> bool {
        self.backoff > TRIAL_WAIT
    }

    /// Whether a trial's completion falls in its ramp, and is not measured (counted off).
    pub(super) fn skips_ramp(&mut self) -> bool {
        if self.trial.is_none() || self.ramp == 0 {
            return false;
        }
        self.ramp -= 1;
        true
    }
}

impl Default for Knee {
    fn default() -> Self {
        Self {
            at_floor: Rate::default(),
            wait: TRIAL_WAIT,
            backoff: TRIAL_WAIT,
            trial: None,
            ramp: 0,
        }
    }
}

impl DeviceShare {
    /// The floor in force: a trial's depth while one runs.
    pub(super) fn floor(&self) -> u32 {
        self.knee.trial.map_or(self.floor, |(depth, _)| depth)
    }

    /// A window of a floor trial: counted, and once it has [`TRIAL_WINDOWS`], judged
    /// against the windows at the floor before it. Whether a trial took the window.
    pub(super) fn judge_trial(&mut self, depth_sum: u64, sum_ns: u64) -> bool {
        let Some((depth, mut deep)) = self.knee.trial else {
            return false;
        };
        deep.add(depth_sum, sum_ns);
        if deep.windows < TRIAL_WINDOWS {
            self.knee.trial = Some((depth, deep));
            return true;
        }
        let knee = &mut self.knee;
        knee.trial = None;
        if deep.gains_over(&knee.at_floor) {
            // Halfway to what the device held: a step short of a depth that may not be
            // needed whole, and the next trial goes on from there.
            let held = deep.mean_depth().clamp(self.floor, depth);
            self.floor = (self.floor + held).div_ceil(2).min(self.tags);
            knee.backoff = TRIAL_WAIT;
        } else {
            knee.backoff = knee.backoff.saturating_mul(2).min(TRIAL_WAIT_MAX);
        }
        knee.wait = knee.backoff;
        knee.at_floor = Rate::default();
        true
    }

    /// A window while the bound holds: if the device ran at about the floor (a tenth
    /// either side), it is measured, and a trial of twice the floor starts when its wait is
    /// over.
    pub(super) fn watch_floor(&mut self, depth_sum: u64, sum_ns: u64) {
        let mean_depth = depth_sum / u64::from(WINDOW);
        let floor = u64::from(self.floor);
        let at_floor = mean_depth * 10 >= floor * 9 && mean_depth * 10 <= floor * 11;
        let contended = self.per_group.len() >= 2;
        if !(self.saturated && self.probe.is_none() && at_floor && contended) {
            return;
        }
        let knee = &mut self.knee;
        if knee.at_floor.windows == TRIAL_WINDOWS {
            knee.at_floor = Rate::default();
        }
        knee.at_floor.add(depth_sum, sum_ns);
        knee.wait = knee.wait.saturating_sub(1);
        let deeper = self.floor.saturating_mul(2).min(self.tags);
        if knee.wait == 0 && knee.at_floor.windows == TRIAL_WINDOWS && deeper > self.floor {
            knee.trial = Some((deeper, Rate::default()));
            knee.ramp = deeper - self.floor;
        }
    }
}
