//! The device side of a real run, whichever thread the submitters live on: one core and
//! policy per device, the ring, and the buffer arena whose slots the bios borrow. Bios go in
//! with [`Devices::submit`]; finished bios come out of [`Devices::done`].

use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use schedhost_sdk::Op;

use super::buffers::{Arena, Lease, SlotAccess};
use super::ring::{Io, IoKind, Notifier, Ring, Segments};
use super::{RealError, RealOptions, Target};
use serde_json::{Value, json};

use crate::control::{Command, Control};
use crate::core::{Action, Bio, BioDone, Bios, Config, Core, CoreStats};
use crate::metrics::exposition::DeviceView;
use crate::outcome::SwapRecord;
use crate::policy::Fault;
use crate::stats::live::{Gauges, Live};
use crate::stats::meter::Meter;

/// One device: its scheduler, and where its policy calls are timed when metering.
pub(crate) struct Lane {
    pub core: Core,
    pub name: String,
    pub policy_clock: Option<Arc<AtomicU64>>,
    /// Per-ctx counters for live stats and metrics, recorded from the completions the
    /// core hands out, while metering.
    pub meter: Option<Meter>,
}

impl Lane {
    /// A device named `name` whose core is built by `core` from its policy and fallback,
    /// with the policy's calls timed when `metering`.
    pub fn new<E>(
        name: String,
        policy: Box<dyn crate::policy::PolicyBackend>,
        metering: bool,
        core: impl FnOnce(
            Box<dyn crate::policy::PolicyBackend>,
            crate::policy::Fallback,
        ) -> Result<Core, E>,
    ) -> Result<Self, E> {
        let policy_clock = metering.then(|| Arc::new(AtomicU64::new(0)));
        let (policy, fallback) = crate::policy::for_core(policy, policy_clock.as_ref());
        Ok(Self {
            core: core(policy, fallback)?,
            name,
            policy_clock,
            meter: metering.then(Meter::default),
        })
    }
}

/// Where a bio's buffer goes on its device.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SlotUse {
    pub offset: u64,
    pub generation: u32,
}

/// A finished bio, the device it went to, and the buffer it leased.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Finished {
    pub lane: u32,
    pub done: BioDone,
    pub lease: Lease,
    pub slot: SlotUse,
}

/// How long the policies may hold requests with nothing on the device, no timer and no new
/// bios before a driver fed by other threads declares them starving.
const STALL_LIMIT: Duration = Duration::from_secs(2);

/// Since when the policies have held requests with nothing on the device and no timer.
#[derive(Debug, Default)]
pub(crate) struct StallWatch(Option<Instant>);

/// Which of `lanes` devices a bio goes to: blocks are striped by block number, so a block
/// is always on the same device and the verify pass finds it there.
pub(crate) fn stripe(bio: &Bio, lanes: usize) -> usize {
    let block = bio.sector / u64::from(bio.sectors.max(1));
    (block % lanes.max(1) as u64) as usize
}

pub(crate) struct Devices {
    // Field order matters: the ring is dropped before the arena whose memory it lends to the
    // kernel, after `Drop` drained it.
    ring: Ring,
    /// Freed by `Drop` only once the ring holds no I/O.
    arena: ManuallyDrop<Arena>,
    pub lanes: Vec<Lane>,
    /// Per arena slot (by lease), where its bio went.
    slots: Vec<SlotUse>,
    /// Bios finished since the caller last took them.
    pub done: Vec<Finished>,
    reaped: Vec<((u32, u64), i32)>,
    /// The live view, when `--status-interval` is on.
    live: Option<Live>,
}

impl Drop for Devices {
    fn drop(&mut self) {
        // Until the ring is drained the kernel may still write into the arena; if it cannot
        // be drained, leaking the arena is the only safe choice.
        if self.ring.drain() {
            // SAFETY: dropped exactly once, here, and never used after.
            unsafe { ManuallyDrop::drop(&mut self.arena) }
        }
    }
}

