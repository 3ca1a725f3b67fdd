//! A thin owner of one io_uring: it starts reads, writes and flushes on registered files,
//! finishes short transfers and `EAGAIN` itself, and reports each I/O once, with 0 or a
//! negative errno. All io_uring `unsafe` lives here.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use io_uring::types::{Fd, Fixed, SubmitArgs, Timespec};
use io_uring::{IoUring, opcode, squeue};
use smallvec::SmallVec;

/// Retries of an I/O the kernel answered with `EAGAIN` before it is failed.
const MAX_EAGAIN: u32 = 64;

/// `user_data` of the read that watches a [`Notifier`].
const WATCH: u64 = u64::MAX;

/// `user_data` bit of a readiness poll ([`Ring::poll`]); the rest is the caller's token.
const POLL: u64 = 1 << 62;

/// An eventfd other threads write to wake a ring's `Ring::wait`.
#[derive(Debug)]
pub struct Notifier {
    file: File,
}

impl Notifier {
    /// A new eventfd.
    ///
    /// # Errors
    /// The kernel refused an eventfd.
    pub fn new() -> io::Result<Arc<Self>> {
        // SAFETY: eventfd takes no pointers; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor owned by nothing else.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(Arc::new(Self { file }))
    }

    /// Wakes the ring watching it.
    pub fn notify(&self) {
        // An eventfd write of 8 bytes fails only if the counter would overflow, which means
        // the ring has a wake-up pending anyway.
        let _ = (&self.file).write(&1u64.to_ne_bytes());
    }
}

/// The watch on a notifier: its read lands in `buf` while armed.
struct Watch {
    notifier: Arc<Notifier>,
    buf: Box<[u8; 8]>,
    armed: bool,
}

/// What an I/O does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    /// Read into the segments.
    Read,
    /// Write the segments.
    Write,
    /// Flush the file (fdatasync).
    Flush,
    /// Discard this many bytes: the range reads back as zeroes afterwards (a file's blocks
    /// are punched out, a block device's discarded or zeroed), or the I/O fails.
    Discard(u64),
}

/// Memory an I/O reads into or writes from.
pub type Segments = SmallVec<[(*mut u8, usize); 1]>;

/// One I/O as the driver asks for it.
#[derive(Debug, Clone)]
pub struct Io {
    /// Index of the file among those registered.
    pub file: u32,
    /// What it does.
    pub kind: IoKind,
    /// Byte offset in the file.
    pub offset: u64,
    /// Buffers in file order.
    pub segments: Segments,
    /// Reported back with the result: (device lane, request id).
    pub tag: (u32, u64),
    /// The I/O priority the kernel is told (`IOPRIO_PRIO_VALUE`), 0 for the submitter's own.
    pub ioprio: u16,
}

/// `IOPRIO_CLASS_RT`, the one class the kernel refuses without CAP_SYS_ADMIN or
/// CAP_SYS_NICE (`ioprio_check_cap`).
const IOPRIO_CLASS_RT: u16 = 1;
/// Bits of the level below the class (`IOPRIO_CLASS_SHIFT`).
pub const IOPRIO_CLASS_SHIFT: u16 = 13;

#[derive(Debug)]
struct InFlight {
    io: Io,
    /// Bytes already transferred (short transfers are continued).
    done: usize,
    eagain: u32,
    /// The iovec array of a vectored I/O: the kernel reads it while the I/O runs.
    iovecs: Box<[libc::iovec]>,
}

/// One ring and the I/O it carries.
pub struct Ring {
    ring: IoUring,
    slots: Vec<Option<InFlight>>,
    free: Vec<u32>,
    inflight: usize,
    /// The registered buffer region, for `*_FIXED` I/O inside it.
    fixed: Option<(usize, usize)>,
    watch: Option<Watch>,
    /// Tokens of readiness polls that fired since the caller last took them.
    ready: Vec<u64>,
    /// The completions `reap` takes off the queue, kept between calls: a batch moved by
    /// value (an inline array of 32) cost a 512-byte copy or two per I/O.
    reaped: Vec<(u64, i32)>,
    /// The kernel refused a real-time priority (`EPERM`): such I/O goes without one since.
    rt_refused: bool,
    /// Tests: the next submissions fail as if the kernel refused them.
    #[cfg(test)]
    refuse_submissions: bool,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("inflight", &self.inflight)
            .field("fixed", &self.fixed.is_some())
            .finish_non_exhaustive()
    }
}

