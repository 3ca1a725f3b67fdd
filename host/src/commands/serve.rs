//! `schedhost serve --nbd ADDR --device PATH`: export a file or block device over NBD, every
//! client's I/O going through the policy, until SIGINT or SIGTERM.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use schedhost::frontend::jobs::value::size as size_bytes;
use schedhost::frontend::nbd::{self, Address, ServeOptions, Served};
use schedhost::frontend::plan::{Observe, RingOptions, RunPlan};
use schedhost::policy::load;

use super::plan::{QueueArgs, SandboxArgs, status_interval_ns};
use super::{OutputFormat, parse_setting};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Listen for NBD clients on HOST:PORT, PORT (on 127.0.0.1) or unix:PATH.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:10809")]
    pub nbd: String,
    /// The file or block device to export.
    #[arg(long)]
    pub device: PathBuf,
    /// Faults to inject between the host and the kernel, as a fault plan
    /// (`read_errors=0.01,busy=0.01,spikes=0.001:20ms,…`; see the README): clients get the
    /// errors as NBD errors.
    #[arg(long, value_name = "PLAN", value_parser = parse_faults)]
    pub faults: Option<schedhost::backend::sim::FaultPlan>,
    /// Policy: a component (PATH.wasm), a bundled name (noop), or native:NAME.
    #[arg(long, short = 'p', default_value = "noop")]
    pub policy: String,
    /// The export's name (clients asking for the default export get it too).
    #[arg(long, default_value = "schedhost")]
    pub export_name: String,
    /// Export read-only: writes, trims and zeroing are refused with EPERM.
    #[arg(long)]
    pub read_only: bool,
    /// Export an existing file or a block device writable (clients may overwrite it).
    #[arg(long)]
    pub allow_overwrite: bool,
    /// Create the file with this size if it does not exist (fio sizes: 64m, 1g).
    #[arg(long, value_name = "BYTES")]
    pub size: Option<String>,
    /// The queue's attributes, as `run`'s.
    #[command(flatten)]
    pub queue: QueueArgs,
    /// Seed for the fault plan's choices; the same seed fails the same requests.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Listen on this unix socket (mode 0600) for `schedhost ctl`: swap the policy, set
    /// tunables, status and stats, while clients are connected.
    #[arg(long, value_name = "SOCKET")]
    pub control: Option<PathBuf>,
    /// Set a policy tunable (repeatable): --set slice_idle=0.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_setting)]
    pub settings: Vec<(String, i64)>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Print a live line (IOPS, MiB/s, p99 per client ctx, queue depths, policy, ejections)
    /// to stderr every SECS; the default is 1 on a terminal and off otherwise; 0 is off.
    #[arg(long, value_name = "SECS")]
    pub status_interval: Option<f64>,
    /// Record every request's events to FILE, a new file (`schedhost events FILE` prints
    /// them; `schedhost replay` replays them under another policy).
    #[arg(long, value_name = "FILE")]
    pub trace_events: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (HOST:PORT, or PORT on 127.0.0.1):
    /// IOPS and bytes per client ctx, latency histograms, queue depths, merges, policy
    /// calls, swaps, ejections.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Clients served at once; more are closed as they connect.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_clients: u32,
    /// Seconds a client may take over its whole handshake before it is closed (fio's time
    /// notation also works: 500ms).
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = parse_timeout)]
    pub handshake_timeout: Duration,
    /// Seconds one whole reply may take to reach its client before the connection is
    /// closed (a client that stops reading holds nothing past it).
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = parse_timeout)]
    pub reply_timeout: Duration,
    /// Text clients see as the export's description (NBD_INFO_DESCRIPTION), as qemu-nbd's
    /// --description; none by default, so nothing about the host is revealed.
    #[arg(long, value_name = "TEXT", value_parser = parse_description)]
    pub description: Option<String>,
    /// One group for every client of the export together, in `run`'s words:
    /// `--group tenant:riops=1000,wbps=10m` (`ctl group` changes it).
    #[arg(long, value_name = "NAME:KEY=VALUE,...", value_parser = super::plan::parse_group)]
    pub group: Option<schedhost::core::GroupSpec>,
    /// Summary format when the server stops.
    #[arg(long, value_enum, default_value_t = OutputFormat::Normal)]
    pub output_format: OutputFormat,
}

/// `--size`: a whole number of 512-byte blocks, at least one, that a file can have
/// (`set_len` takes an i64).
fn parse_size(text: &str) -> Result<u64> {
    let bytes = size_bytes(text).map_err(|e| anyhow::anyhow!("--size {text}: {e}"))?;
    if bytes < 512 || bytes % 512 != 0 || i64::try_from(bytes).is_err() {
        bail!(
            "--size {text}: an export is a whole number of 512-byte blocks, at least one and below 8 EiB"
        );
    }
    Ok(bytes)
}

/// A timeout: fio's time notation, seconds by default; above 0 and at most a day.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    let ns = schedhost::frontend::jobs::value::duration_ns(text, "s")?;
    if ns == 0 || ns > 86_400_000_000_000 {
        return Err(format!("{text}: a timeout is above 0 and at most a day"));
    }
    Ok(Duration::from_nanos(ns))
}

/// The export's description: printable text of at most 4096 bytes (the protocol's limit
/// for a string this server sends).
fn parse_faults(text: &str) -> Result<schedhost::backend::sim::FaultPlan, String> {
    schedhost::backend::sim::FaultPlan::parse(text)
}

