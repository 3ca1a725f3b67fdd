//! A run's plan: every option that shapes a run, gathered once. The CLI builds one
//! [`RunPlan`] from the same flags whichever command runs (`run`, `replay`, `compare`,
//! `serve`, `bench`, `calibrate`, `policy check`), and every driver reads it, so a flag means
//! the same thing wherever a run happens.

use crate::backend::sim::FaultPlan;
use crate::core::{Config, Nomerges, Plug, RqAffinity, Supervision};
use crate::engine::LaneSetup;

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
}

impl Default for QueueAttrs {
    fn default() -> Self {
        Self {
            nomerges: Nomerges::All,
            nr_requests: None,
            queue_depth: DEFAULT_QUEUE_DEPTH,
            plug: Plug::None,
        }
    }
}

impl QueueAttrs {
    /// The core's configuration for a device of `hw_queues` queues of `tags` driver tags
    /// taking at most `max_sectors` a request, with these attributes applied.
    pub fn config(&self, hw_queues: u32, tags: u32, max_sectors: u32) -> Config {
        let mut config = Config::for_device(hw_queues, tags, max_sectors);
        config.nomerges = self.nomerges;
        config.plug = self.plug;
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

/// `NAME:riops=N,wiops=N,rbps=B,wbps=B,riops_burst=N,…`: a group's limits, in cgroup v2
/// io.max's key words (the shape cgroup users write, and one flag per group).
///
/// # Errors
/// A bad name, an unknown or repeated key, a value out of range, or a key of a group
/// feature that needs a group-aware policy, each named.
pub fn parse_group(text: &str) -> Result<crate::core::GroupLimits, String> {
    let (name, keys) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?}: expected NAME:KEY=VALUE,… (e.g. tenant:riops=1000)"))?;
    let name = crate::frontend::jobs::job::group_name(name)?;
    let mut limits = crate::core::GroupLimits {
        name: name.clone(),
        ..crate::core::GroupLimits::default()
    };
    let mut seen: Vec<&str> = Vec::new();
    for pair in keys.split(',').filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("group {name}: {pair:?}: expected KEY=VALUE"))?;
        if seen.contains(&key) {
            return Err(format!("group {name}: {key} given twice"));
        }
        seen.push(key);
        let count = |max: u64| -> Result<u64, String> {
            crate::frontend::jobs::value::integer(value)
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| {
                    format!("group {name}: {key}={value}: expected a number from 1 to {max}")
                })
        };
        let bytes = |max: u64| -> Result<u64, String> {
            crate::frontend::jobs::value::size(value)
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| {
                    format!("group {name}: {key}={value}: expected bytes per second from 1 to {max} (k, m, g allowed)")
                })
        };
        const MAX_IOPS: u64 = 1_000_000_000;
        const MAX_BPS: u64 = 1 << 50;
        match key {
            "riops" => limits.riops = Some(count(MAX_IOPS)?),
            "wiops" => limits.wiops = Some(count(MAX_IOPS)?),
            "rbps" => limits.rbps = Some(bytes(MAX_BPS)?),
            "wbps" => limits.wbps = Some(bytes(MAX_BPS)?),
            "riops_burst" => limits.iops_burst[0] = count(MAX_IOPS)?,
            "wiops_burst" => limits.iops_burst[1] = count(MAX_IOPS)?,
            "rbps_burst" => limits.bps_burst[0] = bytes(MAX_BPS)?,
            "wbps_burst" => limits.bps_burst[1] = bytes(MAX_BPS)?,
            "weight" | "reserve_iops" | "latency_target_us" => {
                return Err(format!(
                    "group {name}: {key}= is not supported yet (it needs a policy that serves groups); riops, wiops, rbps and wbps limits are"
                ));
            }
            _ => {
                return Err(format!(
                    "group {name}: unknown key {key:?} (riops, wiops, rbps, wbps and their _burst)"
                ));
            }
        }
    }
    if !limits.limits() {
        return Err(format!(
            "group {name}: no limit given (riops, wiops, rbps or wbps)"
        ));
    }
    Ok(limits)
}
