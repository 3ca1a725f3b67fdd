//! `schedhost run`: parse jobs, load the policy, run them on a simulated or real device,
//! report.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use schedhost::core::DEFAULT_WATCHDOG_NS;
use schedhost::frontend::jobs::{JobSpec, Pacing, jobs_for_trace, parse_cmdline, parse_job_file};
use schedhost::frontend::outcome::Outcome;
use schedhost::frontend::replay::Format;
use schedhost::frontend::run::{Device, Instances, PolicyPlan, run};
use schedhost::observe::events;
use schedhost::policy::load;
use schedhost::report::{RunInfo, Summary, TraceSummary, to_json, to_json_plus, to_text};

use super::OutputFormat;
use super::flags::{Devices, PolicyFlags, RunFlags, Scope, parse_device, swaps};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Policy: a component (PATH.wasm), a bundled name (noop), or native:NAME, with
    /// tunables after a colon as `--set` takes them: cfq:slice_idle=0,quantum=4.
    #[arg(long, short = 'p', default_value = "noop")]
    pub policy: String,
    /// fio job files; fio options such as --rw=randread --bs=4k may be given instead or as well.
    pub jobs: Vec<PathBuf>,
    /// Device: sim:hdd, sim:ssd, sim:null, a device spec file (NAME.spec), or real files and
    /// block devices (PATH[:PATH…]), driven through io_uring [default: sim:hdd].
    #[arg(long)]
    pub device: Option<String>,
    /// A group's parameters, in cgroup v2's words, for the jobs that say `cgroup=NAME`
    /// (repeatable): `--group NAME:weight=300,reserve_iops=2000,riops=1000,wbps=10m`. Keys:
    /// weight (io.weight, 1-10000, default 100; or fio's cgroup_weight=), reserve_iops
    /// (mClock's reservation), riops, wiops, rbps, wbps (io.max; bytes/s with k/m/g) and
    /// their `_burst`s (I/Os or bytes beyond the rate that may go at once), and
    /// latency_target_us (io.latency). The host holds limits and latency targets whatever
    /// the policy; weights and reservations are served by policies that serve groups
    /// (mclock, bfq).
    #[arg(long = "group", value_name = "NAME:KEY=VALUE,...", value_parser = super::flags::parse_group)]
    pub groups: Vec<schedhost::core::GroupSpec>,
    #[command(flatten)]
    pub flags: RunFlags,
    #[command(flatten)]
    pub policy_flags: PolicyFlags,
    /// Trace replay instead of jobs.
    #[command(flatten)]
    pub trace: ReplayArgs,
    /// Report format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Normal)]
    pub output_format: OutputFormat,
    /// Write the report to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Draw SVG plots of this run into DIR: the latency CDF and IOPS over time per ctx.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

/// `run` and `replay` honour every run flag.
const SCOPE: Scope = Scope {
    command: "run",
    devices: Devices::Either,
    own_seed: None,
    own_queue: None,
    own_on_fault: None,
    own_ring: None,
    own_threads: None,
    own_status: None,
    own_events: None,
    default_fuel: None,
    default_watchdog_ns: Some(DEFAULT_WATCHDOG_NS),
};

