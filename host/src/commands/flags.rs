//! The flags that shape a run, as argument groups every command that runs something
//! flattens in, and the [`RunPlan`] they make: one name and one meaning per option,
//! whichever command takes it.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use schedhost::backend::sim::{DeviceSpec, FaultPlan};
use schedhost::core::{MAX_UNPLUG_DELAY_NS, Nomerges, OnFault, Plug, RqAffinity, Supervision};
use schedhost::frontend::plan::{Observe, QueueAttrs, RingOptions, RunPlan};
use schedhost::frontend::run::Device;
use schedhost::policy::{DEFAULT_CALL_DEADLINE_MS, DEFAULT_MEMORY_MIB, SandboxLimits, WasmRuntime};

mod policy;

pub use policy::{PolicyFlags, SwapPolicy, policy_and_tunables, policy_tunables, swaps};

/// The flags of every command that runs I/O, one group that each such command flattens
/// whole, so every command takes every run option; [`RunFlags::plan`] turns them into the
/// run's [`RunPlan`] (the one place a plan is made, and where the defaults live) and refuses
/// by name what the command's [`Scope`] says it cannot honour.
#[derive(Debug, Clone, clap::Args)]
pub struct RunFlags {
    /// Seed for every random choice (the workload's, a fault plan's); the same seed gives
    /// the same report [default: 1].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub queue: QueueArgs,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    #[command(flatten)]
    pub ring: RingArgs,
    #[command(flatten)]
    pub observe: ObserveArgs,
}

/// What a run shows and records as it goes: `--status-interval`, `--trace-events`.
#[derive(Debug, Clone, clap::Args)]
pub struct ObserveArgs {
    /// Real devices: print a live line (IOPS, MiB/s, p99 per ctx, queue depths, policy,
    /// ejections) to stderr every SECS; the default is 1 on a terminal and off otherwise;
    /// 0 turns it off.
    #[arg(long, value_name = "SECS")]
    pub status_interval: Option<f64>,
    /// Record every request's events (queue, merge, insert, dispatch, complete) to FILE, a
    /// new file; `schedhost events FILE` prints them as blkparse does.
    #[arg(long, value_name = "FILE")]
    pub trace_events: Option<std::path::PathBuf>,
}

/// The devices a command runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Devices {
    /// Simulated devices only: the flags for real ones are refused.
    Sim,
    /// Real files and block devices only.
    Real,
    /// Either, as `--device` says.
    Either,
}

/// What a command does with the shared run flags. Each `Some(why)` is a flag group the
/// command decides itself; giving one of its flags is refused with `why`. Every command that
/// runs I/O writes its scope out field by field, so a new field makes each decide.
#[derive(Debug, Clone, Copy)]
pub struct Scope {
    /// The command, as the user typed it.
    pub command: &'static str,
    /// Its devices.
    pub devices: Devices,
    /// `--seed`.
    pub own_seed: Option<&'static str>,
    /// The queue flags (`--nomerges`, `--nr-requests`, `--queue-depth`, `--plug`,
    /// `--rotational`).
    pub own_queue: Option<&'static str>,
    /// `--on-fault`.
    pub own_on_fault: Option<&'static str>,
    /// The real devices' flags (`--allow-overwrite`, `--sqpoll`, `--no-fixed-buffers`,
    /// `--rq-affinity`).
    pub own_ring: Option<&'static str>,
    /// `--rq-affinity` alone: where completion work runs (refused with `own_ring` too).
    pub own_threads: Option<&'static str>,
    /// `--status-interval`.
    pub own_status: Option<&'static str>,
    /// `--trace-events`.
    pub own_events: Option<&'static str>,
    /// The sandbox's fuel per call when `--fuel` is not given.
    pub default_fuel: Option<u64>,
    /// The watchdog when `--watchdog` is not given.
    pub default_watchdog_ns: Option<u64>,
}

#[cfg(test)]
impl Scope {
    /// A command that honours every flag, with the sandbox's usual defaults (commands write
    /// their scope out whole, so that a new field makes each decide).
    pub const fn all(command: &'static str, devices: Devices) -> Self {
        Self {
            command,
            devices,
            own_seed: None,
            own_queue: None,
            own_on_fault: None,
            own_ring: None,
            own_threads: None,
            own_status: None,
            own_events: None,
            default_fuel: None,
            default_watchdog_ns: Some(schedhost::core::DEFAULT_WATCHDOG_NS),
        }
    }
}

