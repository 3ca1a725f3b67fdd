//! B-WF2Q+: weights, the virtual start and finish of each busy queue's turn, the choice of
//! the next queue, and what a turn is charged when it ends (`bfq_bfqq_expire`,
//! `bfq_bfqq_charge_time`).

use super::idling::seeky;
use std::collections::BTreeMap;

use super::{
    ASYNC_CHARGE_FACTOR, Bfq, CLASS_IDLE_TIMEOUT_NS, DEFAULT_GROUP_WEIGHT, DEFAULT_MAX_BUDGET,
    Expiry, IN_TIME_SLICES, InService, MIN_TT_NS, Queue, QueueKey, RATE_WINDOW_NS, SHORT_TURN_NS,
    VT_SCALE, WEIGHT_SCALE, WR_COEFF,
};

impl Bfq {
    pub(super) fn budget(&self) -> u64 {
        if self.max_budget == 0 {
            DEFAULT_MAX_BUDGET
        } else {
            self.max_budget
        }
    }

    /// The budget of a turn at `weight` in class `class`: `max_budget`, or, with
    /// `group_budgets` where the host named groups, `max_budget` scaled by `weight` over the
    /// heaviest busy queue's of the class (at least a sector). B-WF2Q+ lets a queue lag or
    /// lead its share by one of its budgets, so with equal budgets a group owed a hundredth
    /// of the device gets a whole budget early in a run and then nothing for a hundred: its
    /// share holds only over many budgets. Budgets in proportion to the weights make every
    /// turn the same length in virtual time, so each group's error is one of its own turns.
    /// Not the kernel's (its budgets follow the queue's own history, not its weight).
    pub(super) fn turn_budget(&self, class: usize, weight: u64, now_ns: u64) -> u64 {
        let full = self.budget();
        if !self.scales_budgets() {
            return full;
        }
        scaled_budget(full, weight, self.heaviest_busy(class, now_ns))
    }

    /// How long a turn whose budget is `turn_budget` ([`Self::turn_budget`]) may hold the
    /// device: `timeout_sync`, or, with budgets scaled to the weights, `timeout_sync` scaled
    /// as the budget is. On a disk a random reader's turn ends by its timeout long before
    /// its budget, so only a timeout in proportion keeps a light group's turns as short as
    /// its part: with whole timeouts, the light one of two groups at 3 and 22 on `sim:hdd`
    /// had six turns of 125 ms in a 5 s run and completed 0.094 of the reads after the
    /// first second, 0.12 owed (0.120 with this). A turn timed out so is charged the time
    /// it held as a part of the whole timeout, its scaled budget, as a heavy turn timed out
    /// is charged a whole one.
    pub(super) fn turn_timeout(&self, turn_budget: u64) -> u64 {
        let full = self.budget();
        if !self.scales_budgets() || turn_budget >= full {
            return self.timeout;
        }
        let scaled = u128::from(self.timeout) * u128::from(turn_budget) / u128::from(full);
        // At least a nanosecond, so the turn sends a request before it times out.
        u64::try_from(scaled).unwrap_or(self.timeout).max(1)
    }

    /// The largest weight among class `class`'s busy queues, each as [`Self::weight`]
    /// gives it (0 if none is busy).
    fn heaviest_busy(&self, class: usize, now_ns: u64) -> u64 {
        self.busy_weights(class, now_ns).max().unwrap_or(0)
    }

