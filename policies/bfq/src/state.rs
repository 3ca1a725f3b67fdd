//! What a newer build of bfq takes over from the one it replaces (`save_state` and
//! `restore_state`, which the host calls on a hot swap between two builds of one policy):
//! the system's virtual times and, for each queue, its virtual start and finish, its
//! budget, its weight raising's end and its inject limit, so the new build continues where
//! the old one left it. Started afresh, every queue began again at virtual time 0 and the
//! turns already given were forgotten: two groups 8:7 on `sim:hdd` swapped from bfq to bfq
//! halfway through a 5 s run, on eight seeds, were up to 3.5 % off their weights' shares,
//! the heavier one short by about a turn (1.8 % at most without the swap; 1.7 % with the
//! state handed over).
//!
//! A queue's finish is saved as far as it was served: a waiting turn is not yet served
//! (its start), the turn in service in proportion to what it sent of its budget, a past
//! turn to its finish. The new build gives each queue that turns busy its next turn from
//! there, as B-WF2Q+ does: saved as they stood, a turn waiting at the swap would be charged
//! once for the old build's promise and again when the new one gives it.
//!
//! A queue is built in the new build as every queue is, from its first request, and takes
//! what it carries then (`Carried::apply`). Its inject limit goes with it: learnt afresh,
//! two groups 145:10 at iodepth 10 on `sim:ssd` ran at 0.82 of noop's IOPS across the swap,
//! against 0.89 without one (0.89 with the limit carried). The requests are not part of
//! the state: the host hands the queued ones over
//! after it, and those on the device complete to the new build as to one that never sent
//! them.
//!
//! The bytes are a version tag, the three virtual times, a count and one record per queue in
//! key order (so the same state saves the same bytes), all little-endian. A state that does
//! not parse, names a key no bfq makes, a turn that starts after it finishes or a virtual
//! time past any bfq's is refused with what was wrong; the host then keeps the old build.

use super::inject::InjectLimit;
use super::{Bfq, Queue, QueueKey};

/// No virtual time of bfq's comes near this: it grows by a budget's sectors × 2^20 × 1000
/// over a weight per turn, 2^75 or so in a year at a million sectors a second. A state past
/// it is refused, so that the arithmetic that follows cannot overflow.
const VTIME_LIMIT: u128 = 1 << 100;
/// Names this layout; a build that changes it changes the tag.
const TAG: &[u8; 4] = b"bfq1";
/// A queue's record: key (tag, three fields), start, finish, budget, raised until, and its
/// inject limit (limit, baseline, when it changed).
const RECORD: usize = 1 + 4 + 1 + 1 + 16 + 16 + 8 + 8 + 4 + 8 + 8;

/// What a queue carries from the old build into the one its next request creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Carried {
    start: u128,
    finish: u128,
    budget: u64,
    raised_until: u64,
    inject: (u32, u64, u64),
}

impl Carried {
    /// Applies to `queue`, just created from its first request in the new build as bfq
    /// creates every queue (its habits, its burst): the old build's place in the schedule,
    /// budget, weight raising's end and inject limit.
    pub(super) fn apply(self, queue: &mut Queue) {
        queue.start = self.start;
        queue.finish = self.finish;
        queue.budget = self.budget;
        queue.raised_until = self.raised_until;
        queue.inject = InjectLimit::from_parts(self.inject);
    }
}