impl RunFlags {
    /// The run's plan under `scope`, for a run on a real device if `real` (the live line is
    /// for real devices: a simulated run shows its progress in virtual time), with the
    /// fault plan `--device` gave.
    ///
    /// # Errors
    /// A flag the command decides itself, or one for devices it does not run on, named with
    /// the reason.
    pub fn plan(&self, scope: &Scope, faults: FaultPlan, real: bool) -> Result<RunPlan> {
        // Every flag group is named here, so a new one cannot be left out of the plan.
        let RunFlags {
            seed: _, // read by `seed()`
            queue,
            sandbox,
            ring,
            observe,
        } = self;
        self.refuse(scope)?;
        let plan = RunPlan {
            seed: self.seed(),
            queue: queue.attrs(),
            supervision: sandbox.supervision(scope.default_watchdog_ns),
            observe: Observe {
                record_events: observe.trace_events.is_some(),
                metering: false,
                status_interval_ns: real
                    .then(|| status_interval_ns(observe.status_interval))
                    .flatten(),
            },
            faults,
            ring: ring.options(),
        };
        Ok(plan)
    }

    /// The seed: `--seed`, or the plan's default.
    pub fn seed(&self) -> u64 {
        self.seed.unwrap_or(RunPlan::default().seed)
    }

    /// A WebAssembly engine with the sandbox's limits, the scope's fuel unless `--fuel`.
    ///
    /// # Errors
    /// The engine could not be set up.
    pub fn runtime(&self, scope: &Scope) -> Result<WasmRuntime> {
        self.sandbox.limits.runtime(scope.default_fuel)
    }

    /// Refuses what `scope` decides itself, and the real devices' flags where it runs none.
    fn refuse(&self, scope: &Scope) -> Result<()> {
        let given = self.given();
        let real_only = matches!(scope.devices, Devices::Sim)
            .then_some("it runs simulated devices only, and this flag is for real ones");
        let owners: [(&[&str], Option<&str>); 7] = [
            (&["--seed"], scope.own_seed),
            (
                &["--nomerges", "--nr-requests", "--plug", "--rotational"],
                scope.own_queue,
            ),
            (&["--queue-depth"], scope.own_queue.or(real_only)),
            (&["--on-fault"], scope.own_on_fault),
            (
                &["--allow-overwrite", "--sqpoll", "--no-fixed-buffers"],
                scope.own_ring.or(real_only),
            ),
            (
                &["--rq-affinity"],
                scope.own_threads.or(scope.own_ring).or(real_only),
            ),
            (&["--status-interval"], scope.own_status.or(real_only)),
        ];
        for (flags, why) in owners {
            if let (Some(why), Some(flag)) = (why, flags.iter().find(|f| given.contains(f))) {
                bail!("{}: {flag} does not apply: {why}", scope.command);
            }
        }
        if let (Some(why), true) = (scope.own_events, given.contains(&"--trace-events")) {
            bail!("{}: --trace-events does not apply: {why}", scope.command);
        }
        Ok(())
    }

    /// The flags given on the command line, by name.
    fn given(&self) -> Vec<&'static str> {
        let (q, r, o) = (&self.queue, &self.ring, &self.observe);
        [
            ("--seed", self.seed.is_some()),
            ("--nomerges", q.nomerges.is_some()),
            ("--nr-requests", q.nr_requests.is_some()),
            ("--queue-depth", q.queue_depth.is_some()),
            ("--plug", q.plug.is_some()),
            ("--rotational", q.rotational.is_some()),
            ("--on-fault", self.sandbox.on_fault.is_some()),
            ("--allow-overwrite", r.allow_overwrite),
            ("--sqpoll", r.sqpoll.is_some()),
            ("--no-fixed-buffers", r.no_fixed_buffers),
            ("--rq-affinity", r.rq_affinity.is_some()),
            ("--status-interval", o.status_interval.is_some()),
            ("--trace-events", o.trace_events.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }
}

/// What a policy instance may use: `--call-deadline`, `--policy-memory`, `--fuel`.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitArgs {
    /// Wall-clock time a policy call may take before the policy is ejected.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_CALL_DEADLINE_MS, value_parser = clap::value_parser!(u64).range(1..))]
    pub call_deadline: u64,
    /// Linear memory a policy instance may use, all its memories together.
    #[arg(long, value_name = "MIB", default_value_t = DEFAULT_MEMORY_MIB as u64, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub policy_memory: u64,
    /// Fuel per policy call (about one unit per wasm instruction): a deadline that does not
    /// depend on the machine, so a simulated run ejects at the same point every time.
    #[arg(long, value_name = "UNITS", value_parser = clap::value_parser!(u64).range(1..))]
    pub fuel: Option<u64>,
}

