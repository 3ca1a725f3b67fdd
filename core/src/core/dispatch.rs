//! The call protocol with the policy: what happened goes to it in batches, then each hardware
//! queue with free driver tags asks it for requests; its answers are checked before they
//! are acted on.

use super::*;

impl Core {
    /// Tells the policy what happened since the last run, in batches, and dispatches to every
    /// hardware queue with free driver tags.
    ///
    /// # Errors
    /// A fault in any policy call, including an invalid dispatch answer.
    pub fn run(&mut self, now_ns: u64) -> Result<(), Fault> {
        self.release_throttled(now_ns);
        let ran = self.run_to_settled(now_ns);
        self.check_invariants();
        ran
    }

    pub(super) fn run_to_settled(&mut self, now_ns: u64) -> Result<(), Fault> {
        self.run_policy(now_ns);
        // After a recovery the new policy holds the requests: let it dispatch at once.
        while self.act_on_fault(now_ns)? {
            self.run_policy(now_ns);
        }
        Ok(())
    }

    /// The core's counting law, checked after every public call that moves requests, in
    /// every build: each request is in exactly one place (a software queue, the insert
    /// batch, the requeue batch, the policy, the device), so those counts add up to the
    /// table. It reads running totals only (a few additions; BENCHMARKS.md has the count).
    /// Debug and test builds also walk what the totals stand for: the software queues, each
    /// hardware queue's requests on the device, and the scheduler tags by kind and group.
    pub(super) fn check_invariants(&self) {
        let staged = self.admission.staged();
        assert_eq!(
            staged
                + self.pending_insert.len()
                + self.pending_requeue.len()
                + self.queued
                + self.on_device,
            self.table.len(),
            "every request is in exactly one place (staged {staged}, to insert {}, sent back {}, in the policy {}, on the device {})",
            self.pending_insert.len(),
            self.pending_requeue.len(),
            self.queued,
            self.on_device
        );
        if cfg!(debug_assertions) {
            let on_device: usize = self.queues.iter().map(|q| q.inflight as usize).sum();
            assert_eq!(
                on_device, self.on_device,
                "requests on the device, by queue"
            );
            self.admission.check_invariants();
        }
    }

    /// Bios whose group's limits now let them go become requests (or merge), in the order
    /// they arrived.
    fn release_throttled(&mut self, now_ns: u64) {
        while let Some((bio, arrived_ns)) = self.throttle.as_mut().and_then(|t| t.release(now_ns)) {
            if let Some(throttle) = &self.throttle {
                let group = throttle.group_number(bio.ctx);
                self.admission.limited(group, throttle.holds(group));
            }
            self.place_bio(now_ns, arrived_ns, bio);
            if bio.sync {
                self.unplug_for(now_ns, bio.ctx);
            }
        }
    }

    /// One round of policy calls. Never fails: a fault is latched for [`Core::act_on_fault`].
    pub(super) fn run_policy(&mut self, now_ns: u64) {
        self.count_held(now_ns);
        let mut woken = false;
        for queue in &mut self.queues {
            if queue.timer.is_some_and(|t| t <= now_ns) {
                queue.timer = None;
                woken = true;
            }
        }
        let dispatched = self.stats.dispatched;
        self.flush_due_plugs(now_ns);
        self.give_back(now_ns);
        let served = self.take_turn(now_ns, None);
        for hw_queue in 0..self.config.hw_queues {
            let budget = self.budget(hw_queue);
            if served != Some(hw_queue) && budget > 0 && self.queued > 0 && self.policy.alive() {
                self.stats.policy_calls += 1;
                let answer = self.policy.instance().dispatch(now_ns, hw_queue, budget);
                if let Some(answer) = self.policy.guard(answer.map(Some), None) {
                    self.send(now_ns, hw_queue, budget, answer, "dispatch");
                }
            }
        }
        if woken {
            self.count_idle_wake(self.stats.dispatched > dispatched);
        }
        self.watch(now_ns);
        self.start_held(now_ns);
    }

