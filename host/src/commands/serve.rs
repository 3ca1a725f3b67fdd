//! `schedhost serve --nbd ADDR --device PATH`: export a file or block device over NBD, every
//! client's I/O going through the policy, until SIGINT or SIGTERM. `--export` offers several
//! exports on one server, each on its own device or sharing one, each in a group.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use schedhost::backend::sim::FaultPlan;
use schedhost::core::DEFAULT_WATCHDOG_NS;
use schedhost::frontend::jobs::value::size as size_bytes;
use schedhost::frontend::nbd::{self, Address, ExportSpec, ServeOptions, Served};
use schedhost::frontend::run::Device;
use schedhost::policy::load;

use super::OutputFormat;
use super::flags::{Devices, PolicyFlags, RunFlags, Scope, parse_device};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Listen for NBD clients on HOST:PORT, PORT (on 127.0.0.1) or unix:PATH.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:10809")]
    pub nbd: String,
    /// The file or block device to export, as the export `--export-name`: `PATH`, or
    /// `PATH@PLAN` with a fault plan, as `run --device` takes it.
    #[arg(long, value_name = "PATH[@PLAN]", required_unless_present = "exports")]
    pub device: Option<String>,
    /// Another export (repeatable), in qemu-storage-daemon's key=value words:
    /// `name=vm1,device=PATH[,group=GROUP][,read-only=on]` (a comma in a value is
    /// written twice). Exports naming one device share its scheduler; each export's
    /// clients are in its group.
    #[arg(long = "export", value_name = "name=NAME,device=PATH,...", value_parser = parse_export)]
    pub exports: Vec<ExportSpec>,
    /// Faults to inject between the host and the kernel on every export, as a fault plan
    /// (`read_errors=0.01,busy=0.01,spikes=0.001:20ms,…`; see docs/devices.md): clients get
    /// the errors as NBD errors. `--device PATH@PLAN` says the same for a lone device.
    #[arg(long, value_name = "PLAN", value_parser = parse_faults)]
    pub faults: Option<schedhost::backend::sim::FaultPlan>,
    /// Policy: a component (PATH.wasm), a bundled name (noop), or native:NAME, with
    /// tunables after a colon as `--set` takes them: bfq:slice_idle=0.
    #[arg(long, short = 'p', default_value = "noop")]
    pub policy: String,
    /// The name of `--device`'s export (clients asking for the default export get the
    /// first export).
    #[arg(long, default_value = "schedhost")]
    pub export_name: String,
    /// Every export read-only: writes, trims and zeroing are refused with EPERM.
    #[arg(long)]
    pub read_only: bool,
    /// Create the file with this size if it does not exist (fio sizes: 64m, 1g).
    #[arg(long, value_name = "BYTES")]
    pub size: Option<String>,
    /// The run flags, as `run`'s: `--seed` seeds the fault plan's choices (the same seed
    /// fails the same requests); `--allow-overwrite` exports an existing file or a block
    /// device writable (clients may overwrite it); `--trace-events FILE` records every
    /// request's events (`schedhost replay` replays them under another policy).
    #[command(flatten)]
    pub flags: RunFlags,
    /// The policy's flags, as `run`'s: `--set`, and `--control SOCKET` for `schedhost ctl`
    /// (swap the policy, set tunables, status and stats while clients are connected).
    #[command(flatten)]
    pub policy_flags: PolicyFlags,
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
    /// A group's parameters, in `run`'s words (repeatable):
    /// `--group tenant:weight=300,riops=1000,wbps=10m`; exports name their group
    /// (`--export …,group=tenant`), and a lone `--device` export is in the lone group.
    /// `ctl group` changes them while clients run.
    #[arg(long = "group", value_name = "NAME:KEY=VALUE,...", value_parser = super::flags::parse_group)]
    pub groups: Vec<schedhost::core::GroupSpec>,
    /// Summary format when the server stops.
    #[arg(long, value_enum, default_value_t = OutputFormat::Normal)]
    pub output_format: OutputFormat,
}

/// What `serve` does with the run flags: every connection runs on the engine's thread.
const SCOPE: Scope = Scope {
    command: "serve",
    devices: Devices::Real,
    own_seed: None,
    own_queue: None,
    own_on_fault: None,
    own_ring: None,
    own_threads: Some("every connection's completion work runs on the engine's thread"),
    own_status: None,
    own_events: None,
    default_fuel: None,
    default_watchdog_ns: Some(DEFAULT_WATCHDOG_NS),
};

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