impl LimitArgs {
    /// These limits, with `default_fuel` when `--fuel` is not given.
    pub fn limits(&self, default_fuel: Option<u64>) -> SandboxLimits {
        SandboxLimits {
            call_deadline: Duration::from_millis(self.call_deadline),
            memory_bytes: (self.policy_memory as usize) << 20,
            fuel: self.fuel.or(default_fuel),
        }
    }

    /// A WebAssembly engine with these limits.
    pub fn runtime(&self, default_fuel: Option<u64>) -> Result<WasmRuntime> {
        WasmRuntime::with_limits(self.limits(default_fuel))
            .context("setting up the WebAssembly engine")
    }
}

/// The sandbox: the limits, and what happens when a policy breaks them or fails.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxArgs {
    #[command(flatten)]
    pub limits: LimitArgs,
    /// After a policy fault: `fallback` to the built-in FIFO, `restart[:N]` a new instance
    /// (at most N times, default 3, then fall back), or `abort` the run [default: fallback].
    #[arg(long, value_name = "ACTION", value_parser = parse_on_fault)]
    pub on_fault: Option<OnFault>,
    /// Eject a policy that holds requests and dispatches nothing for this long while the
    /// device has nothing in flight (0: never); default 10.
    #[arg(long, value_name = "SECONDS", value_parser = parse_watchdog)]
    pub watchdog: Option<Watchdog>,
}

/// `--watchdog`'s limit in ns; `None` is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watchdog(pub Option<u64>);

impl SandboxArgs {
    /// What happens when the policy fails: `--on-fault` (fallback unless given) and
    /// `--watchdog` (`default_watchdog_ns` unless given).
    fn supervision(&self, default_watchdog_ns: Option<u64>) -> Supervision {
        Supervision {
            on_fault: self.on_fault.unwrap_or(Supervision::default().on_fault),
            watchdog_ns: self.watchdog.map_or(default_watchdog_ns, |w| w.0),
        }
    }
}

/// `--watchdog SECONDS`: the limit, off for 0.
pub fn parse_watchdog(text: &str) -> Result<Watchdog, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("{text}: a number of seconds (0: off)"))?;
    if !(0.0..=86_400.0 * 365.0).contains(&secs) {
        return Err(format!("{text}: from 0 (off) to a year of seconds"));
    }
    Ok(Watchdog((secs > 0.0).then_some((secs * 1e9) as u64)))
}

/// `fallback`, `abort`, `restart` or `restart:N`.
fn parse_on_fault(text: &str) -> Result<OnFault, String> {
    match text.split_once(':') {
        None if text == "fallback" => Ok(OnFault::Fallback),
        None if text == "abort" => Ok(OnFault::Abort),
        None if text == "restart" => Ok(OnFault::Restart(3)),
        Some(("restart", n)) => n
            .parse()
            .map(OnFault::Restart)
            .map_err(|_| format!("restart:{n}: N is a number of restarts")),
        _ => Err(format!(
            "{text}: expected fallback, restart, restart:N or abort"
        )),
    }
}

