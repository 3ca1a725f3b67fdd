//! `schedhost run`: parse jobs, load the policy, run them on a simulated or real device,
//! report.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use schedhost::backend::sim::{DeviceSpec, FaultPlan};
use schedhost::core::{Nomerges, OnFault, RqAffinity, Supervision};
use schedhost::frontend::jobs::real::{self, DEFAULT_QUEUE_DEPTH, RealOptions};
use schedhost::frontend::jobs::sim::{self, SimOptions};
use schedhost::frontend::jobs::{JobSpec, Pacing, jobs_for_trace, parse_cmdline, parse_job_file};
use schedhost::frontend::outcome::Outcome;
use schedhost::frontend::replay::Format;
use schedhost::observe::events;
use schedhost::policy::{DEFAULT_CALL_DEADLINE_MS, DEFAULT_MEMORY_MIB, Limits, WasmRuntime, load};
use schedhost::report::{RealDetails, RunInfo, Summary, TraceSummary, to_json, to_text};

use super::{OutputFormat, parse_setting};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Policy: a component (PATH.wasm), a bundled name (noop), or native:NAME.
    #[arg(long, short = 'p', default_value = "noop")]
    pub policy: String,
    /// fio job files; fio options such as --rw=randread --bs=4k may be given instead or as well.
    pub jobs: Vec<PathBuf>,
    /// Device: sim:hdd, sim:ssd, sim:null, a device spec file (NAME.spec), or real files and
    /// block devices (PATH[:PATH…]), driven through io_uring.
    #[arg(long, default_value = "sim:hdd")]
    pub device: String,
    /// Allow jobs that write to write over an existing file or a block device.
    #[arg(long)]
    pub allow_overwrite: bool,
    /// Real devices: requests on the kernel at once per device (driver tags).
    #[arg(long, default_value_t = DEFAULT_QUEUE_DEPTH, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub queue_depth: u32,
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
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Simulated devices: swap to POLICY at TIME of virtual time (repeatable), e.g.
    /// `--swap-at 2s:cfq`. The new policy starts with its defaults.
    #[arg(long, value_name = "TIME:POLICY", value_parser = parse_swap_at)]
    pub swap_at: Vec<(u64, String)>,
    /// Replay this trace instead of running jobs: blkparse text output or a fio iolog
    /// (version 2 or 3); `schedhost replay TRACE` says the same.
    #[arg(long, value_name = "TRACE")]
    pub replay: Option<PathBuf>,
    /// The trace's format, when detection (an iolog's header line) is not wanted.
    #[arg(long, value_enum)]
    pub trace_format: Option<TraceFormat>,
    /// Replay with recorded gaps multiplied by this (0.5: twice as fast).
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Replay as fast as each stream's depth allows, ignoring recorded times.
    #[arg(long)]
    pub no_stall: bool,
    /// I/Os a replayed stream may have in flight.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub replay_depth: u32,
    /// Real devices: listen on this unix socket (mode 0600) for `schedhost ctl` requests:
    /// swap a policy, set or get tunables, status and stats, while the I/O runs.
    #[arg(long, value_name = "SOCKET")]
    pub control: Option<PathBuf>,
    /// Set a policy tunable (repeatable): --set fifo_batch=8.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_setting)]
    pub settings: Vec<(String, i64)>,
    /// Seed for every random choice; the same seed gives the same report.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Queue attribute nomerges: 0 all merges, 1 one-hit cache only, 2 none.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=2))]
    pub nomerges: u8,
    /// Queue attribute nr_requests (scheduler tags per hardware queue); default max(2 × min(depth, 128), 128).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub nr_requests: Option<u32>,
    /// Report format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Normal)]
    pub output_format: OutputFormat,
    /// Write the report to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Real devices: print a live line (IOPS, MiB/s, p99 per ctx, queue depths, policy,
    /// ejections) to stderr every SECS; the default is 1 on a terminal and off otherwise;
    /// 0 turns it off.
    #[arg(long, value_name = "SECS")]
    pub status_interval: Option<f64>,
    /// Draw SVG plots of this run into DIR: the latency CDF and IOPS over time per ctx.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Record every request's events (queue, merge, insert, dispatch, complete) to FILE, a
    /// new file; `schedhost events FILE` prints them as blkparse does.
    #[arg(long, value_name = "FILE")]
    pub trace_events: Option<PathBuf>,
}

