//! The active queue's turn: whether it may dispatch and how much (`cfq_may_dispatch`),
//! which queue of the serving group goes next and for how long (service trees, workload
//! slices, prio-scaled slices), and when an arriving request preempts it; whether it keeps
//! the device once dry is `idling.rs`.

use super::*;

/// What the active queue does next.
pub(crate) enum Step {
    Sent(RequestId),
    Expire,
    WaitUntil(u64),
}

impl Cfq {
    /// What makes a request a seek here (`cfq_update_io_seektime`): on flash, being small.
    pub(crate) fn seek_rule(&self) -> SeekRule {
        if self.rotational {
            SeekRule::Far
        } else {
            SeekRule::Small
        }
    }

    /// A completion's sample of the device's queueing (`cfq_update_hw_tag`), taken before
    /// it leaves the count: only while enough is queued or on the device, and not while a
    /// quick queue in service has too few requests to fill it.
    pub(crate) fn update_hw_tag(&mut self) {
        let in_driver = self.in_flight[0] + self.in_flight[1];
        let queued = u32::try_from(self.queued.len()).unwrap_or(u32::MAX);
        let min = hw_tag::CFQ.deep;
        let busy = queued > min || in_driver > min;
        let starved = self
            .active
            .and_then(|a| self.queues.get(&a.key))
            .is_some_and(|q| {
                q.window.idle_window
                    && q.inflight + (q.requests.len() as u32) < min
                    && in_driver < min
            });
        self.hw_tag.sample(hw_tag::CFQ, in_driver, busy && !starved);
    }

    /// One decision for the active queue: one lookup of it, through the choice and the
    /// send (lookups are a component's dearest step).
    pub(crate) fn step(&mut self, active: Active, now_ns: u64) -> Step {
        let t = self.t;
        let queue_sync = matches!(active.key, QueueKey::Sync(_));
        if active.wait_busy
            && self
                .queues
                .get(&active.key)
                .is_some_and(|q| !q.requests.is_empty())
        {
            // The request it waited for came: the slice ends with the group busy.
            return Step::Expire;
        }
        // cfq_may_dispatch's first rules: an async queue waits while sync requests are on
        // the device, and a sync queue cfq would idle for waits while async ones are.
        let [async_out, sync_out] = self.in_flight;
        let held = (!queue_sync && sync_out > 0)
            || (queue_sync && async_out > 0 && self.should_idle(active.key));
        if held
            && self
                .queues
                .get(&active.key)
                .is_some_and(|q| !q.requests.is_empty())
        {
            return Step::WaitUntil(active.slice_end);
        }
        let Some(mut queue) = self.queues.get_mut(&active.key) else {
            return Step::Expire;
        };
        if queue.requests.is_empty() {
            let (sync, inflight) = (queue.sync, queue.inflight);
            return self.when_dry(active, sync, inflight, now_ns);
        }
        let (sync, inflight) = (queue.sync, queue.inflight);
        if let Err(wake) = self.may_dispatch(active, sync, inflight, now_ns) {
            return Step::WaitUntil(wake);
        }
        let Some(again) = self.queues.get_mut(&active.key) else {
            return Step::Expire;
        };
        queue = again;
        if !queue.sync && active.dispatched >= async_requests_per_slice(&t, queue.level) {
            return Step::Expire;
        }
        let fifo_due = self.active.as_mut().is_some_and(|a| {
            let first = !a.fifo_checked;
            a.fifo_checked = true;
            first
        });
        let id = choose(queue, fifo_due, self.head, &t, now_ns);
        let Some(extent) = queue.requests.take(id) else {
            return Step::Sent(id);
        };
        queue.inflight += 1;
        let group = queue.group;
        if let Some(g) = self.groups.get_mut(&group) {
            g.dispatched += 1;
        }
        self.queued.remove(&id);
        self.on_device.insert(id, active.key);
        self.in_flight[usize::from(queue_sync)] += 1;
        if let Some(a) = &mut self.active {
            a.dispatched += 1;
            a.idle_until = None;
        }
        self.head = extent.end();
        Step::Sent(id)
    }

