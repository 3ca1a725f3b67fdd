//! The values that cross between the host and a policy, as plain Rust types.
//!
//! They mirror the records of `wit/policy.wit` one for one; the wasm glue converts between the
//! two so policy code never sees generated bindings.

use std::fmt;

/// A request's identity, unique for the life of a host (and below 2^63).
///
/// Only ever handed out by the host: a policy stores and returns ids, it never makes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(transparent)]
pub struct RequestId(pub u64);

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A position on the device, in 512-byte sectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(transparent)]
pub struct Sector(pub u64);

impl Sector {
    /// The device's first sector.
    pub const ZERO: Sector = Sector(0);

    /// The sector `sectors` further on (saturating: a policy never panics on the host's
    /// numbers).
    #[must_use]
    pub fn plus(self, sectors: u32) -> Sector {
        Sector(self.0.saturating_add(u64::from(sectors)))
    }

    /// How far apart two positions are, in sectors, in either direction: a seek's length.
    pub fn distance(self, other: Sector) -> u64 {
        self.0.abs_diff(other.0)
    }
}

impl std::ops::Add<u32> for Sector {
    type Output = Sector;

    fn add(self, sectors: u32) -> Sector {
        self.plus(sectors)
    }
}

impl fmt::Display for Sector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a request does to the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// Read data.
    Read,
    /// Write data.
    Write,
    /// Make earlier writes durable.
    Flush,
    /// Forget a range (TRIM).
    Discard,
}

impl Op {
    /// All operations, for tables indexed by `Op as usize`.
    pub const ALL: [Op; 4] = [Op::Read, Op::Write, Op::Flush, Op::Discard];

    /// Lower-case name, as fio and blktrace spell it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Discard => "discard",
        }
    }

    /// True for operations that carry data towards the device.
    pub fn is_write(self) -> bool {
        matches!(self, Op::Write | Op::Discard)
    }
}

/// I/O priority class (ioprio_class): `Rt` before `Be` before `Idle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum PrioClass {
    /// No class given; schedulers treat it as best effort.
    #[default]
    None,
    /// Real time.
    Rt,
    /// Best effort.
    Be,
    /// Served only when nothing else waits.
    Idle,
}

impl PrioClass {
    /// The class a scheduler acts on: `None` counts as best effort, as in the kernel.
    pub fn effective(self) -> PrioClass {
        match self {
            PrioClass::None => PrioClass::Be,
            other => other,
        }
    }
}

/// A request queued for scheduling.
// Laid out in the order of its packed words (`crate::packed`), so a component unpacking a
// batch copies whole words: `sectors` and `ctx` are one word, the flags four bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Request {
    /// Unique for the life of the host.
    pub id: RequestId,
    /// First 512-byte sector.
    pub sector: Sector,
    /// When it entered the host, in nanoseconds.
    pub arrival_ns: u64,
    /// Length in 512-byte sectors.
    pub sectors: u32,
    /// The submitter (software queue) it came from.
    pub ctx: u32,
    /// What it does.
    pub op: Op,
    /// The submitter waits for it.
    pub sync: bool,
    /// Priority class.
    pub prio_class: PrioClass,
    /// Level within the class, 0 (highest) to 7.
    pub prio_level: u8,
    /// The [`Group`] it belongs to (from 1), or 0 when its submitter is in none.
    pub group: u32,
}

impl Request {
    /// One past the last sector.
    pub fn end_sector(&self) -> Sector {
        self.sector.plus(self.sectors)
    }
}

/// Which end of a queued request grew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeKind {
    /// The bio continued the request: its end moved.
    Back,
    /// The bio preceded the request: its start moved.
    Front,
}

/// What the host does with a merge of one kind into a queued request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeRule {
    /// Merge without asking.
    Allow,
    /// Ask [`crate::Policy::allow_merge`] first.
    Ask,
    /// Never merge, without asking.
    Refuse,
}

/// Which merges into its queued requests a policy with [`crate::Policy::MERGE_VETO`] is
/// asked about, per end of the request (a queued request absorbing its neighbour is a back
/// merge). The host reads them after `init` and after every tunable set, so a rule that
/// depends on a tunable (mq-deadline's `front_merges`) costs no call per merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeRules {
    /// Merges at the request's end.
    pub back: MergeRule,
    /// Merges at the request's start.
    pub front: MergeRule,
}

impl MergeRules {
    /// Every merge allowed without asking: a policy without a veto.
    pub const ALLOW: Self = Self {
        back: MergeRule::Allow,
        front: MergeRule::Allow,
    };
    /// Every merge asked about.
    pub const ASK: Self = Self {
        back: MergeRule::Ask,
        front: MergeRule::Ask,
    };

    /// The rule for merges of `kind`.
    pub fn of(self, kind: MergeKind) -> MergeRule {
        match kind {
            MergeKind::Back => self.back,
            MergeKind::Front => self.front,
        }
    }

    /// As `merge-rules` carries them: two bits per end, back in bits 0–1, front in 2–3,
    /// each 0 allow, 1 ask, 2 refuse.
    pub fn bits(self) -> u32 {
        let rule = |r: MergeRule| match r {
            MergeRule::Allow => 0,
            MergeRule::Ask => 1,
            MergeRule::Refuse => 2,
        };
        rule(self.back) | rule(self.front) << 2
    }

    /// The rules `bits` carry, or `None` for bits no rule has.
    pub fn from_bits(bits: u32) -> Option<Self> {
        let rule = |r: u32| match r {
            0 => Some(MergeRule::Allow),
            1 => Some(MergeRule::Ask),
            2 => Some(MergeRule::Refuse),
            _ => None,
        };
        if bits >> 4 != 0 {
            return None;
        }
        Some(Self {
            back: rule(bits & 3)?,
            front: rule(bits >> 2)?,
        })
    }
}

