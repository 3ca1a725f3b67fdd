//! bfq's tunables, in the kernel's sysfs names and units (`device_share` and `group_budgets` are schedhost's).

use schedhost_sdk::TunableSpec;

use super::Bfq;

pub(super) const TUNABLES: &[TunableSpec<Bfq>] = &[
    TunableSpec {
        name: "slice_idle",
        default: 8,
        min: 0,
        max: 1_000,
        unit: "ms",
        help: "how long an empty sync queue keeps the device",
        field: |p| &mut p.knobs.slice_idle,
    },
    TunableSpec {
        name: "timeout_sync",
        default: 125,
        min: 1,
        max: 60_000,
        unit: "ms",
        help: "longest service of one queue at a time",
        field: |p| &mut p.knobs.timeout_sync,
    },
    TunableSpec {
        name: "max_budget",
        default: 0,
        min: 0,
        max: 1 << 30,
        unit: "sectors",
        help: "sectors a queue is served per turn; 0 = auto (16384)",
        field: |p| &mut p.knobs.max_budget,
    },
    TunableSpec {
        name: "low_latency",
        default: 1,
        min: 0,
        max: 1,
        unit: "",
        help: "raise the weight of new submitters' queues for their first seconds",
        field: |p| &mut p.knobs.low_latency,
    },
    TunableSpec {
        name: "strict_guarantees",
        default: 0,
        min: 0,
        max: 1,
        unit: "",
        help: "idle for async queues too and keep one request on the device at a time, trading throughput for fairness",
        field: |p| &mut p.knobs.strict_guarantees,
    },
    TunableSpec {
        name: "device_share",
        default: 1,
        min: 0,
        max: 1,
        unit: "",
        help: "on a device deeper than the load, keep on it only what lets each group hold its weight's part (not the kernel's)",
        field: |p| &mut p.knobs.device_share,
    },
    TunableSpec {
        name: "group_budgets",
        default: 1,
        min: 0,
        max: 1,
        unit: "",
        help: "where groups are named, scale each turn's budget and timeout by its weight over the heaviest busy queue's, so light groups get their share in small turns (not the kernel's)",
        field: |p| &mut p.knobs.group_budgets,
    },
];
