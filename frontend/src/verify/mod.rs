//! Data verification, fio's `verify=crc32c`: every written block starts with a header naming
//! its offset and which write of that block it is, followed by a pattern derived from both,
//! and a CRC-32C over the whole block. A read checks the header against where it read and
//! what the [`Ledger`] says was last written there. Sans-IO: buffers in, verdicts out.

mod crc32c;

use std::collections::HashMap;

pub use crc32c::crc32c;

/// Bytes of header at the start of each verified block.
pub const HEADER_BYTES: usize = 32;

const MAGIC: u32 = u32::from_le_bytes(*b"shv1");
const CRC_AT: usize = 24;

/// Writes a verifiable block for `offset` (bytes on the target) and `generation`.
pub fn stamp(block: &mut [u8], offset: u64, generation: u32) {
    let len = block.len();
    fill_pattern(&mut block[HEADER_BYTES.min(len)..], offset, generation);
    let header = &mut block[..HEADER_BYTES];
    header[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    header[4..8].copy_from_slice(&(len as u32).to_le_bytes());
    header[8..16].copy_from_slice(&offset.to_le_bytes());
    header[16..20].copy_from_slice(&generation.to_le_bytes());
    header[20..CRC_AT + 4].fill(0);
    header[28..32].fill(0);
    let crc = crc32c(block);
    block[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
}

/// The payload after the header: xorshift64* from the offset and generation, so a block
/// written elsewhere or by another write never matches by accident.
fn fill_pattern(payload: &mut [u8], offset: u64, generation: u32) {
    let mut x = (offset ^ (u64::from(generation) << 40)).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for chunk in payload.chunks_mut(8) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let word = x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

/// What a read of a block should find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Nothing can be said: a write to it is in flight, or the run never wrote it and
    /// cannot vouch for what is there.
    Nothing,
    /// A valid block for this offset, of any generation (written by an earlier run, or by
    /// overlapping writes whose order the device chose).
    Valid,
    /// A valid block of exactly this generation.
    Generation(u32),
}

/// Why a block failed verification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("verify failed at offset {offset} ({len} bytes): {problem}")]
pub struct Mismatch {
    /// Byte offset of the block on the target.
    pub offset: u64,
    /// Block length.
    pub len: usize,
    /// What was wrong.
    pub problem: String,
}

/// Checks `block`, read from `offset`, against `expect`.
///
/// # Errors
/// A [`Mismatch`] naming the first thing that is wrong.
pub fn verify_block(block: &[u8], offset: u64, expect: Expect) -> Result<(), Mismatch> {
    if expect == Expect::Nothing {
        return Ok(());
    }
    let fail = |problem: String| Mismatch {
        offset,
        len: block.len(),
        problem,
    };
    let word =
        |at: usize| u32::from_le_bytes([block[at], block[at + 1], block[at + 2], block[at + 3]]);
    if block.len() < HEADER_BYTES || word(0) != MAGIC {
        return Err(fail(
            "no verify header (bad magic): the block was not written by a verified run".into(),
        ));
    }
    let len = word(4) as usize;
    if len != block.len() {
        return Err(fail(format!(
            "header says {len} bytes, the block is {}",
            block.len()
        )));
    }
    let found_offset = u64::from_le_bytes(block[8..16].try_into().unwrap_or_default());
    if found_offset != offset {
        return Err(fail(format!(
            "holds the block written for offset {found_offset}"
        )));
    }
    let generation = word(16);
    let stored = word(CRC_AT);
    let mut copy = block.to_vec();
    copy[CRC_AT..CRC_AT + 4].fill(0);
    let computed = crc32c(&copy);
    if stored != computed {
        return Err(fail(format!(
            "crc32c {computed:#010x}, header says {stored:#010x}: the data is corrupt"
        )));
    }
    if let Expect::Generation(want) = expect
        && generation != want
    {
        return Err(fail(format!(
            "holds write #{generation} of this block, expected #{want}: a write was lost or reordered"
        )));
    }
    Ok(())
}

/// What the run wrote where: per block offset, writes issued and in flight, and what is
/// known to be on the media. A block is `interval` bytes (fio's `verify_interval`): an I/O
/// covers one or more whole blocks, each stamped and checked on its own, so a read that
/// spans blocks rewritten by smaller writes still knows what each part should hold, and a
/// stale copy of any part is caught.
#[derive(Debug)]
pub struct Ledger {
    interval: usize,
    blocks: HashMap<u64, Entry>,
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new(4096)
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Entry {
    issued: u32,
    writing: u32,
    /// Writes overlapped since the block was last idle: the device chose their order.
    raced: bool,
    /// A write failed since the block was last idle: old data, new data or a mix.
    failed: bool,
    on_media: OnMedia,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum OnMedia {
    #[default]
    Unknown,
    AnyGeneration,
    Generation(u32),
}

impl Ledger {
    /// A ledger of `interval`-byte blocks (at least a header's worth).
    pub fn new(interval: usize) -> Self {
        Self {
            interval: interval.max(HEADER_BYTES),
            blocks: HashMap::new(),
        }
    }

    /// The block size it stamps and checks.
    pub fn interval(&self) -> usize {
        self.interval
    }

    /// Each block of `buf`, about to be written at `offset`, is stamped with its next
    /// generation. A trailing part shorter than the interval is stamped as a block of its own.
    pub fn stamp_write(&mut self, buf: &mut [u8], offset: u64) {
        for (at, block) in blocks_of(buf.len(), self.interval, offset) {
            let generation = self.begin_write(at);
            stamp(&mut buf[block], at, generation);
        }
    }

    /// The write of `buf` (as [`Self::stamp_write`] left it) at `offset` finished; `ok`
    /// iff it succeeded. Each block's generation is read back from its own header.
    pub fn finish_write(&mut self, buf: &[u8], offset: u64, ok: bool) {
        for (at, block) in blocks_of(buf.len(), self.interval, offset) {
            let header = &buf[block][16..20];
            let generation = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
            self.end_write(at, generation, ok);
        }
    }

    /// Checks every block of `buf`, read from `offset`; returns whether any block was
    /// vouched for (`trust_unwritten`: see [`Self::expect`]).
    ///
    /// # Errors
    /// The first block that does not hold what the ledger says.
    pub fn check_read(
        &self,
        buf: &[u8],
        offset: u64,
        trust_unwritten: bool,
    ) -> Result<bool, Mismatch> {
        let mut checked = false;
        for (at, block) in blocks_of(buf.len(), self.interval, offset) {
            let expect = self.expect(at, trust_unwritten);
            verify_block(&buf[block], at, expect)?;
            checked |= expect != Expect::Nothing;
        }
        Ok(checked)
    }

    /// A write of the block at `offset` is about to be issued; returns its generation.
    pub fn begin_write(&mut self, offset: u64) -> u32 {
        let entry = self.blocks.entry(offset).or_default();
        entry.issued = entry.issued.wrapping_add(1);
        entry.raced |= entry.writing > 0;
        entry.writing += 1;
        entry.issued
    }

    /// The write of `generation` at `offset` finished; `ok` iff it succeeded.
    pub fn end_write(&mut self, offset: u64, generation: u32, ok: bool) {
        let Some(entry) = self.blocks.get_mut(&offset) else {
            return;
        };
        entry.writing = entry.writing.saturating_sub(1);
        entry.failed |= !ok;
        if entry.writing > 0 {
            return;
        }
        entry.on_media = if entry.failed {
            OnMedia::Unknown
        } else if entry.raced {
            OnMedia::AnyGeneration
        } else {
            OnMedia::Generation(generation)
        };
        entry.raced = false;
        entry.failed = false;
    }

    /// What a read of `offset` should find; `trust_unwritten` vouches for blocks this run
    /// never wrote (a read-only verify of an earlier run's data).
    pub fn expect(&self, offset: u64, trust_unwritten: bool) -> Expect {
        match self.blocks.get(&offset) {
            None if trust_unwritten => Expect::Valid,
            None => Expect::Nothing,
            Some(e) if e.writing > 0 => Expect::Nothing,
            Some(e) => match e.on_media {
                OnMedia::Unknown => Expect::Nothing,
                OnMedia::AnyGeneration => Expect::Valid,
                OnMedia::Generation(g) => Expect::Generation(g),
            },
        }
    }

    /// Offsets of every block the run wrote, ascending.
    pub fn written(&self) -> Vec<u64> {
        let mut offsets: Vec<u64> = self.blocks.keys().copied().collect();
        offsets.sort_unstable();
        offsets
    }
}

/// The blocks of an I/O of `len` bytes at `offset`: each block's device offset and its
/// byte range in the buffer.
fn blocks_of(
    len: usize,
    interval: usize,
    offset: u64,
) -> impl Iterator<Item = (u64, std::ops::Range<usize>)> {
    (0..len)
        .step_by(interval)
        .map(move |start| (offset + start as u64, start..(start + interval).min(len)))
}

/// The verify interval for I/O sizes `sizes`: their greatest common divisor, so every I/O
/// covers whole blocks (a block of one size for a run of one size, as before).
pub fn interval_for(sizes: impl IntoIterator<Item = u32>) -> usize {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    sizes.into_iter().fold(0, gcd).max(1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(offset: u64, generation: u32) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        stamp(&mut b, offset, generation);
        b
    }

    #[test]
    fn stamped_block_verifies_at_its_offset_and_generation() {
        let b = block(8192, 3);
        assert_eq!(verify_block(&b, 8192, Expect::Generation(3)), Ok(()));
        assert_eq!(verify_block(&b, 8192, Expect::Valid), Ok(()));
    }

    #[test]
    fn verify_names_each_kind_of_mismatch() {
        let b = block(8192, 3);
        let err = |r: Result<(), Mismatch>| r.expect_err("must fail").problem;
        assert!(err(verify_block(&b, 4096, Expect::Valid)).contains("offset 8192"));
        assert!(err(verify_block(&b, 8192, Expect::Generation(4))).contains("write #3"));
        let mut flipped = b.clone();
        flipped[1000] ^= 1;
        assert!(err(verify_block(&flipped, 8192, Expect::Valid)).contains("corrupt"));
        assert!(err(verify_block(&[0u8; 4096], 0, Expect::Valid)).contains("magic"));
        assert_eq!(verify_block(&[0u8; 4096], 0, Expect::Nothing), Ok(()));
    }

    #[test]
    fn ledger_expects_last_completed_write_and_skips_inflight_ones() {
        let mut ledger = Ledger::default();
        assert_eq!(ledger.expect(0, false), Expect::Nothing);
        assert_eq!(ledger.expect(0, true), Expect::Valid);
        let g1 = ledger.begin_write(0);
        assert_eq!(ledger.expect(0, false), Expect::Nothing);
        ledger.end_write(0, g1, true);
        assert_eq!(ledger.expect(0, false), Expect::Generation(g1));
        let g2 = ledger.begin_write(0);
        let g3 = ledger.begin_write(0);
        ledger.end_write(0, g3, true);
        ledger.end_write(0, g2, true);
        assert_eq!(
            ledger.expect(0, false),
            Expect::Valid,
            "overlapping writes: either may be on the media"
        );
        let g4 = ledger.begin_write(0);
        ledger.end_write(0, g4, false);
        assert_eq!(
            ledger.expect(0, true),
            Expect::Nothing,
            "a failed write leaves unknown data"
        );
    }

    #[test]
    fn a_read_across_a_smaller_rewrite_checks_each_part_against_its_own_write() {
        let mut ledger = Ledger::new(interval_for([8192, 4096]));
        let mut big = vec![0u8; 8192];
        ledger.stamp_write(&mut big, 0);
        ledger.finish_write(&big, 0, true);
        let mut small = vec![0u8; 4096];
        ledger.stamp_write(&mut small, 4096);
        ledger.finish_write(&small, 4096, true);
        // What the device holds after both: the big write's first half, the small write.
        let mut current = big.clone();
        current[4096..].copy_from_slice(&small);
        assert_eq!(ledger.check_read(&current, 0, false), Ok(true));
        // A stale copy (the small write went elsewhere) holds the big write's second half.
        let err = ledger
            .check_read(&big, 0, false)
            .expect_err("a stale copy must fail");
        assert_eq!(err.offset, 4096);
        assert!(err.problem.contains("expected #2"), "{}", err.problem);
    }

    #[test]
    fn the_interval_is_the_common_divisor_of_the_sizes() {
        assert_eq!(interval_for([8192, 4096, 12288]), 4096);
        assert_eq!(interval_for([1 << 20]), 1 << 20);
        assert_eq!(interval_for([]), 1);
    }
}
