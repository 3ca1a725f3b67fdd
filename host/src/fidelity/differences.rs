//! Request by request: how far each simulated time lies from the recorded one, counted as
//! DiskSim counts its own ("Trace access diff time distribution" in a validation run's
//! output), so that the model's agreement with a drive can be set beside DiskSim's request
//! for request and not only as the two distributions' distance.

use super::RecordedRequest;

/// DiskSim's bucket edges for the difference, in whole ms (its `statdefs`): a request whose
/// recorded time less the simulated one, truncated toward zero as its `stat_update` takes
/// `(int)` of it, is under the first edge it does not reach, or at the last or more.
pub const EDGES_MS: [i64; 9] = [-5, -1, 0, 1, 2, 5, 10, 11, 12];

/// The bucket of requests whose difference truncates to 0: within a millisecond either way.
const WITHIN_ONE_MS: usize = 3;

/// Requests counted by the recorded time less the simulated one, in [`EDGES_MS`]' buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Differences {
    /// The buckets' edges in whole ms: under -5, under -1, …, under 12, then 12 or more.
    pub edges_ms: [i64; 9],
    /// Requests in each bucket, in the edges' order (ten: the last holds 12 ms or more).
    pub requests: [u32; 10],
}

impl Differences {
    /// Counts given per bucket (DiskSim's own, transcribed from its output).
    pub const fn from_counts(requests: [u32; 10]) -> Self {
        Self {
            edges_ms: EDGES_MS,
            requests,
        }
    }

    /// `trace`'s recorded times against `simulated` (µs, request by request).
    pub fn count(trace: &[RecordedRequest], simulated: &[f64]) -> Self {
        let mut requests = [0u32; 10];
        for (r, &us) in trace.iter().zip(simulated) {
            requests[bucket((r.service_us - us) / 1000.0)] += 1;
        }
        Self::from_counts(requests)
    }

    /// Requests counted.
    pub fn total(&self) -> u64 {
        self.requests.iter().map(|&n| u64::from(n)).sum()
    }

    /// The part of the requests within a millisecond of the recorded time either way.
    pub fn within_one_ms(&self) -> f64 {
        f64::from(self.requests[WITHIN_ONE_MS]) / self.total().max(1) as f64
    }

    /// The buckets' names: `<-5` … `<12`, `12+`.
    pub fn labels() -> [String; 10] {
        std::array::from_fn(|i| match EDGES_MS.get(i) {
            Some(edge) => format!("<{edge}"),
            None => format!("{}+", EDGES_MS[EDGES_MS.len() - 1]),
        })
    }
}

/// The bucket of a difference of `ms`: truncated toward zero (a saturating cast: a NaN or
/// an infinity cannot come from a parsed trace, and would land in an end bucket).
fn bucket(ms: f64) -> usize {
    let whole = ms.trunc() as i64;
    EDGES_MS.iter().take_while(|&&edge| whole >= edge).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_truncates_toward_zero_into_disksims_buckets() {
        for (ms, want) in [
            (-11.1, 0),
            (-5.9, 1), // truncates to -5: not under -5
            (-1.5, 2), // -1
            (-0.99, 3),
            (0.0, 3),
            (0.99, 3),
            (1.0, 4),
            (4.99, 5),
            (9.99, 6),
            (10.5, 7),
            (11.99, 8),
            (12.0, 9),
            (45.0, 9),
        ] {
            assert_eq!(bucket(ms), want, "{ms} ms");
        }
        assert_eq!(Differences::labels()[0], "<-5");
        assert_eq!(Differences::labels()[9], "12+");
    }

    #[test]
    fn within_one_ms_is_the_share_of_the_zero_bucket() {
        let d = Differences::from_counts([1, 0, 0, 6, 0, 0, 0, 0, 0, 1]);
        assert_eq!(d.total(), 8);
        assert_eq!(d.within_one_ms(), 0.75);
        assert_eq!(Differences::from_counts([0; 10]).within_one_ms(), 0.0);
    }
}
