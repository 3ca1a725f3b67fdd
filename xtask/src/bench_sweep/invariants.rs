//! Each cell judged against the invariants: shares from the IOPS logs after the ramp,
//! throughput against noop's on flash, no backlogged group starved in any window, limits held.

use super::*;

/// What each group's IOPS log says (an entry per 100 ms window with completions).
pub(super) struct Logged {
    /// Per group, the windows (by index from 0) in which it completed I/O.
    pub(super) windows: Vec<Vec<bool>>,
    /// Per group, the I/Os it completed from the end of the run's first fifth to the end of
    /// its run time: the shares are judged on them. Not the report's totals, which also
    /// count what drains after the run time (on a disk, a group of weight 1 with 281
    /// requests outstanding when the jobs stop gets them all served in the next second, more
    /// than its weight gave it over the run), nor the first fifth, fio's `ramp_time`: the
    /// device's queue fills in arrival order before a policy's bound sees it saturated (a
    /// group of weight 3 beside 740 on `sim:ssd` got about 120 I/Os more than its weight's
    /// part in the first 100 ms, 14 % of its part of the whole run).
    pub(super) ios: Vec<f64>,
    /// Per group, the I/Os it completed before the end of its run time, the first fifth
    /// included: what starvation over the run is judged on.
    pub(super) in_run: Vec<f64>,
    /// Per 100 ms window, the I/Os every group together completed in it.
    pub(super) window_ios: Vec<f64>,
    /// Per group, per window, the I/Os it completed in it.
    pub(super) group_window_ios: Vec<Vec<f64>>,
}

