//! The demerit as DiskSim's own `rms` tool computes it (`src/rms.c`), which is how the
//! figures DiskSim states for its validation suite were reached: both response times
//! counted into DiskSim's statistics buckets, each cumulative distribution read at every
//! 0.0001 of the requests by straight lines between bucket edges, and the RMS of the
//! horizontal distances taken. [`super::demerit`] pairs the sorted times themselves; on a
//! distribution with steps the two part by a few per cent, so a comparison with a figure
//! of DiskSim's is made with this one.

/// DiskSim's buckets for an access time (`statdefs`): 1 750 upper edges in µs, from 0,
/// each the one before plus 1 % of it (whole µs) plus 1.
const BUCKETS: usize = 1750;

/// The step at which `rms.c` reads both distributions (`RMS_INCR`).
const STEP: f64 = 0.0001;

fn edges_us() -> Vec<u64> {
    let mut edges = Vec::with_capacity(BUCKETS);
    let mut edge = 0u64;
    for _ in 0..BUCKETS {
        edges.push(edge);
        edge += edge / 100 + 1;
    }
    edges
}

/// `times_us`' cumulative distribution at each bucket's upper edge (ms, fraction), as
/// DiskSim prints it and `rms.c` reads it: a time goes in the first bucket whose edge is
/// above it (the last takes the rest), and the reading stops at the first edge with every
/// request under it.
fn cdf(edges: &[u64], times_us: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let mut counts = vec![0u64; edges.len()];
    for &t in times_us {
        let bucket = edges.partition_point(|&e| e as f64 <= t);
        counts[bucket.min(edges.len() - 1)] += 1;
    }
    let n = times_us.len().max(1) as f64;
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    let mut under = 0u64;
    for (&edge, &count) in edges.iter().zip(&counts) {
        under += count;
        xs.push(edge as f64 / 1000.0);
        ys.push(under as f64 / n);
        if under as f64 >= n {
            break;
        }
    }
    (xs, ys)
}

/// The time (ms) by straight lines between edges at which a distribution reaches `at`,
/// from bucket `*i` on (`compute_rms`'s walk; `*i` left where the next reading resumes).
fn time_at(xs: &[f64], ys: &[f64], i: &mut usize, at: f64) -> f64 {
    // One edge read (every time under DiskSim's first edge): there is no line to follow.
    if ys.len() < 2 {
        return xs.first().copied().unwrap_or(0.0);
    }
    while *i + 1 < ys.len() && ys[*i] < at {
        *i += 1;
    }
    let i = (*i).max(1);
    let fraction = (at - ys[i - 1]) / (ys[i] - ys[i - 1]).max(f64::MIN_POSITIVE);
    xs[i - 1] + fraction * (xs[i] - xs[i - 1])
}

/// The RMS horizontal distance (ms) between `measured`'s and `simulated`'s distributions
/// (µs, any order), as DiskSim's `rms` tool reads them from its output.
pub fn disksim_rms_ms(measured: &[f64], simulated: &[f64]) -> f64 {
    let edges = edges_us();
    let (x1, y1) = cdf(&edges, measured);
    let (x2, y2) = cdf(&edges, simulated);
    let (mut i1, mut i2) = (0, 0);
    let (mut squares, mut count) = (0.0, 0u32);
    // The reading points accumulate in a double as rms.c's loop does, so that the last
    // one falls where DiskSim's does.
    let mut at = STEP;
    while at <= 1.0 {
        let d = time_at(&x1, &y1, &mut i1, at) - time_at(&x2, &y2, &mut i2, at);
        squares += d * d;
        count += 1;
        at += STEP;
    }
    (squares / f64::from(count.max(1))).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disksims_buckets_grow_by_one_per_cent_to_its_last_printed_edge() {
        let edges = edges_us();
        assert_eq!(&edges[..3], &[0, 1, 2]);
        assert_eq!(edges[101], 102, "past 100 µs, 1 % a step");
        assert_eq!(
            edges[BUCKETS - 1],
            2_049_165_458,
            "DiskSim's last printed edge, 2049165.458 ms"
        );
    }

    #[test]
    fn the_rms_tool_reads_identical_distributions_as_zero_and_a_shift_as_the_shift() {
        let times: Vec<f64> = (0..1000).map(|i| 5000.0 + f64::from(i)).collect();
        assert_eq!(disksim_rms_ms(&times, &times), 0.0);
        // Every request 0.5 ms longer: half a millisecond, to the buckets' resolution
        // (50 µs there), not exactly.
        let later: Vec<f64> = times.iter().map(|t| t + 500.0).collect();
        let rms = disksim_rms_ms(&times, &later);
        assert!((rms - 0.5).abs() < 0.05, "{rms}");
        // Order does not matter; one request alone is read too.
        let reversed: Vec<f64> = later.iter().rev().copied().collect();
        assert_eq!(disksim_rms_ms(&times, &reversed), rms);
        assert!(disksim_rms_ms(&[1000.0], &[3000.0]) > 1.5);
    }
}
