//! A program that embeds schedhost's core: its own event loop, its own I/O (plain `pread` and
//! `pwrite` on a file it creates), and a bundled policy component deciding the order.
//!
//! One writer fills the file block by block, each block stamped with its number; readers
//! read blocks the writer has had acknowledged, at random, and check each stamp. The core
//! holds the queues, merges the writer's neighbouring bios and asks the policy which request
//! goes next; this program only moves bytes and tells the core what finished.
//!
//! `cargo run -p schedhost-embed-example -- [--policy NAME] [--blocks N] [--dir DIR]`

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use schedhost_core::core::{Action, Bio, BioDone, Bios, Config, Core, CoreStats};
use schedhost_core::policy::{self, WasmRuntime};
use schedhost_sdk::{Op, PrioClass};

/// Bytes per block, the unit every bio moves.
const BLOCK: u64 = 4096;
const SECTORS_PER_BLOCK: u32 = (BLOCK / 512) as u32;
/// Bios each submitter keeps outstanding.
const DEPTH: u32 = 8;
/// Readers beside the one writer.
const READERS: u32 = 3;
/// Requests on the "device" at once: fewer than the submitters keep outstanding, so the
/// policy has a queue to choose from and the writer's bios have time to merge.
const DEVICE_DEPTH: u32 = 4;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut policy, mut blocks, mut dir) = ("deadline".to_owned(), 2048, std::env::temp_dir());
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--policy" => policy = value()?,
            "--blocks" => blocks = value()?.parse().context("--blocks takes a number")?,
            "--dir" => dir = PathBuf::from(value()?),
            other => bail!("unknown argument {other} (--policy NAME, --blocks N, --dir DIR)"),
        }
    }
    let summary = run(&policy, blocks, &dir)?;
    println!("{summary}");
    Ok(())
}

/// What a run did.
#[derive(Debug)]
struct Summary {
    policy: String,
    written: u64,
    read: u64,
    stats: CoreStats,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.stats;
        write!(
            f,
            "{}: {} blocks written, {} read and checked; {} bios became {} requests \
             ({} merged), {} policy calls",
            self.policy,
            self.written,
            self.read,
            s.bios,
            s.requests,
            s.back_merges + s.front_merges,
            s.policy_calls
        )
    }
}

/// Most blocks a run writes: a 1 GiB file.
const MAX_BLOCKS: u64 = 1 << 18;