/// The sandbox's flags, shared by `run` and `serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxArgs {
    /// After a policy fault: `fallback` to the built-in FIFO, `restart[:N]` a new instance
    /// (at most N times, default 3, then fall back), or `abort` the run.
    #[arg(long, value_name = "ACTION", default_value = "fallback", value_parser = parse_on_fault)]
    pub on_fault: OnFault,
    /// Eject a policy that holds requests and dispatches nothing for this long while the
    /// device has nothing in flight (0: never).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub watchdog: f64,
    /// Wall-clock time a policy call may take before the policy is ejected.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_CALL_DEADLINE_MS, value_parser = clap::value_parser!(u64).range(1..))]
    pub call_deadline: u64,
    /// Linear memory a policy instance may use.
    #[arg(long, value_name = "MIB", default_value_t = DEFAULT_MEMORY_MIB as u64, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub policy_memory: u64,
    /// Fuel per policy call (about one unit per wasm instruction): a deadline that does not
    /// depend on the machine, so a simulated run ejects at the same point every time.
    #[arg(long, value_name = "UNITS")]
    pub fuel: Option<u64>,
}

impl SandboxArgs {
    /// What happens when the policy fails.
    pub fn supervision(&self) -> Supervision {
        Supervision {
            on_fault: self.on_fault,
            watchdog_ns: (self.watchdog > 0.0).then_some((self.watchdog * 1e9) as u64),
        }
    }

    /// A WebAssembly engine with these limits.
    pub fn runtime(&self) -> Result<WasmRuntime> {
        let limits = Limits {
            call_deadline: Duration::from_millis(self.call_deadline),
            memory_bytes: (self.policy_memory as usize) << 20,
            fuel: self.fuel,
        };
        WasmRuntime::with_limits(limits).context("setting up the WebAssembly engine")
    }
}

impl RunArgs {
    pub fn execute(self, fio_options: Vec<String>) -> Result<()> {
        let (jobs, trace) = match &self.replay {
            Some(path) => {
                if !self.jobs.is_empty() || !fio_options.is_empty() {
                    bail!("--replay replays a trace; give no job files or fio options with it");
                }
                let (jobs, trace) = self.read_trace(path)?;
                (jobs, Some(trace))
            }
            None => (read_jobs(&self.jobs, &fio_options)?, None),
        };
        let device = DeviceArg::parse(&self.device)?;
        if let Some(path) = &self.trace_events {
            schedhost::observe::events::file::check_new(path).map_err(anyhow::Error::msg)?;
        }
        let runtime = self.sandbox.runtime()?;
        let (source, loaded) = load(&runtime, &self.policy)?;
        let context = || {
            format!(
                "running {} with policy {}",
                self.job_label(&fio_options),
                source.label()
            )
        };
        let (outcome, device_model, real) = match &device {
            DeviceArg::Sim(spec, faults) => {
                if self.control.is_some() {
                    bail!(
                        "--control serves runs on real devices; a simulated run takes its swaps from --swap-at TIME:POLICY"
                    );
                }
                let swaps = self.swaps(&runtime)?;
                let outcome = self
                    .simulate(&jobs, spec, loaded.instantiate()?, swaps, **faults)
                    .with_context(context)?;
                (outcome, spec.name().to_owned(), None)
            }
            DeviceArg::Real(paths, faults) => {
                if !self.swap_at.is_empty() {
                    bail!(
                        "--swap-at schedules swaps in virtual time, for simulated devices; on a real device swap with --control SOCKET and `schedhost ctl`"
                    );
                }
                let policies = paths
                    .iter()
                    .map(|_| loaded.instantiate())
                    .collect::<Result<Vec<_>>>()?;
                let options = RealOptions {
                    seed: self.seed,
                    nomerges: Nomerges::from_level(self.nomerges).unwrap_or_default(),
                    nr_requests: self.nr_requests,
                    queue_depth: self.queue_depth,
                    allow_overwrite: self.allow_overwrite,
                    sqpoll_idle_ms: self.sqpoll,
                    fixed_buffers: !self.no_fixed_buffers,
                    threads: self.rq_affinity.and_then(RqAffinity::from_level),
                    supervision: self.sandbox.supervision(),
                    record_events: self.trace_events.is_some(),
                    status_interval_ns: status_interval_ns(self.status_interval),
                    faults: **faults,
                };
                let control = self.control.as_deref().map(|path| (path, &runtime));
                let done =
                    real::run_controlled(&jobs, paths, policies, &self.settings, options, control)
                        .with_context(context)?;
                let details = RealDetails {
                    targets: done.targets,
                    fixed_buffers: done.fixed_buffers,
                };
                (done.outcome, "io_uring".to_owned(), Some(details))
            }
        };
        if let Some(path) = &self.trace_events {
            let header = events::file::Header {
                device: self.device.clone(),
                policy: source.label(),
            };
            let write = || -> std::io::Result<()> {
                let mut writer = events::file::Writer::create(path, &header)?;
                writer.write(&outcome.events)?;
                writer.finish()
            };
            write().with_context(|| format!("--trace-events {}", path.display()))?;
        }
        let info = RunInfo {
            policy_source: source.label(),
            device: self.device.clone(),
            device_model,
            seed: self.seed,
            settings: self.settings.clone(),
            real,
            trace,
        };
        self.report(&info, &jobs, &outcome)
    }