impl Ring {
    /// A ring with room for `entries` submissions, over `files`; `sqpoll_idle_ms` starts a
    /// kernel submission thread.
    ///
    /// # Errors
    /// The kernel refused the ring (io_uring disabled, or too old) or the files.
    pub fn new(entries: u32, files: &[RawFd], sqpoll_idle_ms: Option<u32>) -> io::Result<Self> {
        let mut builder = IoUring::builder();
        if let Some(idle) = sqpoll_idle_ms {
            builder.setup_sqpoll(idle);
        }
        let ring = builder.setup_cqsize(entries * 2).build(entries)?;
        ring.submitter().register_files(files)?;
        Ok(Self {
            ring,
            slots: Vec::new(),
            free: Vec::new(),
            inflight: 0,
            fixed: None,
            watch: None,
            ready: Vec::new(),
            reaped: Vec::with_capacity(32),
            rt_refused: false,
            #[cfg(test)]
            refuse_submissions: false,
        })
    }

    /// Whether the kernel refused a real-time I/O priority, so that such I/O went without.
    pub fn rt_refused(&self) -> bool {
        self.rt_refused
    }

    /// Registers `len` bytes at `base` as fixed buffer 0; false if the kernel refused (a
    /// locked-memory limit, say), in which case plain reads and writes are used.
    ///
    /// # Safety
    /// The memory must stay allocated for the life of the ring.
    pub unsafe fn register_buffer(&mut self, base: *mut u8, len: usize) -> bool {
        let iovec = libc::iovec {
            iov_base: base.cast(),
            iov_len: len,
        };
        // SAFETY: the caller keeps the region alive as long as the ring.
        let ok = unsafe { self.ring.submitter().register_buffers(&[iovec]) }.is_ok();
        if ok {
            self.fixed = Some((base as usize, len));
        }
        ok
    }

    /// Makes [`Ring::wait`] return when `notifier` is written, even with no I/O in flight.
    ///
    /// # Errors
    /// The kernel refused the submission.
    pub fn watch(&mut self, notifier: Arc<Notifier>) -> io::Result<()> {
        self.watch = Some(Watch {
            notifier,
            buf: Box::new([0; 8]),
            armed: false,
        });
        self.arm_watch()
    }

    fn arm_watch(&mut self) -> io::Result<()> {
        let Some(watch) = self.watch.as_mut() else {
            return Ok(());
        };
        let sqe = opcode::Read::new(
            Fd(watch.notifier.file.as_raw_fd()),
            watch.buf.as_mut_ptr(),
            8,
        )
        .build()
        .user_data(WATCH);
        watch.armed = true;
        self.queue(sqe)
    }

    /// Asks to hear (through [`Ring::take_ready`], waking [`Ring::wait`]) once `fd` is ready
    /// for `events` (`POLLIN`, `POLLOUT`), under `token` (below 2^62). One-shot: ask again
    /// after it fired. A poll holds no memory, so an armed one needs no draining.
    ///
    /// # Errors
    /// The kernel refused the submission.
    pub fn poll(&mut self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        // A token at or past the poll bit would read as an I/O's slot when it fires.
        assert!(token < POLL, "poll token {token:#x} past 2^62");
        let sqe = opcode::PollAdd::new(Fd(fd), events).build();
        self.queue(sqe.user_data(POLL | token))
    }

    /// The tokens of the polls that fired since the last call.
    pub fn take_ready(&mut self, into: &mut Vec<u64>) {
        into.clear();
        std::mem::swap(into, &mut self.ready);
    }

    /// True iff an eventfd wakes [`Ring::wait`].
    pub fn watching(&self) -> bool {
        self.watch.is_some()
    }

    /// True iff buffers are registered.
    pub fn has_fixed_buffers(&self) -> bool {
        self.fixed.is_some()
    }

    /// I/Os started and not yet reported.
    pub fn inflight(&self) -> usize {
        self.inflight
    }

