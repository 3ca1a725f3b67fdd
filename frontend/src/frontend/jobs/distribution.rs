//! fio's `random_distribution`: which block a random job touches next when the blocks are
//! not equally likely. As in fio, a skewed job draws with repetition (no random map), the
//! hot blocks are scattered over the region by a hash of their rank rather than packed at
//! its start, and `size` still bounds the I/O count of a job that is not time based.
//!
//! - `zipf:θ` (θ > 0, θ ≠ 1): rank k is drawn with weight 1/k^θ, by Gray et al.'s quick
//!   method ("Quickly generating billion-record synthetic databases", 1994), over ζ(n, θ)
//!   for at most 10 million ranks as fio sums it (the first 10 000 terms one by one, the
//!   rest by Euler–Maclaurin, so no region size costs a clone millions of powers).
//! - `pareto:h` (0 < h < 1): rank ⌊(n − 1) · u^(ln h / ln(1 − h))⌋ for uniform u, fio's
//!   power law: a fraction h of the accesses goes to 1 − h of the blocks.
//! - `normal:dev` (0 < dev ≤ 100): ranks around the region's middle, normally distributed
//!   with a standard deviation of `dev` percent of the region (the sum of 12 uniforms).
//! - `random`: every block equally likely, each once per pass (the default).

use super::rng::Rng;

/// A random job's distribution over its blocks.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Distribution {
    /// Every block once per pass, in a random order.
    Random,
    /// Zipf with exponent `theta`.
    Zipf {
        /// The exponent.
        theta: f64,
    },
    /// Pareto with fio's parameter `h`.
    Pareto {
        /// The share parameter.
        h: f64,
    },
    /// Normal around the middle, `dev` percent of the region as standard deviation.
    Normal {
        /// The deviation, percent.
        dev: f64,
    },
}

/// Ranks fio sums ζ over at most (`ZIPF_MAX_GEN`): beyond it the tail's weight is left out.
const ZIPF_MAX_GEN: u64 = 10_000_000;

impl Distribution {
    /// `random`, `zipf:θ`, `pareto:h` or `normal:dev`.
    ///
    /// # Errors
    /// Another name, a missing or out-of-range parameter, named.
    pub fn parse(value: &str) -> Result<Self, String> {
        let (name, parameter) = value.split_once(':').unwrap_or((value, ""));
        let number = || -> Result<f64, String> {
            if parameter.contains(':') {
                return Err(format!(
                    "random_distribution={value}: a center (a second `:`) is not supported"
                ));
            }
            parameter
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| {
                    format!("random_distribution={value}: {name} takes a number after `:`")
                })
        };
        let out_of_range = |what: &str| format!("random_distribution={value}: {what}");
        match name {
            "random" if parameter.is_empty() => Ok(Self::Random),
            "zipf" => {
                let theta = number()?;
                if theta <= 0.0 || (theta - 1.0).abs() < 1e-9 || theta > 100.0 {
                    return Err(out_of_range("zipf's θ is above 0, at most 100, and not 1"));
                }
                Ok(Self::Zipf { theta })
            }
            "pareto" => {
                let h = number()?;
                if h <= 0.0 || h >= 1.0 {
                    return Err(out_of_range("pareto's h lies strictly between 0 and 1"));
                }
                Ok(Self::Pareto { h })
            }
            "normal" => {
                let dev = number()?;
                if dev <= 0.0 || dev > 100.0 {
                    return Err(out_of_range(
                        "normal's deviation is a percentage above 0, at most 100",
                    ));
                }
                Ok(Self::Normal { dev })
            }
            _ => Err(format!(
                "random_distribution={value} is not supported (random, zipf:θ, pareto:h, normal:dev)"
            )),
        }
    }
}

/// Draws blocks of a region of `n` under a skewed distribution.
#[derive(Debug, Clone)]
pub struct Picker {
    distribution: Distribution,
    n: u64,
    /// Zipf: ζ(n, θ) and ζ(2, θ).
    zetan: f64,
    zeta2: f64,
    /// Where rank 0 lands: the region's hot spot differs between jobs and seeds.
    offset: u64,
}

impl Picker {
    /// A picker over `n` blocks (n > 0) drawing its offset from `rng`; `None` for
    /// [`Distribution::Random`], which the permutation serves.
    pub fn new(distribution: Distribution, n: u64, rng: &mut Rng) -> Option<Self> {
        let (zetan, zeta2) = match distribution {
            Distribution::Random => return None,
            Distribution::Zipf { theta } => {
                (zeta(n.min(ZIPF_MAX_GEN), theta), 1.0 + 0.5f64.powf(theta))
            }
            _ => (0.0, 0.0),
        };
        Some(Self {
            distribution,
            n: n.max(1),
            zetan,
            zeta2,
            offset: rng.next_u64(),
        })
    }

