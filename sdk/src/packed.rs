//! The packed encoding of the two per-request calls, `insert` and `completed`: five u64 words
//! per record. A list of scalars crosses the component boundary in one copy, a list of records
//! field by field; `schedhost bench` measured the difference (BENCHMARKS.md). The layouts are
//! documented in `wit/policy.wit`.

use crate::types::{
    Completion, Group, MergeEvent, MergeKind, Op, PrioClass, Request, RequestId, Sector,
};

/// Words per packed request or completion.
pub const WORDS: usize = 5;

fn op_index(op: Op) -> u64 {
    op as u64
}

fn op_from(index: u64) -> Op {
    match index & 0xff {
        0 => Op::Read,
        1 => Op::Write,
        2 => Op::Flush,
        _ => Op::Discard,
    }
}

/// `turn`'s `control`: a completion is present (`turn-after-completion`).
pub const TURN_COMPLETION: u64 = 1;
/// `turn`'s `control`: a request is present.
pub const TURN_REQUEST: u64 = 2;
/// `turn`'s `control`: dispatch.
pub const TURN_DISPATCH: u64 = 4;
/// The largest hardware queue `turn`'s `control` can name (24 bits).
pub const TURN_MAX_HW_QUEUE: u32 = (1 << 24) - 1;

/// `turn`'s `control` word: the parts present, and the dispatch's queue and budget.
pub fn turn_control(parts: u64, hw_queue: u32, budget: u32) -> u64 {
    parts | u64::from(hw_queue & TURN_MAX_HW_QUEUE) << 8 | u64::from(budget) << 32
}

/// The parts, hardware queue and budget of a `control` word.
pub fn turn_parts(control: u64) -> (u64, u32, u32) {
    (
        control & 0xff,
        ((control >> 8) & 0xff_ffff) as u32,
        (control >> 32) as u32,
    )
}
/// The first word of `turn`'s result when nothing was dispatched.
pub const TURN_NONE: u64 = u64::MAX;
/// The first word of `turn`'s result when the answer is more than one id: `take-answer`
/// has it.
pub const TURN_MORE: u64 = u64::MAX - 1;
/// The second word of `turn`'s result when no wake-up is asked.
pub const TURN_NO_WAKE: u64 = u64::MAX;

/// `r` in five words.
pub fn request_words(r: &Request) -> [u64; WORDS] {
    let flags = op_index(r.op)
        | u64::from(r.sync) << 8
        | (r.prio_class as u64) << 16
        | u64::from(r.prio_level) << 24
        | u64::from(r.group) << 32;
    [
        r.id.0,
        r.sector.0,
        r.arrival_ns,
        u64::from(r.sectors) | u64::from(r.ctx) << 32,
        flags,
    ]
}

/// Appends `r` to `out`.
pub fn pack_request(r: &Request, out: &mut Vec<u64>) {
    out.extend_from_slice(&request_words(r));
}

/// The request in five words.
// Inlined so a batch's loop builds each request in place: a call leaves it on the shadow
// stack in narrow stores that the copy then reads back in wide loads.
#[inline(always)]
pub fn unpack_request(w: &[u64]) -> Request {
    Request {
        id: RequestId(w[0]),
        sector: Sector(w[1]),
        arrival_ns: w[2],
        sectors: w[3] as u32,
        ctx: (w[3] >> 32) as u32,
        op: op_from(w[4]),
        sync: (w[4] >> 8) & 1 == 1,
        prio_class: match (w[4] >> 16) & 0xff {
            1 => PrioClass::Rt,
            2 => PrioClass::Be,
            3 => PrioClass::Idle,
            _ => PrioClass::None,
        },
        prio_level: (w[4] >> 24) as u8,
        group: (w[4] >> 32) as u32,
    }
}

/// Appends `c` to `out`.
pub fn pack_completion(c: &Completion, out: &mut Vec<u64>) {
    out.extend_from_slice(&completion_words(c));
}

/// `c` in five words.
pub fn completion_words(c: &Completion) -> [u64; WORDS] {
    [
        c.id.0,
        c.latency_ns,
        c.service_ns,
        u64::from(c.sectors) | u64::from(c.ctx) << 32,
        op_index(c.op) | u64::from(c.status as u32) << 32,
    ]
}

/// `turn`'s result for `answer`: its two words, or `None` if the answer does not fit them
/// (it must then be kept for `take-answer`, and the first word is [`TURN_MORE`]).
pub fn turn_result(answer: &crate::Dispatch) -> Option<(u64, u64)> {
    let wake = match answer.wake_at_ns {
        None => TURN_NO_WAKE,
        Some(TURN_NO_WAKE) => return None,
        Some(at) => at,
    };
    match answer.ids.as_slice() {
        [] => Some((TURN_NONE, wake)),
        [id] if id.0 < 1 << 63 => Some((id.0, wake)),
        _ => None,
    }
}

