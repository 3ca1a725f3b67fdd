//! cscan: a one-way elevator. Requests are served in ascending sector order from the last
//! dispatched position; when none lies ahead the head sweeps back to the lowest sector.
//! Unlike a two-way elevator it treats both ends of the disk alike.

#![forbid(unsafe_code)]

use schedhost_sdk::{
    Dispatch, IdMap, MergeEvent, MergeKind, Policy, Request, SectorSet, Setup, TunableSpec,
};

/// The C-SCAN policy.
#[derive(Debug, Default)]
pub struct Cscan {
    sorted: SectorSet,
    /// Start and length of every queued request, to find it in `sorted`.
    extent_of: IdMap<(u64, u32)>,
    /// Where the last dispatched request ended: the sweep continues from here.
    head: u64,
    /// Tunable `max_sweep_kb`: most data sent per dispatch call.
    max_sweep_sectors: u64,
}

impl Policy for Cscan {
    const NAME: &'static str = "cscan";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const TUNABLES: &'static [TunableSpec] = &[TunableSpec {
        name: "max_sweep_kb",
        default: 4096,
        min: 4,
        max: 1 << 30,
        unit: "KiB",
        help: "most data sent per dispatch call before other hardware queues get a turn",
    }];

    fn new(_setup: &Setup) -> Self {
        Self::default()
    }

    fn set(&mut self, name: &str, value: i64) {
        if name == "max_sweep_kb" {
            self.max_sweep_sectors = value.unsigned_abs() * 2;
        }
    }

    fn get(&self, name: &str) -> Option<i64> {
        (name == "max_sweep_kb").then_some((self.max_sweep_sectors / 2) as i64)
    }

    fn insert(&mut self, _now_ns: u64, requests: &[Request]) {
        for r in requests {
            self.sorted.insert(r.sector, r.id);
            self.extent_of.insert(r.id, (r.sector, r.sectors));
        }
    }

    fn dispatch(&mut self, _now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        let mut sent = 0;
        while out.ids.len() < budget as usize && sent < self.max_sweep_sectors {
            let Some((sector, id)) = self
                .sorted
                .at_or_after(self.head)
                .or_else(|| self.sorted.first())
            else {
                break;
            };
            self.sorted.remove(sector, id);
            let sectors = self.extent_of.remove(&id).map_or(0, |(_, n)| u64::from(n));
            out.ids.push(id);
            self.head = sector + sectors;
            sent += sectors;
        }
    }

    fn merged(&mut self, _now_ns: u64, event: &MergeEvent) {
        if let Some(gone) = event.absorbed
            && let Some((sector, _)) = self.extent_of.remove(&gone)
        {
            self.sorted.remove(sector, gone);
        }
        if let Some((old, _)) = self
            .extent_of
            .insert(event.target, (event.sector, event.sectors))
            && event.kind == MergeKind::Front
        {
            self.sorted.reposition(old, event.sector, event.target);
        }
    }
}

schedhost_sdk::export!(Cscan);

#[cfg(test)]
mod tests {
    use schedhost_sdk::{Op, PrioClass, Runtime};

    use super::*;

    fn read(id: u64, sector: u64) -> Request {
        Request {
            id,
            ctx: 0,
            op: Op::Read,
            sector,
            sectors: 8,
            sync: true,
            prio_class: PrioClass::None,
            prio_level: 4,
            arrival_ns: 0,
        }
    }

    #[test]
    fn cscan_sweeps_upward_then_wraps_to_lowest_sector() {
        let mut rt = Runtime::<Cscan>::new();
        rt.init(
            &Setup {
                hw_queues: 1,
                queue_depth: 1,
                nr_requests: 8,
            },
            &[],
        )
        .unwrap();
        rt.insert(0, &[read(1, 500), read(2, 100), read(3, 900)]);
        assert_eq!(rt.dispatch(0, 0, 1).ids, vec![2]);
        rt.insert(0, &[read(4, 50)]);
        assert_eq!(rt.dispatch(0, 0, 2).ids, vec![1, 3]);
        assert_eq!(rt.dispatch(0, 0, 2).ids, vec![4]);
    }
}
