//! Reading a policy's answers out of its linear memory, as the canonical ABI lays them out.

use schedhost_sdk::{Dispatch, Info, RequestId, Tunable};
use wasmtime::{Memory, Store};

use super::layout;
use super::{MAX_ANSWER_IDS, MAX_STATE_BYTES};
use crate::policy::calls::Caps;

/// A policy's linear memory, read as the canonical ABI lays answers out in it. Nothing
/// it holds is trusted: every read is bounds-checked.
pub(super) struct Guest(pub(super) Memory);

/// An answer that breaks the canonical ABI: a trap of the guest's making.
pub(super) fn bad(what: &str) -> wasmtime::Error {
    wasmtime::Error::msg(format!("the policy's answer is malformed: {what}"))
}

impl Guest {
    /// `len` bytes at `ptr` of the guest's memory, if they lie inside it.
    pub(super) fn bytes<'s>(
        &self,
        store: &'s Store<Caps>,
        ptr: u32,
        len: u32,
    ) -> wasmtime::Result<&'s [u8]> {
        let start = ptr as usize;
        let end = start
            .checked_add(len as usize)
            .ok_or_else(|| bad("a length past the end of memory"))?;
        self.0
            .data(store)
            .get(start..end)
            .ok_or_else(|| bad("a pointer outside memory"))
    }

    pub(super) fn u32_at(&self, store: &Store<Caps>, at: u32) -> wasmtime::Result<u32> {
        let b = self.bytes(store, at, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(super) fn u64_at(&self, store: &Store<Caps>, at: u32) -> wasmtime::Result<u64> {
        let b = self.bytes(store, at, 8)?;
        Ok(u64::from_le_bytes(
            b.try_into().map_err(|_| bad("a short read"))?,
        ))
    }

    /// The `tuple<u64, u64>` in the return area at `area` (a turn's result).
    pub(super) fn two_words(&self, store: &Store<Caps>, area: u32) -> wasmtime::Result<(u64, u64)> {
        if !area.is_multiple_of(8) {
            return Err(bad("a misaligned return area"));
        }
        let b = self.bytes(store, area, 16)?;
        let word = |at: usize| {
            b.get(at..at + 8)
                .and_then(|w| w.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or_else(|| bad("a short read"))
        };
        Ok((word(0)?, word(8)?))
    }

    pub(super) fn u8_at(&self, store: &Store<Caps>, at: u32) -> wasmtime::Result<u8> {
        Ok(self.bytes(store, at, 1)?[0])
    }

    /// A field `offset` bytes into the return area at `area`.
    pub(super) fn field(area: u32, offset: u32) -> wasmtime::Result<u32> {
        area.checked_add(offset)
            .ok_or_else(|| bad("a return area past the end of memory"))
    }

    /// The string whose (pointer, length) pair is at `at`.
    pub(super) fn string_at(
        &self,
        store: &Store<Caps>,
        at: u32,
        limit: u32,
    ) -> wasmtime::Result<String> {
        let (ptr, len) = (
            self.u32_at(store, at)?,
            self.u32_at(store, Self::field(at, layout::LEN)?)?,
        );
        if len > limit {
            return Err(bad(&format!("a string of {len} bytes")));
        }
        let bytes = self.bytes(store, ptr, len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| bad("a string that is not UTF-8"))
    }

    /// A `result<_, string>` in the return area at `area`.
    pub(super) fn unit_or_string(
        &self,
        store: &Store<Caps>,
        area: u32,
    ) -> wasmtime::Result<Result<(), String>> {
        match self.u8_at(store, area)? {
            0 => Ok(Ok(())),
            1 => Ok(Err(
                self.message_at(store, Self::field(area, layout::RESULT_ERR)?)?
            )),
            _ => Err(bad("a result that is neither ok nor error")),
        }
    }

    /// A refusal's message whose (pointer, length) pair is at `at`: read no further than
    /// the host keeps of one ([`crate::policy::answers::MAX_MESSAGE`]), as the component API would
    /// lift it whole and then cut it. Bytes that are not UTF-8 are replaced.
    pub(super) fn message_at(&self, store: &Store<Caps>, at: u32) -> wasmtime::Result<String> {
        let (ptr, len) = (
            self.u32_at(store, at)?,
            self.u32_at(store, Self::field(at, layout::LEN)?)?,
        );
        let bytes = self.bytes(store, ptr, len)?;
        let kept = &bytes[..bytes.len().min(crate::policy::answers::MAX_MESSAGE + 1)];
        Ok(crate::policy::answers::bound_message(
            String::from_utf8_lossy(kept).into_owned(),
        ))
    }

    /// A `policy-info` in the return area at `area`.
    pub(super) fn info_at(&self, store: &Store<Caps>, area: u32) -> wasmtime::Result<Info> {
        let limit = crate::policy::answers::MAX_NAME as u32 * 4;
        Ok(Info {
            name: self.string_at(store, area, limit)?,
            version: self.string_at(store, Self::field(area, layout::INFO_VERSION)?, limit)?,
            merge_veto: self.u8_at(store, Self::field(area, layout::INFO_MERGE_VETO)?)? != 0,
            completions: self.u8_at(store, Self::field(area, layout::INFO_COMPLETIONS)?)? != 0,
            weighted_tags: self.u8_at(store, Self::field(area, layout::INFO_WEIGHTED_TAGS)?)? != 0,
        })
    }

    /// A `list<tunable>` in the return area at `area`, read to one past the host's bound.
    pub(super) fn tunables_at(
        &self,
        store: &Store<Caps>,
        area: u32,
    ) -> wasmtime::Result<Vec<Tunable>> {
        let (ptr, len) = (
            self.u32_at(store, area)?,
            self.u32_at(store, Self::field(area, layout::LEN)?)?,
        );
        // One more than the host accepts, so a longer list is seen as one.
        let len = len.min(crate::policy::answers::MAX_TUNABLES as u32 + 1);
        let name = crate::policy::answers::MAX_NAME as u32 * 4;
        let help = crate::policy::answers::MAX_HELP as u32 * 4;
        let mut list = Vec::with_capacity(len as usize);
        for i in 0..len {
            let at = ptr
                .checked_add(
                    i.checked_mul(layout::TUNABLE_SIZE)
                        .ok_or_else(|| bad("tunables"))?,
                )
                .ok_or_else(|| bad("tunables past the end of memory"))?;
            list.push(Tunable {
                name: self.string_at(store, at, name)?,
                default: self.u64_at(store, Self::field(at, layout::TUNABLE_DEFAULT)?)? as i64,
                min: self.u64_at(store, Self::field(at, layout::TUNABLE_MIN)?)? as i64,
                max: self.u64_at(store, Self::field(at, layout::TUNABLE_MAX)?)? as i64,
                unit: self.string_at(store, Self::field(at, layout::TUNABLE_UNIT)?, name)?,
                help: self.string_at(store, Self::field(at, layout::TUNABLE_HELP)?, help)?,
            });
        }
        Ok(list)
    }

    /// An `option<s64>` in the return area at `area`.
    pub(super) fn option_s64_at(
        &self,
        store: &Store<Caps>,
        area: u32,
    ) -> wasmtime::Result<Option<i64>> {
        match self.u8_at(store, area)? {
            0 => Ok(None),
            1 => Ok(Some(
                self.u64_at(store, Self::field(area, layout::OPTION_S64_VALUE)?)? as i64,
            )),
            _ => Err(bad("an option that is neither none nor some")),
        }
    }

    /// A `list<u8>` of saved state in the return area at `area`.
    pub(super) fn state_at(&self, store: &Store<Caps>, area: u32) -> wasmtime::Result<Vec<u8>> {
        let (ptr, len) = (
            self.u32_at(store, area)?,
            self.u32_at(store, Self::field(area, layout::LEN)?)?,
        );
        if len > MAX_STATE_BYTES {
            return Err(bad(&format!("{len} bytes of saved state")));
        }
        Ok(self.bytes(store, ptr, len)?.to_vec())
    }

    /// A `dispatch-answer` in the return area at `area`.
    pub(super) fn answer_at(&self, store: &Store<Caps>, area: u32) -> wasmtime::Result<Dispatch> {
        let (ptr, len) = (
            self.u32_at(store, area)?,
            self.u32_at(store, Self::field(area, layout::LEN)?)?,
        );
        let len = len.min(MAX_ANSWER_IDS);
        let bytes = self.bytes(store, ptr, len.checked_mul(8).ok_or_else(|| bad("ids"))?)?;
        let mut ids = vec![RequestId(0); len as usize];
        for (id, word) in ids.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut le = [0; 8];
            le.copy_from_slice(word);
            *id = RequestId(u64::from_le_bytes(le));
        }
        let wake_at_ns = match self.u8_at(store, Self::field(area, layout::ANSWER_WAKE)?)? {
            0 => None,
            1 => Some(self.u64_at(store, Self::field(area, layout::ANSWER_WAKE_VALUE)?)?),
            _ => return Err(bad("an option that is neither none nor some")),
        };
        Ok(Dispatch { ids, wake_at_ns })
    }
}