/// The answer `turn`'s two words stand for, unless the first is [`TURN_MORE`]; the ids
/// go into `ids` (cleared first).
#[inline]
pub fn turn_answer(
    (first, wake): (u64, u64),
    mut ids: Vec<crate::RequestId>,
) -> Option<crate::Dispatch> {
    ids.clear();
    match first {
        TURN_MORE => return None,
        TURN_NONE => {}
        id => ids.push(crate::RequestId(id)),
    }
    Some(crate::Dispatch {
        ids,
        wake_at_ns: (wake != TURN_NO_WAKE).then_some(wake),
    })
}

/// A record that crosses the interface as a fixed number of u64 words (a list of them as one
/// `list<u64>`): the host packs, the SDK unpacks, an author sees the record. A call's
/// argument declared `as Words` in the interface's list is a slice of such records.
pub trait Packed: Sized {
    /// Words per record.
    const WORDS: usize;
    /// Writes the record into `out`, exactly [`Packed::WORDS`] long.
    fn pack(&self, out: &mut [u64]);
    /// The record in `words`, exactly [`Packed::WORDS`] long.
    fn unpack(words: &[u64]) -> Self;
}

/// The shape of an argument declared `as Words` in the interface's list: a slice of
/// [`Packed`] records, crossing as their words.
#[derive(Debug, Clone, Copy)]
pub struct Words;

/// The shape of an argument declared without `as`: it crosses as the WIT type of its name.
#[derive(Debug, Clone, Copy)]
pub struct Plain;

impl Packed for Request {
    const WORDS: usize = WORDS;
    fn pack(&self, out: &mut [u64]) {
        out.copy_from_slice(&request_words(self));
    }
    #[inline(always)]
    fn unpack(words: &[u64]) -> Self {
        unpack_request(words)
    }
}

impl Packed for Completion {
    const WORDS: usize = WORDS;
    fn pack(&self, out: &mut [u64]) {
        out.copy_from_slice(&completion_words(self));
    }
    #[inline(always)]
    fn unpack(words: &[u64]) -> Self {
        unpack_completion(words)
    }
}

/// A merge event in four words, as `turn-words` carries them: [target, sector, sectors |
/// kind << 32, absorbed], `kind` as its case index, `absorbed` all ones when none (ids are
/// below 2^63).
impl Packed for MergeEvent {
    const WORDS: usize = 4;
    fn pack(&self, out: &mut [u64]) {
        let kind = match self.kind {
            MergeKind::Back => 0,
            MergeKind::Front => 1,
        };
        out.copy_from_slice(&[
            self.target.0,
            self.sector.0,
            u64::from(self.sectors) | kind << 32,
            self.absorbed.map_or(NO_ID, |id| id.0),
        ]);
    }
    #[inline(always)]
    fn unpack(w: &[u64]) -> Self {
        MergeEvent {
            target: RequestId(w[0]),
            sector: Sector(w[1]),
            sectors: w[2] as u32,
            kind: if (w[2] >> 32) & 1 == 0 {
                MergeKind::Back
            } else {
                MergeKind::Front
            },
            absorbed: (w[3] != NO_ID).then_some(RequestId(w[3])),
        }
    }
}

/// A packed merge event's `absorbed` when there is none.
const NO_ID: u64 = u64::MAX;

/// `turn-words`' list: `completions`, `merges` and `requests` packed one after the other into
/// `out` (cleared first).
pub fn turn_words(
    completions: &[Completion],
    merges: &[MergeEvent],
    requests: &[Request],
    out: &mut Vec<u64>,
) {
    out.clear();
    pack_into(completions, out);
    pack_into(merges, out);
    pack_into(requests, out);
}

/// Where each part of a `turn-words` list ends: the completions', the merges' and the
/// requests' word counts must sum to the list's length, or the list is not one.
pub fn turn_words_split(counts: [u32; 3], len: usize) -> Option<[usize; 3]> {
    let [c, m, r] = counts.map(u64::from);
    let ends = [
        c * WORDS as u64,
        c * WORDS as u64 + m * <MergeEvent as Packed>::WORDS as u64,
        c * WORDS as u64 + m * <MergeEvent as Packed>::WORDS as u64 + r * WORDS as u64,
    ];
    (ends[2] == len as u64).then(|| ends.map(|e| e as usize))
}

/// A group in seven words: [id | weight << 32, reserve-iops, riops, wiops, rbps, wbps,
/// latency-target-ns], 0 where a parameter is not set (none can be 0 when set).
impl Packed for Group {
    const WORDS: usize = 7;
    fn pack(&self, out: &mut [u64]) {
        let word = |v: Option<u64>| v.unwrap_or(0);
        out.copy_from_slice(&[
            u64::from(self.id) | u64::from(self.weight) << 32,
            word(self.reserve_iops),
            word(self.limit_iops[0]),
            word(self.limit_iops[1]),
            word(self.limit_bps[0]),
            word(self.limit_bps[1]),
            word(self.latency_target_ns),
        ]);
    }
    fn unpack(w: &[u64]) -> Self {
        let set = |v: u64| (v != 0).then_some(v);
        Group {
            id: w[0] as u32,
            weight: (w[0] >> 32) as u32,
            reserve_iops: set(w[1]),
            limit_iops: [set(w[2]), set(w[3])],
            limit_bps: [set(w[4]), set(w[5])],
            latency_target_ns: set(w[6]),
        }
    }
}