    /// Starts `io`.
    ///
    /// # Safety
    /// Its segments must stay valid, and untouched by the caller, until [`Ring::reap`] reports
    /// its tag or the ring is dropped.
    ///
    /// # Errors
    /// The kernel refused a submission while making room.
    pub unsafe fn start(&mut self, io: Io) -> io::Result<()> {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
        };
        self.slots[index as usize] = Some(InFlight {
            io,
            done: 0,
            eagain: 0,
            iovecs: Box::new([]),
        });
        self.inflight += 1;
        if let Err(e) = self.push(index) {
            // It never reached the kernel: no completion will come for it, so it must not
            // count as in flight (a drain would wait for it forever).
            self.slots[index as usize] = None;
            self.free.push(index);
            self.inflight -= 1;
            return Err(e);
        }
        self.check_slots();
        Ok(())
    }

    /// Every I/O the kernel may still write for holds exactly one slot of the table, and
    /// `inflight` counts them: a drain waits for exactly those, no more (a hang) and no fewer
    /// (memory freed under the kernel).
    fn check_slots(&self) {
        assert_eq!(
            self.inflight + self.free.len(),
            self.slots.len(),
            "ring: {} I/Os in flight, {} free slots, {} slots",
            self.inflight,
            self.free.len(),
            self.slots.len()
        );
    }

    /// Builds and queues the submission for slot `index`, from where it got to.
    fn push(&mut self, index: u32) -> io::Result<()> {
        let fixed = self.fixed;
        let Some(entry) = self.slots[index as usize].as_mut() else {
            return Ok(());
        };
        let rest = remaining(&entry.io.segments, entry.done);
        let file = Fixed(entry.io.file);
        let ioprio = match entry.io.ioprio {
            p if self.rt_refused && p >> IOPRIO_CLASS_SHIFT == IOPRIO_CLASS_RT => 0,
            p => p,
        };
        let offset = entry.io.offset + entry.done as u64;
        let in_fixed = |(ptr, len): (*mut u8, usize)| {
            fixed.is_some_and(|(base, size)| {
                ptr as usize >= base && ptr as usize + len <= base + size
            })
        };
        let sqe = match (entry.io.kind, rest.as_slice()) {
            (IoKind::Flush, _) => opcode::Fsync::new(file)
                .flags(io_uring::types::FsyncFlags::DATASYNC)
                .build(),
            (IoKind::Discard(len), _) => opcode::Fallocate::new(file, len)
                .offset(offset)
                .mode(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE)
                .build(),
            (kind, &[single]) if in_fixed(single) => match kind {
                IoKind::Read => opcode::ReadFixed::new(file, single.0, single.1 as u32, 0)
                    .offset(offset)
                    .ioprio(ioprio)
                    .build(),
                _ => opcode::WriteFixed::new(file, single.0, single.1 as u32, 0)
                    .offset(offset)
                    .ioprio(ioprio)
                    .build(),
            },
            (kind, &[single]) => match kind {
                IoKind::Read => opcode::Read::new(file, single.0, single.1 as u32)
                    .offset(offset)
                    .ioprio(ioprio)
                    .build(),
                _ => opcode::Write::new(file, single.0, single.1 as u32)
                    .offset(offset)
                    .ioprio(ioprio)
                    .build(),
            },
            (kind, many) => {
                entry.iovecs = many
                    .iter()
                    .map(|&(ptr, len)| libc::iovec {
                        iov_base: ptr.cast(),
                        iov_len: len,
                    })
                    .collect();
                let (ptr, count) = (entry.iovecs.as_ptr(), entry.iovecs.len() as u32);
                match kind {
                    IoKind::Read => opcode::Readv::new(file, ptr, count)
                        .offset(offset)
                        .ioprio(ioprio)
                        .build(),
                    _ => opcode::Writev::new(file, ptr, count)
                        .offset(offset)
                        .ioprio(ioprio)
                        .build(),
                }
            }
        };
        self.queue(sqe.user_data(u64::from(index)))
    }

    /// Puts `sqe` on the submission queue. The I/O queued before it is submitted first, so
    /// every I/O reaches the kernel on its own, as blk-mq's queue_rq and fio's default
    /// iodepth_batch_submit=1 do, and the last one rides on the next [`Ring::wait`]'s enter.
    /// Submitting a step's I/O in one enter made a virtio disk complete the batch together,
    /// and the queue then ran in lockstep (BENCHMARKS.md: 0.79× fio's IOPS at QD32).
    fn queue(&mut self, sqe: squeue::Entry) -> io::Result<()> {
        #[cfg(test)]
        if self.refuse_submissions {
            return Err(io::Error::from_raw_os_error(libc::ENOMEM));
        }
        if !self.ring.submission().is_empty() {
            self.submit_retrying(0)?;
        }
        loop {
            // SAFETY: every buffer and iovec array the entry points to is owned by an in-flight
            // slot (iovecs) or by the caller under `start`'s contract (segments), and stays put
            // until the completion is reaped; the ring is drained before it is dropped.
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            self.submit_retrying(0)?;
        }
    }

    fn submit_retrying(&mut self, want: usize) -> io::Result<()> {
        loop {
            match self.ring.submit_and_wait(want) {
                Ok(_) => return Ok(()),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) => {
                    if want > 0 {
                        return Ok(());
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Submits what is queued and waits for a completion, at most `timeout` (forever if
    /// `None`). Returns at once if nothing is in flight.
    ///
    /// # Errors
    /// The kernel refused the submission.
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if self.watch.as_ref().is_some_and(|w| !w.armed) {
            self.arm_watch()?;
        }
        let watching = self.watch.is_some();
        if (self.inflight == 0 && !watching) || !self.ring.completion().is_empty() {
            return self.submit_retrying(0);
        }

        let Some(timeout) = timeout else {
            return self.submit_retrying(1);
        };
        let ts = Timespec::from(timeout);
        let args = SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Hands every finished I/O to `done` as (tag, 0 or −errno); continues short transfers
    /// and retries `EAGAIN` instead.
    ///
    /// # Errors
    /// The kernel refused a resubmission.
    pub fn reap(&mut self, done: &mut impl FnMut((u32, u64), i32)) -> io::Result<()> {
        let mut batch = std::mem::take(&mut self.reaped);
        let reaped = loop {
            batch.clear();
            batch.extend(
                self.ring
                    .completion()
                    .take(32)
                    .map(|cqe| (cqe.user_data(), cqe.result())),
            );
            if batch.is_empty() {
                break Ok(());
            }
            if let Err(e) = self.finish_batch(&batch, done) {
                break Err(e);
            }
        };
        self.reaped = batch;
        reaped
    }

    /// One batch of completions taken off the queue.
    fn finish_batch(
        &mut self,
        batch: &[(u64, i32)],
        done: &mut impl FnMut((u32, u64), i32),
    ) -> io::Result<()> {
        for &(index, result) in batch {
            if index == WATCH {
                // Woken by the notifier: the caller looks at its inbox after any wait.
                if let Some(watch) = self.watch.as_mut() {
                    watch.armed = false;
                }
                continue;
            }
            if index & POLL != 0 {
                self.ready.push(index & !POLL);
                continue;
            }
            if let Some(status) = self.final_status(index as u32, result)? {
                // Only the tag is read; the entry is dropped where it lies, not moved out.
                let slot = &mut self.slots[index as usize];
                let tag = slot.as_ref().map(|entry| entry.io.tag);
                // The kernel completes each submission once: a final completion for a free
                // slot would report some other bio's I/O as done.
                assert!(tag.is_some(), "ring: a completion for free slot {index}");
                *slot = None;
                self.free.push(index as u32);
                self.inflight -= 1;
                if let Some(tag) = tag {
                    done(tag, status);
                }
            }
        }
        self.check_slots();
        Ok(())
    }

    /// The final status of slot `index` after a completion with `result`, or `None` if it was
    /// resubmitted.
    fn final_status(&mut self, index: u32, result: i32) -> io::Result<Option<i32>> {
        let Some(entry) = self.slots.get_mut(index as usize).and_then(Option::as_mut) else {
            return Ok(None);
        };
        if result == -libc::EAGAIN && entry.eagain < MAX_EAGAIN {
            entry.eagain += 1;
            return Ok(self.resubmit(index));
        }
        if result == -libc::EPERM && entry.io.ioprio >> IOPRIO_CLASS_SHIFT == IOPRIO_CLASS_RT {
            // Without the capability a real-time priority is refused: the I/O goes again
            // without it (once: a second EPERM is the file's), as does all RT I/O since.
            entry.io.ioprio = 0;
            self.rt_refused = true;
            return Ok(self.resubmit(index));
        }
        if result < 0 {
            return Ok(Some(result));
        }
        if matches!(entry.io.kind, IoKind::Flush | IoKind::Discard(_)) {
            return Ok(Some(0));
        }
        let total: usize = entry.io.segments.iter().map(|s| s.1).sum();
        entry.done += result as usize;
        if entry.done >= total {
            return Ok(Some(0));
        }
        if result == 0 {
            // Nothing more to read: the file ended inside the request.
            return Ok(Some(-libc::EIO));
        }
        Ok(self.resubmit(index))
    }

    /// Sends the rest of slot `index` again: `None` once it is on the ring, or the error that
    /// finishes it if the kernel refused it (it is then not in the kernel's hands).
    fn resubmit(&mut self, index: u32) -> Option<i32> {
        match self.push(index) {
            Ok(()) => None,
            Err(e) => Some(-e.raw_os_error().unwrap_or(libc::EIO)),
        }
    }
}

/// The part of `segments` after the first `done` bytes.
fn remaining(segments: &Segments, mut done: usize) -> Segments {
    let mut rest = Segments::new();
    for &(ptr, len) in segments {
        if done >= len {
            done -= len;
            continue;
        }
        // SAFETY: `done < len`, so the pointer stays inside this segment.
        rest.push((unsafe { ptr.add(done) }, len - done));
        done = 0;
    }
    rest
}

impl Ring {
    /// Waits for every I/O in flight, discarding results; true iff none is left. The kernel
    /// may write into buffers until then, so memory lent to the ring may be freed only after
    /// this returned true.
    pub fn drain(&mut self) -> bool {
        if let Some(watch) = &self.watch
            && watch.armed
        {
            // Complete the watch's read so its buffer can go.
            watch.notifier.notify();
        }
        let watch_armed = |ring: &Self| ring.watch.as_ref().is_some_and(|w| w.armed);
        while self.inflight > 0 || watch_armed(self) {
            if self.ring.submit_and_wait(1).is_err() && self.ring.completion().is_empty() {
                return false;
            }
            let mut ignore = |_: (u32, u64), _: i32| {};
            if self.reap(&mut ignore).is_err() {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests;