impl RunArgs {
    pub fn execute(self, fio_options: Vec<String>) -> Result<()> {
        let (jobs, trace) = match &self.trace.replay {
            Some(path) => {
                if !self.jobs.is_empty() || !fio_options.is_empty() {
                    bail!("--replay replays a trace; give no job files or fio options with it");
                }
                let (jobs, trace) = self.trace.read(path)?;
                (jobs, Some(trace))
            }
            None => (read_jobs(&self.jobs, &fio_options)?, None),
        };
        let mut jobs = jobs;
        super::flags::apply_groups(&mut jobs, &self.groups)?;
        if self.device.is_none() {
            refuse_a_real_filename_in_simulation(&jobs)?;
        }
        let (device, faults) = parse_device(self.device())?;
        let plan = self
            .flags
            .plan(&SCOPE, faults, matches!(device, Device::Real(_)))?;
        if let Some(path) = &self.flags.observe.trace_events {
            schedhost::observe::events::file::check_new(path).map_err(anyhow::Error::msg)?;
        }
        let runtime = self.flags.runtime(&SCOPE)?;
        let p = &self.policy_flags;
        let (name, settings) = p.policy_and_settings(&self.policy)?;
        let (source, loaded) = load(&runtime, name)?;
        let policy = PolicyPlan {
            instances: Instances::Loaded(&loaded),
            settings: &settings,
            swaps: swaps(&p.swap_policies(&runtime)?),
            control: p.control.as_deref().map(|path| (path, &runtime)),
        };
        let mut progress = Progress::new();
        let ran = run(&jobs, &device, policy, &plan, &mut |now| {
            progress.update(now)
        });
        progress.finish();
        let ran = ran.with_context(|| {
            format!(
                "running {} with policy {}",
                self.job_label(&fio_options),
                source.label()
            )
        })?;
        let outcome = ran.outcome;
        if let Some(path) = &self.flags.observe.trace_events {
            let header = events::file::Header {
                device: self.device().to_owned(),
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
            device: self.device().to_owned(),
            device_model: ran.device_model,
            seed: plan.seed,
            settings: settings.clone(),
            real: ran.real,
            trace,
        };
        self.report(&info, &jobs, &outcome)
    }

    /// The device asked for, or the simulated disk.
    fn device(&self) -> &str {
        self.device.as_deref().unwrap_or("sim:hdd")
    }

    fn report(&self, info: &RunInfo, jobs: &[JobSpec], outcome: &Outcome) -> Result<()> {
        write_logs(outcome, self.flags.ring.allow_overwrite)?;
        let summary = Summary {
            info,
            jobs,
            outcome,
        };
        if let Some(dir) = &self.plot {
            let svgs = schedhost::observe::plot::runs(&[&to_json(&summary)], &Default::default())
                .map_err(anyhow::Error::msg)?;
            super::plot::write(dir, &svgs, super::plot::DEFAULT_DPI)?;
        }
        let text = match self.output_format {
            OutputFormat::Normal => schedhost::output::printable_lines(&to_text(&summary)),
            OutputFormat::Json => format!("{:#}\n", to_json(&summary)),
            OutputFormat::JsonPlus => format!("{:#}\n", to_json_plus(&summary)),
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

    fn job_label(&self, fio_options: &[String]) -> String {
        if let Some(trace) = &self.trace.replay {
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

/// Jobs from job files, then from fio options given on the command line.
/// Replaying a trace: `--replay` and how its I/Os are paced (`run`, `replay`, `compare`).
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
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
}

impl ReplayArgs {
    /// The trace's jobs, one per stream, and what the report says of it.
    pub fn read(&self, path: &std::path::Path) -> Result<(Vec<JobSpec>, TraceSummary)> {
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
            recorded: trace.recorded,
        };
        Ok((jobs, summary))
    }
}

/// Writes the fio logs the jobs asked for, job n's as fio names them (`PREFIX_lat.N.log`).
/// A log file already there is replaced only with `--allow-overwrite`: the prefix comes
/// from a job file, and a job file must not overwrite what the user did not name.
/// A job file written for fio names its target in `filename`; without `--device` the run is
/// on the simulated disk, which the author of a job naming `/dev/…` or an existing file
/// would not expect, and its figures would be taken for the device's.
pub(super) fn refuse_a_real_filename_in_simulation(jobs: &[JobSpec]) -> Result<()> {
    let real = jobs.iter().find_map(|job| {
        let name = job.filename.as_deref()?;
        (name.starts_with("/dev/") || std::path::Path::new(name).exists()).then_some((job, name))
    });
    if let Some((job, name)) = real {
        bail!(
            "job `{}` names filename={name}, but without --device the run is on the simulated \
             disk (sim:hdd): give --device {name} to run on it, or --device sim:hdd to simulate it",
            job.name
        );
    }
    Ok(())
}

fn write_logs(outcome: &Outcome, allow_overwrite: bool) -> Result<()> {
    for (i, stats) in outcome.stats.iter().enumerate() {
        let Some(logs) = &stats.logs else {
            continue;
        };
        if logs.truncated() {
            eprintln!(
                "schedhost: job {}'s logs stopped at {} entries; set log_avg_msec to average them",
                i + 1,
                schedhost::observe::stats::logs::MAX_LOG_ENTRIES
            );
        }
        for (path, text) in logs.files(i + 1) {
            let mut options = std::fs::OpenOptions::new();
            options.write(true);
            if allow_overwrite {
                options.create(true).truncate(true);
            } else {
                options.create_new(true);
            }
            let mut file = options.open(&path).with_context(|| {
                if std::path::Path::new(&path).exists() && !allow_overwrite {
                    format!("log {path} exists; remove it or pass --allow-overwrite")
                } else {
                    format!("creating log {path}")
                }
            })?;
            file.write_all(text.as_bytes())
                .with_context(|| format!("writing log {path}"))?;
        }
    }
    Ok(())
}

pub fn read_jobs(paths: &[PathBuf], fio_options: &[String]) -> Result<Vec<JobSpec>> {
    let mut jobs = Vec::new();
    for path in paths {
        let text = schedhost::input::read_text(path, schedhost::input::MAX_CONFIG_BYTES)
            .with_context(|| format!("reading job file {}", path.display()))?;
        jobs.extend(parse_job_file(&path.display().to_string(), &text)?);
    }
    // With job files, fio options before any --name change every job of the files (as
    // `fio --runtime=10 job.fio` does); options from a --name on are jobs of their own.
    let own_jobs = if paths.is_empty() {
        0
    } else {
        fio_options
            .iter()
            .position(|o| o == "--name" || o.starts_with("--name="))
            .unwrap_or(fio_options.len())
    };
    let (overrides, command_line_jobs) = fio_options.split_at(own_jobs);
    for option in overrides {
        let text = option.trim_start_matches('-');
        let (key, value) = text.split_once('=').unwrap_or((text, ""));
        for job in &mut jobs {
            job.set_option(key, value).map_err(|e| {
                anyhow::anyhow!("{option} on the command line, for job '{}': {e}", job.name)
            })?;
        }
    }
    if !command_line_jobs.is_empty() {
        jobs.extend(parse_cmdline(command_line_jobs)?);
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
