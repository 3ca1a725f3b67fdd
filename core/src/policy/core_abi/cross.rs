//! How each type of the interface crosses into a core module and back, written once per
//! type: [`Lower`] flattens an argument into core values (copying what does not fit into
//! guest memory), [`Lift`] reads an answer out of the core results. The calls themselves
//! are generated from the interface's list (`mod.rs`); the export table a module must match
//! is built from these types' [`Flat`] forms.

use schedhost_sdk::packed::{Packed, Plain, Words};
use schedhost_sdk::{Dispatch, Info, MergeEvent, MergeKind, MergeQuery, Op, Setup, Tunable};
use wasmtime::{Store, ValRaw};

use super::CoreCalls;
use super::guest::{Guest, bad};
use super::layout::{self, Flat};
use crate::policy::calls::Caps;

/// The most flat parameters a core export takes before the canonical ABI passes them in
/// memory instead (`MAX_FLAT_PARAMS`); every call of this interface stays under it.
pub(super) const MAX_FLAT: usize = 16;

/// One call's flat values, as they are lowered: the values and which of them are `i64`
/// (bit i), so a call can check them against its function's type before it crosses.
pub(super) struct Flats {
    pub(super) vals: [ValRaw; MAX_FLAT],
    pub(super) len: usize,
    pub(super) wide: u32,
}

impl Default for Flats {
    fn default() -> Self {
        Self {
            vals: [ValRaw::u32(0); MAX_FLAT],
            len: 0,
            wide: 0,
        }
    }
}

impl Flats {
    fn push(&mut self, value: ValRaw, wide: bool) -> wasmtime::Result<()> {
        let slot = self
            .vals
            .get_mut(self.len)
            .ok_or_else(|| bad("a call with more flat parameters than the ABI passes flat"))?;
        *slot = value;
        self.wide |= u32::from(wide) << self.len;
        self.len += 1;
        Ok(())
    }

    pub(super) fn u32(&mut self, value: u32) -> wasmtime::Result<()> {
        self.push(ValRaw::u32(value), false)
    }

    pub(super) fn u64(&mut self, value: u64) -> wasmtime::Result<()> {
        self.push(ValRaw::u64(value), true)
    }
}

/// An argument of the SDK's type `Self` as core values: its flat types ([`Lower::FLAT`],
/// which the export table is built from) and the values themselves, `S` its shape.
pub(super) trait Lower<S = Plain>: Sized {
    const FLAT: &'static [Flat];
    fn lower(
        self,
        calls: &CoreCalls,
        store: &mut Store<Caps>,
        out: &mut Flats,
    ) -> wasmtime::Result<()>;
}

/// An answer read from a core call's results (a scalar, or a pointer to its return area).
pub(super) trait Lift: Sized {
    const FLAT: &'static [Flat];
    fn lift(guest: &Guest, store: &Store<Caps>, results: &[ValRaw]) -> wasmtime::Result<Self>;
}

use Flat::{I32, I64};

impl Lower for u64 {
    const FLAT: &'static [Flat] = &[I64];
    fn lower(self, _: &CoreCalls, _: &mut Store<Caps>, out: &mut Flats) -> wasmtime::Result<()> {
        out.u64(self)
    }
}

impl Lower for i64 {
    const FLAT: &'static [Flat] = &[I64];
    fn lower(self, _: &CoreCalls, _: &mut Store<Caps>, out: &mut Flats) -> wasmtime::Result<()> {
        out.u64(self as u64)
    }
}

impl Lower for u32 {
    const FLAT: &'static [Flat] = &[I32];
    fn lower(self, _: &CoreCalls, _: &mut Store<Caps>, out: &mut Flats) -> wasmtime::Result<()> {
        out.u32(self)
    }
}

impl Lower for bool {
    const FLAT: &'static [Flat] = &[I32];
    fn lower(self, _: &CoreCalls, _: &mut Store<Caps>, out: &mut Flats) -> wasmtime::Result<()> {
        out.u32(u32::from(self))
    }
}

impl Lower for Op {
    const FLAT: &'static [Flat] = &[I32];
    fn lower(self, _: &CoreCalls, _: &mut Store<Caps>, out: &mut Flats) -> wasmtime::Result<()> {
        out.u32(op_index(self))
    }
}