    /// Whether the active queue, `sync` and with `inflight` requests on the device, may send
    /// one more (`cfq_may_dispatch`), or when to ask again: up to `quantum / 2` (one for the
    /// idle class); past that, no limit if it is the only busy queue or the only busy sync
    /// one, else up to `quantum` unless its slice will be used before what it has out comes
    /// back (`cfq_slice_used_soon`: no request of the slice has completed yet, or `slice_idle`
    /// per request out would pass the slice's end). An async queue under `low_latency`
    /// sends one request more for each `slice_sync` since a sync request was last delayed
    /// past `fifo_expire_sync`, and one if none of its own are out.
    fn may_dispatch(
        &self,
        active: Active,
        sync: bool,
        inflight: u32,
        now_ns: u64,
    ) -> Result<(), u64> {
        let t = &self.t;
        let idle_class = self.queues.get(&active.key).is_some_and(|q| q.class == 2);
        let mut max = if idle_class {
            1
        } else {
            (t.quantum / 2).max(1)
        };
        if inflight >= max {
            if idle_class {
                return Err(active.slice_end);
            }
            let sole = self.none_waiting();
            let promote = sync && self.sole_busy(active.key);
            let used_soon = !active.completed_one
                || now_ns.saturating_add(t.slice_idle.saturating_mul(u64::from(inflight)))
                    > active.slice_end;
            if !sole && used_soon && !promote {
                return Err(active.slice_end);
            }
            max = if sole || promote {
                u32::MAX
            } else {
                t.quantum.max(1)
            };
        }
        if !sync && t.low_latency {
            let since = self
                .last_delayed_sync
                .map_or(now_ns.saturating_add(1_000 * MS), |at| {
                    now_ns.saturating_sub(at)
                });
            let steps = since / t.slice_sync.max(1);
            let depth = u32::try_from(steps).unwrap_or(u32::MAX);
            let depth = if depth == 0 && inflight == 0 {
                1
            } else {
                depth
            };
            if inflight >= depth.min(max) {
                let next = now_ns.saturating_add(t.slice_sync.max(1) - since % t.slice_sync.max(1));
                return Err(next.min(active.slice_end));
            }
        }
        if inflight >= max {
            return Err(active.slice_end);
        }
        Ok(())
    }

    /// True iff the queue `key` may dispatch past `quantum` (`cfq_may_dispatch`): no other
    /// queue is busy, or it is sync and no other sync queue is ("a sync queue can preempt
    /// async queue, limiting the sync queue doesn't make sense"). The scan stops at the
    /// first sync key, after at most the 24 async queues.
    fn sole_busy(&self, key: QueueKey) -> bool {
        let others_sync = || self.all_waiting().any(|k| matches!(k, QueueKey::Sync(_)));
        self.none_waiting() || (matches!(key, QueueKey::Sync(_)) && !others_sync())
    }

    /// Every waiting queue, of every group (the device's busy queues but the active one).
    fn all_waiting(&self) -> impl Iterator<Item = &QueueKey> {
        self.groups
            .values()
            .flat_map(|g| g.waiting.iter().flatten())
    }

    fn none_waiting(&self) -> bool {
        self.all_waiting().next().is_none()
    }

    /// Ends the active slice (`__cfq_slice_expired`): its group is charged for it, and the
    /// queue waits for another turn if it still has requests; a group left with no busy
    /// queue leaves the tree.
    pub(crate) fn expire(&mut self, now_ns: u64) {
        let Some(active) = self.active else {
            return;
        };
        let (sync, busy) = self
            .queues
            .get(&active.key)
            .map_or((false, false), |q| (q.sync, !q.requests.is_empty()));
        self.group_served(&active, sync, now_ns);
        self.active = None;
        if busy {
            self.enqueue(active.key, now_ns);
        } else {
            self.group_idle(active.group);
        }
    }

    /// Queue `key` waits for a slice, placed after those waiting by its slice offset
    /// (`cfq_service_tree_add`, `cfq_slice_offset`: lower priorities further back the more
    /// queues of its group are busy).
    fn enqueue(&mut self, key: QueueKey, now_ns: u64) {
        let Some(queue) = self.queues.get(&key) else {
            return;
        };
        let group = queue.group;
        let busy = self.busy_in(group);
        let class = usize::from(queue.class);
        let longest = prio_slice(&self.t, true, 0);
        let offset = (busy.max(1) as u64 - 1).saturating_mul(longest.saturating_sub(prio_slice(
            &self.t,
            queue.sync,
            queue.level,
        )));
        let rb_key = i64::try_from(now_ns.saturating_add(offset)).unwrap_or(i64::MAX);
        if let Some(queue) = self.queues.get_mut(&key) {
            queue.rb_key = rb_key;
        }
        self.wait_in(group, class, key);
    }

