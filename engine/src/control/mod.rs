//! The control socket of a running schedhost (`--control SOCKET`), and the `ctl` client.
//!
//! The protocol is one line per request and one JSON object per reply:
//! `swap POLICY`, `set NAME=VALUE`, `get`, `status`, `stats`. A reply has `"ok": true` and
//! its fields, or `"ok": false` and an `"error"`.
//!
//! The server thread does everything slow off the I/O path: it compiles the new policy (or
//! takes it from its cache, keyed by a hash of the component's bytes) and instantiates one
//! per device. The driver then applies the command at its next batch boundary and answers.
//! The socket is created with mode 0600: only its owner can connect.
//!
//! Peers are not trusted even so: each client has its own thread, at most
//! [`MAX_SESSIONS`] at once; a request line is at most [`MAX_LINE`] bytes and must arrive
//! within [`REQUEST_TIMEOUT`] of the previous answer; an answer must be taken within
//! [`REQUEST_TIMEOUT`]; `swap` reads only regular files up to the component size limit.

mod protocol;

use std::hash::{BuildHasher, RandomState};
use std::io::{BufRead, BufReader, IoSlice, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::peer::{self, Deadline};
use crate::policy::{
    LoadedPolicy, PolicyBackend, PolicySource, WasmRuntime, native_policy, read_component, resolve,
};
use crate::signal::RemovedOnSignal;
pub use protocol::{Request, parse_request};

/// Clients served at once; more are answered with an error and closed.
pub const MAX_SESSIONS: usize = 8;
/// Longest request line, newline included.
pub const MAX_LINE: usize = 4096;
/// How long a client may take to send a request line, or to take its answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a session waits for the driver to answer (it answers between batches of I/O).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// A command for the driver, with everything slow already done.
pub enum Command {
    /// Replace every device's policy.
    Swap {
        /// What was asked for.
        label: String,
        /// One new instance per device, not yet started.
        policies: Vec<Box<dyn PolicyBackend>>,
        /// Time spent compiling or fetching from the cache, ns.
        load_ns: u64,
        /// The compiled component came from the cache.
        cached: bool,
    },
    /// Set a tunable on every device's policy.
    Set {
        /// Its name.
        name: String,
        /// Its value.
        value: i64,
    },
    /// Every tunable's value.
    Get,
    /// Policy, uptime, ejections, swaps, queue depths.
    Status,
    /// The cores' counters.
    Stats,
    /// Every group's limits and what it did.
    Groups,
    /// Keys of a group to change.
    Group(crate::value::GroupEdit),
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Swap { label, .. } => write!(f, "Swap({label})"),
            Self::Set { name, value } => write!(f, "Set({name}={value})"),
            Self::Get => write!(f, "Get"),
            Self::Status => write!(f, "Status"),
            Self::Stats => write!(f, "Stats"),
            Self::Groups => write!(f, "Groups"),
            Self::Group(limits) => write!(f, "Group({})", limits.name),
        }
    }
}

/// A command and where its answer goes.
#[derive(Debug)]
pub struct Envelope {
    /// What to do.
    pub command: Command,
    /// The answer, a JSON object.
    pub reply: Sender<Value>,
}

/// The driver's end of the control socket.
#[derive(Debug)]
pub struct Control {
    path: PathBuf,
    inbox: Receiver<Envelope>,
    /// Forgotten after the socket is removed (fields drop after `Drop::drop`).
    _on_signal: Option<RemovedOnSignal>,
}

