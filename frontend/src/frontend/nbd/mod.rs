//! The NBD front-end: `schedhost serve --nbd ADDR --device PATH` exports one file or block
//! device to unmodified NBD clients (qemu-img, qemu-io, nbdcopy, fio's nbd engine), and
//! every client's I/O goes through the policy on its way to io_uring.
//!
//! - `wire` and [`decide`] are sans-IO: the protocol's bytes, and what a request becomes.
//! - `handshake` is the fixed newstyle handshake as a state machine (and a blocking
//!   driver of it for any stream).
//! - `front` serves the listener and every connection on the engine's thread: the ring
//!   says when a socket is ready, `greet` runs a handshake as its bytes arrive, `conn` (a
//!   state machine: bytes in, actions out; no socket, no buffer memory, deadlines on the
//!   engine's clock) turns requests into bios of the connection's ctx and answers each when
//!   its bios finished, `link` is its driver (the socket, the slots' bytes over the ring's
//!   arena, the loops that carry bytes and bios), and `pool` holds the buffer slots.
//!
//! Each connection is one ctx (software queue), so cfq and bfq share the disk between
//! clients as they share it between processes. A request is split into bios of at most
//! 256 KiB, as the kernel splits at max_sectors_kb, and the merge engine joins neighbours
//! again; the protocol's simple replies carry the data of reads.

mod conn;
mod decide;
mod exports;
mod front;
mod greet;
mod handshake;
mod link;
mod net;
mod pool;
mod wire;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use conn::Tally;
pub use decide::{Decision, ExportBounds, Work, decide, pieces};
pub use exports::{ExportSpec, ExportSummary};
use exports::{LaneLayout, Offered, describe, layout};
pub use handshake::{Ended, Export, negotiate, negotiate_admitting};
pub use net::{Address, DEFAULT_PORT};
pub use wire::{BadMagic, REQUEST_LEN, Request};

use crate::backend::ring::{Notifier, OpenRules, Target};
use crate::control::Control;
use crate::core::{CoreStats, Ejection, Throttle};
use crate::engine::{Lane, SetRecord, SwapRecord};
use crate::frontend::RunError;
use crate::frontend::plan::{EngineParts, RunPlan};
use crate::observe::events::file::Writer;
use crate::observe::metrics::Endpoint;
use crate::policy::{PolicyBackend, WasmRuntime};
use net::Listener;

/// Bytes per bio: a request is split into pieces of at most this.
pub const CHUNK: u32 = 256 * 1024;
/// Largest read or write a client may send (what `NBD_INFO_BLOCK_SIZE` advertises).
pub const MAX_PAYLOAD: u32 = 16 * 1024 * 1024;
/// Data slots (64 MiB): four of the largest requests' worth.
const DATA_SLOTS: u32 = 4 * MAX_PAYLOAD / CHUNK;
/// Data slots one connection may hold: its largest request, so at least four clients that
/// stop reading their replies are needed to hold up the rest.
const SLOTS_PER_CONNECTION: u32 = MAX_PAYLOAD / CHUNK;
/// Slots for flushes and trims, which carry no data.
const CONTROL_SLOTS: u32 = 256;

/// How the buffer arena is cut into slots.
#[derive(Debug, Clone, Copy)]
struct SlotPlan {
    /// Data slots, numbered from 0, of `chunk` bytes each.
    data: u32,
    /// Control slots, numbered after them, of no bytes.
    control: u32,
    /// Data slots one connection may hold.
    per_connection: u32,
    /// Bytes per data slot: a bio's most.
    chunk: u32,
}

const SLOTS: SlotPlan = SlotPlan {
    data: DATA_SLOTS,
    control: CONTROL_SLOTS,
    per_connection: SLOTS_PER_CONNECTION,
    chunk: CHUNK,
};
/// How long a whole reply may take to reach the client before the connection is closed
/// (`--reply-timeout`).
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client may take over the whole handshake (`--handshake-timeout`).
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a failing accept (EMFILE, say) is reported.
const ACCEPT_WARNING_EVERY: Duration = Duration::from_secs(10);

/// How `serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where clients connect.
    pub address: Address,
    /// What is exported: at least one.
    pub exports: Vec<ExportSpec>,
    /// Export existing files or block devices writable.
    pub allow_overwrite: bool,
    /// Create a missing file with this many bytes.
    pub size: Option<u64>,
    /// Record every request's events to this new file (`--trace-events`).
    pub trace_events: Option<PathBuf>,
    /// Serve Prometheus metrics over HTTP here (`--metrics`).
    pub metrics: Option<String>,
    /// Clients past the handshake served at once; more are closed as they arrive.
    pub max_clients: usize,
    /// How long a client may take over the whole handshake; past it, it is closed. At most
    /// `max_clients` connections are in their handshake at once: a new one closes the
    /// oldest, so silent sockets cannot keep real clients out.
    pub handshake_timeout: Duration,
    /// How long one whole reply may take to reach its client; past it, the connection is
    /// closed and nothing it sent after runs.
    pub reply_timeout: Duration,
    /// `NBD_INFO_DESCRIPTION`'s text; nothing (not the exported path) unless given.
    pub description: Option<String>,
    /// The groups' parameters (`--group`): each is named by an export.
    pub groups: Vec<crate::core::GroupSpec>,
}

