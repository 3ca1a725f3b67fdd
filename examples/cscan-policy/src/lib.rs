//! cscan: a one-way elevator. Requests are served in ascending sector order from the last
//! dispatched position; when none lies ahead the head sweeps back to the lowest sector.
//! Unlike a two-way elevator it treats both ends of the disk alike.

#![forbid(unsafe_code)]

use schedhost_sdk::{
    Dispatch, Extent, IdMap, MergeEvent, MergeKind, Policy, Request, Sector, SectorSet, Setup,
    TunableSpec,
};

/// The C-SCAN policy.
#[derive(Debug, Default)]
pub struct Cscan {
    sorted: SectorSet,
    /// Start and length of every queued request, to find it in `sorted`.
    extent_of: IdMap<Extent>,
    /// Where the last dispatched request ended: the sweep continues from here.
    head: Sector,
    /// Tunable `max_sweep_kb`, as set.
    max_sweep_kb: i64,
    /// The same in sectors: most data sent per dispatch call.
    max_sweep_sectors: u64,
}

impl Policy for Cscan {
    const NAME: &'static str = "cscan";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const TUNABLES: &'static [TunableSpec<Self>] = &[TunableSpec {
        name: "max_sweep_kb",
        default: 4096,
        min: 4,
        max: 1 << 30,
        unit: "KiB",
        help: "most data sent per dispatch call before other hardware queues get a turn",
        field: |p| &mut p.max_sweep_kb,
    }];
    // merged keeps `sorted` in step, so the SDK need not filter.
    const HANDLES_ABSORBED: bool = true;

    fn new(_setup: &Setup) -> Self {
        Self::default()
    }

    fn retuned(&mut self, _name: &str) {
        self.max_sweep_sectors = self.max_sweep_kb.unsigned_abs() * 2;
    }

    fn insert(&mut self, _now_ns: u64, requests: &[Request]) {
        for r in requests {
            self.sorted.insert(r.sector, r.id);
            let extent = Extent {
                sector: r.sector,
                sectors: r.sectors,
            };
            self.extent_of.insert(r.id, extent);
        }
    }

    fn dispatch(&mut self, _now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        let mut sent = 0;
        while out.ids.len() < budget as usize && sent < self.max_sweep_sectors {
            let Some(next) = self
                .sorted
                .at_or_after(self.head)
                .or_else(|| self.sorted.first())
            else {
                break;
            };
            self.sorted.remove(next.sector, next.id);
            let sectors = self.extent_of.remove(&next.id).map_or(0, |e| e.sectors);
            out.ids.push(next.id);
            self.head = next.sector + sectors;
            sent += u64::from(sectors);
        }
    }

    fn merged(&mut self, _now_ns: u64, event: &MergeEvent) {
        if let Some(gone) = event.absorbed
            && let Some(extent) = self.extent_of.remove(&gone)
        {
            self.sorted.remove(extent.sector, gone);
        }
        let grown = Extent {
            sector: event.sector,
            sectors: event.sectors,
        };
        if let Some(old) = self.extent_of.insert(event.target, grown)
            && event.kind == MergeKind::Front
        {
            self.sorted
                .reposition(old.sector, event.sector, event.target);
        }
    }
}

schedhost_sdk::export!(Cscan);

#[cfg(test)]
mod tests {
    use schedhost_sdk::{Op, PrioClass, RequestId, Runtime};

    use super::*;

    fn read(id: u64, sector: u64) -> Request {
        Request {
            id: RequestId(id),
            ctx: 0,
            op: Op::Read,
            sector: Sector(sector),
            sectors: 8,
            sync: true,
            prio_class: PrioClass::None,
            prio_level: 4,
            group: 0,
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
                rotational: true,
            },
            &[],
        )
        .unwrap();
        rt.insert(0, &[read(1, 500), read(2, 100), read(3, 900)]);
        let ids = |ids: &[u64]| -> Vec<RequestId> { ids.iter().copied().map(RequestId).collect() };
        assert_eq!(rt.dispatch(0, 0, 1).ids, ids(&[2]));
        rt.insert(0, &[read(4, 50)]);
        assert_eq!(rt.dispatch(0, 0, 2).ids, ids(&[1, 3]));
        assert_eq!(rt.dispatch(0, 0, 2).ids, ids(&[4]));
    }
}