fn parse_description(text: &str) -> Result<String, String> {
    if text.len() > 4096 || text.chars().any(char::is_control) {
        return Err("a description is printable text of at most 4096 bytes".into());
    }
    Ok(text.to_owned())
}

/// Set by SIGINT and SIGTERM; the acceptor polls it.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_: libc::c_int) {
    STOP.store(true, Ordering::Release);
}

/// Routes SIGINT and SIGTERM to [`STOP`].
fn install_stop_handlers() -> Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the
        // sigaction struct is zeroed and filled before the call, which copies it.
        let failed = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = request_stop as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut()) != 0
        };
        if failed {
            bail!(
                "installing the signal handler: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

impl ServeArgs {
    pub fn execute(self) -> Result<()> {
        let address = Address::parse(&self.nbd).map_err(anyhow::Error::msg)?;
        let size = self.size.as_deref().map(parse_size).transpose()?;
        let runtime = self.sandbox.runtime()?;
        let (source, loaded) = load(&runtime, &self.policy)?;
        let options = ServeOptions {
            address,
            device: self.device.clone(),
            export_name: self.export_name.clone(),
            read_only: self.read_only,
            allow_overwrite: self.allow_overwrite,
            size,
            trace_events: self.trace_events.clone(),
            metrics: self.metrics.clone(),
            max_clients: self.max_clients as usize,
            handshake_timeout: self.handshake_timeout,
            reply_timeout: self.reply_timeout,
            description: self.description.clone(),
            group: self.group.clone(),
        };
        let plan = RunPlan {
            seed: self.seed,
            queue: self.queue.attrs(),
            supervision: self.sandbox.supervision(),
            // The event file and the metrics endpoint are the server's options; it records and
            // meters for them itself.
            observe: Observe {
                status_interval_ns: status_interval_ns(self.status_interval),
                ..Observe::default()
            },
            faults: self.faults.unwrap_or_default(),
            ring: RingOptions {
                allow_overwrite: self.allow_overwrite,
                ..RingOptions::default()
            },
        };
        install_stop_handlers()?;
        let control = self.control.as_deref().map(|path| (path, &runtime));
        let label = source.label();
        let served = nbd::serve(
            &options,
            &plan,
            loaded.instantiate()?,
            &self.settings,
            control,
            &STOP,
            |at| {
                let metrics = at
                    .metrics
                    .map(|m| format!("; metrics at http://{m}/metrics"))
                    .unwrap_or_default();
                eprintln!(
                    "schedhost: serving {} ({} bytes{}) as export '{}' on {} with policy {label}{metrics}; stop with Ctrl-C or SIGTERM",
                    self.device.display(),
                    at.export.size,
                    if self.read_only { ", read-only" } else { "" },
                    at.export.name,
                    at.address,
                );
            },
        )
        .with_context(|| format!("serving {} over NBD", self.device.display()))?;
        self.report(&served, &label)
    }

    fn report(&self, served: &Served, policy: &str) -> Result<()> {
        match self.output_format {
            OutputFormat::Json | OutputFormat::JsonPlus => {
                let value = serde_json::json!({
                    "device": self.device.display().to_string(),
                    "policy": policy,
                    "size": served.size,
                    "clients": served.clients.latest,
                    "clients_total": served.clients.total(),
                    "earlier_clients": { "clients": served.clients.earlier_clients, "tally": served.clients.earlier },
                    "core": served.core,
                    "swaps": served.swaps,
                    "sets": served.sets,
                    "ejections": served.ejections.len(),
                });
                println!("{}", serde_json::to_string_pretty(&value)?);
            }
            OutputFormat::Normal => print!(
                "{}",
                schedhost::output::printable_lines(&summary(served, policy))
            ),
        }
        Ok(())
    }
}

/// The text summary printed when the server stops.
fn summary(served: &Served, policy: &str) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "schedhost serve: policy {policy}, {} client(s) served",
        served.clients.total()
    );
    let earlier = &served.clients;
    if earlier.earlier_clients > 0 {
        let t = &earlier.earlier;
        let _ = writeln!(
            out,
            "  {} earlier clients together: {} reads, {} writes, {} errors",
            earlier.earlier_clients, t.reads, t.writes, t.errors
        );
    }
    for c in &served.clients.latest {
        let t = &c.tally;
        let _ = writeln!(
            out,
            "  {} (ctx {}): {:.2} s, {} reads ({:.1} MiB), {} writes ({:.1} MiB), {} flushes, {} trims, {} zeroes, {} errors{}",
            c.peer,
            c.ctx,
            c.seconds,
            t.reads,
            t.bytes_read as f64 / 1048576.0,
            t.writes,
            t.bytes_written as f64 / 1048576.0,
            t.flushes,
            t.trims,
            t.zeroes,
            t.errors,
            c.closed_because
                .as_ref()
                .map(|w| format!("; closed: {w}"))
                .unwrap_or_default(),
        );
    }
    let core = &served.core;
    let _ = writeln!(
        out,
        "  scheduler: {} bios in, {} requests dispatched, merges back={} front={}",
        core.bios, core.dispatched, core.back_merges, core.front_merges
    );
    for s in &served.swaps {
        let _ = writeln!(out, "  {}", s.line());
    }
    for s in &served.sets {
        let _ = writeln!(out, "  {}", s.line());
    }
    for e in &served.ejections {
        let _ = writeln!(
            out,
            "  ejection at {:.3} s ({}): {}",
            e.at_ns as f64 / 1e9,
            e.kind,
            e.message
        );
    }
    out
}