/// A bio asking to join a queued request (asked only when [`Info::merge_veto`] is set, and
/// only for the merges its [`MergeRules`] say to ask about).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeQuery {
    /// The queued request.
    pub target: RequestId,
    /// The queued request's submitter.
    pub target_ctx: u32,
    /// The bio's submitter.
    pub ctx: u32,
    /// The bio's operation.
    pub op: Op,
    /// The bio's first sector.
    pub sector: Sector,
    /// The bio's length in sectors.
    pub sectors: u32,
    /// Whether the bio is synchronous.
    pub sync: bool,
    /// Where it would join.
    pub kind: MergeKind,
}

/// A queued request grew; when `absorbed` is set that request was coalesced into `target`
/// and no longer exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeEvent {
    /// The request that grew.
    pub target: RequestId,
    /// Its first sector now.
    pub sector: Sector,
    /// Its length now.
    pub sectors: u32,
    /// Which end grew.
    pub kind: MergeKind,
    /// A request that disappeared into `target`.
    pub absorbed: Option<RequestId>,
}

/// A group of submitters sharing the device under one set of parameters (a cgroup, an NBD
/// export, fio's `cgroup=`), as the host tells the policy in [`crate::Policy::groups`]. What
/// the policy does with them is its own: mclock serves reservations, weights and limits by
/// dmClock's tags, bfq serves groups by weight. The host itself holds the limits before the
/// policy (as blk-throttle does under io.max), so a policy that ignores them is still held to
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    /// Its number, as in a request's `group`; from 1 (0 is every submitter in no group).
    pub id: u32,
    /// io.weight's share: 1 to 10000, 100 by default.
    pub weight: u32,
    /// IOPS the group is promised whatever others do (mClock's reservation).
    pub reserve_iops: Option<u64>,
    /// io.max's `riops` and `wiops`: at most this many requests per second, [read, write].
    pub limit_iops: [Option<u64>; 2],
    /// io.max's `rbps` and `wbps`: at most this many bytes per second, [read, write].
    pub limit_bps: [Option<u64>; 2],
    /// io.latency's `target`, in nanoseconds.
    pub latency_target_ns: Option<u64>,
}

/// A dispatched request finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The request.
    pub id: RequestId,
    /// Its submitter.
    pub ctx: u32,
    /// Its operation.
    pub op: Op,
    /// Its length in sectors.
    pub sectors: u32,
    /// From arrival in the host to completion.
    pub latency_ns: u64,
    /// From dispatch to completion.
    pub service_ns: u64,
    /// 0 on success, a negative errno otherwise.
    pub status: i32,
}

/// What `dispatch` answers: ids to send now and, optionally, when to be asked again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dispatch {
    /// Requests to send, in order; at most the budget.
    pub ids: Vec<RequestId>,
    /// Ask again at this time even if nothing else happens (idling, slice expiry).
    pub wake_at_ns: Option<u64>,
}

impl Dispatch {
    /// Most ids a list kept for the next answer may hold: one outsized answer does not keep
    /// its memory for the rest of the run.
    pub const KEPT_IDS: usize = 4096;

    /// Hands this answer's id list to `spare`, where the next answer is built, when it is
    /// larger than the one there and within [`Dispatch::KEPT_IDS`].
    pub fn recycle_into(self, spare: &mut Vec<RequestId>) {
        let capacity = self.ids.capacity();
        if capacity > spare.capacity() && capacity <= Self::KEPT_IDS {
            *spare = self.ids;
        }
    }
}

/// A tunable as the host sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tunable {
    /// Name, as in sysfs.
    pub name: String,
    /// Value before any `set`.
    pub default: i64,
    /// Smallest accepted value.
    pub min: i64,
    /// Largest accepted value.
    pub max: i64,
    /// Unit for humans ("ms", "requests", "" for a plain number).
    pub unit: String,
    /// One line on what it does.
    pub help: String,
}

/// A policy's description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// Short name, e.g. "deadline".
    pub name: String,
    /// The policy's own version.
    pub version: String,
    /// Whether to read `merge_rules`, and ask `allow_merge` where they say, before merges
    /// into queued requests.
    pub merge_veto: bool,
    /// Whether to call `completed`.
    pub completions: bool,
    /// Whether the host shares the scheduler tags between groups by weight (else equally).
    pub weighted_tags: bool,
}

/// The device a policy schedules for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// Number of hardware dispatch queues.
    pub hw_queues: u32,
    /// Driver tags per hardware queue.
    pub queue_depth: u32,
    /// Scheduler tags per hardware queue (nr_requests).
    pub nr_requests: u32,
    /// The device seeks: a disk, not flash (the queue's `rotational` attribute).
    pub rotational: bool,
}

#[cfg(test)]
mod merge_rules_tests {
    use super::*;

    #[test]
    fn merge_rules_cross_as_two_bits_per_end_and_other_bits_are_refused() {
        let rules = [MergeRule::Allow, MergeRule::Ask, MergeRule::Refuse];
        for back in rules {
            for front in rules {
                let r = MergeRules { back, front };
                assert_eq!(MergeRules::from_bits(r.bits()), Some(r));
            }
        }
        assert_eq!(MergeRules::ASK.bits(), 0b0101);
        assert_eq!(MergeRules::ALLOW.bits(), 0);
        // 3 is no rule, and nothing past bit 3 is either.
        assert_eq!(MergeRules::from_bits(0b0011), None);
        assert_eq!(MergeRules::from_bits(0b1100), None);
        assert_eq!(MergeRules::from_bits(1 << 4), None);
        assert_eq!(MergeRules::from_bits(u32::MAX), None);
    }
}