/// The queue's attributes: `--nomerges`, `--nr-requests`, `--queue-depth`, `--plug`,
/// `--rotational`.
#[derive(Debug, Clone, clap::Args)]
pub struct QueueArgs {
    /// Queue attribute nomerges: 0 all merges, 1 one-hit cache only, 2 none [default: 0].
    #[arg(long, value_name = "0|1|2", value_parser = clap::value_parser!(u8).range(0..=2))]
    pub nomerges: Option<u8>,
    /// Queue attribute nr_requests (scheduler tags per hardware queue); default
    /// max(2 × min(depth, 128), 128).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub nr_requests: Option<u32>,
    /// Real devices: requests on the kernel at once per device (driver tags) [default:
    /// 128]; a simulated device has its spec's.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub queue_depth: Option<u32>,
    /// How requests are held back so that later bios can merge: `none` (each submitter's
    /// bios merge until the core's next turn), `legacy` (the pre-2.6.39 queue plug:
    /// `legacy:unplug_thresh=4,unplug_delay_us=3000`) or `submitter` (blk-mq's per-task
    /// plug: `submitter:max_requests=32,max_bytes=131072`) [default: none].
    #[arg(long, value_name = "MODE[:KEY=N,...]", value_parser = parse_plug)]
    pub plug: Option<Plug>,
    /// Queue attribute rotational: 1 the device seeks (a disk), 0 it does not (flash). The
    /// policy is told, and cfq and bfq idle and judge seeks by it. Default: the device's own
    /// (sysfs for a real one; a simulated one's model).
    #[arg(long, value_name = "0|1", value_parser = clap::value_parser!(u8).range(0..=1))]
    pub rotational: Option<u8>,
}

/// `none`, `legacy[:unplug_thresh=N,unplug_delay_us=N]` or
/// `submitter[:max_requests=N,max_bytes=N]`, with the kernel's defaults for keys left out.
///
/// # Errors
/// An unknown mode or key, a key given twice, or a value out of its range, named.
pub fn parse_plug(text: &str) -> Result<Plug, String> {
    let (mode, keys) = text.split_once(':').unwrap_or((text, ""));
    let mut plug = match mode {
        "none" => Plug::None,
        "legacy" => Plug::legacy(),
        "submitter" => Plug::submitter(),
        _ => return Err(format!("{mode:?}: expected none, legacy or submitter")),
    };
    let mut seen = Vec::new();
    for pair in keys.split(',').filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?}: expected KEY=N"))?;
        if seen.contains(&key) {
            return Err(format!("{key} given twice"));
        }
        seen.push(key);
        let number = |max: u64| -> Result<u64, String> {
            value
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| format!("{key}={value}: expected a number from 1 to {max}"))
        };
        let unknown = || format!("{key}: not a key of the {mode} plug");
        match (&mut plug, key) {
            (Plug::Legacy { unplug_thresh, .. }, "unplug_thresh") => {
                *unplug_thresh = u32::try_from(number(65_536)?).map_err(|e| e.to_string())?;
            }
            (
                Plug::Legacy {
                    unplug_delay_ns, ..
                },
                "unplug_delay_us",
            ) => {
                *unplug_delay_ns = number(MAX_UNPLUG_DELAY_NS / 1000)? * 1000;
            }
            (Plug::Submitter { max_requests, .. }, "max_requests") => {
                *max_requests = u32::try_from(number(65_536)?).map_err(|e| e.to_string())?;
            }
            (Plug::Submitter { max_bytes, .. }, "max_bytes") => *max_bytes = number(1 << 30)?,
            _ => return Err(unknown()),
        }
    }
    Ok(plug)
}

impl QueueArgs {
    /// The attributes, the kernel's defaults ([`QueueAttrs::default`]) for those not given.
    fn attrs(&self) -> QueueAttrs {
        let default = QueueAttrs::default();
        QueueAttrs {
            nomerges: self
                .nomerges
                .and_then(Nomerges::from_level)
                .unwrap_or(default.nomerges),
            nr_requests: self.nr_requests.or(default.nr_requests),
            queue_depth: self.queue_depth.unwrap_or(default.queue_depth),
            plug: self.plug.unwrap_or(default.plug),
            rotational: self.rotational.map(|r| r == 1).or(default.rotational),
        }
    }
}

/// How real devices are driven: `--allow-overwrite`, `--sqpoll`, `--no-fixed-buffers`,
/// `--rq-affinity`.
#[derive(Debug, Clone, clap::Args)]
pub struct RingArgs {
    /// Real devices: let jobs that write (or clients) write over an existing file or a
    /// block device.
    #[arg(long)]
    pub allow_overwrite: bool,
    /// Real devices: a kernel thread polls the submission queue (SQPOLL), idling after MS.
    #[arg(long, value_name = "MS")]
    pub sqpoll: Option<u32>,
    /// Real devices: plain reads and writes instead of registered buffers, as fio without
    /// `--fixedbufs` (to compare like with like).
    #[arg(long)]
    pub no_fixed_buffers: bool,
    /// Real devices: run each job clone on its own thread, with completion work where the
    /// kernel's rq_affinity would put it: 0 the ring's thread, 1 a thread of the
    /// submitter's group, 2 the submitting thread. Without it, submitters run on the
    /// ring's thread.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=2))]
    pub rq_affinity: Option<u8>,
}