    /// The next block.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        let rank = self.rank(rng).min(self.n - 1);
        scatter(rank).wrapping_add(self.offset) % self.n
    }

    /// The next rank: 0 the most likely.
    fn rank(&self, rng: &mut Rng) -> u64 {
        let n = self.n as f64;
        match self.distribution {
            Distribution::Random => rng.below(self.n),
            Distribution::Zipf { theta } => {
                let u = unit(rng);
                let z = u * self.zetan;
                if z < 1.0 {
                    0
                } else if z < 1.0 + 0.5f64.powf(theta) {
                    1
                } else {
                    let alpha = 1.0 / (1.0 - theta);
                    let eta = (1.0 - (2.0 / n).powf(1.0 - theta)) / (1.0 - self.zeta2 / self.zetan);
                    (n * (eta * u - eta + 1.0).powf(alpha)) as u64
                }
            }
            Distribution::Pareto { h } => {
                let power = h.ln() / (1.0 - h).ln();
                ((n - 1.0) * unit(rng).powf(power)) as u64
            }
            Distribution::Normal { dev } => {
                // The sum of 12 uniforms less 6 is close to a standard normal.
                let z: f64 = (0..12).map(|_| unit(rng)).sum::<f64>() - 6.0;
                // Rank 0 is the middle; ranks alternate either side of it.
                let from_middle = (z * dev / 100.0 * n).round();
                let signed = from_middle as i64;
                let rank = if signed >= 0 {
                    2 * signed as u64
                } else {
                    2 * signed.unsigned_abs() - 1
                };
                rank.min(self.n - 1)
            }
        }
    }
}

/// Terms of ζ summed one by one; past them the Euler–Maclaurin formula gives the rest, so a
/// job file's region size cannot ask for millions of powers per clone.
const ZETA_EXACT_TERMS: u64 = 10_000;

/// ζ(n, θ) = Σ_{k=1..n} k^−θ (θ ≠ 1).
fn zeta(n: u64, theta: f64) -> f64 {
    let f = |x: f64| x.powf(-theta);
    let exact: f64 = (1..=n.min(ZETA_EXACT_TERMS)).map(|k| f(k as f64)).sum();
    if n <= ZETA_EXACT_TERMS {
        return exact;
    }
    let (a, b) = (ZETA_EXACT_TERMS as f64, n as f64);
    let integral = (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta);
    let slope = |x: f64| -theta * x.powf(-theta - 1.0);
    // Σ_{k=a+1..b} f(k) = Σ_{k=a..b} f(k) − f(a).
    exact + integral + (f(b) - f(a)) / 2.0 + (slope(b) - slope(a)) / 12.0
}

/// A uniform number in [0, 1).
fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Spreads neighbouring ranks over the region (a 64-bit finaliser: a bijection, so no two
/// ranks collide before the reduction to the region).
fn scatter(rank: u64) -> u64 {
    let mut z = rank.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The share of accesses that land on the most-hit `top` fraction of the blocks that were
/// hit at all, out of `draws` draws over `n` blocks (n at most 2^26) seeded with `seed`:
/// fio-genzipf's "Sum %" column, to hold a skewed job against fio's own.
pub fn hot_share(distribution: Distribution, n: u64, draws: u64, top: f64, seed: u64) -> f64 {
    let n = n.clamp(1, 1 << 26);
    let mut rng = Rng::new(seed);
    let Some(mut picker) = Picker::new(distribution, n, &mut rng) else {
        return top;
    };
    let mut hits = vec![0u32; usize::try_from(n).unwrap_or(usize::MAX)];
    for _ in 0..draws {
        let block = picker.next(&mut rng) as usize;
        hits[block] = hits[block].saturating_add(1);
    }
    let mut hit: Vec<u32> = hits.into_iter().filter(|&h| h > 0).collect();
    hit.sort_unstable_by(|a, b| b.cmp(a));
    let rows = ((hit.len() as f64 * top).round() as usize).max(1);
    let total: u64 = hit.iter().map(|&h| u64::from(h)).sum();
    let hot: u64 = hit[..rows.min(hit.len())]
        .iter()
        .map(|&h| u64::from(h))
        .sum();
    hot as f64 / total.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ranges_are_fios_and_bad_ones_are_named() {
        assert_eq!(
            Distribution::parse("zipf:1.2"),
            Ok(Distribution::Zipf { theta: 1.2 })
        );
        assert_eq!(
            Distribution::parse("pareto:0.3"),
            Ok(Distribution::Pareto { h: 0.3 })
        );
        assert_eq!(
            Distribution::parse("normal:10"),
            Ok(Distribution::Normal { dev: 10.0 })
        );
        assert_eq!(Distribution::parse("random"), Ok(Distribution::Random));
        for bad in [
            "zipf:1",
            "zipf",
            "pareto:1.5",
            "normal:0",
            "gauss:3",
            "zipf:1.2:0.5",
            "zipf:nan",
        ] {
            let message = Distribution::parse(bad).expect_err(bad);
            assert!(
                message.contains(bad.split(':').next().unwrap()),
                "{bad}: {message}"
            );
        }
    }

    #[test]
    fn zeta_past_its_exact_terms_matches_the_sum_to_a_part_in_a_billion() {
        for theta in [0.8, 1.2, 2.5] {
            let n = 1_000_000;
            let summed: f64 = (1..=n).map(|k| (k as f64).powf(-theta)).sum();
            let fast = zeta(n, theta);
            assert!(
                ((fast - summed) / summed).abs() < 1e-9,
                "θ {theta}: {fast} vs {summed}"
            );
        }
    }

    #[test]
    fn every_pick_lies_in_the_region_and_zipf_is_skewed() {
        let mut rng = Rng::new(3);
        for d in ["zipf:1.2", "pareto:0.2", "normal:5"] {
            let mut picker = Picker::new(Distribution::parse(d).unwrap(), 1000, &mut rng).unwrap();
            assert!((0..10_000).all(|_| picker.next(&mut rng) < 1000), "{d}");
        }
        let share = hot_share(Distribution::Zipf { theta: 1.2 }, 10_000, 100_000, 0.1, 3);
        assert!(
            share > 0.7,
            "the hottest tenth takes most accesses: {share}"
        );
        assert!(Picker::new(Distribution::Random, 10, &mut rng).is_none());
    }
}