impl Control {
    /// Listens on `path` (which must not exist) for a run with `devices` devices. `wake`
    /// interrupts the driver's wait when a command is ready.
    ///
    /// # Errors
    /// The path exists or cannot be bound.
    pub fn start(
        path: &Path,
        runtime: WasmRuntime,
        devices: usize,
        wake: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<Self> {
        // The socket's identity is registered before it appears at `path`, so a signal at
        // any moment removes it if it is there, and never anything else (one between the
        // bind and the rename leaves only the staged socket, in its private directory
        // beside `path`). Under a command that stops gracefully (`serve`) the signal only
        // stops it, and dropping `Control` removes the socket.
        let mut on_signal = None;
        let listener = peer::bind_private_then(path, |staged| {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::symlink_metadata(staged)?;
            on_signal = Some(RemovedOnSignal::with_identity(
                path,
                meta.dev(),
                meta.ino(),
            )?);
            Ok(())
        })
        .with_context(|| format!("--control {}: binding the socket", path.display()))?;
        let (sender, inbox) = mpsc::channel();
        let server = Server {
            runtime,
            devices,
            sender,
            wake,
            cache: Arc::new(Mutex::new(Cache::default())),
        };
        let server = Arc::new(server);
        std::thread::Builder::new()
            .name("schedhost-control".into())
            .spawn(move || serve(&server, &listener))
            .context("starting the control thread")?;
        Ok(Self {
            path: path.to_owned(),
            inbox,
            _on_signal: on_signal,
        })
    }

    /// The commands waiting, without blocking.
    pub fn take(&self) -> Vec<Envelope> {
        self.inbox.try_iter().collect()
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Compiled components a long-running run may keep: a swap back to one of the last few is
/// instant, and a stream of distinct components costs at most this many (each is about
/// half a MiB of code and metadata).
const CACHED_COMPONENTS: usize = 8;

/// The last [`CACHED_COMPONENTS`] compiled components, by their bytes (the engine is the
/// process's one, so its configuration is fixed), most recently used last. The bytes are
/// compared whole: a hash alone could hand back another component.
#[derive(Debug)]
struct Cache<T> {
    hasher: RandomState,
    entries: Vec<(u64, Vec<u8>, T)>,
}

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Self {
            hasher: RandomState::new(),
            entries: Vec::new(),
        }
    }
}

impl<T: Clone> Cache<T> {
    /// The value for `bytes`, and whether it was cached; `make` builds a missing one, and
    /// the least recently used entry makes room for it.
    fn get_or_make(
        &mut self,
        bytes: Vec<u8>,
        make: impl FnOnce(&[u8]) -> Result<T>,
    ) -> Result<(T, bool)> {
        let hash = self.hasher.hash_one(&bytes);
        if let Some(at) = self
            .entries
            .iter()
            .position(|(h, b, _)| *h == hash && *b == bytes)
        {
            let entry = self.entries.remove(at);
            let value = entry.2.clone();
            self.entries.push(entry);
            return Ok((value, true));
        }
        let value = make(&bytes)?;
        if self.entries.len() >= CACHED_COMPONENTS {
            self.entries.remove(0);
        }
        self.entries.push((hash, bytes, value.clone()));
        Ok((value, false))
    }
}

struct Server {
    runtime: WasmRuntime,
    devices: usize,
    sender: Sender<Envelope>,
    wake: Arc<dyn Fn() + Send + Sync>,
    cache: Arc<Mutex<Cache<LoadedPolicy>>>,
}

/// Accepts clients, each on its own thread, at most [`MAX_SESSIONS`] at once.
fn serve(server: &Arc<Server>, listener: &UnixListener) {
    let live = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else {
            // Out of descriptors, say: accept fails at once, so wait before the next try.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if live.load(Ordering::Acquire) >= MAX_SESSIONS {
            let busy = json!({ "ok": false, "error": format!("{MAX_SESSIONS} control clients are connected; try again") });
            let line = format!("{busy}\n");
            let _ = peer::write_all(
                &mut stream,
                &mut [IoSlice::new(line.as_bytes())],
                Deadline::after(Duration::from_millis(100)),
            );
            continue;
        }
        live.fetch_add(1, Ordering::AcqRel);
        let (server, leaving) = (Arc::clone(server), Arc::clone(&live));
        let spawned = std::thread::Builder::new()
            .name("schedhost-control-client".into())
            .spawn(move || {
                if let Err(e) = server.session(stream) {
                    tracing::debug!("control session ended: {e:#}");
                }
                leaving.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            live.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!("control: no thread for a client: {e}");
        }
    }
}

impl Server {
    /// Answers one client's requests until it leaves, breaks a limit or misses a deadline.
    fn session(&self, mut stream: UnixStream) -> Result<()> {
        let mut pending = Vec::new();
        loop {
            let deadline = Deadline::after(REQUEST_TIMEOUT);
            let Some(line) = peer::read_line(&mut stream, &mut pending, MAX_LINE, deadline)? else {
                return Ok(());
            };
            let reply = match parse_request(line.trim()) {
                Ok(request) => self.answer(request),
                Err(e) => json!({ "ok": false, "error": e }),
            };
            let text = format!("{reply}\n");
            peer::write_all(
                &mut stream,
                &mut [IoSlice::new(text.as_bytes())],
                Deadline::after(REQUEST_TIMEOUT),
            )?;
        }
    }