impl RingArgs {
    /// The options.
    fn options(&self) -> RingOptions {
        RingOptions {
            allow_overwrite: self.allow_overwrite,
            sqpoll_idle_ms: self.sqpoll,
            fixed_buffers: !self.no_fixed_buffers,
            threads: self.rq_affinity.and_then(RqAffinity::from_level),
        }
    }
}

/// `--status-interval`: as given (0 is off; at least 10 ms, so a tiny value cannot turn
/// the status line into a flood), else once a second when stderr is a terminal.
fn status_interval_ns(secs: Option<f64>) -> Option<u64> {
    match secs {
        Some(s) if s > 0.0 && s.is_finite() => Some(((s * 1e9) as u64).max(10_000_000)),
        Some(_) => None,
        None => std::io::stderr().is_terminal().then_some(1_000_000_000),
    }
}

/// What `--device` names, and how it fails: `sim:NAME`, `*.spec` and DiskSim's
/// `*.diskspecs` and `*.parv` are simulated, each with an optional fault plan after `@`;
/// anything else is a colon-separated list of paths, as fio's `filename=a:b`, with an
/// optional plan after the last `@` (told apart from an `@` in a file name by its `=`).
pub fn parse_device(arg: &str) -> Result<(Device, FaultPlan)> {
    let (device, faults) = arg.split_once('@').unwrap_or((arg, ""));
    if device.starts_with("sim:")
        || [".spec", ".diskspecs", ".parv"]
            .iter()
            .any(|e| device.ends_with(e))
    {
        let (spec, in_file) = DeviceSpec::parse_with_faults(device)?;
        // A plan after `@` replaces the one the spec file gives.
        let plan = if faults.is_empty() {
            in_file
        } else {
            FaultPlan::parse(faults).map_err(|e| anyhow!("--device {arg}: {e}"))?
        };
        return Ok((Device::Sim(spec), plan));
    }
    let (paths, plan) = match arg.rsplit_once('@') {
        Some((paths, plan)) if plan.contains('=') => (
            paths,
            FaultPlan::parse(plan).map_err(|e| anyhow!("--device {arg}: {e}"))?,
        ),
        _ => (arg, FaultPlan::default()),
    };
    let paths: Vec<_> = paths
        .split(':')
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .collect();
    if paths.is_empty() {
        bail!(
            "--device {arg:?}: name sim:hdd, sim:ssd, sim:null, a NAME.spec file, or file and block device paths"
        );
    }
    Ok((Device::Real(paths), plan))
}

pub use schedhost::value::parse_group;

/// Gives each `--group`'s limits to the jobs that name it with `cgroup=`.
///
/// # Errors
/// A group named twice, or one no job names (a misspelt name would limit nothing).
pub fn apply_groups(
    jobs: &mut [schedhost::frontend::jobs::JobSpec],
    groups: &[schedhost::core::GroupSpec],
) -> Result<()> {
    for (i, group) in groups.iter().enumerate() {
        if groups[..i].iter().any(|g| g.name == group.name) {
            bail!("--group {}: the group is named twice", group.name);
        }
        let mut used = false;
        for job in jobs
            .iter_mut()
            .filter(|j| j.cgroup.as_deref() == Some(&group.name))
        {
            if let Some(weight) = job
                .cgroup_weight
                .filter(|&w| group.weight != schedhost::core::DEFAULT_WEIGHT && w != group.weight)
            {
                bail!(
                    "--group {}: weight={} but job '{}' says cgroup_weight={weight}; give the weight once",
                    group.name,
                    group.weight,
                    job.name
                );
            }
            job.group_limits = Some(group.clone());
            used = true;
        }
        if !used {
            bail!(
                "--group {}: no job says cgroup={}; give the jobs of the group that option",
                group.name,
                group.name
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