/// `--export name=NAME,device=PATH[,group=GROUP][,read-only=on|off]`: qemu's key=value
/// list, where `,,` is a comma inside a value.
fn parse_export(text: &str) -> Result<ExportSpec, String> {
    let mut name = None;
    let mut device = None;
    let mut group = None;
    let mut read_only = None;
    for pair in split_qemu_list(text) {
        let (key, value) = pair.split_once('=').ok_or_else(|| {
            format!("{pair:?}: expected KEY=VALUE (name=, device=, group=, read-only=)")
        })?;
        let repeated = |set: bool| {
            if set {
                Err(format!("{key} is given twice"))
            } else {
                Ok(())
            }
        };
        match key {
            "name" => {
                repeated(name.is_some())?;
                name = Some(value.to_owned());
            }
            "device" => {
                repeated(device.is_some())?;
                if value.is_empty() {
                    return Err("device=: expected a path".into());
                }
                device = Some(PathBuf::from(value));
            }
            "group" => {
                repeated(group.is_some())?;
                group = Some(schedhost::value::group_name(value)?);
            }
            "read-only" => {
                repeated(read_only.is_some())?;
                read_only = Some(
                    schedhost::value::boolean(value)
                        .map_err(|e| format!("read-only={value}: {e}"))?,
                );
            }
            _ => {
                return Err(format!(
                    "unknown key {key:?} (name, device, group, read-only)"
                ));
            }
        }
    }
    Ok(ExportSpec {
        name: name.ok_or("name= is missing")?,
        device: device.ok_or("device= is missing")?,
        read_only: read_only.unwrap_or(false),
        group,
    })
}

/// The items of qemu's comma-separated list: `,,` is a comma within an item.
fn split_qemu_list(text: &str) -> Vec<String> {
    let mut items = vec![String::new()];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ',' if chars.peek() == Some(&',') => {
                chars.next();
                items.last_mut().expect("never empty").push(',');
            }
            ',' => items.push(String::new()),
            _ => items.last_mut().expect("never empty").push(c),
        }
    }
    items.retain(|i| !i.is_empty());
    items
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

impl ServeArgs {
    pub fn execute(self) -> Result<()> {
        let address = Address::parse(&self.nbd).map_err(anyhow::Error::msg)?;
        let size = self.size.as_deref().map(parse_size).transpose()?;
        self.policy_flags.refuse(
            "serve",
            Some("an export is a real device; swap its policy with --control and `schedhost ctl`"),
            None,
        )?;
        let (device, faults) = self.device()?;
        let faults = match (faults, self.faults) {
            (Some(_), Some(_)) => {
                bail!("--device …@PLAN and --faults PLAN both give a fault plan; give one")
            }
            (Some(plan), None) | (None, Some(plan)) => plan,
            (None, None) => FaultPlan::default(),
        };
        let plan = self.flags.plan(&SCOPE, faults, true)?;
        let runtime = self.flags.runtime(&SCOPE)?;
        let (name, settings) = self.policy_flags.policy_and_settings(&self.policy)?;
        let (source, loaded) = load(&runtime, name)?;
        let options = ServeOptions {
            address,
            exports: self.exports(device),
            allow_overwrite: plan.ring.allow_overwrite,
            size,
            trace_events: self.flags.observe.trace_events.clone(),
            metrics: self.metrics.clone(),
            max_clients: self.max_clients as usize,
            handshake_timeout: self.handshake_timeout,
            reply_timeout: self.reply_timeout,
            description: self.description.clone(),
            groups: self.groups.clone(),
        };
        let policies = options
            .devices()
            .iter()
            .map(|_| loaded.instantiate())
            .collect::<Result<Vec<_>>>()?;
        // One signal path: SIGINT, SIGTERM and SIGHUP stop the server gracefully, with or
        // without --control (whose socket is then removed as the server stops).
        let stop = schedhost::signal::stop_gracefully().context("installing the signal handler")?;
        let control = self
            .policy_flags
            .control
            .as_deref()
            .map(|path| (path, &runtime));
        let label = source.label();
        let served = nbd::serve(
            &options,
            &plan,
            policies,
            &settings,
            control,
            stop,
            |at| {
                let metrics = at
                    .metrics
                    .map(|m| format!("; metrics at http://{m}/metrics"))
                    .unwrap_or_default();
                let exports: Vec<String> = options
                    .exports
                    .iter()
                    .zip(at.exports)
                    .map(|(spec, export)| {
                        format!(
                            "{} ({} bytes{}) as export '{}'{}",
                            spec.device.display(),
                            export.size,
                            if spec.read_only { ", read-only" } else { "" },
                            export.name,
                            spec.group
                                .as_ref()
                                .map(|g| format!(" in group {g}"))
                                .unwrap_or_default(),
                        )
                    })
                    .collect();
                eprintln!(
                    "schedhost: serving {} on {} with policy {label}{metrics}; stop with Ctrl-C or SIGTERM",
                    exports.join(", "),
                    at.address,
                );
            },
        )
        .context("serving over NBD")?;
        self.report(&served, &label)
    }