impl Devices {
    /// Devices over `targets` with `lanes`, and one buffer slot per entry of `slot_lens`.
    pub fn new(
        targets: &[Target],
        lanes: Vec<Lane>,
        slot_lens: &[usize],
        config: Config,
        options: RealOptions,
    ) -> Result<Self, RealError> {
        let mut arena = Arena::new(slot_lens);
        arena.fill_random(options.seed);
        let fds: Vec<RawFd> = targets.iter().map(Target::raw_fd).collect();
        let depth = config.queue_depth * lanes.len() as u32;
        let entries = depth.clamp(8, 4096).next_power_of_two();
        let mut ring =
            Ring::new(entries, &fds, options.sqpoll_idle_ms).map_err(|source| RealError::Ring {
                action: "setting up the ring",
                source,
            })?;
        let (base, len) = arena.region();
        // SAFETY: the arena outlives the ring's use of it: `Drop` drains the ring before the
        // arena can be freed, and leaks it if the ring cannot be drained.
        let fixed = unsafe { ring.register_buffer(base, len) };
        tracing::debug!(fixed, entries, "io_uring ready");
        Ok(Self {
            ring,
            arena: ManuallyDrop::new(arena),
            lanes,
            slots: vec![SlotUse::default(); slot_lens.len()],
            done: Vec::new(),
            reaped: Vec::new(),
            live: options.status_interval_ns.map(|every| Live::new(every, 0)),
        })
    }

    /// The end of a loop turn for a ring thread fed by other threads: the live line, then
    /// stall detection (a policy holding requests with nothing on the device and no timer
    /// for [`STALL_LIMIT`] is ejected as starving them), then a wait for a completion, the
    /// notifier, the next policy timer or the next live line.
    ///
    /// # Errors
    /// The stall could not be cleared, or the ring failed.
    pub fn idle(
        &mut self,
        clock: impl Fn() -> u64,
        watch: &mut StallWatch,
    ) -> Result<(), RealError> {
        self.tick_live(clock());
        let timer = self.next_timer();
        let stuck = self.inflight() == 0 && timer.is_none() && self.queued() > 0;
        watch.0 = match (stuck, watch.0) {
            (false, _) => None,
            (true, None) => Some(Instant::now()),
            (true, Some(since)) if since.elapsed() > STALL_LIMIT => {
                if !self.starve(clock())? {
                    return Err(RealError::Stalled {
                        at_ms: clock() as f64 / 1e6,
                        queued: self.queued(),
                    });
                }
                None
            }
            (true, since) => since,
        };
        let now = clock();
        let timeout = match (timer, watch.0) {
            (Some(t), _) => Some(Duration::from_nanos(t.saturating_sub(now))),
            (None, Some(_)) => Some(STALL_LIMIT / 4),
            (None, None) => None,
        };
        let live = self.live_wait_ns(now).map(Duration::from_nanos);
        self.wait(timeout.into_iter().chain(live).min())
    }

    /// Prints the live line to stderr if one is due at `now`.
    pub fn tick_live(&mut self, now: u64) {
        if !self.live.as_ref().is_some_and(|l| l.due(now)) {
            return;
        }
        let mut meter = Meter::default();
        for lane in &mut self.lanes {
            if let Some(m) = &mut lane.meter {
                meter.absorb(m);
                m.clear_recent();
            }
        }
        let policy = self
            .lanes
            .first_mut()
            .and_then(|l| l.core.policy_mut().info().ok())
            .map(|i| i.name)
            .unwrap_or_default();
        let gauges = Gauges {
            policy: &policy,
            queued: self.queued(),
            inflight: self.inflight(),
            ejections: self.lanes.iter().map(|l| l.core.ejections().len()).sum(),
        };
        if let Some(live) = &mut self.live {
            // A closed stderr must not stop the I/O.
            let _ = writeln!(std::io::stderr(), "{}", live.line(now, &meter, gauges));
        }
    }

    /// How long until the next live line, if the live view is on.
    pub fn live_wait_ns(&self, now: u64) -> Option<u64> {
        self.live.as_ref().map(|l| l.wait_ns(now))
    }

    /// Every device as the metrics see it (counters empty unless metering is on).
    pub fn views(&mut self) -> Vec<DeviceView> {
        let inflight = self.inflight();
        self.lanes
            .iter_mut()
            .map(|lane| DeviceView {
                name: lane.name.clone(),
                policy: lane
                    .core
                    .policy_mut()
                    .info()
                    .map(|i| i.name)
                    .unwrap_or_default(),
                meter: lane.meter.clone().unwrap_or_default(),
                stats: lane.core.stats(),
                queued: lane.core.queued_in_policy(),
                // One ring carries every device: its in-flight count is theirs together.
                inflight,
                ejections: lane.core.ejections().len(),
                policy_call_ns: lane
                    .policy_clock
                    .as_ref()
                    .map_or(0, |c| c.load(Ordering::Relaxed)),
            })
            .collect()
    }

    /// The device a bio goes to.
    pub fn lane_of(&self, bio: &Bio) -> usize {
        stripe(bio, self.lanes.len())
    }