    /// Queue `key` of `group` waits on the group's tree of `class`; a group that had no
    /// busy queue goes on the group tree (one with a busy queue is on it already).
    fn wait_in(&mut self, group: u32, class: usize, key: QueueKey) {
        self.group_busy(group);
        let waiting = &mut self.cfqg(group).waiting[class];
        if !waiting.contains(&key) {
            waiting.push_back(key);
        }
    }

    /// Queue `key` preempts: it goes a second ahead of its tree's first
    /// (`cfq_service_tree_add` with `add_front`), so it is served next.
    fn enqueue_front(&mut self, key: QueueKey, now_ns: u64) {
        let Some((class, group)) = self
            .queues
            .get(&key)
            .map(|q| (usize::from(q.class), q.group))
        else {
            return;
        };
        let tree = self.workload_of(key);
        let first = (self.groups.get(&group))
            .into_iter()
            .flat_map(|g| g.waiting[class].iter())
            .filter(|&&k| k != key && self.workload_of(k) == tree)
            .filter_map(|k| self.queues.get(k).map(|q| q.rb_key))
            .min()
            .unwrap_or(i64::try_from(now_ns).unwrap_or(i64::MAX));
        if let Some(queue) = self.queues.get_mut(&key) {
            queue.rb_key = first.saturating_sub(1_000 * MS as i64);
        }
        self.wait_in(group, class, key);
    }

    /// The waiting queue of `group` and `class` on tree `wl` (any tree if `None`) with the
    /// lowest `rb_key` (ties to the lower key), and where it is in line.
    fn first_waiting(
        &self,
        group: &Cfqg,
        class: usize,
        wl: Option<Workload>,
    ) -> Option<(usize, QueueKey)> {
        group.waiting[class]
            .iter()
            .enumerate()
            .filter(|&(_, &k)| wl.is_none() || self.workload_of(k) == wl)
            .filter_map(|(at, &k)| self.queues.get(&k).map(|q| ((q.rb_key, k), at)))
            .min()
            .map(|((_, k), at)| (at, k))
    }

    /// Gives the next waiting queue a slice: in the group whose turn is next
    /// (`cfq_choose_cfqg`), the first by `rb_key` of the highest class with one, on the
    /// service tree being served while its workload slice lasts and it has a queue, else on
    /// the tree whose first queue's key is lowest, for a new workload slice
    /// (`cfq_choose_wl_class_and_type`, `cfq_choose_wl_type`). False iff none waits.
    pub(crate) fn activate_next(&mut self, now_ns: u64) -> bool {
        self.drop_emptied();
        // Every group on the tree has a queue waiting, none being in service; were one
        // without, it leaves rather than stall the others.
        let (id, class) = loop {
            let Some(id) = self.choose_group(now_ns) else {
                return false;
            };
            let waiting = self
                .groups
                .get(&id)
                .map(|g| (0..3).find(|&c| g.waiting_in(c) > 0));
            match waiting.flatten() {
                Some(class) => break (id, class),
                None => self.group_idle(id),
            }
        };
        let Some(group) = self.groups.get(&id) else {
            return false;
        };
        let kept = self
            .serving
            .filter(|&(c, _, expires)| usize::from(c) == class && now_ns < expires)
            .and_then(|(_, wl, _)| self.first_waiting(group, class, Some(wl)));
        let chosen = match kept {
            Some(kept) => Some(kept),
            None => self.first_waiting(group, class, None).map(|(at, key)| {
                let wl = self.workload_of(key).unwrap_or(Workload::Sync);
                let expires = now_ns + self.workload_slice(id, class, wl);
                self.serving = Some((class as u8, wl, expires));
                (at, key)
            }),
        };
        let Some((at, key)) = chosen else {
            return false;
        };
        self.cfqg(id).waiting[class].remove(at);
        let slice = self.slice_for(key, id);
        self.active = Some(Active {
            key,
            group: id,
            start: now_ns,
            allocated: slice,
            slice_end: now_ns + slice,
            dispatched: 0,
            fifo_checked: false,
            idle_until: None,
            preempt: false,
            completed_one: false,
            used_up: false,
            wait_busy: false,
        });
        true
    }

