//! Deterministic randomness: SplitMix64 for choices, and a permutation (a full-period LCG,
//! scrambled) so a random job touches every block of its region once per pass, as fio's
//! random map does.

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
/// of two with full period (Hull–Dobell: c odd, a ≡ 1 mod 4), each state put through a keyed
/// bijection of its bits, skipping values ≥ n.
///
/// The bijection is what makes the order random in every bit. An LCG modulo 2^k repeats its
/// low j bits every 2^j steps, so its blocks alone walked the low bits in a fixed cycle: a
/// job's consecutive 4 KiB reads went to `sim:ssd`'s 32 dies (block mod 32) each once in
/// every 32, never two on one die, and a policy that changed the order in which several
/// jobs' requests reached the device changed the collisions: round robin between six jobs
/// at iodepth 8 ran at 0.89 of arrival order's IOPS with no request held back.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    mask: u64,
    /// Half the permutation's bits: the xor-shifts' distance.
    shift: u32,
    /// Xored into each state first: a seed's own bijection.
    key: u64,
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
            shift: (m.trailing_zeros() / 2).max(1),
            key: rng.next_u64() & mask,
            a: ((rng.next_u64() << 2) | 1) & mask,
            c: (rng.next_u64() | 1) & mask,
            state: rng.next_u64() & mask,
        }
    }

    /// The next index; a new pass starts after every n calls.
    pub fn next_index(&mut self) -> u64 {
        loop {
            self.state = (self.state.wrapping_mul(self.a).wrapping_add(self.c)) & self.mask;
            let index = self.scramble(self.state);
            if index < self.n {
                return index;
            }
        }
    }

    /// A bijection of the permutation's bits: a key xored in, then xor-shifts and odd
    /// multiplications modulo 2^k, each invertible, so every bit of the result depends on
    /// the state's high bits, whose period is long.
    fn scramble(&self, state: u64) -> u64 {
        let mut x = state ^ self.key;
        x ^= x >> self.shift;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9) & self.mask;
        x ^= x >> self.shift;
        x = x.wrapping_mul(0x94d0_49bb_1331_11eb) & self.mask;
        x ^ (x >> self.shift)
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

    #[test]
    fn consecutive_blocks_fall_on_32_units_as_random_draws_do_not_in_a_cycle() {
        // 32 draws over 32 units hit about 20.4 distinct ones (32 × (1 − (31/32)^32)); a
        // bare LCG's low bits visit all 32 in every 32 steps.
        let mut perm = Permutation::new(1 << 18, &mut Rng::new(3));
        let (runs, mut distinct) = (500, 0);
        for _ in 0..runs {
            let mut hit = [false; 32];
            for _ in 0..32 {
                hit[(perm.next_index() % 32) as usize] = true;
            }
            distinct += hit.iter().filter(|&&h| h).count();
        }
        let mean = distinct as f64 / f64::from(runs);
        assert!(
            (19.5..21.5).contains(&mean),
            "{mean} distinct units in 32 draws"
        );
    }
}