/// Writes `blocks` blocks and reads them back at random under `policy`, in a file it creates
/// in `dir` and removes after.
fn run(policy: &str, blocks: u64, dir: &Path) -> Result<Summary> {
    ensure!(
        (1..=MAX_BLOCKS).contains(&blocks),
        "--blocks {blocks}: from 1 to {MAX_BLOCKS} (a 1 GiB file)"
    );
    let path = dir.join(format!("schedhost-embed-{}.data", std::process::id()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    let ran = Program::new(policy, blocks, file).and_then(Program::run);
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    ran
}

/// One submitter's state: the writer (ctx 0) or a reader.
#[derive(Debug, Default)]
struct Submitter {
    outstanding: u32,
    done: u64,
}

/// The program's own state around the core: its file, its submitters, its "device" queue.
struct Program {
    policy: String,
    core: Core,
    file: File,
    clock: Instant,
    blocks: u64,
    /// Blocks acknowledged written, in order: readers pick among them.
    acknowledged: Vec<bool>,
    acknowledged_count: u64,
    next_write: u64,
    submitters: Vec<Submitter>,
    /// Requests the core dispatched, served in order, one per turn of the loop.
    device: VecDeque<(u64, Op, u64, Bios)>,
    next_bio: u64,
    rng: u64,
    read: u64,
}

impl Program {
    fn new(policy: &str, blocks: u64, file: File) -> Result<Self> {
        // The policy: a bundled component (found beside the binary, under target/policies)
        // compiled once; each device gets an instance.
        let runtime = WasmRuntime::new()?;
        let (_source, loaded) = policy::load(&runtime, policy)?;
        let (instance, fallback) = policy::for_core(loaded.instantiate()?, None);
        let mut config = Config::for_device(1, DEVICE_DEPTH, 256);
        config.rotational = false;
        let core = Core::new(config, instance, &[], fallback)
            .map_err(|refused| anyhow::anyhow!("{policy} did not start: {refused}"))?;
        Ok(Self {
            policy: policy.to_owned(),
            core,
            file,
            clock: Instant::now(),
            blocks,
            acknowledged: vec![false; usize::try_from(blocks)?],
            acknowledged_count: 0,
            next_write: 0,
            submitters: (0..=READERS).map(|_| Submitter::default()).collect(),
            device: VecDeque::new(),
            next_bio: 0,
            rng: 0x9e37_79b9_7f4a_7c15,
            read: 0,
        })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The event loop: submit what the submitters may, let the core decide, serve the
    /// device one request at a time, until every block is written and read once.
    fn run(mut self) -> Result<Summary> {
        loop {
            self.submit()?;
            let now = self.now();
            self.core.run(now)?;
            self.take_actions()?;
            if let Some((id, op, sector, bios)) = self.device.pop_front() {
                let status = self.serve(op, sector, &bios)?;
                self.core.complete(self.now(), id, status)?;
                self.take_actions()?;
            } else if self.finished() {
                break;
            } else if let Some(at) = self.core.poll_timeout() {
                // The policy holds requests back until `at` (an idle window, a batch).
                std::thread::sleep(Duration::from_nanos(at.saturating_sub(self.now())));
            } else if self.core.requests_in_flight() > 0 {
                bail!(
                    "{} holds requests with no timer and nothing on the device",
                    self.policy
                );
            }
        }
        Ok(Summary {
            policy: self.policy,
            written: self.submitters[0].done,
            read: self.read,
            stats: self.core.stats(),
        })
    }

    fn finished(&self) -> bool {
        self.submitters[0].done == self.blocks
            && self.read >= self.blocks
            && self.submitters.iter().all(|s| s.outstanding == 0)
    }

    /// Tops every submitter up to its depth: the writer with the next blocks in order, the
    /// readers with random acknowledged blocks.
    fn submit(&mut self) -> Result<()> {
        let now = self.now();
        while self.submitters[0].outstanding < DEPTH && self.next_write < self.blocks {
            let block = self.next_write;
            self.next_write += 1;
            self.submit_bio(now, 0, Op::Write, block)?;
        }
        let reads_wanted = self.blocks;
        for ctx in 1..=READERS {
            while self.submitters[ctx as usize].outstanding < DEPTH
                && self.acknowledged_count > 0
                && self.read_started() < reads_wanted
            {
                let block = self.random_acknowledged();
                self.submit_bio(now, ctx, Op::Read, block)?;
            }
        }
        Ok(())
    }

    fn read_started(&self) -> u64 {
        self.read
            + self.submitters[1..]
                .iter()
                .map(|s| u64::from(s.outstanding))
                .sum::<u64>()
    }

    fn random_acknowledged(&mut self) -> u64 {
        loop {
            // xorshift64: the program's own randomness, no dependency needed.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            let block = self.rng % self.next_write.max(1);
            if self.acknowledged[block as usize] {
                return block;
            }
        }
    }

    fn submit_bio(&mut self, now: u64, ctx: u32, op: Op, block: u64) -> Result<()> {
        // The bio's id is the program's own: it carries the block, so a completion needs no
        // lookup table.
        let id = self.next_bio << 32 | block;
        self.next_bio += 1;
        let bio = Bio {
            id,
            ctx,
            op,
            sector: block * u64::from(SECTORS_PER_BLOCK),
            sectors: SECTORS_PER_BLOCK,
            sync: op == Op::Read,
            prio_class: PrioClass::None,
            prio_level: 0,
        };
        self.core.submit(now, bio)?;
        self.submitters[ctx as usize].outstanding += 1;
        Ok(())
    }

    fn take_actions(&mut self) -> Result<()> {
        while let Some(action) = self.core.poll_action() {
            match action {
                Action::Dispatch {
                    id,
                    op,
                    sector,
                    bios,
                    ..
                } => self.device.push_back((id, op, sector, bios)),
                Action::Complete(done) => self.finish(done)?,
            }
        }
        Ok(())
    }

    /// The device: one request, whose bios lie back to back from `sector`, moved with one
    /// `pread`/`pwrite`. Returns the status the core is told.
    fn serve(&mut self, op: Op, sector: u64, bios: &Bios) -> Result<i32> {
        let mut buffer = Vec::with_capacity(bios.len() * BLOCK as usize);
        let offset = sector * 512;
        match op {
            Op::Write => {
                for (_, bio) in bios {
                    let block = bio.id & 0xffff_ffff;
                    buffer.extend((0..BLOCK / 8).flat_map(|_| block.to_le_bytes()));
                }
                self.file.write_all_at(&buffer, offset)?;
            }
            Op::Read => {
                buffer.resize(bios.len() * BLOCK as usize, 0);
                self.file.read_exact_at(&mut buffer, offset)?;
                for (i, (_, bio)) in bios.iter().enumerate() {
                    let block = bio.id & 0xffff_ffff;
                    let stamp = &buffer[i * BLOCK as usize..][..8];
                    ensure!(
                        stamp == block.to_le_bytes(),
                        "block {block} read back {stamp:?} under {}",
                        self.policy
                    );
                }
            }
            Op::Flush | Op::Discard => bail!("this program sends no {op:?}"),
        }
        Ok(0)
    }

    fn finish(&mut self, done: BioDone) -> Result<()> {
        ensure!(done.status == 0, "bio {} failed: {}", done.bio, done.status);
        let submitter = &mut self.submitters[done.ctx as usize];
        submitter.outstanding -= 1;
        submitter.done += 1;
        let block = done.bio & 0xffff_ffff;
        match done.op {
            Op::Write => {
                self.acknowledged[block as usize] = true;
                self.acknowledged_count += 1;
            }
            _ => self.read += 1,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_block_written_through_a_bundled_component_reads_back_its_own_stamp_and_the_writer_merges()
     {
        let summary = run("deadline", 512, &std::env::temp_dir()).expect("the program runs");
        assert_eq!((summary.written, summary.read), (512, 512));
        let s = summary.stats;
        assert_eq!(
            s.completed + s.coalesced,
            s.requests,
            "every request finished or was absorbed into a neighbour"
        );
        assert!(
            summary.stats.back_merges > 0,
            "the writer's neighbouring bios queue behind the device and merge: {summary}"
        );
    }
}