    /// Counts the time since the last round in which the policy held requests back from
    /// free driver tags.
    fn count_held(&mut self, now_ns: u64) {
        if let Some(since) = self.held_since.take() {
            self.stats.held_ns += now_ns.saturating_sub(since);
        }
    }

    /// After a round: whether the policy now holds requests while the device has free
    /// driver tags.
    fn start_held(&mut self, now_ns: u64) {
        let free = (0..self.config.hw_queues).any(|q| self.budget(q) > 0);
        if self.queued > 0 && free && self.policy.alive() {
            self.held_since = Some(now_ns);
        }
    }

    /// After a wake-up the policy asked for: a policy that keeps asking to be woken and
    /// then dispatches nothing, while it holds requests and the device has free tags, is
    /// at fault after [`MAX_IDLE_WAKES`] in a row, however close together it asks (one
    /// nanosecond apart would otherwise step virtual time a nanosecond at a time).
    pub(super) fn count_idle_wake(&mut self, dispatched: bool) {
        let free = (0..self.config.hw_queues).any(|q| self.budget(q) > 0);
        if dispatched || self.queued == 0 || !free {
            self.policy.woke_usefully();
            return;
        }
        let idle_wakes = self.policy.idle_wake();
        if idle_wakes > MAX_IDLE_WAKES && self.policy.alive() {
            let message = format!(
                "was woken {idle_wakes} times in a row at its own request and dispatched nothing while it held {} requests and the device had free tags",
                self.queued
            );
            self.policy.woke_usefully();
            self.policy.latch(Fault {
                kind: FaultKind::Starved,
                call: "dispatch",
                message,
            });
        }
    }

    /// The turn's notices (completions, merges) and new requests go to the policy together
    /// with a dispatch for the first hardware queue with free tags, in one
    /// [`PolicyBackend::turn`]: a component hears them in one crossing where it can. In the
    /// round (no `only`) the dispatch rides along even without new requests while the
    /// policy holds some, where it would otherwise be a call of its own after the notices.
    /// Returns the hardware queue that was served, if one was. With `only`, the requests of
    /// that submitter alone are inserted (its plug flushed); the others wait for the round.
    pub(super) fn take_turn(&mut self, now_ns: u64, only: Option<u32>) -> Option<u32> {
        if !self.policy.alive() {
            return None;
        }
        let inserts = self.take_inserts(now_ns, only);
        let served = (inserts || (only.is_none() && self.queued > 0))
            .then(|| (0..self.config.hw_queues).find(|&q| self.budget(q) > 0))
            .flatten();
        let dispatch = served.map(|q| (q, self.budget(q)));
        let calls = [
            !self.pending_completions.is_empty(),
            !self.pending_merges.is_empty(),
            inserts || dispatch.is_some(),
        ];
        if !calls.contains(&true) {
            return None;
        }
        // Counted as the calls they stand for, however many crossings they take.
        self.stats.policy_calls += calls.iter().filter(|&&c| c).count() as u64;
        let turn = Turn {
            completions: &self.pending_completions,
            merges: &self.pending_merges,
            requests: if inserts { &self.scratch } else { &[] },
            dispatch,
        };
        let answer = self.policy.instance().turn(now_ns, &turn);
        self.pending_completions.clear();
        self.pending_merges.clear();
        if let (Some(Some(answer)), Some((hw_queue, budget))) =
            (self.policy.guard(answer.map(Some), None), dispatch)
        {
            let call = if inserts {
                "insert-and-dispatch"
            } else {
                "dispatch"
            };
            self.send(now_ns, hw_queue, budget, answer, call);
        }
        served
    }

    /// Free driver tags on `hw_queue`; none while the queue is plugged.
    pub(super) fn budget(&self, hw_queue: u32) -> u32 {
        if self.plugging.holds_queue() {
            return 0;
        }
        self.config.queue_depth - self.queues[hw_queue as usize].inflight
    }