impl ServeOptions {
    /// The devices the exports name, each once, in the order first named: one policy
    /// instance (one scheduler) each.
    pub fn devices(&self) -> Vec<PathBuf> {
        let mut devices: Vec<PathBuf> = Vec::new();
        for export in &self.exports {
            if !devices
                .iter()
                .any(|d| exports::same_device(d, &export.device))
            {
                devices.push(export.device.clone());
            }
        }
        devices
    }
}

/// Where a started server can be reached.
#[derive(Debug, Clone, Copy)]
pub struct Listening<'a> {
    /// The NBD address, as bound (`127.0.0.1:PORT` or `unix:PATH`).
    pub address: &'a str,
    /// What the handshake offers, export by export.
    pub exports: &'a [Export],
    /// The metrics endpoint, when asked for.
    pub metrics: Option<std::net::SocketAddr>,
}

/// One client, when it left.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ClientSummary {
    /// Its address (the socket path for unix clients).
    pub peer: String,
    /// The export it chose.
    pub export: String,
    /// The ctx its I/O carried.
    pub ctx: u32,
    /// Seconds it was connected.
    pub seconds: f64,
    /// What it did.
    pub tally: Tally,
    /// Why the server closed it, if the client broke the protocol.
    pub closed_because: Option<String>,
}

/// Clients whose summaries a server keeps, the latest; the earlier ones are summed into
/// [`Departed::earlier`], so a server that has seen a million clients holds no more.
pub const KEPT_CLIENTS: usize = 1024;

/// The clients that left a server: the latest [`KEPT_CLIENTS`] one by one, the rest summed.
#[derive(Debug, Clone, Default)]
pub struct Departed {
    /// The latest ones, in the order they left.
    pub latest: std::collections::VecDeque<ClientSummary>,
    /// How many left before them.
    pub earlier_clients: u64,
    /// What those did, together.
    pub earlier: Tally,
}

impl Departed {
    /// `client` left.
    pub fn push(&mut self, client: ClientSummary) {
        if self.latest.len() >= KEPT_CLIENTS
            && let Some(oldest) = self.latest.pop_front()
        {
            self.earlier_clients += 1;
            self.earlier.add(&oldest.tally);
        }
        self.latest.push_back(client);
    }

    /// Every client that left.
    pub fn total(&self) -> u64 {
        self.earlier_clients + self.latest.len() as u64
    }
}

/// What a server did, once it stopped.
#[derive(Debug, Clone)]
pub struct Served {
    /// Clients that completed the handshake.
    pub clients: Departed,
    /// The scheduler's counters, over every device.
    pub core: CoreStats,
    /// Swaps through the control socket.
    pub swaps: Vec<SwapRecord>,
    /// Tunable changes through the control socket.
    pub sets: Vec<SetRecord>,
    /// Policy ejections.
    pub ejections: Vec<Ejection>,
    /// The exports, in the order given.
    pub exports: Vec<ExportSummary>,
    /// Every group on every device: its parameters and what it did.
    pub groups: Vec<(String, crate::core::GroupReport)>,
}