impl Bfq {
    /// The state [`Self::restore`] takes.
    pub(super) fn save(&self) -> Vec<u8> {
        let mut queues: Vec<(QueueKey, Carried)> = (self.queues.iter())
            .map(|(key, queue)| {
                let served = self.served_until(key, queue);
                let carried = Carried {
                    start: queue.start.min(served),
                    finish: served,
                    budget: queue.budget,
                    raised_until: queue.raised_until,
                    inject: queue.inject.parts(),
                };
                (key, carried)
            })
            // Restored and not yet asked for: still the old build's.
            .chain(self.restored.iter().map(|(&key, &carried)| (key, carried)))
            .collect();
        queues.sort_unstable_by_key(|&(key, _)| key);
        let mut out = Vec::with_capacity(TAG.len() + 3 * 16 + 4 + queues.len() * RECORD);
        out.extend_from_slice(TAG);
        for vtime in self.vtime {
            out.extend_from_slice(&vtime.to_le_bytes());
        }
        let count = u32::try_from(queues.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&count.to_le_bytes());
        for (key, carried) in queues.into_iter().take(count as usize) {
            let (tag, id, class, level) = match key {
                QueueKey::Sync(ctx) => (0u8, ctx, 0, 0),
                QueueKey::Async(group, class, level) => (1, group, class, level),
            };
            out.push(tag);
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&[class, level]);
            out.extend_from_slice(&carried.start.to_le_bytes());
            out.extend_from_slice(&carried.finish.to_le_bytes());
            out.extend_from_slice(&carried.budget.to_le_bytes());
            out.extend_from_slice(&carried.raised_until.to_le_bytes());
            let (limit, baseline_ns, changed_at) = carried.inject;
            out.extend_from_slice(&limit.to_le_bytes());
            out.extend_from_slice(&baseline_ns.to_le_bytes());
            out.extend_from_slice(&changed_at.to_le_bytes());
        }
        out
    }

    /// The virtual time queue `key` was served up to: its finish, or within its turn if the
    /// turn is in service or waiting.
    fn served_until(&self, key: QueueKey, queue: &Queue) -> u128 {
        match self.in_service {
            Some(turn) if turn.key == key && turn.budget > 0 => {
                let part = u128::from(turn.served.min(turn.budget));
                let length = queue.finish.saturating_sub(queue.start);
                queue.start + length * part / u128::from(turn.budget)
            }
            _ if queue.busy => queue.start,
            _ => queue.finish,
        }
    }

    /// Takes over a state [`Self::save`] gave, into an instance that holds no queue yet.
    pub(super) fn restore(&mut self, state: &[u8]) -> Result<(), String> {
        if state.is_empty() {
            return Ok(());
        }
        if !self.queues.is_empty() || !self.restored.is_empty() {
            return Err("bfq takes a saved state only before its first request".into());
        }
        let mut bytes = Reader {
            bytes: state,
            at: 0,
        };
        if bytes.take::<4>("the version tag")? != *TAG {
            return Err(format!(
                "not a state of this bfq: its tag is {:?}, this build's {:?}",
                String::from_utf8_lossy(&state[..4]),
                String::from_utf8_lossy(TAG)
            ));
        }
        let mut vtime = [0u128; 3];
        for v in &mut vtime {
            *v = u128::from_le_bytes(bytes.take("a virtual time")?);
            if *v > VTIME_LIMIT {
                return Err(format!("a virtual time of {v}, past any bfq's"));
            }
        }
        let count = u32::from_le_bytes(bytes.take("the queue count")?) as usize;
        // Checked before anything is built from it: the records must all be there.
        if bytes.left() != count.saturating_mul(RECORD) {
            return Err(format!(
                "{count} queues take {} bytes after the header; the state has {}",
                count.saturating_mul(RECORD),
                bytes.left()
            ));
        }
        let mut queues: Vec<(QueueKey, Carried)> = Vec::with_capacity(count);
        for i in 0..count {
            let (key, queue) = bytes.queue().map_err(|e| format!("queue {i}: {e}"))?;
            if queues.last().is_some_and(|&(last, _)| last >= key) {
                return Err(format!("queue {i}: {key:?} out of key order or twice"));
            }
            queues.push((key, queue));
        }
        self.vtime = vtime;
        self.restored = queues.into_iter().collect();
        Ok(())
    }
}

/// The state's bytes, read front to back.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The next `N` bytes, or what was missing.
    fn take<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let end = self
            .at
            .checked_add(N)
            .filter(|&end| end <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!("ends before {what} (byte {})", self.at));
        };
        let mut out = [0; N];
        out.copy_from_slice(&self.bytes[self.at..end]);
        self.at = end;
        Ok(out)
    }

    fn byte(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take::<1>(what)?[0])
    }

    /// One queue's record: its key and what it carries.
    fn queue(&mut self) -> Result<(QueueKey, Carried), String> {
        let tag = self.byte("the key's kind")?;
        let id = u32::from_le_bytes(self.take("the key")?);
        let (class, level) = (self.byte("the key's class")?, self.byte("the key's level")?);
        let key = match tag {
            0 if class == 0 && level == 0 => QueueKey::Sync(id),
            1 if class < 3 && level < 8 => QueueKey::Async(id, class, level),
            _ => {
                return Err(format!(
                    "no bfq queue has the key ({tag}, {id}, {class}, {level})"
                ));
            }
        };
        let start = u128::from_le_bytes(self.take("the virtual start")?);
        let finish = u128::from_le_bytes(self.take("the virtual finish")?);
        if finish > VTIME_LIMIT {
            return Err(format!(
                "{key:?} finishes at {finish}, past any bfq's virtual time"
            ));
        }
        if start > finish {
            return Err(format!(
                "{key:?} starts at {start}, after its finish {finish}"
            ));
        }
        let carried = Carried {
            start,
            finish,
            budget: u64::from_le_bytes(self.take("the budget")?),
            raised_until: u64::from_le_bytes(self.take("the raising's end")?),
            inject: (
                u32::from_le_bytes(self.take("the inject limit")?),
                u64::from_le_bytes(self.take("the inject baseline")?),
                u64::from_le_bytes(self.take("when the inject limit changed")?),
            ),
        };
        Ok((key, carried))
    }
}
