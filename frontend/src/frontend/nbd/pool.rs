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
//!
//! Slots are also shared out between tenants (an export's group on its device, or an
//! ungrouped export alone), since a tenant's bios may wait long in the host: its group's
//! io.max or io.latency holds them with their slots. Each tenant is owed a reserve of each
//! kind of slot, an even share of half the pool; a tenant takes a slot only if the slots
//! left free still cover what every other tenant is owed. A limited tenant so holds at most
//! the pool less the others' reserves and never stalls another; with one tenant, it has the
//! whole pool. Past `slots / 2` tenants a reserve rounds to nothing and tenants share the
//! pool first come, first served.

/// Who takes slots: a connection's count against its quota (data slots, parked copies
/// included), and the tenant whose share its slots come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holder {
    /// Data slots it holds, parked copies included.
    pub held: u32,
    /// Its tenant, an index below [`Pools::new`]'s `tenants`.
    pub tenant: usize,
}

/// One kind of slot (data or control): the free ones, and what each tenant holds of them
/// against its reserve.
#[derive(Debug)]
struct Kind {
    free: Vec<u32>,
    /// Slots each tenant holds now (parked data slots are free again, so not counted).
    holding: Vec<u32>,
    /// Slots every tenant is owed.
    reserve: u32,
    /// Over all tenants, what each is still owed of its reserve: `reserve − holding`, at
    /// least 0, summed.
    owed: u32,
}

impl Kind {
    fn new(slots: std::ops::Range<u32>, tenants: usize) -> Self {
        let tenants = tenants.max(1);
        let count = slots.end - slots.start;
        // Half the pool is reserved, shared out evenly; the other half is first come.
        let reserve = u32::try_from(count as usize / (2 * tenants)).unwrap_or(0);
        Self {
            free: slots.rev().collect(),
            holding: vec![0; tenants],
            reserve,
            owed: reserve.saturating_mul(tenants as u32),
        }
    }

    fn owed_by(&self, tenant: usize) -> u32 {
        self.reserve.saturating_sub(self.holding[tenant])
    }

    /// True iff `tenant` may take `n` slots: they are free, and what is left still covers
    /// every other tenant's reserve.
    fn may_take(&self, tenant: usize, n: usize) -> bool {
        let others = self.owed - self.owed_by(tenant);
        self.free.len() >= n + others as usize
    }

    fn take(&mut self, tenant: usize, n: usize) -> Vec<u32> {
        let before = self.owed_by(tenant);
        self.holding[tenant] += n as u32;
        self.owed = self.owed - before + self.owed_by(tenant);
        let at = self.free.len() - n;
        self.free.split_off(at)
    }

    fn give(&mut self, tenant: usize, slots: impl IntoIterator<Item = u32>) {
        let before = self.owed_by(tenant);
        for slot in slots {
            self.free.push(slot);
            debug_assert!(
                self.holding[tenant] > 0,
                "a slot given back that was not held"
            );
            self.holding[tenant] = self.holding[tenant].saturating_sub(1);
        }
        self.owed = self.owed - before + self.owed_by(tenant);
    }
}

/// The free slots.
#[derive(Debug)]
pub struct Pools {
    data: Kind,
    control: Kind,
    data_slots: u32,
    per_connection: u32,
    /// Data slots whose replies wait as copies, over every connection.
    parked: u32,
}

impl Pools {
    /// `data` data slots numbered from 0, then `control` control slots; a connection holds
    /// at most `per_connection` data slots; `tenants` share them (see the module's text).
    pub fn new(data: u32, control: u32, per_connection: u32, tenants: usize) -> Self {
        Self {
            data: Kind::new(0..data, tenants),
            control: Kind::new(data..data + control, tenants),
            data_slots: data,
            per_connection: per_connection.clamp(1, data.max(1)),
            parked: 0,
        }
    }

    /// `n` data slots for `holder`, if that many are free, within its connection's quota
    /// and its tenant's share; the caller tries again after slots come back.
    pub fn take_data(&mut self, n: usize, holder: &mut Holder) -> Option<Vec<u32>> {
        // A connection holding nothing may take more than its quota at once, so no request
        // waits forever.
        let within = holder.held == 0 || holder.held as usize + n <= self.per_connection as usize;
        if !within || !self.data.may_take(holder.tenant, n) {
            return None;
        }
        holder.held += n as u32;
        Some(self.data.take(holder.tenant, n))
    }

    /// A control slot for `holder`, if one is free within its tenant's share.
    pub fn take_control(&mut self, holder: &Holder) -> Option<u32> {
        if !self.control.may_take(holder.tenant, 1) {
            return None;
        }
        self.control.take(holder.tenant, 1).pop()
    }

    /// Gives `slot` back; a data slot leaves its connection's `held`.
    pub fn put(&mut self, slot: u32, holder: &mut Holder) {
        if slot < self.data_slots {
            self.data.give(holder.tenant, [slot]);
            holder.held = holder.held.saturating_sub(1);
        } else {
            self.control.give(holder.tenant, [slot]);
        }
    }

    /// Gives `slots` back while their data waits, copied, for a slow client: they still
    /// count in its `held` until [`Self::unpark`] (its tenant has them back at once).
    /// Returns how many data slots were parked.
    pub fn park(&mut self, slots: &[u32], holder: &Holder) -> usize {
        let data_slots = self.data_slots;
        let parked: Vec<u32> = slots.iter().copied().filter(|&s| s < data_slots).collect();
        self.parked = self.parked.saturating_add(parked.len() as u32);
        let n = parked.len();
        self.data.give(holder.tenant, parked);
        n
    }