    /// A waiting queue may have been emptied by merges since it queued up: it leaves, and
    /// a group left with no busy queue leaves the tree.
    fn drop_emptied(&mut self) {
        let queues = &self.queues;
        let mut emptied = Vec::new();
        for (&id, group) in self.groups.iter_mut() {
            let before: usize = group.waiting.iter().map(VecDeque::len).sum();
            for w in &mut group.waiting {
                w.retain(|k| queues.get(k).is_some_and(|q| !q.requests.is_empty()));
            }
            if group.waiting.iter().map(VecDeque::len).sum::<usize>() < before {
                emptied.push(id);
            }
        }
        for id in emptied {
            self.group_idle(id);
        }
    }

    /// The service tree queue `key` is on.
    fn workload_of(&self, key: QueueKey) -> Option<Workload> {
        let queue = self.queues.get(&key)?;
        Some(match (queue.sync, queue.window.idle_window) {
            (false, _) => Workload::Async,
            (true, false) => Workload::SyncNoIdle,
            (true, true) => Workload::Sync,
        })
    }

    /// How long tree `wl` of `class` is served (`cfq_choose_wl_class_and_type`): the target
    /// latency shared by the class's busy queues, this tree's part by its queues; an async
    /// tree's part of all busy queues at most, scaled by `slice_async / slice_sync`; a
    /// sync tree's at least two idle slices; every one at least `CFQ_MIN_TT`.
    fn workload_slice(&self, group: u32, class: usize, wl: Workload) -> u64 {
        let t = self.t;
        let active = self.active.map(|a| a.key);
        let waiting = self.groups.get(&group).map(|g| &g.waiting);
        let busy = |c: usize| {
            (waiting.into_iter().flat_map(move |w| w[c].iter().copied())).chain(active.filter(
                |k| {
                    self.queues
                        .get(k)
                        .is_some_and(|q| usize::from(q.class) == c && q.group == group)
                },
            ))
        };
        let in_class = busy(class).count().max(1) as u64;
        let count = busy(class)
            .filter(|k| self.workload_of(*k) == Some(wl))
            .count() as u64;
        let slice = self.group_slice(group) * count / in_class;
        let slice = if wl == Workload::Async {
            // The group's async queues of the device's busy queues.
            let all = self.all_waiting().count() + usize::from(active.is_some());
            let asyncs = (0..3)
                .flat_map(busy)
                .filter(|k| matches!(k, QueueKey::Async(..)))
                .count() as u64;
            let share = slice.min(t.target_latency * asyncs / all.max(1) as u64);
            share * t.slice_async / t.slice_sync.max(1)
        } else {
            slice.max(2 * t.slice_idle)
        };
        slice.max(MIN_TT_NS)
    }

    /// Request `r` of queue `key` arrived at `now_ns`, the queue having had none
    /// (`was_idle`) or not: unless it is the active queue it may preempt that one, and is
    /// then served next (`cfq_preempt_queue`); otherwise an idle queue waits for a slice.
    pub(crate) fn arrived_at(&mut self, key: QueueKey, r: &Request, was_idle: bool, now_ns: u64) {
        if self.active.is_some_and(|a| a.key == key) {
            return;
        }
        let preempts = self.should_preempt(key, r, now_ns);
        if !preempts && !was_idle {
            return;
        }
        if !preempts {
            self.enqueue(key, now_ns);
            return;
        }
        self.enqueue_front(key, now_ns);
        if let Some(a) = &mut self.active {
            a.preempt = true;
        }
        // A queue of another tree ends the workload slice, so the preempting queue, now the
        // longest waiting, is served next (the root's queue preempting one of another
        // group's drops what the root saved, `cfq_preempt_queue`).
        if self.serving.map(|(_, wl, _)| wl) != self.workload_of(key) {
            let group = self.queues.get(&key).map_or(0, |q| q.group);
            if self.active.is_some_and(|a| a.group == group) {
                self.serving = None;
            } else {
                self.cfqg(group).saved = None;
            }
        }
    }

