//! A run's plan: every option that shapes a run, gathered once. The CLI builds one
//! [`RunPlan`] from the same flags whichever command runs (`run`, `replay`, `compare`,
//! `serve`, `bench`, `calibrate`, `policy check`), and every driver reads it, so a flag means
//! the same thing wherever a run happens.

use crate::backend::sim::FaultPlan;
use crate::control::Control;
use crate::core::{Config, Nomerges, Plug, RqAffinity, Supervision};
use crate::engine::{Backend, Engine, EngineSetup, Lane, LaneSetup, ScheduledSwap, Striping};

/// Driver tags per real device unless `--queue-depth` says otherwise: deep enough for any
/// single disk or virtio queue, shallow enough that a policy still has requests to order.
pub const DEFAULT_QUEUE_DEPTH: u32 = 128;

/// What shapes a run besides its jobs, its device and its policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunPlan {
    /// Seeds every submitter's random choices (and a fault plan's).
    pub seed: u64,
    /// The queue's attributes.
    pub queue: QueueAttrs,
    /// What happens when the policy fails.
    pub supervision: Supervision,
    /// What the run records and shows as it goes.
    pub observe: Observe,
    /// How the device fails: a simulated device by itself, a real one as faults injected
    /// between the host and the kernel.
    pub faults: FaultPlan,
    /// How real devices are driven (ignored by simulated ones).
    pub ring: RingOptions,
}

impl Default for RunPlan {
    fn default() -> Self {
        Self {
            seed: 1,
            queue: QueueAttrs::default(),
            supervision: Supervision::default(),
            observe: Observe::default(),
            faults: FaultPlan::default(),
            ring: RingOptions::default(),
        }
    }
}

impl RunPlan {
    /// A lane's setup under this plan: `config` from [`QueueAttrs::config`], the policy's
    /// `settings`.
    pub(crate) fn lane_setup<'a>(
        &self,
        config: Config,
        settings: &'a [(String, i64)],
    ) -> LaneSetup<'a> {
        LaneSetup {
            config,
            settings,
            supervision: self.supervision,
            record_events: self.observe.record_events,
            metering: self.observe.meters(),
        }
    }

    /// The one place a run's engine is built: `lanes` over `backend`, with what the plan
    /// says a run shows as it goes, and the front-end's own `parts`.
    pub fn engine<B: Backend>(
        &self,
        backend: B,
        lanes: Vec<Lane>,
        parts: EngineParts,
    ) -> Engine<B> {
        let EngineParts {
            striping,
            control,
            swaps,
        } = parts;
        Engine::new(
            backend,
            EngineSetup {
                lanes,
                striping: striping.unwrap_or_else(Striping::single),
                control,
                live_every_ns: self.observe.status_interval_ns,
                swaps,
            },
        )
    }
}

/// What a front-end adds to the engine it builds from a plan.
#[derive(Debug, Default)]
pub struct EngineParts {
    /// How bios spread over several devices (one needs none).
    pub striping: Option<Striping>,
    /// A control socket to answer at every turn.
    pub control: Option<Control>,
    /// Swaps at set times of virtual time.
    pub swaps: Vec<ScheduledSwap>,
}

/// The queue attributes a kernel shows under `/sys/block/DEV/queue/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueAttrs {
    /// `nomerges`: which merges are tried.
    pub nomerges: Nomerges,
    /// `nr_requests`: scheduler tags per hardware queue, if not the default.
    pub nr_requests: Option<u32>,
    /// Driver tags per real device (requests on the kernel at once); a simulated device has
    /// its own, from its spec.
    pub queue_depth: u32,
    /// How requests are held back so that later bios can merge.
    pub plug: Plug,
    /// `rotational`, if not the device's own.
    pub rotational: Option<bool>,
}

impl Default for QueueAttrs {
    fn default() -> Self {
        Self {
            nomerges: Nomerges::All,
            nr_requests: None,
            queue_depth: DEFAULT_QUEUE_DEPTH,
            plug: Plug::None,
            rotational: None,
        }
    }
}

impl QueueAttrs {
    /// The core's configuration for a device of `hw_queues` queues of `tags` driver tags
    /// taking at most `max_sectors` a request, `rotational` by its own account, with these
    /// attributes applied.
    pub fn config(&self, hw_queues: u32, tags: u32, max_sectors: u32, rotational: bool) -> Config {
        let mut config = Config::for_device(hw_queues, tags, max_sectors);
        config.nomerges = self.nomerges;
        config.plug = self.plug;
        config.rotational = self.rotational.unwrap_or(rotational);
        if let Some(n) = self.nr_requests {
            config.nr_requests = n.max(1);
        }
        config
    }
}

/// What a run records and shows while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Observe {
    /// Record every request's events into the outcome (`--trace-events`).
    pub record_events: bool,
    /// Keep the per-ctx counters live stats and metrics read, and time policy calls (what
    /// they cost the core), without showing them.
    pub metering: bool,
    /// Print a live line to stderr this often (ns); implies metering.
    pub status_interval_ns: Option<u64>,
}

impl Observe {
    /// Whether the lanes keep live counters.
    pub fn meters(&self) -> bool {
        self.metering || self.status_interval_ns.is_some()
    }
}

/// How real files and block devices are driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingOptions {
    /// Jobs that write may write over an existing file or a block device.
    pub allow_overwrite: bool,
    /// A kernel thread polls the submission queue (idle timeout, ms).
    pub sqpoll_idle_ms: Option<u32>,
    /// Register the buffers with the kernel (fio's `fixedbufs`; on by default).
    pub fixed_buffers: bool,
    /// Run each job clone on its own thread, completion work placed by this rq_affinity;
    /// `None` runs the submitters on the ring's thread.
    pub threads: Option<RqAffinity>,
}

impl Default for RingOptions {
    fn default() -> Self {
        Self {
            allow_overwrite: false,
            sqpoll_idle_ms: None,
            fixed_buffers: true,
            threads: None,
        }
    }
}