    /// Each of class `class`'s busy queues' weights as [`Self::weight`] gives it: the
    /// groups' sums are taken once, so a thousand grouped queues cost two passes, not a
    /// pass each.
    fn busy_weights(&self, class: usize, now_ns: u64) -> impl Iterator<Item = u64> + '_ {
        self.busy_weights_by_key(class, now_ns).map(|(_, w)| w)
    }

    /// [`Self::busy_weights`], each with its queue's key.
    fn busy_weights_by_key(
        &self,
        class: usize,
        now_ns: u64,
    ) -> impl Iterator<Item = (QueueKey, u64)> + '_ {
        let busy = move || {
            self.queues
                .iter()
                .filter(move |(_, q)| q.busy && q.class == class)
        };
        let mut siblings: BTreeMap<u32, u64> = BTreeMap::new();
        for (_, q) in busy().filter(|(_, q)| q.group != 0) {
            *siblings.entry(q.group).or_default() += Self::own_weight(q, now_ns);
        }
        busy().map(move |(key, q)| {
            let sum = siblings.get(&q.group).copied().unwrap_or(0);
            (key, self.share(q, now_ns, sum))
        })
    }

    /// The queue's own weight, raised while it is new under `low_latency`.
    pub(super) fn own_weight(queue: &Queue, now_ns: u64) -> u64 {
        if now_ns < queue.raised_until {
            queue.weight * WR_COEFF
        } else {
            queue.weight
        }
    }

    /// The weight B-WF2Q+ schedules `queue` by: its own, or, in a group, its share of the
    /// group's weight among the group's busy queues of its class (`queue` counted busy).
    pub(super) fn weight(&self, queue: &Queue, now_ns: u64) -> u64 {
        let siblings = if queue.group == 0 {
            0
        } else {
            self.queues
                .values()
                .filter(|q| q.busy && q.group == queue.group && q.class == queue.class)
                .map(|q| Self::own_weight(q, now_ns))
                .sum()
        };
        self.share(queue, now_ns, siblings)
    }

    /// [`Self::weight`] of `queue`, given the own weights of its group's busy queues of its
    /// class summed (`siblings`, `queue` among them if it is busy; unused outside a group).
    pub(super) fn share(&self, queue: &Queue, now_ns: u64, siblings: u64) -> u64 {
        let own = Self::own_weight(queue, now_ns) * WEIGHT_SCALE;
        if queue.group == 0 {
            return own;
        }
        let group_weight = self
            .group_weights
            .get(&queue.group)
            .map_or(DEFAULT_GROUP_WEIGHT, |&w| u64::from(w));
        let busy_total = if queue.busy {
            siblings
        } else {
            siblings + Self::own_weight(queue, now_ns)
        };
        (own * group_weight / busy_total.max(1)).max(1)
    }

    /// The weights of class `class`'s busy queues summed, each as [`Self::weight`] gives
    /// it.
    pub(super) fn busy_weight(&self, class: usize, now_ns: u64) -> u128 {
        self.busy_weights(class, now_ns)
            .map(|w| u128::from(w.max(1)))
            .sum()
    }

    /// A queue becomes busy: its turn starts at max(system virtual time, its last finish),
    /// or, when it ran dry with budget left and this request came in time, it resumes that
    /// turn where it stood (`bfq_bfqq_update_budg_for_activation`, the timestamps
    /// back-shifted) and may take the device from the queue in service.
    pub(super) fn activate(&mut self, key: QueueKey, now_ns: u64) {
        let slice = IN_TIME_SLICES * self.slice_idle;
        let resume = self.queues.get_mut(&key).and_then(|q| {
            let left = q.resume_left.take()?;
            let in_time = q
                .habits
                .last_completion()
                .is_some_and(|done| now_ns <= done.saturating_add(slice));
            (in_time && left > 0).then_some(left)
        });
        let Some(left) = resume else {
            let heaviest_before = self.scales_budgets().then(|| {
                let class = self.queues.get(&key).map_or(0, |q| q.class);
                (class, self.heaviest_busy(class, now_ns))
            });
            self.begin_turn(key, now_ns, false);
            // A queue turning busy lowers its siblings' shares and leaves other groups' as
            // they were, so the heaviest grew only if it is the new heaviest: its own weight
            // says so without another pass over the busy queues.
            let grew = |before: u64| {
                (self.queues.get(&key)).is_some_and(|q| self.weight(q, now_ns) > before)
            };
            if let Some((class, before)) = heaviest_before
                && grew(before)
            {
                self.rescale_waiting_budgets(class, now_ns);
            }
            if self.in_service.is_some_and(|s| s.key != key) {
                self.preempting = Some((key, false));
                self.rescale_service_budget(now_ns);
            }
            return;
        };
        let Some(queue) = self.queues.get(&key) else {
            return;
        };
        let weight = self.weight(queue, now_ns).max(1);
        if let Some(queue) = self.queues.get_mut(&key) {
            queue.start = queue.finish;
            queue.finish = queue.start + u128::from(left) * VT_SCALE / u128::from(weight);
            queue.budget = left;
            queue.busy = true;
        }
        if self.in_service.is_some_and(|s| s.key != key) {
            self.preempting = Some((key, true));
            self.rescale_service_budget(now_ns);
        }
    }

    /// Whether turns' budgets follow their weights (`group_budgets` with groups named).
    fn scales_budgets(&self) -> bool {
        self.group_budgets && !self.group_weights.is_empty()
    }

    /// Under `group_budgets`, a queue just busy is heavier than every busy queue was: the
    /// turns waiting in class `class` are cut to the budgets their weights now give them,
    /// their finishes with them. A queue busy before the heavy ones was stamped with a full
    /// budget at its light weight, a finish that the heavy queues' turns, each stamped a
    /// budget in proportion, reach only after hundreds of turns: at iodepth 1 on the Atlas
    /// 10K three groups of weights 3, 13 and 42 beside 875 and 444 waited out a 5 s run.
    fn rescale_waiting_budgets(&mut self, class: usize, now_ns: u64) {
        let serving = self.in_service.map(|s| s.key);
        let busy: Vec<(QueueKey, u64)> = self.busy_weights_by_key(class, now_ns).collect();
        // The heaviest taken once: a queue each, not a pass over the queues each.
        let heaviest = busy.iter().map(|&(_, w)| w).max().unwrap_or(0);
        let full = self.budget();
        for (key, weight) in busy.into_iter().filter(|&(key, _)| Some(key) != serving) {
            let cap = scaled_budget(full, weight, heaviest);
            if let Some(queue) = self.queues.get_mut(&key)
                && queue.budget > cap
            {
                queue.budget = cap;
                queue.finish = queue.start + u128::from(cap) * VT_SCALE / u128::from(weight.max(1));
            }
        }
    }

    /// Under `group_budgets`, a queue just busy may be heavier than the one in service:
    /// the turn in service is cut to the budget its weight now gives it. Otherwise the
    /// first queue busy in a run takes a full budget before the heavier ones arrive, and
    /// a light group served a whole budget first waits out the run.
    fn rescale_service_budget(&mut self, now_ns: u64) {
        let Some(service) = self.in_service else {
            return;
        };
        let Some(queue) = self.queues.get(&service.key) else {
            return;
        };
        let weight = self.weight(queue, now_ns).max(1);
        let cap = self.turn_budget(queue.class, weight, now_ns);
        let until = service.started.saturating_add(self.turn_timeout(cap));
        if let Some(s) = &mut self.in_service {
            s.budget = s.budget.min(cap);
            s.until = s.until.min(until);
        }
    }

    /// Whether `key`, just busy, takes the device from the queue in service
    /// (`bfq_bfqq_handle_idle_busy_switch`): B-WF2Q+ would serve it next (a higher class,
    /// or eligible in the same class), and it resumed its turn raised at least as much, or
    /// is of a higher class or weight (`bfq_bfqq_higher_class_or_weight`), or bfq would no
    /// longer idle for the queue in service.
    pub(super) fn may_preempt(&self, key: QueueKey, resumed: bool, now_ns: u64) -> bool {
        let Some(service) = self.in_service else {
            return false;
        };
        let (Some(queue), Some(serving)) = (self.queues.get(&key), self.queues.get(&service.key))
        else {
            return false;
        };
        let raised = |q: &Queue| u8::from(now_ns < q.raised_until);
        let next = queue.class < serving.class
            || (queue.class == serving.class && queue.start <= self.vtime[queue.class]);
        if !queue.busy || !next {
            return false;
        }
        let recovers = resumed && raised(queue) >= raised(serving);
        let ranks = queue.class < serving.class
            || (queue.class == serving.class
                && queue.group == serving.group
                && Self::own_weight(queue, now_ns) > Self::own_weight(serving, now_ns));
        recovers || ranks || !self.better_to_idle(service.key, now_ns)
    }

    /// A new turn for queue `key`, finishing a budget later at its weight. A queue just
    /// served and still backlogged (`requeued`) starts where its turn finished, not at the
    /// system's virtual time (`__bfq_requeue_entity`): `max(vtime, finish)` would forgive a
    /// heavy queue the time it ran ahead, and weights 3:1 gave 2.7:1.
    pub(super) fn begin_turn(&mut self, key: QueueKey, now_ns: u64, requeued: bool) {
        let Some(queue) = self.queues.get(&key) else {
            return;
        };
        let weight = self.weight(queue, now_ns).max(1);
        let budget = self.turn_budget(queue.class, weight, now_ns);
        let start = if requeued {
            queue.finish
        } else {
            self.vtime[queue.class].max(queue.finish)
        };
        if let Some(queue) = self.queues.get_mut(&key) {
            queue.start = start;
            queue.finish = start + u128::from(budget) * VT_SCALE / u128::from(weight);
            queue.budget = budget;
            queue.busy = true;
        }
    }

    /// Picks the next queue by B-WF2Q+ in the highest class with a busy queue, the idle
    /// class first once every [`CLASS_IDLE_TIMEOUT_NS`] (`bfq_lookup_next_entity`).
    pub(super) fn select(&mut self, now_ns: u64) -> bool {
        let idle_due = now_ns >= self.idle_class_last.saturating_add(CLASS_IDLE_TIMEOUT_NS);
        if idle_due {
            self.idle_class_last = now_ns;
        }
        let order = if idle_due { [2, 0, 1] } else { [0, 1, 2] };
        for class in order {
            let busy = || {
                self.queues
                    .iter()
                    .filter(move |(_, q)| q.busy && q.class == class)
            };
            let Some(min_start) = busy().map(|(_, q)| q.start).min() else {
                continue;
            };
            // The system virtual time jumps to the earliest start if no queue is eligible.
            let v = self.vtime[class].max(min_start);
            self.vtime[class] = v;
            let Some((key, _)) = busy()
                .filter(|(_, q)| q.start <= v)
                .min_by_key(|(k, q)| (q.finish, *k))
            else {
                continue;
            };
            // Weights may have changed since its turn was timestamped: a queue busy first,
            // alone, was given a full budget.
            let (budget, timeout) = match self.queues.get(&key) {
                Some(q) => {
                    let weight = self.weight(q, now_ns).max(1);
                    let cap = self.turn_budget(q.class, weight, now_ns);
                    (q.budget.min(cap), self.turn_timeout(cap))
                }
                None => (self.budget(), self.timeout),
            };
            let charge_factor = self.charge_factor(key, now_ns);
            // What it was given as injected service counts in this turn.
            let injected = self
                .queues
                .get_mut(&key)
                .map_or(0, |q| std::mem::take(&mut q.injected));
            self.in_service = Some(InService {
                key,
                served: injected,
                budget,
                charge_factor,
                started: now_ns,
                until: now_ns + timeout,
                idle_started: now_ns,
                idle_until: None,
                held_for_heavy: false,
            });
            return true;
        }
        false
    }

    /// Ends the in-service turn for `reason`, charging the service received, or the time
    /// held for a slow queue; the queue starts a new turn if it still has requests.
    pub(super) fn expire(&mut self, now_ns: u64, reason: Expiry) {
        let Some(service) = self.in_service.take() else {
            return;
        };
        let Some(queue) = self.queues.get(&service.key) else {
            return;
        };
        let (class, weight) = (queue.class, self.weight(queue, now_ns).max(1));
        let charged = self.charge(queue, &service, now_ns, reason).max(1);
        let total_weight = self.busy_weight(class, now_ns);
        let charged = u128::from(charged) * VT_SCALE;
        let Some(queue) = self.queues.get_mut(&service.key) else {
            return;
        };
        // The turn finishes where its charge, not its budget, says.
        queue.finish = queue.start + charged / u128::from(weight);
        queue.busy = false;
        let backlogged = !queue.requests.is_empty();
        // Run dry, not out of budget or time: its next request may resume the turn.
        queue.resume_left = (!backlogged
            && !matches!(reason, Expiry::BudgetTimeout | Expiry::BudgetExhausted))
        .then(|| {
            let charged = u64::try_from(charged / VT_SCALE).unwrap_or(u64::MAX);
            service.budget.saturating_sub(charged)
        });
        self.vtime[class] += charged / total_weight.max(1);
        if backlogged {
            self.begin_turn(service.key, now_ns, true);
        }
    }

    /// How many times each sector of `key`'s turn counts (`bfq_serv_to_charge`): an async
    /// queue's three times, unless the scenario is asymmetric (judged as the turn begins,
    /// where the kernel judges each request).
    pub(super) fn charge_factor(&self, key: QueueKey, now_ns: u64) -> u64 {
        let Some(queue) = self.queues.get(&key) else {
            return 1;
        };
        if queue.sync || now_ns < queue.raised_until || self.asymmetric(key, now_ns) {
            1
        } else {
            ASYNC_CHARGE_FACTOR
        }
    }

    /// What a turn ending for `reason` costs `queue` in sectors (`bfq_bfqq_expire`): the
    /// sectors it moved, or, for a slow queue or one timed out with a third of its budget
    /// left, the time it held the device as a share of `max_budget` per `timeout_sync`
    /// (`bfq_bfqq_charge_time`), whichever is more. A raised queue is never charged time.
    pub(super) fn charge(
        &self,
        queue: &Queue,
        service: &InService,
        now_ns: u64,
        reason: Expiry,
    ) -> u64 {
        let served = service.served;
        if !queue.sync || now_ns < queue.raised_until {
            return served;
        }
        // bfq_bfqq_is_slow: after idling, the turn is measured to when idling began.
        let end = if reason == Expiry::TooIdle {
            service.idle_started
        } else {
            now_ns
        };
        let held = end.saturating_sub(service.started);
        // A turn that spent a budget scaled to its weight (`turn_budget`) is short by
        // design: the kernel's too-short-to-measure charge presumes a full budget. (Without
        // groups every turn is the kernel's, a resumed one's short budget included.)
        let scaled = self.scales_budgets() && service.budget < self.budget();
        if scaled && reason == Expiry::BudgetExhausted && held < SHORT_TURN_NS {
            return served;
        }
        let (slow, held) = if held < SHORT_TURN_NS {
            // Too short to measure: if seeky, charged at least one seek on a disk (an idle
            // slice) and on flash what idling for a seeky queue would cost (`BFQ_MIN_TT`).
            let least = if self.rotational {
                self.slice_idle
            } else {
                MIN_TT_NS
            };
            (seeky(queue), least)
        } else if held > RATE_WINDOW_NS {
            (served < self.budget() / 2, held)
        } else {
            (seeky(queue), held)
        };
        let left = service.budget.saturating_sub(served);
        let timed_out = reason == Expiry::BudgetTimeout && left >= service.budget / 3;
        if !(slow || timed_out) || self.timeout == 0 {
            return served;
        }
        let for_time = u128::from(self.budget()) * u128::from(held.min(self.timeout))
            / u128::from(self.timeout);
        served.max(u64::try_from(for_time).unwrap_or(u64::MAX))
    }

    /// A busy queue whose requests all went as injected service leaves the busy queues,
    /// charged for them as a turn that ran dry is (`bfq_del_bfqq_busy`).
    pub(super) fn settle_injected(&mut self, key: QueueKey, now_ns: u64) {
        let Some(queue) = self.queues.get(&key) else {
            return;
        };
        let (class, weight) = (queue.class, self.weight(queue, now_ns).max(1));
        let total_weight = self.busy_weight(class, now_ns);
        let Some(queue) = self.queues.get_mut(&key) else {
            return;
        };
        let charged = u128::from(std::mem::take(&mut queue.injected).max(1)) * VT_SCALE;
        queue.finish = queue.start + charged / u128::from(weight);
        queue.busy = false;
        queue.resume_left = None;
        self.vtime[class] += charged / total_weight.max(1);
    }
}

/// `full` scaled by `weight` over `heaviest` (taken as at least `weight`), at least a
/// sector and at most `full`.
fn scaled_budget(full: u64, weight: u64, heaviest: u64) -> u64 {
    let heaviest = heaviest.max(weight).max(1);
    let scaled = u128::from(full) * u128::from(weight) / u128::from(heaviest);
    u64::try_from(scaled).unwrap_or(full).clamp(1, full)
}