    fn simulate(
        &self,
        jobs: &[JobSpec],
        device: &DeviceSpec,
        policy: Box<dyn schedhost::policy::PolicyBackend>,
        swaps: Vec<schedhost::engine::ScheduledSwap>,
        faults: FaultPlan,
    ) -> Result<Outcome, sim::SimError> {
        let options = SimOptions {
            seed: self.seed,
            nomerges: Nomerges::from_level(self.nomerges).unwrap_or_default(),
            nr_requests: self.nr_requests,
            supervision: self.sandbox.supervision(),
            record_events: self.trace_events.is_some(),
            metering: false,
            faults,
        };
        let mut progress = Progress::new();
        let outcome = sim::run_swapping(
            jobs,
            device,
            policy,
            &self.settings,
            options,
            swaps,
            &mut |now| progress.update(now),
        );
        progress.finish();
        outcome
    }

    fn report(&self, info: &RunInfo, jobs: &[JobSpec], outcome: &Outcome) -> Result<()> {
        let summary = Summary {
            info,
            jobs,
            outcome,
        };
        if let Some(dir) = &self.plot {
            let svgs = schedhost::observe::plot::runs(&[&to_json(&summary)])
                .map_err(anyhow::Error::msg)?;
            super::plot::write(dir, &svgs)?;
        }
        let text = match self.output_format {
            OutputFormat::Normal => schedhost::output::printable_lines(&to_text(&summary)),
            OutputFormat::Json => format!("{:#}\n", to_json(&summary)),
        };
        match &self.output {
            Some(path) => std::fs::write(path, text)
                .with_context(|| format!("writing the report to {}", path.display()))?,
            None => std::io::stdout()
                .write_all(text.as_bytes())
                .context("writing the report")?,
        }
        failed_ios(outcome)
    }

    /// The `--swap-at` policies, compiled before the run starts and instantiated at the swap.
    fn swaps(&self, runtime: &WasmRuntime) -> Result<Vec<schedhost::engine::ScheduledSwap>> {
        self.swap_at
            .iter()
            .map(|(at_ns, name)| {
                let (_, loaded) = load(runtime, name)?;
                Ok(schedhost::engine::ScheduledSwap {
                    at_ns: *at_ns,
                    label: name.clone(),
                    policy: Box::new(move || loaded.instantiate().map_err(|e| format!("{e:#}"))),
                    settings: Vec::new(),
                })
            })
            .collect()
    }

    /// The trace's jobs, one per stream, and what the report says of it.
    fn read_trace(&self, path: &std::path::Path) -> Result<(Vec<JobSpec>, TraceSummary)> {
        if !(self.time_scale > 0.0 && self.time_scale.is_finite()) {
            bail!("--time-scale {}: a factor above 0", self.time_scale);
        }
        let text = schedhost::input::read_text(path, schedhost::input::MAX_TRACE_BYTES)
            .with_context(|| format!("reading trace {}", path.display()))?;
        let source = path.display().to_string();
        let trace =
            schedhost::frontend::replay::parse(&source, &text, self.trace_format.map(Into::into))?;
        let pacing = Pacing {
            time_scale: self.time_scale,
            no_stall: self.no_stall,
            depth: self.replay_depth,
        };
        let jobs = jobs_for_trace(&trace, pacing, &source);
        let summary = TraceSummary {
            path: source,
            format: trace.format,
            ios: trace.ios.len(),
            streams: trace.streams.len(),
            recorded_merges: trace.recorded_merges,
        };
        Ok((jobs, summary))
    }

    fn job_label(&self, fio_options: &[String]) -> String {
        if let Some(trace) = &self.replay {
            return format!("trace {}", trace.display());
        }
        let mut parts: Vec<String> = self.jobs.iter().map(|p| p.display().to_string()).collect();
        if !fio_options.is_empty() {
            parts.push("command-line jobs".into());
        }
        parts.join(" + ")
    }
}

/// `--trace-format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormat {
    /// blkparse text output.
    Blkparse,
    /// fio iolog, version 2.
    IologV2,
    /// fio iolog, version 3.
    IologV3,
}

impl From<TraceFormat> for Format {
    fn from(f: TraceFormat) -> Self {
        match f {
            TraceFormat::Blkparse => Format::Blkparse,
            TraceFormat::IologV2 => Format::IologV2,
            TraceFormat::IologV3 => Format::IologV3,
        }
    }
}