    /// Access to slot contents for whoever holds a slot (see [`SlotAccess`]).
    pub fn slots(&self) -> SlotAccess {
        self.arena.access()
    }

    /// `lease`'s buffer, to fill before its write goes in.
    ///
    /// # Safety
    /// The lease's bio is not in flight (see [`Arena::slot_mut`]).
    pub unsafe fn slot_mut(&mut self, lease: Lease) -> &mut [u8] {
        // SAFETY: the caller's contract.
        unsafe { self.arena.slot_mut(lease) }
    }

    /// `lease`'s buffer, after its bio finished.
    ///
    /// # Safety
    /// As for [`Devices::slot_mut`].
    pub unsafe fn slot(&self, lease: Lease) -> &[u8] {
        // SAFETY: the caller's contract.
        unsafe { self.arena.slot(lease) }
    }

    /// `bio`, holding buffer `lease` (written with `generation` when verified), enters its
    /// device's core. The bio's id must be the lease's ([`Lease::bio_id`]).
    pub fn submit(
        &mut self,
        now: u64,
        lease: Lease,
        bio: Bio,
        generation: u32,
    ) -> Result<(), RealError> {
        debug_assert_eq!(bio.id, lease.bio_id());
        let lane = self.lane_of(&bio);
        self.slots[lease.index()] = SlotUse {
            offset: bio.sector * 512,
            generation,
        };
        let result = self.lanes[lane].core.submit(now, bio);
        result.map_err(|fault| self.fault(lane, now, fault))?;
        self.drain_actions(lane)
    }

    /// Lets every policy dispatch.
    pub fn run(&mut self, now: u64) -> Result<(), RealError> {
        for l in 0..self.lanes.len() {
            let result = self.lanes[l].core.run(now);
            result.map_err(|fault| self.fault(l, now, fault))?;
            self.drain_actions(l)?;
        }
        Ok(())
    }

    /// Takes the kernel's completions into the cores; `now` reads the clock after reaping.
    /// Returns the time it read, if there was anything to reap.
    pub fn reap(&mut self, now: impl Fn() -> u64) -> Result<Option<u64>, RealError> {
        let mut reaped = std::mem::take(&mut self.reaped);
        reaped.clear();
        self.ring
            .reap(&mut |tag, status| reaped.push((tag, status)))
            .map_err(|source| RealError::Ring {
                action: "resubmitting a short transfer",
                source,
            })?;
        let mut read = None;
        if !reaped.is_empty() {
            let now = now();
            read = Some(now);
            for &((lane, id), status) in &reaped {
                self.lanes[lane as usize].core.complete(now, id, status)?;
                self.drain_actions(lane as usize)?;
            }
        }
        self.reaped = reaped;
        Ok(read)
    }