    /// Moves requests waiting for the insert batch (of submitter `only`, if given) into
    /// `scratch`, as queued; true iff any.
    pub(super) fn take_inserts(&mut self, now_ns: u64, only: Option<u32>) -> bool {
        if self.pending_insert.is_empty() {
            return false;
        }
        self.scratch.clear();
        let mut pending = std::mem::take(&mut self.pending_insert);
        // A flushed plug takes its submitter's requests; the rest keep their order.
        let table = &self.table;
        let mut kept = Vec::new();
        if let Some(ctx) = only {
            pending.retain(|&id| {
                let mine = table.get(id).is_none_or(|r| r.ctx == ctx);
                if !mine {
                    kept.push(id);
                }
                mine
            });
        }
        for &id in &pending {
            if let Some(request) = self.table.get_mut(id) {
                request.state = State::Queued;
                request.epoch = self.policy.epoch();
                self.scratch.push(policy_view(id, request));
                if let Some(events) = &mut self.events {
                    events.push(event(now_ns, Kind::Insert, id, request));
                }
            }
        }
        // The batch's buffer is kept (no allocation per round) unless a flush split it.
        pending.clear();
        self.pending_insert = if only.is_some() { kept } else { pending };
        self.queued += self.scratch.len();
        !self.scratch.is_empty()
    }

    /// Checks the policy's answer to `call` and sends its requests on `hw_queue`, then hands
    /// the answer back to the policy's backend for its next one.
    pub(super) fn send(
        &mut self,
        now_ns: u64,
        hw_queue: u32,
        budget: u32,
        answer: Dispatch,
        call: &'static str,
    ) {
        self.act_on(now_ns, hw_queue, budget, &answer, call);
        self.policy.instance().give_back(answer);
    }

    fn act_on(
        &mut self,
        now_ns: u64,
        hw_queue: u32,
        budget: u32,
        answer: &Dispatch,
        call: &'static str,
    ) {
        if answer.ids.len() > budget as usize {
            let message = format!("returned {} ids for a budget of {budget}", answer.ids.len());
            self.policy.latch(invalid(call, message));
            return;
        }
        if !answer.ids.is_empty() {
            self.policy.progressed(now_ns);
        }
        for &RequestId(id) in &answer.ids {
            let Some(request) = self.table.get_mut(id).filter(|r| r.is_queued()) else {
                self.policy.latch(invalid(
                    call,
                    format!(
                        "returned id {id:#x}, which is not queued (unknown, absorbed or already dispatched)"
                    ),
                ));
                return;
            };
            request.state = State::Dispatched {
                hw_queue,
                at_ns: now_ns,
            };
            let (op, sector, sectors) = (request.op, request.sector, request.sectors);
            let (home, group) = (request.home_queue, request.tag_kind().group);
            let prio = (request.prio_class, request.prio_level);
            let (ctx, sync) = (request.ctx, request.sync);
            let bios = request.bios.clone();
            self.merging.remove(id, request);
            self.note(now_ns, Kind::Dispatch, ctx, op, sync, (sector, sectors), id);
            assert!(self.queued > 0, "a dispatch with nothing queued");
            self.queued -= 1;
            self.admission.on_device(home, group, true);
            let queue = &mut self.queues[hw_queue as usize];
            queue.inflight += 1;
            self.on_device += 1;
            // The backends size their rings and slots by the driver tags.
            assert!(
                queue.inflight <= self.config.queue_depth,
                "queue {hw_queue}: a dispatch past {} driver tags",
                self.config.queue_depth
            );
            self.stats.dispatched += 1;
            self.actions.push_back(Action::Dispatch {
                hw_queue,
                id,
                op,
                sector,
                sectors,
                prio,
                bios,
            });
        }
        if let Some(wake) = answer.wake_at_ns {
            // A wake in the past means "as soon as possible": the next nanosecond. Asked for
            // again and again with nothing dispatched, the idle-wake count ejects it.
            self.queues[hw_queue as usize].timer = Some(wake.max(now_ns.saturating_add(1)));
        }
    }
}

/// Wake-ups in a row that end with nothing dispatched (while requests wait and tags are
/// free) tolerated before the policy is starving its requests. A real policy idles for one
/// wake-up, or a few, before it dispatches (cfq's slice_idle, bfq's budget timeout).
const MAX_IDLE_WAKES: u32 = 10_000;