    /// Whether request `r` of queue `key` takes the device from the active queue
    /// (`cfq_should_preempt`): never an idle-class queue and never a non-RT one from RT;
    /// always from an idle-class queue; a sync request from an async queue; anything once
    /// the slice is used; the one other queue of an empty sync-noidle tree being served; RT
    /// from a lower class; anything from an empty queue cfq would not idle for; and, while
    /// cfq idles, a request within 8 MiB of where the head is.
    fn should_preempt(&self, key: QueueKey, r: &Request, now_ns: u64) -> bool {
        let Some(active) = self.active else {
            return false;
        };
        let (Some(new), Some(current)) = (self.queues.get(&key), self.queues.get(&active.key))
        else {
            return false;
        };
        if new.class == 2 {
            return false;
        }
        if current.class == 2 {
            return true;
        }
        if current.class == 0 && new.class != 0 {
            return false;
        }
        if r.sync && !current.sync {
            return true;
        }
        // "Treat ancestors of current cgroup the same way as current cgroup. For anybody
        // else we disallow preemption to guarantee service fairness among cgroups." The
        // root is every group's ancestor.
        if new.group != current.group && new.group != 0 {
            return false;
        }
        if now_ns >= active.slice_end {
            return true;
        }
        let noidle = |k: QueueKey| self.workload_of(k) == Some(Workload::SyncNoIdle);
        let serving_noidle = self
            .serving
            .is_some_and(|(_, wl, _)| wl == Workload::SyncNoIdle);
        // The scan of the waiting queues comes last: this runs for every arriving request.
        let tree_of_two = || {
            !(self.groups.get(&new.group).into_iter())
                .flat_map(|g| g.waiting[usize::from(new.class)].iter())
                .any(|&k| k != key && noidle(k))
        };
        if serving_noidle && current.requests.is_empty() && noidle(key) && tree_of_two() {
            return true;
        }
        if new.class == 0 {
            return true;
        }
        if current.requests.is_empty() && !self.should_idle(active.key) {
            return true;
        }
        active.idle_until.is_some() && self.head.distance(r.sector) <= CLOSE_THRESHOLD
    }

    /// Slice length for queue `key` of `group` (cfq_prio_slice, then low_latency scaling
    /// to the group's part of `target_latency` by its busy sync queues).
    fn slice_for(&self, key: QueueKey, group: u32) -> u64 {
        let t = self.t;
        let queue = &self.queues[&key];
        let slice = prio_slice(&t, queue.sync, queue.level);
        if !(t.low_latency && queue.sync) {
            return slice;
        }
        let busy = 1
            + (self.groups.get(&group).into_iter())
                .flat_map(|g| g.waiting.iter().flatten())
                .filter(|k| matches!(k, QueueKey::Sync(_)))
                .count() as u64;
        let expected = t.slice_sync * busy;
        let group_slice = self.group_slice(group);
        if expected <= group_slice || expected == 0 {
            return slice;
        }
        let low = slice.min((slice * t.slice_idle / t.slice_sync.max(1)).max(2 * t.slice_idle));
        (slice * group_slice / expected).max(low)
    }
}

/// A slice at priority `level` (`cfq_prio_slice`): the base, a fifth of it more per level
/// above 4 and less per level below.
fn prio_slice(t: &Tunables, sync: bool, level: u8) -> u64 {
    let base = if sync { t.slice_sync } else { t.slice_async };
    let level = i64::from(level.min(7));
    (base as i64 + base as i64 / 5 * (4 - level)).max(1) as u64
}

/// Async requests the active async queue may send per slice (`cfq_prio_to_maxrq`:
/// `2 · slice_async_rq · (IOPRIO_BE_NR − prio)`, 16 at the default level 4).
fn async_requests_per_slice(t: &Tunables, level: u8) -> u32 {
    (2 * t.slice_async_rq * (8 - u32::from(level.min(7)))).max(1)
}

/// The next request of `queue`: its expired FIFO head if `fifo_due` (once per slice),
/// otherwise the nearest in sector order from `head`, backward seeks penalised.
fn choose(queue: &Queue, fifo_due: bool, head: Sector, t: &Tunables, now_ns: u64) -> RequestId {
    if fifo_due
        && queue.requests.expired(now_ns)
        && let Some(due) = queue.requests.fifo_front()
    {
        return due.id;
    }
    let ahead = queue.requests.at_or_after(head);
    let behind = queue
        .requests
        .before(head)
        .filter(|b| head.distance(b.sector) <= t.back_seek_max_sectors);
    match (ahead, behind) {
        (Some(a), Some(b)) => {
            let back = head.distance(b.sector) * t.back_seek_penalty;
            if back < a.sector.distance(head) {
                b.id
            } else {
                a.id
            }
        }
        (Some(only), None) | (None, Some(only)) => only.id,
        (None, None) => queue.requests.lowest().map_or(RequestId(0), |p| p.id),
    }
}
