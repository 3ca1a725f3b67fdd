//! A submitter's latencies: each distinct value with its count while there are few, an HDR
//! histogram (three significant digits from 1 ns, as fio) past that. A clone of a short job or
//! a replayed stream of a few bios keeps a few hundred bytes instead of a histogram's tens of
//! kilobytes, so a run's many submitters cost memory in proportion to the I/O they did, not
//! to their number; what is read out is the histogram either way, so every figure is the
//! same.

use std::borrow::Cow;

use hdrhistogram::Histogram;

/// The longest latency a histogram tells apart (an hour); longer ones count as an hour.
const LONGEST_NS: u64 = 3_600_000_000_000;

/// Distinct values kept as a list (16 bytes each) before the histogram takes over.
const FEW: usize = 256;

/// A latency distribution, in ns.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    /// (value, count), sorted by value; empty once `many` holds the distribution.
    few: Vec<(u64, u64)>,
    many: Option<Histogram<u64>>,
}

impl Latencies {
    /// Records one latency (past an hour counts as an hour).
    pub fn record(&mut self, value_ns: u64) {
        self.record_n(value_ns.min(LONGEST_NS), 1);
    }

    fn record_n(&mut self, value: u64, count: u64) {
        if let Some(many) = &mut self.many {
            grow_and_record(many, value, count);
            return;
        }
        match self.few.binary_search_by_key(&value, |&(v, _)| v) {
            Ok(at) => self.few[at].1 = self.few[at].1.saturating_add(count),
            Err(at) if self.few.len() < FEW => self.few.insert(at, (value, count)),
            Err(_) => {
                let mut many = self.histogram().into_owned();
                grow_and_record(&mut many, value, count);
                self.many = Some(many);
                self.few = Vec::new();
            }
        }
    }

    /// Adds `other`'s latencies to these (group summaries).
    pub fn add(&mut self, other: &Latencies) {
        match &other.many {
            None => {
                for &(value, count) in &other.few {
                    self.record_n(value, count);
                }
            }
            Some(theirs) => {
                // This side's own histogram, not a copy of it (group summaries add many).
                let mut many = match self.many.take() {
                    Some(mine) => mine,
                    None => self.histogram().into_owned(),
                };
                // Adding grows this one to the other's largest value: it fails only if
                // that growth does, leaving this one as it was.
                let _ = many.add(theirs);
                self.many = Some(many);
                self.few = Vec::new();
            }
        }
    }

    /// True iff nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.many
            .as_ref()
            .map_or(self.few.is_empty(), Histogram::is_empty)
    }

    /// The distribution as a histogram, to read percentiles, mean and extremes from: the
    /// one kept, or one made from the list (dropped after reading).
    pub fn histogram(&self) -> Cow<'_, Histogram<u64>> {
        if let Some(many) = &self.many {
            return Cow::Borrowed(many);
        }
        let mut made = empty_histogram();
        for &(value, count) in &self.few {
            grow_and_record(&mut made, value, count);
        }
        Cow::Owned(made)
    }

    /// Bytes held for the distribution (its list, or its histogram's counts): what the
    /// tests check the list saves.
    #[cfg(test)]
    fn footprint(&self) -> usize {
        self.few.capacity() * size_of::<(u64, u64)>()
            + self
                .many
                .as_ref()
                .map_or(0, |h| h.distinct_values() * size_of::<u64>())
    }
}

/// Three digits, as fio, from 1 ns; sized to the longest value recorded so far, not to an
/// hour from the start. The buckets a value falls in do not depend on the size, so
/// percentiles are the same.
fn empty_histogram() -> Histogram<u64> {
    Histogram::new(3).unwrap_or_else(|_| unreachable!("three digits is a valid precision"))
}

/// Records `count` of `value` (at most an hour), growing the histogram to it
/// (`saturating_record` would clamp to the size it has).
fn grow_and_record(histogram: &mut Histogram<u64>, value: u64, count: u64) {
    if histogram.record_n(value, count).is_err() {
        // Only if growing failed: the value counts as the largest the histogram holds.
        histogram.saturating_record_n(value, count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// splitmix64, for generated latencies.
    fn latencies(seed: u64, n: usize, spread: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                (z ^ (z >> 31)) % spread
            })
            .collect()
    }

    fn sized_for_an_hour(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, LONGEST_NS, 3).unwrap();
        for &v in values {
            h.saturating_record(v.min(LONGEST_NS));
        }
        h
    }

    fn assert_reads_as(got: &Latencies, want: &Histogram<u64>, what: &str) {
        let h = got.histogram();
        for q in [0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(
                h.value_at_quantile(q),
                want.value_at_quantile(q),
                "{what}: q {q}"
            );
        }
        assert_eq!(
            (h.min(), h.max(), h.len()),
            (want.min(), want.max(), want.len()),
            "{what}"
        );
        assert_eq!(h.mean(), want.mean(), "{what}");
        assert_eq!(h.stdev(), want.stdev(), "{what}");
    }

    #[test]
    fn few_or_many_values_read_as_a_histogram_sized_for_an_hour_and_few_keep_a_list() {
        for (n, spread) in [
            (0, 1),
            (1, 1),
            (20, 1_000_000),
            (256, 1 << 40),
            (257, 1 << 40),
            (5_000, 200_000),
        ] {
            let values = latencies(n as u64, n, spread);
            let mut kept = Latencies::default();
            for &v in &values {
                kept.record(v);
            }
            // Past an hour counts as an hour.
            kept.record(7_200_000_000_000);
            let mut all = values.clone();
            all.push(7_200_000_000_000);
            assert_reads_as(&kept, &sized_for_an_hour(&all), &format!("{n} values"));
            if n <= 20 {
                assert!(
                    kept.footprint() <= 64 * 16,
                    "{n} values: {} bytes",
                    kept.footprint()
                );
            }
        }
    }

    #[test]
    fn added_distributions_read_as_one_that_recorded_both() {
        for (a, b) in [
            (10, 10),
            (200, 200),
            (10, 3_000),
            (3_000, 10),
            (3_000, 3_000),
        ] {
            let (x, y) = (latencies(1, a, 1 << 30), latencies(2, b, 50_000));
            let (mut left, mut right) = (Latencies::default(), Latencies::default());
            x.iter().for_each(|&v| left.record(v));
            y.iter().for_each(|&v| right.record(v));
            left.add(&right);
            let both: Vec<u64> = x.iter().chain(&y).copied().collect();
            assert_reads_as(&left, &sized_for_an_hour(&both), &format!("{a} + {b}"));
        }
    }
}