/// Bytes copied into guest memory: a (pointer, length) pair.
impl Lower for &[u8] {
    const FLAT: &'static [Flat] = &[I32, I32];
    fn lower(
        self,
        calls: &CoreCalls,
        store: &mut Store<Caps>,
        out: &mut Flats,
    ) -> wasmtime::Result<()> {
        let ptr = calls.lower(store, self, 1)?;
        out.u32(ptr)?;
        out.u32(length(self.len())?)
    }
}

impl Lower for &str {
    const FLAT: &'static [Flat] = &[I32, I32];
    fn lower(
        self,
        calls: &CoreCalls,
        store: &mut Store<Caps>,
        out: &mut Flats,
    ) -> wasmtime::Result<()> {
        self.as_bytes().lower(calls, store, out)
    }
}

/// `init`'s settings: a list of (string, s64) tuples, each string copied first.
impl Lower for &[(String, i64)] {
    const FLAT: &'static [Flat] = &[I32, I32];
    fn lower(
        self,
        calls: &CoreCalls,
        store: &mut Store<Caps>,
        out: &mut Flats,
    ) -> wasmtime::Result<()> {
        let mut tuples = Vec::with_capacity(self.len() * layout::SETTING_SIZE);
        for (name, value) in self {
            let ptr = calls.lower(store, name.as_bytes(), 1)?;
            let mut tuple = [0u8; layout::SETTING_SIZE];
            tuple[..4].copy_from_slice(&ptr.to_le_bytes());
            tuple[layout::LEN as usize..8].copy_from_slice(&length(name.len())?.to_le_bytes());
            tuple[layout::SETTING_VALUE..].copy_from_slice(&value.to_le_bytes());
            tuples.extend_from_slice(&tuple);
        }
        let list = calls.lower(store, &tuples, 8)?;
        out.u32(list)?;
        out.u32(length(self.len())?)
    }
}

/// A record of scalars: its fields, flat, in order.
impl Lower for &Setup {
    const FLAT: &'static [Flat] = &[I32, I32, I32, I32];
    fn lower(self, _: &CoreCalls, _: &mut Store<Caps>, out: &mut Flats) -> wasmtime::Result<()> {
        out.u32(self.hw_queues)?;
        out.u32(self.queue_depth)?;
        out.u32(self.nr_requests)?;
        out.u32(u32::from(self.rotational))
    }
}

impl Lower for &MergeQuery {
    const FLAT: &'static [Flat] = &[I64, I32, I32, I32, I64, I32, I32, I32];
    fn lower(self, _: &CoreCalls, _: &mut Store<Caps>, out: &mut Flats) -> wasmtime::Result<()> {
        out.u64(self.target.0)?;
        out.u32(self.target_ctx)?;
        out.u32(self.ctx)?;
        out.u32(op_index(self.op))?;
        out.u64(self.sector.0)?;
        out.u32(self.sectors)?;
        out.u32(u32::from(self.sync))?;
        out.u32(u32::from(kind_index(self.kind)))
    }
}

/// Merge events laid out as `merge-event` records in guest memory.
impl Lower for &[MergeEvent] {
    const FLAT: &'static [Flat] = &[I32, I32];
    fn lower(
        self,
        calls: &CoreCalls,
        store: &mut Store<Caps>,
        out: &mut Flats,
    ) -> wasmtime::Result<()> {
        use layout::{
            EVENT_ABSORBED, EVENT_ABSORBED_VALUE, EVENT_KIND, EVENT_SECTOR, EVENT_SECTORS,
        };
        let bytes = self
            .len()
            .checked_mul(layout::EVENT_SIZE)
            .ok_or_else(|| bad("an argument past 4 GiB"))?;
        // Written in place in the guest's allocation: no copy built on the host first.
        let (ptr, target) = calls.allocate(store, bytes, 8)?;
        for (record, e) in target.chunks_exact_mut(layout::EVENT_SIZE).zip(self) {
            record.fill(0);
            record[..EVENT_SECTOR].copy_from_slice(&e.target.0.to_le_bytes());
            record[EVENT_SECTOR..EVENT_SECTOR + 8].copy_from_slice(&e.sector.0.to_le_bytes());
            record[EVENT_SECTORS..EVENT_SECTORS + 4].copy_from_slice(&e.sectors.to_le_bytes());
            record[EVENT_KIND] = kind_index(e.kind);
            if let Some(absorbed) = e.absorbed {
                record[EVENT_ABSORBED] = 1;
                record[EVENT_ABSORBED_VALUE..].copy_from_slice(&absorbed.0.to_le_bytes());
            }
        }
        out.u32(ptr)?;
        out.u32(length(self.len())?)
    }
}