    /// Sleeps until a completion, at most `timeout`.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<(), RealError> {
        self.ring.wait(timeout).map_err(|source| RealError::Ring {
            action: "waiting for completions",
            source,
        })
    }

    /// I/Os on the kernel.
    pub fn inflight(&self) -> usize {
        self.ring.inflight()
    }

    /// The earliest wake-up a policy asked for.
    pub fn next_timer(&self) -> Option<u64> {
        self.lanes
            .iter()
            .filter_map(|l| l.core.poll_timeout())
            .min()
    }

    /// Requests the policies hold.
    pub fn queued(&self) -> usize {
        self.lanes.iter().map(|l| l.core.queued_in_policy()).sum()
    }

    /// True iff buffers are registered with the ring.
    pub fn fixed_buffers(&self) -> bool {
        self.ring.has_fixed_buffers()
    }

    /// The run is stuck with requests in the policies: ejects the ones holding requests
    /// (see [`Core::starve`]); true iff any was replaced.
    pub fn starve(&mut self, now: u64) -> Result<bool, RealError> {
        let mut replaced = false;
        for l in 0..self.lanes.len() {
            let result = self.lanes[l].core.starve(now);
            replaced |= result.map_err(|fault| self.fault(l, now, fault))?;
            self.drain_actions(l)?;
        }
        Ok(replaced)
    }

    /// The events every device's core recorded, in time order.
    pub fn take_events(&mut self) -> Vec<crate::events::Event> {
        let mut events = Vec::new();
        for lane in &mut self.lanes {
            lane.core.take_events(&mut events);
        }
        // Each device's events are in order; a stable sort interleaves them.
        events.sort_by_key(|e| e.at_ns);
        events
    }

    /// Every device's policy ejections, in device order.
    pub fn ejections(&self) -> Vec<crate::core::Ejection> {
        self.lanes
            .iter()
            .flat_map(|l| l.core.ejections().iter().cloned())
            .collect()
    }

    /// The cores' counters, per device.
    pub fn stats(&self) -> Vec<CoreStats> {
        self.lanes.iter().map(|l| l.core.stats()).collect()
    }

    /// Makes the ring's waits return when `notifier` is written.
    pub fn watch(&mut self, notifier: Arc<Notifier>) -> Result<(), RealError> {
        self.ring.watch(notifier).map_err(|source| RealError::Ring {
            action: "watching the submitters' eventfd",
            source,
        })
    }

    /// Carries out lane `l`'s actions: dispatches go to the ring, finished bios to `done`.
    fn drain_actions(&mut self, l: usize) -> Result<(), RealError> {
        while let Some(action) = self.lanes[l].core.poll_action() {
            match action {
                Action::Dispatch {
                    id,
                    op,
                    sector,
                    sectors,
                    bios,
                    ..
                } => self.dispatch(l, id, (op, sector, sectors), &bios)?,
                Action::Complete(done) => {
                    if let Some(meter) = &mut self.lanes[l].meter {
                        meter.record_done(&done);
                    }
                    let lease = Lease::of_bio(done.bio);
                    self.done.push(Finished {
                        lane: l as u32,
                        done,
                        lease,
                        slot: self.slots[lease.index()],
                    });
                }
            }
        }
        Ok(())
    }

    /// Sends request `id` of lane `l` (`op` on `sectors` at `sector`) to the kernel over its
    /// bios' buffers, which the core hands over in sector order.
    fn dispatch(
        &mut self,
        l: usize,
        id: u64,
        (op, sector, sectors): (Op, u64, u32),
        bios: &Bios,
    ) -> Result<(), RealError> {
        let kind = match op {
            Op::Read => IoKind::Read,
            Op::Write => IoKind::Write,
            Op::Flush => IoKind::Flush,
            Op::Discard => IoKind::Discard(u64::from(sectors) * 512),
        };
        let mut segments = Segments::new();
        if matches!(kind, IoKind::Read | IoKind::Write) {
            // Each bio's buffer is the start of its slot, as long as the bio.
            for (_, bio) in bios {
                let len = bio.sectors as usize * 512;
                let (ptr, room) = self.arena.raw(Lease::of_bio(bio.id));
                // Slots are sized to their submitter's longest bio: a bio that does not fit
                // is a driver bug, and cutting it short would report bytes never moved.
                if len > room {
                    return Err(RealError::Layout(format!(
                        "a {len}-byte bio does not fit its {room}-byte buffer; refusing to issue it short"
                    )));
                }
                segments.push((ptr, len));
            }
        }
        let io = Io {
            file: l as u32,
            kind,
            offset: sector * 512,
            segments,
            tag: (l as u32, id),
        };
        // SAFETY: the segments are arena slots lent to this request's bios; nobody touches a
        // slot again until its bio finished (after the reap), and the arena outlives the
        // ring's I/O (see `Drop`).
        unsafe { self.ring.start(io) }.map_err(|source| RealError::Ring {
            action: "submitting",
            source,
        })
    }

    /// Answers every waiting control request at this batch boundary; swaps go to `swaps`.
    ///
    /// # Errors
    /// A policy fault in a request (a `set` that traps) when faults stop the run
    /// (`--on-fault abort`); the request is answered first.
    pub fn serve(
        &mut self,
        control: &Control,
        now: u64,
        swaps: &mut Vec<SwapRecord>,
    ) -> Result<(), RealError> {
        for envelope in control.take() {
            let (reply, record, fatal) = self.command(now, envelope.command);
            swaps.extend(record);
            let _ = envelope.reply.send(reply);
            if let Some((lane, fault)) = fatal {
                return Err(self.fault(lane, now, fault));
            }
        }
        Ok(())
    }

    /// Carries out a control command; returns the reply, the swap's record when it was
    /// one, and a fault that must stop the run (with its device).
    fn command(
        &mut self,
        now: u64,
        command: Command,
    ) -> (Value, Option<SwapRecord>, Option<(usize, Fault)>) {
        match command {
            Command::Swap {
                label,
                policies,
                load_ns,
                cached,
            } => {
                let (reply, record) = self.swap(now, label, policies, load_ns, cached);
                (reply, record, None)
            }
            Command::Set { name, value } => {
                let mut errors = Vec::new();
                let mut fatal = None;
                for (l, lane) in self.lanes.iter_mut().enumerate() {
                    match lane.core.set_tunable(now, &name, value) {
                        Ok(Ok(())) => {}
                        Ok(Err(refusal)) => errors.push(format!("{}: {refusal}", lane.name)),
                        Err(fault) => {
                            errors.push(format!("{}: {fault}", lane.name));
                            fatal.get_or_insert((l, fault));
                        }
                    }
                }
                let reply = if errors.is_empty() {
                    json!({ "ok": true, "set": { name: value } })
                } else {
                    json!({ "ok": false, "error": errors.join("; ") })
                };
                (reply, None, fatal)
            }
            Command::Get => (self.tunables(), None, None),
            Command::Status => {
                let devices: Vec<Value> = self
                    .lanes
                    .iter_mut()
                    .map(|lane| {
                        let info = lane.core.policy_mut().info().ok();
                        json!({
                            "device": lane.name,
                            "policy": info.as_ref().map(|i| i.name.clone()),
                            "version": info.as_ref().map(|i| i.version.clone()),
                            "queued_in_policy": lane.core.queued_in_policy(),
                            "requests_in_host": lane.core.requests_in_flight(),
                            "ejections": lane.core.ejections().len(),
                        })
                    })
                    .collect();
                let reply = json!({
                    "ok": true,
                    "uptime_ms": now / 1_000_000,
                    "inflight": self.inflight(),
                    "devices": devices,
                });
                (reply, None, None)
            }
            Command::Stats => {
                let devices: Vec<Value> = self
                    .lanes
                    .iter()
                    .map(|lane| json!({ "device": lane.name, "requests": lane.core.stats() }))
                    .collect();
                (json!({ "ok": true, "devices": devices }), None, None)
            }
        }
    }

    /// Replaces every device's policy; a device whose new policy will not start keeps its
    /// old one.
    fn swap(
        &mut self,
        now: u64,
        label: String,
        policies: Vec<Box<dyn crate::policy::PolicyBackend>>,
        load_ns: u64,
        cached: bool,
    ) -> (Value, Option<SwapRecord>) {
        let started = std::time::Instant::now();
        let results: Vec<Result<crate::core::Swapped, String>> = self
            .lanes
            .iter_mut()
            .zip(policies)
            .map(|(lane, policy)| {
                let policy = match &lane.policy_clock {
                    Some(clock) => crate::policy::timed(policy, clock),
                    None => policy,
                };
                lane.core
                    .replace_policy(now, policy, &[])
                    .map_err(|e| format!("{}: refused, the old policy stays: {e}", lane.name))
            })
            .collect();
        let stall_ns = started.elapsed().as_nanos() as u64;
        // The new policies dispatch at once.
        let _ = self.run(now);
        let ok = results.iter().all(Result::is_ok);
        let reply = json!({
            "ok": ok,
            "error": (!ok).then(|| results.iter().filter_map(|r| r.as_ref().err().cloned()).collect::<Vec<_>>().join("; ")),
            "devices": results.iter().map(|r| match r {
                Ok(s) => json!(s),
                Err(e) => json!({ "error": e }),
            }).collect::<Vec<_>>(),
            "stall_us": stall_ns as f64 / 1e3,
            "load_us": load_ns as f64 / 1e3,
            "cached": cached,
        });
        let record = SwapRecord {
            at_ns: now,
            to: label,
            result: results
                .into_iter()
                .next()
                .unwrap_or_else(|| Err("no device".into())),
            stall_ns,
        };
        (reply, Some(record))
    }

    /// Every tunable of the first device's policy (all devices run the same one).
    fn tunables(&mut self) -> Value {
        let Some(lane) = self.lanes.first_mut() else {
            return json!({ "ok": false, "error": "no device" });
        };
        let policy = lane.core.policy_mut();
        let specs = match policy.tunables() {
            Ok(specs) => specs,
            Err(fault) => return json!({ "ok": false, "error": fault.to_string() }),
        };
        let mut values = serde_json::Map::new();
        for spec in specs {
            let value = policy.get(&spec.name).ok().flatten();
            values.insert(spec.name, json!(value));
        }
        json!({ "ok": true, "tunables": values })
    }

    fn fault(&self, lane: usize, now: u64, fault: Fault) -> RealError {
        RealError::Fault {
            at_ms: now as f64 / 1e6,
            device: self.lanes[lane].name.clone(),
            fault,
        }
    }
}