pub(super) fn read_logs(logs: &Path, groups: usize, runtime_ms: u64) -> Result<Logged> {
    let count = (runtime_ms / WINDOW_MS) as usize;
    let ramp = count / SHARE_RAMP_PARTS;
    let per_group = (0..groups)
        .map(|g| {
            let mut seen = vec![false; count];
            let mut per_window = vec![0.0; count];
            let (mut ios, mut in_run) = (0.0, 0.0);
            // fio numbers each job's log by its place among the jobs, from 1.
            let path = logs.join(format!("g{g}_iops.{}.log", g + 1));
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            for line in text.lines() {
                let mut fields = line.split(',').map(str::trim);
                let (ms, iops) = fields
                    .next()
                    .and_then(|t| t.parse::<u64>().ok())
                    .zip(fields.next().and_then(|v| v.parse::<f64>().ok()))
                    .with_context(|| format!("{}: {line:?}", path.display()))?;
                // An entry is stamped at its window's end.
                let w = (ms.saturating_sub(1) / WINDOW_MS) as usize;
                if let Some(slot) = seen.get_mut(w) {
                    *slot = true;
                    let done = iops * WINDOW_MS as f64 / 1000.0;
                    per_window[w] += done;
                    in_run += done;
                    if w >= ramp {
                        ios += done;
                    }
                }
            }
            Ok((seen, (ios, in_run, per_window)))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut window_ios = vec![0.0; count];
    let (mut windows, mut ios, mut in_run) = (Vec::new(), Vec::new(), Vec::new());
    let mut group_window_ios = Vec::new();
    for (seen, (group_ios, group_in_run, per_window)) in per_group {
        for (total, done) in window_ios.iter_mut().zip(&per_window) {
            *total += done;
        }
        windows.push(seen);
        ios.push(group_ios);
        in_run.push(group_in_run);
        group_window_ios.push(per_window);
    }
    Ok(Logged {
        windows,
        ios,
        in_run,
        window_ios,
        group_window_ios,
    })
}

/// Total IOPS at least [`THROUGHPUT_FLOOR`] × noop's, judged on flash (a disk's throughput
/// depends on the order a policy sorts, which may be better or worse than arrival order:
/// counted apart). A policy that idles on purpose (it gives a queue the device for a
/// slice, or waits for a queue's next request) is named rather than failed where it held
/// requests back from free driver tags for at least the part of the run it lost.
///
/// A policy that bounds the device for shares is named too where the shares cap the device
/// (`capped`: the shares' depth and noop's IOPS with the device held to it) and it ran at
/// [`THROUGHPUT_FLOOR`] or more of that: the heaviest group holds its part only while
/// requests of its own wait, and flash completes fewer reads the fewer it holds (two groups
/// 4:312 at iodepth 84 leave the device 85 of noop's 168, where `sim:ssd` completes about
/// 0.86 of noop's IOPS: mclock ran at 0.83 of noop's, 0.96 of what noop does at 85).
pub(super) fn throughput(
    sweep: &mut Sweep,
    i: usize,
    cell: &Cell,
    ours: &Ran,
    noop: &Ran,
    capped: Option<(u32, f64)>,
) {
    let ratio = ours.iops / noop.iops.max(1.0);
    if cell.device != FLASH {
        let (checked, held, worst) = &mut sweep.disk_throughput;
        *checked += 1;
        *held += usize::from(ratio >= THROUGHPUT_FLOOR);
        *worst = worst.min(ratio);
        return;
    }
    let idles = SLICING.contains(&cell.policy) || cell.swap.is_some_and(|to| SLICING.contains(&to));
    if ratio < THROUGHPUT_FLOOR && idles && ours.held >= 1.0 - ratio {
        sweep.idled.push((i, ratio, ours.held));
        return;
    }
    if let Some((depth, at_depth)) = capped {
        let of_capped = ours.iops / at_depth.max(1.0);
        if ratio < THROUGHPUT_FLOOR && of_capped >= THROUGHPUT_FLOOR {
            sweep.capped.push((i, ratio, depth, of_capped));
            return;
        }
    }
    sweep.worst_ratio = sweep.worst_ratio.min(ratio);
    let tally = sweep.by_policy.entry(cell.policy).or_default();
    tally[0] += 1;
    tally[1] += usize::from(ratio >= THROUGHPUT_FLOOR);
    sweep.judge(1, i, THROUGHPUT_FLOOR - ratio, || {
        format!(
            "{ratio:.3} of noop's {:.0} IOPS (requests held from free tags {:.0} % of the run)",
            noop.iops,
            ours.held * 100.0
        )
    });
}

/// Every group completed I/O in every window in which its weight's part of the run's I/O
/// (or an equal part, under a policy that serves no weights; the policy that ran the
/// window, in a cell that swaps) was at least
/// [`OWED_PER_WINDOW`]; a limited group is owed no more than its limit. Judged on flash
/// under policies that give no queue the device for a slice; elsewhere every group
/// completes I/O over the run, and the windows are counted apart: on a disk a policy that
/// sorts by sector may leave a group's region a full sweep or a read expiry (deadline's
/// 500 ms) without service, and a slicing policy gives each queue in turn up to its slice
/// (cfq's 100 ms, bfq's 125 ms budget timeout), so a group waits for the others' slices.
/// Over the run means before its run time ended (the drain after it completes everything a
/// group had outstanding), where the group was owed [`OWED_PER_WINDOW`] I/Os or more.
pub(super) fn starvation(sweep: &mut Sweep, i: usize, cell: &Cell, ours: &Ran, logged: &Logged) {
    let per_window = ours.iops * WINDOW_MS as f64 / 1000.0;
    let mut starved = Vec::new();
    for (g, seen) in logged.windows.iter().enumerate() {
        let rate = sweep.rates[i].filter(|_| cell.limit.is_some_and(|(l, _)| l == g));
        for (w, _) in seen.iter().enumerate().filter(|&(_, &io)| !io) {
            // Owed by the policy that ran the window, from its start.
            let policy = cell.policy_at(w as u64 * WINDOW_MS);
            let mut owed = cell.part_under(g, policy) * per_window;
            if let Some(rate) = rate {
                owed = owed.min(rate as f64 * WINDOW_MS as f64 / 1000.0);
            }
            if owed >= OWED_PER_WINDOW {
                starved.push(format!("g{g} in window {w} ({owed:.0} I/Os owed)"));
            }
        }
    }
    let invariant = if cell.serves_groups() { 2 } else { 6 };
    if cell.windows_judged() {
        sweep.judge(invariant, i, starved.len() as f64, || starved.join(", "));
        return;
    }
    sweep.disk_windows[0] += 1;
    sweep.disk_windows[1] += usize::from(starved.is_empty());
    // Before the run time ended: what drains after it is every request a group still had
    // outstanding, so counted with it every group would pass. Owed as a window is: its
    // part of what the run completed, at most its limit.
    let done: f64 = logged.in_run.iter().sum();
    let runtime = cell.runtime_ms as f64 / 1000.0;
    let owed = |g: usize| {
        let rate = sweep.rates[i].filter(|_| cell.limit.is_some_and(|(l, _)| l == g));
        let limit = rate.map_or(f64::INFINITY, |r| r as f64 * runtime);
        (cell.part(g) * done).min(limit)
    };
    let idle: Vec<String> = logged
        .in_run
        .iter()
        .enumerate()
        .filter(|&(g, &n)| n == 0.0 && owed(g) >= OWED_PER_WINDOW)
        .map(|(g, _)| {
            format!(
                "g{g} completed nothing in the {} ms run ({} I/Os after it; {:.0} owed)",
                cell.runtime_ms,
                ours.ios[g],
                owed(g)
            )
        })
        .collect();
    sweep.judge(invariant, i, idle.len() as f64, || idle.join(", "));
}

/// Shares within ±3 % of the weights, where every group is backlogged, the device
/// saturated, the policies judged on shares serve throughout, no limit holds a group back
/// and every group is owed enough I/Os to resolve ±3 %.
pub(super) fn shares(sweep: &mut Sweep, i: usize, cell: &Cell, ios: &[f64], noop: &Ran, peak: f64) {
    let groups = cell.weights.len() as u32;
    let backlogged = cell.iodepth > noop.tags.div_ceil(groups);
    let saturated = noop.iops >= 0.97 * peak;
    if !(cell.shares_judged() && cell.limit.is_none() && backlogged && saturated) {
        return;
    }
    let total_w: f64 = cell.weights.iter().map(|&w| f64::from(w)).sum();
    let total_ios: f64 = ios.iter().sum();
    let least = cell.weights.iter().min().copied().unwrap_or(0);
    if f64::from(least) / total_w * total_ios < SHARE_RESOLUTION_IOS {
        sweep.unresolved_shares += 1;
        return;
    }
    sweep.by_policy.entry(cell.policy).or_default()[2] += 1;
    let error = cell
        .weights
        .iter()
        .zip(ios)
        .map(|(&w, &n)| ((n / total_ios) / (f64::from(w) / total_w) - 1.0).abs())
        .fold(0.0, f64::max);
    sweep.worst_share = sweep.worst_share.max(error);
    if error <= SHARE_TOLERANCE {
        sweep.by_policy.entry(cell.policy).or_default()[3] += 1;
    }
    sweep.judge(3, i, error - SHARE_TOLERANCE, || {
        format!("a group {:.1} % off its weight's share", error * 100.0)
    });
}

/// A limited group never over its rate (one I/O of rounding over the run), and at it
/// within 1 % where it had twice the rate to take. The first is the host's (io.max holds
/// before any policy); the second needs the policy to offer the group that much, and the
/// group to ask it: a group that keeps `iodepth` requests out sends no more than `iodepth`
/// a latency, so where noop, which holds nothing back, did not bring it to its rate, the
/// limit does not bind and is not judged for reaching (the cell is named).
pub(super) fn limit(
    sweep: &mut Sweep,
    i: usize,
    cell: &Cell,
    (ours, noop): (&Ran, &Ran),
    logged: &Logged,
    riops: Option<u64>,
) {
    let (Some((g, _)), Some(rate)) = (cell.limit, riops) else {
        return;
    };
    // Bios the limit held when the run time ended still go, at the rate.
    let allowed = rate as f64 * ours.seconds[g];
    let got = ours.ios[g];
    let over = (got - allowed - 1.0).max(0.0) / allowed;
    sweep.worst_limit = sweep.worst_limit.max(over);
    sweep.judge(4, i, over, || {
        format!(
            "g{g} did {got:.0} I/Os under riops={rate}: {allowed:.0} allowed over its {:.3} s",
            ours.seconds[g]
        )
    });
    // Reached over the run time: after it the group issues nothing new, so the drain's
    // time (its report's seconds run past the run time while its last requests complete)
    // is no time it could use. Judged over each policy's part of the run (the whole run,
    // or either side of a swap) where the group could have had twice its rate: in each
    // window its part, under the policy that ran it, of everything completed in it. A
    // policy's part of its own half, not of the run's whole: cfq on flash completes a
    // fraction of what deadline does, and a light group's part of deadline's half is not
    // cfq's to give.
    let window_s = WINDOW_MS as f64 / 1000.0;
    let (mut promised, mut done, mut could) = (0.0, 0.0, 0.0);
    let windows = logged.window_ios.len();
    // A window the swap falls inside (250 ms into a 500 ms run) is either policy's: in
    // neither span.
    // And the run's first fifth in neither, as for shares: a group held to its rate
    // completes it once its first requests' time in the queue is paid, so from a cold
    // start it completes that time's worth less (anticipatory on `sim:ssd`, seed 2 cell
    // 464: 203 I/Os, 36 ms of the rate, short over 500 ms, its requests about 25 ms in the
    // scheduler past the 50 ms the limit held each).
    let ramp = windows / SHARE_RAMP_PARTS;
    let swap_ms = cell.swap.map_or(cell.runtime_ms, |_| cell.runtime_ms / 2);
    let before = ((swap_ms / WINDOW_MS) as usize).min(windows);
    let after = (swap_ms.div_ceil(WINDOW_MS) as usize).min(windows);
    for span in [ramp.min(before)..before, after..windows] {
        let policy = cell.policy_at(span.start as u64 * WINDOW_MS);
        let part: f64 =
            logged.window_ios[span.clone()].iter().sum::<f64>() * cell.part_under(g, policy);
        let owed = rate as f64 * window_s * span.len() as f64;
        could += part;
        if !span.is_empty() && part >= 2.0 * owed {
            promised += owed;
            done += logged.group_window_ios[g][span].iter().sum::<f64>();
        }
    }
    if promised == 0.0 {
        return;
    }
    let under_noop = noop.ios[g] / noop.seconds[g].max(f64::MIN_POSITIVE);
    if under_noop < (1.0 - LIMIT_TOLERANCE) * rate as f64 {
        sweep.unbound.push((i, under_noop, rate));
        return;
    }
    let runtime = promised / rate as f64;
    let short = (promised * (1.0 - LIMIT_TOLERANCE) - done).max(0.0) / promised;
    sweep.judge(5, i, short, || {
        format!(
            "g{g} completed {done:.0} I/Os in its {runtime:.3} s under riops={rate} ({promised:.0}; its part of the run was {could:.0})"
        )
    });
}