/// `records` unpacked from `words` into `out` (cleared first); a trailing partial record is
/// ignored, as the host never sends one.
pub fn unpack_into<T: Packed>(words: &[u64], out: &mut Vec<T>) {
    out.clear();
    out.extend(words.chunks_exact(T::WORDS).map(T::unpack));
}

/// `records` in their words, appended to `out`.
pub fn pack_into<T: Packed>(records: &[T], out: &mut Vec<u64>) {
    let start = out.len();
    out.resize(start + records.len() * T::WORDS, 0);
    for (slot, record) in out[start..].chunks_exact_mut(T::WORDS).zip(records) {
        record.pack(slot);
    }
}

/// The completion in five words.
pub fn unpack_completion(w: &[u64]) -> Completion {
    Completion {
        id: RequestId(w[0]),
        latency_ns: w[1],
        service_ns: w[2],
        sectors: w[3] as u32,
        ctx: (w[3] >> 32) as u32,
        op: op_from(w[4]),
        status: (w[4] >> 32) as u32 as i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_control_round_trips_parts_queue_and_budget() {
        let control = turn_control(TURN_REQUEST | TURN_DISPATCH, 1023, u32::MAX);
        assert_eq!(
            turn_parts(control),
            (TURN_REQUEST | TURN_DISPATCH, 1023, u32::MAX)
        );
    }

    #[test]
    fn an_answer_of_at_most_one_id_and_a_wake_up_crosses_in_the_turns_two_words() {
        let answer = |ids: &[u64], wake_at_ns| crate::Dispatch {
            ids: ids.iter().copied().map(RequestId).collect(),
            wake_at_ns,
        };
        for fits in [
            answer(&[], None),
            answer(&[], Some(5)),
            answer(&[3], None),
            answer(&[(1 << 63) - 1], Some(u64::MAX - 1)),
        ] {
            let words = turn_result(&fits).expect("fits the two words");
            assert_eq!(turn_answer(words, Vec::new()), Some(fits));
        }
        // Kept for `take-answer`: two ids, an id the first word cannot tell from its
        // markers, a wake-up the second cannot tell from none.
        for kept in [
            answer(&[1, 2], None),
            answer(&[1 << 63], None),
            answer(&[1], Some(u64::MAX)),
        ] {
            assert_eq!(turn_result(&kept), None, "{kept:?}");
        }
        assert_eq!(turn_answer((TURN_MORE, 5), Vec::new()), None);
    }

    #[test]
    fn packed_request_and_completion_round_trip() {
        let r = Request {
            id: RequestId(u64::MAX - 3),
            ctx: 77,
            op: Op::Discard,
            sector: Sector(1 << 40),
            sectors: 2560,
            sync: true,
            prio_class: PrioClass::Idle,
            prio_level: 7,
            group: 0,
            arrival_ns: 123_456_789,
        };
        let c = Completion {
            id: RequestId(9),
            ctx: u32::MAX,
            op: Op::Write,
            sectors: 8,
            latency_ns: 5,
            service_ns: 4,
            status: -5,
        };
        let mut words = Vec::new();
        pack_request(&r, &mut words);
        pack_completion(&c, &mut words);
        assert_eq!(words.len(), 2 * WORDS);
        assert_eq!(unpack_request(&words[..WORDS]), r);
        assert_eq!(unpack_completion(&words[WORDS..]), c);
    }

    #[test]
    fn packed_merge_events_round_trip_with_and_without_an_absorbed_request() {
        let events = [
            MergeEvent {
                target: RequestId((1 << 63) - 1),
                sector: Sector(u64::MAX >> 1),
                sectors: u32::MAX,
                kind: MergeKind::Front,
                absorbed: Some(RequestId(0)),
            },
            MergeEvent {
                target: RequestId(5),
                sector: Sector(8),
                sectors: 16,
                kind: MergeKind::Back,
                absorbed: None,
            },
        ];
        let mut words = Vec::new();
        pack_into(&events, &mut words);
        assert_eq!(words.len(), 2 * <MergeEvent as Packed>::WORDS);
        let mut back: Vec<MergeEvent> = Vec::new();
        unpack_into(&words, &mut back);
        assert_eq!(back, events);
    }

    #[test]
    fn a_turn_words_list_splits_only_where_its_counts_add_up() {
        // Two completions, one merge event, three requests: 10 + 4 + 15 words.
        assert_eq!(turn_words_split([2, 1, 3], 29), Some([10, 14, 29]));
        assert_eq!(turn_words_split([2, 1, 3], 28), None);
        assert_eq!(turn_words_split([0, 0, 0], 0), Some([0, 0, 0]));
        // Counts whose words pass 32 bits are refused, not wrapped.
        assert_eq!(turn_words_split([u32::MAX; 3], 0), None);
    }
}