/// `--status-interval`: as given (0 is off; at least 10 ms, so a tiny value cannot turn
/// the status line into a flood), else once a second when stderr is a terminal.
pub(crate) fn status_interval_ns(secs: Option<f64>) -> Option<u64> {
    match secs {
        Some(s) if s > 0.0 && s.is_finite() => Some(((s * 1e9) as u64).max(10_000_000)),
        Some(_) => None,
        None => std::io::stderr().is_terminal().then_some(1_000_000_000),
    }
}

/// `TIME:POLICY`, the time in fio's notation (`2s`, `500ms`; seconds by default).
fn parse_swap_at(text: &str) -> Result<(u64, String), String> {
    let (time, policy) = text
        .split_once(':')
        .filter(|(_, p)| !p.is_empty())
        .ok_or_else(|| format!("{text}: expected TIME:POLICY, e.g. 2s:cfq"))?;
    let at = schedhost::frontend::jobs::value::duration_ns(time, "s")?;
    Ok((at, policy.to_owned()))
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

/// What `--device` names: a simulated device, or real files and block devices.
pub(crate) enum DeviceArg {
    /// A simulated device, and how it fails (`sim:ssd@read_errors=0.01,…`).
    Sim(DeviceSpec, Box<FaultPlan>),
    /// Files and block devices, and the faults to inject between the host and the kernel
    /// (`a.img:b.img@read_errors=0.01,…`).
    Real(Vec<PathBuf>, Box<FaultPlan>),
}

impl DeviceArg {
    /// `sim:NAME`, `*.spec` and DiskSim's `*.diskspecs` and `*.parv` are simulated, each
    /// with an optional fault plan after `@`; anything else is a colon-separated list of
    /// paths, as fio's `filename=a:b`.
    pub(crate) fn parse(arg: &str) -> Result<Self> {
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
                FaultPlan::parse(faults).map_err(|e| anyhow::anyhow!("--device {arg}: {e}"))?
            };
            return Ok(Self::Sim(spec, Box::new(plan)));
        }
        // On real paths a plan is told apart from an `@` in a file name by its `=`.
        let (arg, plan) = match arg.rsplit_once('@') {
            Some((paths, plan)) if plan.contains('=') => (
                paths,
                FaultPlan::parse(plan).map_err(|e| anyhow::anyhow!("--device {arg}: {e}"))?,
            ),
            _ => (arg, FaultPlan::default()),
        };
        let paths: Vec<PathBuf> = arg
            .split(':')
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .collect();
        if paths.is_empty() {
            bail!(
                "--device {arg:?}: name sim:hdd, sim:ssd, sim:null, a NAME.spec file, or file and block device paths"
            );
        }
        Ok(Self::Real(paths, Box::new(plan)))
    }
}

/// Jobs from job files, then from fio options given on the command line.
pub fn read_jobs(paths: &[PathBuf], fio_options: &[String]) -> Result<Vec<JobSpec>> {
    let mut jobs = Vec::new();
    for path in paths {
        let text = schedhost::input::read_text(path, schedhost::input::MAX_CONFIG_BYTES)
            .with_context(|| format!("reading job file {}", path.display()))?;
        jobs.extend(parse_job_file(&path.display().to_string(), &text)?);
    }
    if !fio_options.is_empty() {
        jobs.extend(parse_cmdline(fio_options)?);
    }
    if jobs.is_empty() {
        bail!(
            "no job given: pass a job file (schedhost --policy noop examples/jobs/demo.fio) or fio options (--name=r --rw=randread --bs=4k --size=1g)"
        );
    }
    Ok(jobs)
}

/// A one-line progress display on a terminal, for runs longer than two seconds.
struct Progress {
    started: Instant,
    last: Instant,
    shown: bool,
    enabled: bool,
}

impl Progress {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            started: now,
            last: now,
            shown: false,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    fn update(&mut self, virtual_ns: u64) {
        if !self.enabled
            || self.started.elapsed() < Duration::from_secs(2)
            || self.last.elapsed() < Duration::from_millis(250)
        {
            return;
        }
        self.last = Instant::now();
        self.shown = true;
        eprint!(
            "\rschedhost: simulated {:.1} s in {:.0} s of wall time ",
            virtual_ns as f64 / 1e9,
            self.started.elapsed().as_secs_f64()
        );
    }

    fn finish(&self) {
        if self.shown {
            eprintln!();
        }
    }
}

/// A run whose I/O failed exits non-zero, as fio does, after its report is written: the
/// report says which jobs and directions failed.
fn failed_ios(outcome: &Outcome) -> Result<()> {
    let failed: u64 = outcome
        .stats
        .iter()
        .flat_map(|s| s.dirs.iter())
        .map(|d| d.errors)
        .sum();
    if failed > 0 {
        bail!("{failed} I/Os failed (the report counts them per job and direction)");
    }
    Ok(())
}
