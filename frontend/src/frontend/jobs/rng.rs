//! Deterministic randomness: SplitMix64 for choices, and a full-period LCG permutation so a
//! random job touches every block of its region once per pass, as fio's random map does.

/// SplitMix64 (Steele, Lea, Flood 2014): fast, and seeded runs repeat exactly.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Visits 0..n each exactly once per pass in a scrambled order: an LCG modulo the next power
/// of two with full period (Hull–Dobell: c odd, a ≡ 1 mod 4), skipping values ≥ n.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    mask: u64,
    a: u64,
    c: u64,
    state: u64,
}

impl Permutation {
    /// A permutation of 0..n drawn from `rng`.
    pub fn new(n: u64, rng: &mut Rng) -> Self {
        let m = n.max(4).next_power_of_two();
        let mask = m - 1;
        Self {
            n,
            mask,
            a: ((rng.next_u64() << 2) | 1) & mask,
            c: (rng.next_u64() | 1) & mask,
            state: rng.next_u64() & mask,
        }
    }

    /// The next index; a new pass starts after every n calls.
    pub fn next_index(&mut self) -> u64 {
        loop {
            self.state = (self.state.wrapping_mul(self.a).wrapping_add(self.c)) & self.mask;
            if self.state < self.n {
                return self.state;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_visits_every_block_once_per_pass() {
        for n in [1u64, 2, 3, 5, 100, 1000] {
            let mut perm = Permutation::new(n, &mut Rng::new(7));
            let mut seen: Vec<u64> = (0..n).map(|_| perm.next_index()).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
    }
}