    fn answer(&self, request: Request) -> Value {
        let command = match request {
            Request::Swap(policy) => match self.prepare_swap(&policy) {
                Ok(command) => command,
                Err(e) => return json!({ "ok": false, "error": format!("{e:#}") }),
            },
            Request::Set(name, value) => Command::Set { name, value },
            Request::Get => Command::Get,
            Request::Status => Command::Status,
            Request::Stats => Command::Stats,
            Request::Groups => Command::Groups,
            Request::Group(limits) => Command::Group(limits),
        };
        let (reply, answer) = mpsc::channel();
        if self.sender.send(Envelope { command, reply }).is_err() {
            return json!({ "ok": false, "error": "the run has ended" });
        }
        (self.wake)();
        answer.recv_timeout(ANSWER_TIMEOUT).unwrap_or_else(
            |_| json!({ "ok": false, "error": "the run did not answer (it ended, or is stuck)" }),
        )
    }

    /// Compiles (or fetches) the policy and makes one instance per device.
    fn prepare_swap(&self, policy: &str) -> Result<Command> {
        let started = Instant::now();
        let (policies, cached) = match resolve(policy)? {
            PolicySource::Native(name) => {
                let make = || native_policy(&name).context("a native policy vanished");
                (
                    (0..self.devices).map(|_| make()).collect::<Result<_>>()?,
                    false,
                )
            }
            PolicySource::Wasm(path) => {
                let (loaded, cached) = self.compiled(&path)?;
                let make =
                    || -> Result<Box<dyn PolicyBackend>> { Ok(Box::new(loaded.instantiate()?)) };
                (
                    (0..self.devices).map(|_| make()).collect::<Result<_>>()?,
                    cached,
                )
            }
        };
        Ok(Command::Swap {
            label: policy.to_owned(),
            policies,
            load_ns: started.elapsed().as_nanos() as u64,
            cached,
        })
    }

    /// The compiled component at `path`, from the cache when the same bytes were compiled
    /// before.
    fn compiled(&self, path: &Path) -> Result<(LoadedPolicy, bool)> {
        let bytes = read_component(path)?;
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.get_or_make(bytes, |bytes| Ok(self.runtime.load_bytes(path, bytes)?))
    }
}

/// Sends `line` to the schedhost listening on `path` and returns its answer.
///
/// # Errors
/// The socket cannot be reached or answers nonsense.
pub fn request(path: &Path, line: &str) -> Result<Value> {
    let stream = UnixStream::connect(path).with_context(|| {
        format!(
            "connecting to {} (is a schedhost running with --control {}?)",
            path.display(),
            path.display()
        )
    })?;
    // A swap compiles before the driver answers; past this the server is not answering.
    stream.set_read_timeout(Some(ANSWER_TIMEOUT + Duration::from_secs(60)))?;
    let mut writer = stream.try_clone()?;
    writeln!(writer, "{line}")?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer)?;
    serde_json::from_str(&answer).with_context(|| format!("a reply that is not JSON: {answer:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_component_cache_keeps_the_last_few_and_matches_whole_bytes() {
        let mut cache = Cache::default();
        let mut made = 0;
        let mut get = |cache: &mut Cache<usize>, n: usize| {
            cache
                .get_or_make(vec![n as u8; 64], |_| {
                    made += 1;
                    Ok(n)
                })
                .unwrap()
        };
        for n in 0..100 {
            assert_eq!(get(&mut cache, n), (n, false));
        }
        assert_eq!(cache.entries.len(), CACHED_COMPONENTS, "bounded");
        assert_eq!(get(&mut cache, 99), (99, true), "the latest is kept");
        assert_eq!(get(&mut cache, 92), (92, true));
        assert_eq!(get(&mut cache, 100), (100, false), "evicts 93, not 92");
        assert_eq!(get(&mut cache, 92), (92, true));
        assert_eq!(get(&mut cache, 93), (93, false));
        assert_eq!(get(&mut cache, 0), (0, false), "long evicted");
    }
}
