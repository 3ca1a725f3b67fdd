//! The buffer slots the connections' bios lease, on the engine's thread.
//!
//! Data slots carry one bio's payload each. A read takes all of its slots at once, so
//! partly-built reads never hold the pool between them; a write takes one slot per piece and
//! submits it at once. Control slots carry flushes and trims, which have no payload. Slots of
//! writes, flushes and trims go back when the bio finishes; a read's after its data was sent
//! (or copied out for a slow client, [`Pools::park`]).
//!
//! Each connection may hold at most a quota of data slots (its `held` count). A copy of a
//! reply still counts against it until sent, so a client that stops reading its replies stops
//! its own requests, but holds no slot another client needs. The copies of all connections
//! together are bounded too, by the pool's own size: past it ([`Pools::over_budget`]) the
//! server closes the connections holding the most copies, so many slow clients cannot grow
//! it past about twice its buffers, and a client that reads its replies keeps its own.

/// The free slots.
#[derive(Debug)]
pub struct Pools {
    data: Vec<u32>,
    control: Vec<u32>,
    data_slots: u32,
    per_connection: u32,
    /// Data slots whose replies wait as copies, over every connection.
    parked: u32,
}

impl Pools {
    /// `data` data slots numbered from 0, then `control` control slots; a connection holds
    /// at most `per_connection` data slots.
    pub fn new(data: u32, control: u32, per_connection: u32) -> Self {
        Self {
            data: (0..data).rev().collect(),
            control: (data..data + control).rev().collect(),
            data_slots: data,
            per_connection: per_connection.clamp(1, data.max(1)),
            parked: 0,
        }
    }

    /// `n` data slots for a connection holding `held`, if that many are free and within its
    /// quota; the caller tries again after slots come back.
    pub fn take_data(&mut self, n: usize, held: &mut u32) -> Option<Vec<u32>> {
        // A connection holding nothing may take more than its quota at once, so no request
        // waits forever.
        let within = *held == 0 || *held as usize + n <= self.per_connection as usize;
        if self.data.len() < n || !within {
            return None;
        }
        *held += n as u32;
        let at = self.data.len() - n;
        Some(self.data.split_off(at))
    }

    /// A control slot, if one is free.
    pub fn take_control(&mut self) -> Option<u32> {
        self.control.pop()
    }

    /// Gives `slot` back; a data slot leaves its connection's `held`.
    pub fn put(&mut self, slot: u32, held: &mut u32) {
        if slot < self.data_slots {
            self.data.push(slot);
            *held = held.saturating_sub(1);
        } else {
            self.control.push(slot);
        }
    }

    /// Gives `slots` back while their data waits, copied, for a slow client: they still
    /// count in its `held` until [`Self::unpark`]. Returns how many data slots were parked.
    pub fn park(&mut self, slots: &[u32]) -> usize {
        let data_slots = self.data_slots;
        let n = slots.iter().filter(|&&s| s < data_slots).count();
        self.parked = self.parked.saturating_add(n as u32);
        self.data.extend(slots.iter().filter(|&&s| s < data_slots));
        n
    }

    /// True while the copies of every connection together hold more than the pool's size:
    /// the server then closes the connections that hold the most.
    pub fn over_budget(&self) -> bool {
        self.parked > self.data_slots
    }

    /// The copy of `n` parked slots' data was sent (or dropped): they leave `held`.
    pub fn unpark(&mut self, n: usize, held: &mut u32) {
        *held = held.saturating_sub(n as u32);
        self.parked = self.parked.saturating_sub(n as u32);
    }

    /// Data slots parked as copies, over every connection.
    #[cfg(test)]
    pub fn parked(&self) -> u32 {
        self.parked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_gets_all_its_slots_at_once_or_none() {
        let mut pools = Pools::new(4, 1, 4);
        let (mut a, mut b) = (0, 0);
        let held = pools.take_data(3, &mut a).unwrap();
        assert_eq!(held.len(), 3);
        assert_eq!(pools.take_data(2, &mut b), None, "only one slot is free");
        assert_eq!(b, 0, "a refused read holds nothing");
        pools.put(held[0], &mut a);
        assert_eq!(pools.take_data(2, &mut b).map(|s| s.len()), Some(2));
        assert_eq!(pools.take_control(), Some(4));
        assert_eq!(pools.take_control(), None);
    }

    #[test]
    fn one_connection_cannot_take_more_than_its_quota() {
        let mut pools = Pools::new(8, 0, 3);
        let mut greedy = 0;
        let held = pools.take_data(3, &mut greedy).unwrap();
        assert_eq!(pools.take_data(1, &mut greedy), None, "over its quota");
        // Another connection still gets slots; one holding nothing may even take more than
        // its quota at once.
        let mut other = 0;
        assert_eq!(pools.take_data(5, &mut other).map(|s| s.len()), Some(5));
        pools.put(held[0], &mut greedy);
        assert_eq!(greedy, 2);
        assert_eq!(pools.take_data(1, &mut greedy).map(|s| s.len()), Some(1));
    }

    #[test]
    fn parked_slots_serve_other_connections_but_still_count_against_their_own() {
        let mut pools = Pools::new(4, 0, 4);
        let (mut slow, mut other) = (0, 0);
        let held = pools.take_data(4, &mut slow).unwrap();
        assert_eq!(pools.park(&held), 4);
        // The pool has every slot again for others …
        assert_eq!(pools.take_data(4, &mut other).map(|s| s.len()), Some(4));
        // … while the slow connection's quota is still spent until its copy is sent.
        assert_eq!(slow, 4);
        pools.unpark(4, &mut slow);
        assert_eq!(slow, 0);
        assert_eq!(pools.parked(), 0);
    }

    #[test]
    fn copies_over_all_connections_stay_within_the_pool_size() {
        let mut pools = Pools::new(4, 0, 4);
        let (mut a, mut b) = (0, 0);
        let first = pools.take_data(4, &mut a).unwrap();
        assert_eq!(pools.park(&first), 4);
        assert!(!pools.over_budget(), "the pool's size in copies is allowed");
        let second = pools.take_data(1, &mut b).unwrap();
        assert_eq!(pools.park(&second), 1);
        assert!(
            pools.over_budget(),
            "a fifth parked slot passes the pool's size"
        );
        pools.unpark(4, &mut a);
        assert!(!pools.over_budget());
        assert_eq!(pools.parked(), 1);
    }
}