    /// True while the copies of every connection together hold more than the pool's size:
    /// the server then closes the connections that hold the most.
    pub fn over_budget(&self) -> bool {
        self.parked > self.data_slots
    }

    /// The copy of `n` parked slots' data was sent (or dropped): they leave `held`.
    pub fn unpark(&mut self, n: usize, holder: &mut Holder) {
        holder.held = holder.held.saturating_sub(n as u32);
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
        let mut pools = Pools::new(4, 1, 4, 1);
        let (mut a, mut b) = (Holder::default(), Holder::default());
        let held = pools.take_data(3, &mut a).unwrap();
        assert_eq!(held.len(), 3);
        assert_eq!(pools.take_data(2, &mut b), None, "only one slot is free");
        assert_eq!(b.held, 0, "a refused read holds nothing");
        pools.put(held[0], &mut a);
        assert_eq!(pools.take_data(2, &mut b).map(|s| s.len()), Some(2));
        assert_eq!(pools.take_control(&a), Some(4));
        assert_eq!(pools.take_control(&a), None);
    }

    #[test]
    fn one_connection_cannot_take_more_than_its_quota() {
        let mut pools = Pools::new(8, 0, 3, 1);
        let mut greedy = Holder::default();
        let held = pools.take_data(3, &mut greedy).unwrap();
        assert_eq!(pools.take_data(1, &mut greedy), None, "over its quota");
        // Another connection still gets slots; one holding nothing may even take more than
        // its quota at once.
        let mut other = Holder::default();
        assert_eq!(pools.take_data(5, &mut other).map(|s| s.len()), Some(5));
        pools.put(held[0], &mut greedy);
        assert_eq!(greedy.held, 2);
        assert_eq!(pools.take_data(1, &mut greedy).map(|s| s.len()), Some(1));
    }

    #[test]
    fn parked_slots_serve_other_connections_but_still_count_against_their_own() {
        let mut pools = Pools::new(4, 0, 4, 1);
        let (mut slow, mut other) = (Holder::default(), Holder::default());
        let held = pools.take_data(4, &mut slow).unwrap();
        assert_eq!(pools.park(&held, &slow), 4);
        // The pool has every slot again for others …
        assert_eq!(pools.take_data(4, &mut other).map(|s| s.len()), Some(4));
        // … while the slow connection's quota is still spent until its copy is sent.
        assert_eq!(slow.held, 4);
        pools.unpark(4, &mut slow);
        assert_eq!(slow.held, 0);
        assert_eq!(pools.parked(), 0);
    }

    #[test]
    fn copies_over_all_connections_stay_within_the_pool_size() {
        let mut pools = Pools::new(4, 0, 4, 1);
        let (mut a, mut b) = (Holder::default(), Holder::default());
        let first = pools.take_data(4, &mut a).unwrap();
        assert_eq!(pools.park(&first, &a), 4);
        assert!(!pools.over_budget(), "the pool's size in copies is allowed");
        let second = pools.take_data(1, &mut b).unwrap();
        assert_eq!(pools.park(&second, &b), 1);
        assert!(
            pools.over_budget(),
            "a fifth parked slot passes the pool's size"
        );
        pools.unpark(4, &mut a);
        assert!(!pools.over_budget());
        assert_eq!(pools.parked(), 1);
    }

    #[test]
    fn a_tenant_held_at_its_limit_leaves_every_other_tenant_its_reserve() {
        // 16 data and 8 control slots over 4 tenants: each is owed 2 and 1.
        let mut pools = Pools::new(16, 8, 16, 4);
        let mut limited = Holder { held: 0, tenant: 0 };
        let mut taken = 0;
        while pools.take_data(1, &mut limited).is_some() {
            taken += 1;
        }
        assert_eq!(taken, 16 - 3 * 2, "the pool less the others' reserves");
        let mut controls = 0;
        while pools.take_control(&limited).is_some() {
            controls += 1;
        }
        assert_eq!(controls, 8 - 3, "control slots are shared out the same way");
        for tenant in 1..4 {
            let mut other = Holder { held: 0, tenant };
            assert_eq!(
                pools.take_data(2, &mut other).map(|s| s.len()),
                Some(2),
                "tenant {tenant} still gets its reserve"
            );
            assert!(pools.take_control(&other).is_some());
            assert_eq!(pools.take_data(1, &mut other), None, "and no more");
        }
    }

    #[test]
    fn slots_a_tenant_gives_back_count_against_it_no_more() {
        let mut pools = Pools::new(8, 0, 8, 2);
        let mut a = Holder { held: 0, tenant: 0 };
        let mut b = Holder { held: 0, tenant: 1 };
        let slots = pools.take_data(6, &mut a).expect("8 less b's 2");
        assert_eq!(pools.take_data(1, &mut a), None);
        pools.put(slots[0], &mut a);
        assert_eq!(
            pools.park(&slots[1..3], &a),
            2,
            "parked copies free the slots"
        );
        assert_eq!(
            pools.take_data(3, &mut a).map(|s| s.len()),
            Some(3),
            "a's slots back in the pool are a's to take again"
        );
        assert_eq!(pools.take_data(1, &mut a), None, "the rest is b's reserve");
        assert_eq!(pools.take_data(2, &mut b).map(|s| s.len()), Some(2));
    }
}