/// Serves the exports until `stop` is set (SIGINT/SIGTERM in the CLI): stops accepting,
/// lets every connection finish what it sent, flushes the targets, and returns. `policies`
/// holds one instance per device ([`ServeOptions::devices`]); `listening` is called with
/// the bound address once clients can connect.
///
/// # Errors
/// A [`RunError`] naming what is wrong with the setup, or what ended the server.
pub fn serve(
    options: &ServeOptions,
    plan: &RunPlan,
    policies: Vec<Box<dyn PolicyBackend>>,
    settings: &[(String, i64)],
    control: Option<(&Path, &WasmRuntime)>,
    stop: &AtomicBool,
    listening: impl FnOnce(Listening<'_>),
) -> Result<Served, RunError> {
    let layout = layout(options).map_err(RunError::Setup)?;
    if policies.len() != layout.lanes.len() {
        return Err(RunError::Setup(format!(
            "{} policy instance(s) for {} device(s)",
            policies.len(),
            layout.lanes.len()
        )));
    }
    // Bound first, so that a taken address creates no file.
    let listener = Listener::bind(&options.address)
        .map_err(|e| RunError::Setup(format!("--nbd: binding {:?}: {e}", options.address)))?;
    if let Some(path) = &options.trace_events {
        crate::observe::events::file::check_new(path).map_err(RunError::Setup)?;
    }
    let mut targets = layout
        .lanes
        .iter()
        .map(|lane| open_target(options, &lane.path, lane.read_only))
        .collect::<Result<Vec<_>, _>>()?;
    let (tenant_of, tenants) = exports::tenants(&layout.placed);
    let offered = options
        .exports
        .iter()
        .zip(&layout.placed)
        .zip(tenant_of)
        .map(|((spec, &(lane, group)), tenant)| {
            let (export, limits) = describe(options, spec, &targets[lane])?;
            Ok(Offered {
                export,
                limits,
                lane,
                group,
                tenant,
            })
        })
        .collect::<Result<Vec<_>, RunError>>()?;
    let mut policy_name = String::new();
    let mut lanes = Vec::new();
    for ((mut policy, lane), target) in policies.into_iter().zip(&layout.lanes).zip(&targets) {
        if policy_name.is_empty() {
            policy_name = policy.info().map(|i| i.name).unwrap_or_default();
        }
        let on = (lane, target.rotational);
        lanes.push(scheduler(options, plan, policy, settings, on)?);
    }
    let mut slot_lens = vec![SLOTS.chunk as usize; SLOTS.data as usize];
    slot_lens.extend(std::iter::repeat_n(0, SLOTS.control as usize));
    let mut backend = crate::frontend::ring::backend(plan, &targets, &slot_lens)?;
    let notifier = crate::frontend::ring::notifier(&mut backend)?;
    let Extras {
        control,
        metrics,
        mut events,
    } = extras(options, &layout.lanes, control, &notifier, policy_name)?;
    // Clients may write from here on: a file the server created stays.
    for target in &mut targets {
        target.keep();
    }
    listening(Listening {
        address: &listener.to_string(),
        exports: &offered.iter().map(|o| o.export.clone()).collect::<Vec<_>>(),
        metrics: metrics.as_ref().map(Endpoint::address),
    });
    let access = backend.slots();
    let parts = EngineParts {
        control,
        ..EngineParts::default()
    };
    let mut engine = plan.engine(backend, lanes, parts);
    let setup = front::Setup {
        listener: &listener,
        exports: &offered,
        stop,
        max_clients: options.max_clients,
        handshake_timeout: options.handshake_timeout,
        slots: SLOTS,
        tenants,
        access,
        timeout: options.reply_timeout,
        events: events.as_mut(),
        metrics: metrics.as_ref(),
    };
    let mut front = front::Front::new(setup);
    let done = AtomicBool::new(false);
    let outcome = std::thread::scope(|scope| {
        // A signal only sets `stop`: this wakes the engine to see it.
        scope.spawn(|| watch_stop(stop, &done, &notifier));
        let outcome = crate::engine::drive(&mut engine, &mut front);
        done.store(true, Ordering::Release);
        outcome
    });
    let clients = std::mem::take(&mut front.clients);
    drop(front);
    outcome?;
    if let Some(writer) = events {
        writer.finish().map_err(|source| RunError::Ring {
            action: "writing --trace-events",
            source,
        })?;
    }
    for target in &targets {
        target.sync().map_err(|source| RunError::Ring {
            action: "flushing the target at shutdown",
            source,
        })?;
    }
    let groups = engine
        .lanes()
        .iter()
        .flat_map(|lane| {
            let reports = lane
                .core
                .throttle()
                .map(Throttle::report)
                .unwrap_or_default();
            reports.into_iter().map(|r| (lane.name.clone(), r))
        })
        .collect();
    let finished = engine.finish(0);
    let exports = options
        .exports
        .iter()
        .zip(&offered)
        .map(|(spec, o)| ExportSummary {
            name: spec.name.clone(),
            device: spec.device.display().to_string(),
            size: o.export.size,
            read_only: spec.read_only,
            group: spec.group.clone(),
        })
        .collect();
    Ok(Served {
        clients,
        core: finished.core,
        swaps: finished.swaps,
        sets: finished.sets,
        ejections: finished.ejections,
        exports,
        groups,
    })
}

/// What the server does besides NBD.
struct Extras {
    /// The control socket (`--control`).
    control: Option<Control>,
    /// The metrics endpoint (`--metrics`).
    metrics: Option<Endpoint>,
    /// The event file (`--trace-events`).
    events: Option<Writer>,
}

/// Starts what `options` asks for besides NBD, over the devices `lanes` already placed; the
/// control socket and the metrics endpoint wake the ring thread through `notifier`.
fn extras(
    options: &ServeOptions,
    lanes: &[LaneLayout],
    control: Option<(&Path, &WasmRuntime)>,
    notifier: &Arc<Notifier>,
    policy_name: String,
) -> Result<Extras, RunError> {
    let wake = || -> Arc<dyn Fn() + Send + Sync> {
        let notifier = Arc::clone(notifier);
        Arc::new(move || notifier.notify())
    };
    let control = control
        .map(|control| crate::frontend::ring::control(control, lanes.len(), notifier))
        .transpose()?;
    let metrics = match &options.metrics {
        Some(address) => Some(
            Endpoint::start(address, wake())
                .map_err(|e| RunError::Setup(format!("--metrics {address}: binding: {e}")))?,
        ),
        None => None,
    };
    let events =
        match &options.trace_events {
            Some(path) => {
                let devices: Vec<String> = lanes
                    .iter()
                    .map(|lane| lane.path.display().to_string())
                    .collect();
                let header = crate::observe::events::file::Header {
                    device: devices.join(","),
                    policy: policy_name,
                };
                Some(Writer::create(path, &header).map_err(|e| {
                    RunError::Setup(format!("--trace-events {}: {e}", path.display()))
                })?)
            }
            None => None,
        };
    Ok(Extras {
        control,
        metrics,
        events,
    })
}

/// A device's core over `policy`, with the queue settings, supervision, the event trace
/// and counters when they are asked for, and the groups of its exports; `rotational` is
/// what the device says of itself.
fn scheduler(
    options: &ServeOptions,
    plan: &RunPlan,
    policy: Box<dyn PolicyBackend>,
    settings: &[(String, i64)],
    (layout, rotational): (&LaneLayout, bool),
) -> Result<Lane, RunError> {
    let max_sectors = crate::backend::ring::MAX_SECTORS;
    let config = plan
        .queue
        .config(1, plan.queue.queue_depth, max_sectors, rotational);
    let mut setup = plan.lane_setup(config, settings);
    setup.record_events |= options.trace_events.is_some();
    setup.metering |= options.metrics.is_some();
    let mut lane = Lane::new(layout.path.display().to_string(), policy, &setup)?;
    if !layout.groups.is_empty() {
        // Clients join their export's group as they connect (`Engine::place`).
        lane.core
            .set_throttle(Throttle::new(layout.groups.clone(), Vec::new()));
    }
    Ok(lane)
}

/// Opens `path` under the same rules as `run`: writing to an existing file or a block
/// device takes `--allow-overwrite`; a missing file is created only with `--size`.
fn open_target(options: &ServeOptions, path: &Path, read_only: bool) -> Result<Target, RunError> {
    let exists = path.exists();
    if !exists && read_only {
        return Err(RunError::Setup(format!(
            "{} does not exist; a read-only export needs an existing file or device",
            path.display()
        )));
    }
    if !exists && options.size.is_none() {
        return Err(RunError::Setup(format!(
            "{} does not exist; give --size BYTES to create it",
            path.display()
        )));
    }
    if exists && !read_only && !options.allow_overwrite {
        return Err(RunError::Setup(format!(
            "refusing to export {} writable: clients could overwrite its data; pass --allow-overwrite if that is intended, or --read-only",
            path.display()
        )));
    }
    let rules = OpenRules {
        writes: !read_only,
        allow_overwrite: options.allow_overwrite,
        direct: true,
    };
    let need = if exists { 0 } else { options.size.unwrap_or(0) };
    Ok(Target::open(path, need, rules)?)
}

/// Wakes the engine (through `notifier`) once `stop` is set, looking every 100 ms, until
/// `done`.
fn watch_stop(stop: &AtomicBool, done: &AtomicBool, notifier: &Notifier) {
    while !done.load(Ordering::Acquire) {
        if stop.load(Ordering::Acquire) {
            notifier.notify();
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Failed accepts, reported at most once per [`ACCEPT_WARNING_EVERY`].
#[derive(Debug, Default)]
struct AcceptErrors {
    last_warned: Option<Instant>,
    since: u64,
}

impl AcceptErrors {
    /// Counts a failed accept; warns (and returns true) only if the last warning is older
    /// than [`ACCEPT_WARNING_EVERY`], so running out of descriptors cannot flood the log.
    fn note(&mut self, e: &std::io::Error) -> bool {
        self.since += 1;
        let due = self
            .last_warned
            .is_none_or(|at| at.elapsed() >= ACCEPT_WARNING_EVERY);
        if due {
            tracing::warn!(
                "accepting a client: {e} ({} failure(s) since the last warning)",
                self.since
            );
            self.last_warned = Some(Instant::now());
            self.since = 0;
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_failures_warn_once_per_period_not_once_each() {
        let mut errors = AcceptErrors::default();
        let emfile = std::io::Error::from_raw_os_error(libc::EMFILE);
        let warned = (0..100).filter(|_| errors.note(&emfile)).count();
        assert_eq!(warned, 1);
        assert_eq!(errors.since, 99);
    }
}