/// Packed records straight into guest memory, little-endian as the guest reads them: the
/// list's pointer and its length in words.
impl<T: Packed> Lower<Words> for &[T] {
    const FLAT: &'static [Flat] = &[I32, I32];
    fn lower(
        self,
        calls: &CoreCalls,
        store: &mut Store<Caps>,
        out: &mut Flats,
    ) -> wasmtime::Result<()> {
        let words = self
            .len()
            .checked_mul(T::WORDS)
            .ok_or_else(|| bad("an argument past 4 GiB"))?;
        let bytes = words
            .checked_mul(8)
            .ok_or_else(|| bad("an argument past 4 GiB"))?;
        let (ptr, target) = calls.allocate(store, bytes, 8)?;
        write_packed(self, target)?;
        out.u32(ptr)?;
        out.u32(length(words)?)
    }
}

/// `records` packed into `target`, little-endian as the guest reads them; the bytes left
/// after them.
pub(super) fn write_packed<'t, T: Packed>(
    records: &[T],
    target: &'t mut [u8],
) -> wasmtime::Result<&'t mut [u8]> {
    let mut record = [0u64; MAX_RECORD_WORDS];
    let record = record
        .get_mut(..T::WORDS)
        .ok_or_else(|| bad("a packed record longer than the host packs"))?;
    let (packed, rest) = target
        .split_at_mut_checked(records.len().saturating_mul(T::WORDS * 8))
        .ok_or_else(|| bad("packed records past their allocation"))?;
    for (slot, r) in packed.chunks_exact_mut(T::WORDS * 8).zip(records) {
        r.pack(record);
        for (bytes, word) in slot.chunks_exact_mut(8).zip(&*record) {
            bytes.copy_from_slice(&word.to_le_bytes());
        }
    }
    Ok(rest)
}

/// The longest packed record the host lowers, in words.
const MAX_RECORD_WORDS: usize = 16;

/// A length the ABI carries in 32 bits.
fn length(len: usize) -> wasmtime::Result<u32> {
    u32::try_from(len).map_err(|_| bad("an argument past 4 GiB"))
}

/// The WIT enum `op`'s case index.
fn op_index(op: Op) -> u32 {
    match op {
        Op::Read => 0,
        Op::Write => 1,
        Op::Flush => 2,
        Op::Discard => 3,
    }
}

/// The WIT enum `merge-kind`'s case index.
fn kind_index(kind: MergeKind) -> u8 {
    match kind {
        MergeKind::Back => 0,
        MergeKind::Front => 1,
    }
}

impl Lift for () {
    const FLAT: &'static [Flat] = &[];
    fn lift(_: &Guest, _: &Store<Caps>, _: &[ValRaw]) -> wasmtime::Result<Self> {
        Ok(())
    }
}

impl Lift for bool {
    const FLAT: &'static [Flat] = &[I32];
    fn lift(_: &Guest, _: &Store<Caps>, results: &[ValRaw]) -> wasmtime::Result<Self> {
        Ok(first(results)?.get_u32() != 0)
    }
}

impl Lift for u32 {
    const FLAT: &'static [Flat] = &[I32];
    fn lift(_: &Guest, _: &Store<Caps>, results: &[ValRaw]) -> wasmtime::Result<Self> {
        Ok(first(results)?.get_u32())
    }
}

/// Answers the guest leaves in a return area, read by the [`Guest`] reader of their type.
macro_rules! in_return_area {
    ($($t:ty => $read:ident),* $(,)?) => {$(
        impl Lift for $t {
            const FLAT: &'static [Flat] = &[I32];
            fn lift(guest: &Guest, store: &Store<Caps>, results: &[ValRaw]) -> wasmtime::Result<Self> {
                guest.$read(store, first(results)?.get_u32())
            }
        }
    )*};
}
in_return_area!(
    Info => info_at,
    Vec<Tunable> => tunables_at,
    Result<(), String> => unit_or_string,
    Option<i64> => option_s64_at,
    Vec<u8> => state_at,
    Dispatch => answer_at,
);

fn first(results: &[ValRaw]) -> wasmtime::Result<&ValRaw> {
    results.first().ok_or_else(|| bad("no result"))
}