    /// `--device`'s export, then each `--export`; `--read-only` holds for all.
    /// `--device`'s path and the fault plan after its `@`, as `run` reads it: one file or
    /// block device (an NBD export is one).
    fn device(&self) -> Result<(Option<PathBuf>, Option<FaultPlan>)> {
        let Some(arg) = &self.device else {
            return Ok((None, None));
        };
        match parse_device(arg)? {
            (Device::Real(mut paths), faults) if paths.len() == 1 => {
                Ok((paths.pop(), (!faults.is_empty()).then_some(faults)))
            }
            (Device::Real(_), _) => bail!(
                "--device {arg}: an export is one file or block device; offer several with --export"
            ),
            (Device::Sim(_), _) => bail!(
                "--device {arg}: serve exports a file or block device; a simulated device holds no data"
            ),
        }
    }

    fn exports(&self, device: Option<PathBuf>) -> Vec<ExportSpec> {
        let lone_group = (self.exports.is_empty() && self.groups.len() == 1)
            .then(|| self.groups[0].name.clone());
        let device = device.map(|device| ExportSpec {
            name: self.export_name.clone(),
            device,
            read_only: false,
            group: lone_group,
        });
        device
            .into_iter()
            .chain(self.exports.iter().cloned())
            .map(|export| ExportSpec {
                read_only: export.read_only || self.read_only,
                ..export
            })
            .collect()
    }

    fn report(&self, served: &Served, policy: &str) -> Result<()> {
        match self.output_format {
            OutputFormat::Json | OutputFormat::JsonPlus => {
                let groups: Vec<serde_json::Value> = served
                    .groups
                    .iter()
                    .map(|(device, report)| {
                        let mut value = serde_json::to_value(report).unwrap_or_default();
                        value["device"] = serde_json::Value::String(device.clone());
                        value
                    })
                    .collect();
                let value = serde_json::json!({
                    "policy": policy,
                    "exports": served.exports,
                    "groups": groups,
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
            // A message, as every other `serve` says on stderr; the JSON is the report.
            OutputFormat::Normal => eprint!(
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
            "  {} (export {}, ctx {}): {:.2} s, {} reads ({:.1} MiB), {} writes ({:.1} MiB), {} flushes, {} trims, {} zeroes, {} errors{}",
            c.peer,
            c.export,
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
    for (device, g) in &served.groups {
        let _ = writeln!(
            out,
            "  group {} on {device}: {} reads ({:.1} MiB), {} writes ({:.1} MiB), {} throttled",
            g.limits.name,
            g.stats.ios[0],
            g.stats.bytes[0] as f64 / 1048576.0,
            g.stats.ios[1],
            g.stats.bytes[1] as f64 / 1048576.0,
            g.stats.throttled,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_is_read_in_qemus_key_value_words_with_doubled_commas() {
        let export = parse_export("name=vm1,device=/tmp/a,,b.img,group=gold,read-only=on").unwrap();
        assert_eq!(export.name, "vm1");
        assert_eq!(export.device, PathBuf::from("/tmp/a,b.img"));
        assert_eq!(export.group.as_deref(), Some("gold"));
        assert!(export.read_only);
        let plain = parse_export("device=d.img,name=x").unwrap();
        assert_eq!((plain.read_only, plain.group), (false, None));
    }

    #[test]
    fn a_bad_export_is_refused_naming_the_key_and_the_value() {
        let err = |text: &str| parse_export(text).unwrap_err();
        assert!(err("name=a").contains("device= is missing"));
        assert!(err("device=d").contains("name= is missing"));
        assert!(err("name=a,device=d,size=1").contains("unknown key \"size\""));
        assert!(err("name=a,name=b,device=d").contains("name is given twice"));
        assert!(err("name=a,device=d,read-only=maybe").contains("read-only=maybe"));
        assert!(err("name=a,device=d,group=no/slash").contains("group name"));
        assert!(err("name=a,device").contains("expected KEY=VALUE"));
    }
}
