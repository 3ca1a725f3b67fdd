//! The NBD server (`serve --nbd`): a raw protocol client for data, errors and hostile input,
//! then the real clients (qemu-img, qemu-io, nbdcopy, nbdinfo, fio's nbd engine).
//!
//! Servers run in-process on unix sockets in scratch directories; the protocol numbers
//! below are written out from the NBD spec rather than taken from the server, so a wrong
//! constant there fails here.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use schedhost::frontend::RunError;
use schedhost::frontend::nbd::{self, Address, ExportSpec, Request, ServeOptions, Served};
use schedhost::frontend::plan::RunPlan;
use schedhost::policy::{PolicyBackend, native_policy};

use crate::helpers::{component, runtime};

pub(crate) const READ: u16 = 0;
pub(crate) const WRITE: u16 = 1;
const DISC: u16 = 2;
const FLUSH: u16 = 3;
const TRIM: u16 = 4;
const WRITE_ZEROES: u16 = 6;
pub(crate) const FLAG_FUA: u16 = 1;
const EPERM: u32 = 1;
const EINVAL: u32 = 22;
const ENOSPC: u32 = 28;

pub(crate) const MIB: u64 = 1 << 20;

pub(crate) fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("nbd")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A server on `dir/nbd.sock` exporting `dir/disk.img`.
pub(crate) struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Served, RunError>>>,
    pub(crate) socket: PathBuf,
    pub(crate) metrics: Option<std::net::SocketAddr>,
}

impl Running {
    pub(crate) fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket.display())
    }

    /// Stops the server as SIGTERM would and returns what it did.
    /// Stops the server as SIGTERM would and returns how it ended.
    pub(crate) fn end(mut self) -> Result<Served, RunError> {
        self.stop.store(true, Ordering::Release);
        self.thread.take().unwrap().join().unwrap()
    }

    pub(crate) fn finish(mut self) -> Served {
        self.stop.store(true, Ordering::Release);
        let thread = self.thread.take().unwrap();
        thread.join().unwrap().expect("the server stops cleanly")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

pub(crate) fn options(dir: &Path) -> ServeOptions {
    ServeOptions {
        address: Address::Unix(dir.join("nbd.sock")),
        exports: vec![ExportSpec {
            name: "disk".into(),
            device: dir.join("disk.img"),
            read_only: false,
            group: None,
        }],
        allow_overwrite: false,
        size: Some(16 * MIB),
        trace_events: None,
        metrics: None,
        max_clients: 256,
        handshake_timeout: Duration::from_secs(10),
        reply_timeout: Duration::from_secs(30),
        description: None,
        groups: Vec::new(),
    }
}

/// The run plan the tests' servers use: 32 driver tags, the defaults otherwise.
pub(crate) fn plan() -> RunPlan {
    RunPlan {
        queue: schedhost::frontend::plan::QueueAttrs {
            queue_depth: 32,
            ..Default::default()
        },
        ..RunPlan::default()
    }
}

pub(crate) fn start(
    options: ServeOptions,
    policy: Box<dyn PolicyBackend>,
    control: Option<PathBuf>,
) -> Running {
    start_planned(options, plan(), policy, control)
}

/// As [`start`], under `plan`.
pub(crate) fn start_planned(
    options: ServeOptions,
    plan: RunPlan,
    policy: Box<dyn PolicyBackend>,
    control: Option<PathBuf>,
) -> Running {
    start_devices(options, plan, vec![policy], control)
}

/// A server under native noop on each of its devices, under `plan`.
fn start_noop_devices(options: ServeOptions, plan: RunPlan, control: Option<PathBuf>) -> Running {
    let policies = options
        .devices()
        .iter()
        .map(|_| native_policy("noop").unwrap())
        .collect();
    start_devices(options, plan, policies, control)
}

/// As [`start_planned`], with one policy instance per device.
fn start_devices(
    options: ServeOptions,
    plan: RunPlan,
    policies: Vec<Box<dyn PolicyBackend>>,
    control: Option<PathBuf>,
) -> Running {
    let stop = Arc::new(AtomicBool::new(false));
    let socket = match &options.address {
        Address::Unix(path) => path.clone(),
        Address::Tcp(_) => unreachable!("tests serve on unix sockets"),
    };
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let thread = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let engine = runtime();
            let control = control.as_deref().map(|p| (p, &engine));
            let result = nbd::serve(&options, &plan, policies, &[], control, &stop, |at| {
                let _ = ready_tx.send(at.metrics);
            });
            if let Err(e) = &result {
                eprintln!("server: {e}");
            }
            result
        })
    };
    let metrics = ready
        .recv_timeout(Duration::from_secs(30))
        .expect("the server starts listening");
    Running {
        stop,
        thread: Some(thread),
        socket,
        metrics,
    }
}

/// A minimal NBD client: fixed newstyle, `NBD_OPT_GO`, simple replies.
pub(crate) struct Client {
    pub(crate) stream: UnixStream,
    cookie: u64,
    pub(crate) size: u64,
}

impl Client {
    /// A client of the default export.
    pub(crate) fn connect(socket: &Path) -> Self {
        Self::connect_to(socket, "")
    }

    /// A client of the export named `name`.
    pub(crate) fn connect_to(socket: &Path, name: &str) -> Self {
        let mut stream = UnixStream::connect(socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut greeting = [0u8; 18];
        stream.read_exact(&mut greeting).unwrap();
        assert_eq!(&greeting[..8], b"NBDMAGIC");
        assert_eq!(&greeting[8..16], b"IHAVEOPT");
        stream.write_all(&3u32.to_be_bytes()).unwrap();
        let mut go = b"IHAVEOPT".to_vec();
        go.extend_from_slice(&7u32.to_be_bytes());
        go.extend_from_slice(&(6 + name.len() as u32).to_be_bytes());
        go.extend_from_slice(&(name.len() as u32).to_be_bytes());
        go.extend_from_slice(name.as_bytes());
        go.extend_from_slice(&0u16.to_be_bytes());
        stream.write_all(&go).unwrap();
        let mut size = 0;
        loop {
            let mut header = [0u8; 20];
            stream.read_exact(&mut header).unwrap();
            let kind = u32::from_be_bytes(header[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(header[16..20].try_into().unwrap()) as usize;
            let mut data = vec![0u8; len];
            stream.read_exact(&mut data).unwrap();
            match kind {
                1 => break,
                3 if data[..2] == [0, 0] => {
                    size = u64::from_be_bytes(data[2..10].try_into().unwrap());
                }
                3 => {}
                other => panic!("option reply {other:#x}"),
            }
        }
        Self {
            stream,
            cookie: 0,
            size,
        }
    }

    pub(crate) fn send(
        &mut self,
        kind: u16,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) -> u64 {
        self.cookie += 1;
        let request = Request {
            flags,
            kind,
            cookie: self.cookie,
            offset,
            length,
        };
        self.stream.write_all(&request.encode()).unwrap();
        self.stream.write_all(payload).unwrap();
        self.cookie
    }

    /// One reply: (cookie, error); a successful read's `data_len` bytes land in `data`.
    pub(crate) fn receive(&mut self, data_len: impl Fn(u64) -> usize) -> (u64, u32, Vec<u8>) {
        let mut header = [0u8; 16];
        self.stream.read_exact(&mut header).unwrap();
        assert_eq!(&header[..4], &0x6744_6698u32.to_be_bytes());
        let error = u32::from_be_bytes(header[4..8].try_into().unwrap());
        let cookie = u64::from_be_bytes(header[8..16].try_into().unwrap());
        let mut data = Vec::new();
        if error == 0 {
            data = vec![0u8; data_len(cookie)];
            self.stream.read_exact(&mut data).unwrap();
        }
        (cookie, error, data)
    }

    pub(crate) fn call(
        &mut self,
        kind: u16,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
    ) -> (u32, Vec<u8>) {
        let cookie = self.send(kind, flags, offset, length, payload);
        let len = if kind == READ { length as usize } else { 0 };
        let (got, error, data) = self.receive(|_| len);
        assert_eq!(got, cookie);
        (error, data)
    }

    pub(crate) fn write(&mut self, offset: u64, data: &[u8]) -> u32 {
        self.call(WRITE, 0, offset, data.len() as u32, data).0
    }

    pub(crate) fn read(&mut self, offset: u64, len: u32) -> Vec<u8> {
        let (error, data) = self.call(READ, 0, offset, len, &[]);
        assert_eq!(error, 0, "read at {offset}");
        data
    }

    /// True iff the server closed the connection.
    pub(crate) fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte), Ok(0) | Err(_))
    }
}

/// Bytes no two offsets share, so a misplaced block shows.
pub(crate) fn pattern(offset: u64, len: usize, seed: u8) -> Vec<u8> {
    (0..len as u64)
        .map(|i| ((offset + i) / 7 % 251) as u8 ^ seed)
        .collect()
}

#[test]
fn nbd_round_trips_data_spanning_many_bios_through_every_policy() {
    for name in ["noop", "deadline", "cfq", "time-slice", "kyber", "bfq"] {
        let dir = scratch(&format!("round_trip_{name}"));
        let server = start(options(&dir), native_policy(name).unwrap(), None);
        let mut client = Client::connect(&server.socket);
        assert_eq!(client.size, 16 * MIB);
        // 1 MiB + 12 KiB from an odd block: five bios of up to 256 KiB each.
        let offset = 3 * 4096;
        let data = pattern(offset, (MIB + 12 * 1024) as usize, 0x5a);
        assert_eq!(client.write(offset, &data), 0, "{name}");
        let fua = pattern(8 * MIB, 4096, 1);
        assert_eq!(client.call(WRITE, FLAG_FUA, 8 * MIB, 4096, &fua).0, 0);
        assert_eq!(client.call(FLUSH, 0, 0, 0, &[]).0, 0);
        assert_eq!(client.read(offset, data.len() as u32), data, "{name}");
        assert_eq!(client.read(8 * MIB, 4096), fua, "{name}");
        drop(client);
        let served = server.finish();
        assert_eq!(served.clients.latest.len(), 1);
        let tally = served.clients.latest[0].tally;
        assert_eq!(
            (tally.writes, tally.reads, tally.errors),
            (2, 2, 0),
            "{name}"
        );
        assert!(
            served.core.bios >= 10,
            "{name}: the requests were split into bios"
        );
        let file = std::fs::read(dir.join("disk.img")).unwrap();
        assert_eq!(
            &file[offset as usize..offset as usize + data.len()],
            &data[..]
        );
    }
}

#[test]
fn nbd_runs_a_wasm_component_policy() {
    let Some(path) = component("cfq") else { return };
    let dir = scratch("wasm_cfq");
    let policy = runtime().load(&path).unwrap().instantiate().unwrap();
    let server = start(options(&dir), Box::new(policy), None);
    let mut client = Client::connect(&server.socket);
    let data = pattern(0, 512 * 1024, 9);
    assert_eq!(client.write(0, &data), 0);
    assert_eq!(client.read(0, data.len() as u32), data);
    drop(client);
    assert!(server.finish().ejections.is_empty());
}

#[test]
fn nbd_refuses_bad_requests_with_the_protocols_errors_and_keeps_serving() {
    let dir = scratch("refusals");
    let server = start(options(&dir), native_policy("deadline").unwrap(), None);
    let mut c = Client::connect(&server.socket);
    let end = c.size;
    // Past the end: a read is invalid, a write has no space; its payload is skipped.
    assert_eq!(c.call(READ, 0, end - 512, 1024, &[]).0, EINVAL);
    assert_eq!(c.call(WRITE, 0, end - 512, 1024, &[7; 1024]).0, ENOSPC);
    assert_eq!(c.call(READ, 0, u64::MAX - 511, 512, &[]).0, EINVAL);
    // Not whole sectors, for O_DIRECT.
    assert_eq!(c.call(WRITE, 0, 100, 512, &[7; 512]).0, EINVAL);
    assert_eq!(c.call(READ, 0, 0, 100, &[]).0, EINVAL);
    // A command the server does not know.
    assert_eq!(c.call(42, 0, 0, 0, &[]).0, EINVAL);
    // A read larger than the export accepts.
    assert_eq!(c.call(READ, 0, 0, 64 << 20, &[]).0, EINVAL);
    // Still in step: real I/O works and nothing was written by the refused writes.
    assert_eq!(c.read(end - 512, 512), vec![0u8; 512]);
    assert_eq!(c.read(0, 4096), vec![0u8; 4096]);
    drop(c);
    let served = server.finish();
    assert_eq!(served.clients.latest[0].tally.errors, 7);
    assert_eq!(served.clients.latest[0].closed_because, None);
}

#[test]
fn nbd_read_only_export_refuses_writes_trims_and_zeroes_and_leaves_the_file_alone() {
    let dir = scratch("read_only");
    let original = pattern(0, 4 * MIB as usize, 3);
    std::fs::write(dir.join("disk.img"), &original).unwrap();
    let mut opts = options(&dir);
    opts.exports[0].read_only = true;
    opts.size = None;
    let server = start(opts, native_policy("noop").unwrap(), None);
    let mut c = Client::connect(&server.socket);
    assert_eq!(c.call(WRITE, 0, 0, 4096, &[0; 4096]).0, EPERM);
    assert_eq!(c.call(TRIM, 0, 0, 4096, &[]).0, EPERM);
    assert_eq!(c.call(WRITE_ZEROES, 0, 0, 4096, &[]).0, EPERM);
    assert_eq!(c.read(0, 8192), original[..8192]);
    drop(c);
    server.finish();
    assert_eq!(std::fs::read(dir.join("disk.img")).unwrap(), original);
}

#[test]
fn nbd_refuses_to_export_an_existing_file_writable_without_allow_overwrite() {
    let dir = scratch("overwrite_guard");
    std::fs::write(dir.join("disk.img"), vec![1u8; 1 << 20]).unwrap();
    let existing = ServeOptions {
        size: None,
        ..options(&dir)
    };
    let err = refusal(&existing);
    assert!(err.contains("--allow-overwrite"), "{err}");
    assert!(err.contains("--read-only"), "{err}");
    assert!(!dir.join("nbd.sock").exists());
    let mut missing = ServeOptions {
        size: None,
        ..options(&dir)
    };
    missing.exports[0].device = dir.join("missing.img");
    assert!(refusal(&missing).contains("--size"));
    // A taken address fails before anything is created.
    std::fs::write(dir.join("taken.sock"), b"").unwrap();
    let mut taken = ServeOptions {
        address: Address::Unix(dir.join("taken.sock")),
        ..options(&dir)
    };
    taken.exports[0].device = dir.join("new.img");
    assert!(refusal(&taken).contains("binding"));
    assert!(!dir.join("new.img").exists());
    assert_eq!(
        std::fs::read(dir.join("disk.img")).unwrap(),
        vec![1u8; 1 << 20]
    );
}

/// The message of a server that must refuse to start under `options`.
fn refusal(options: &ServeOptions) -> String {
    let stop = AtomicBool::new(false);
    nbd::serve(
        options,
        &plan(),
        vec![native_policy("noop").unwrap()],
        &[],
        None,
        &stop,
        |_| panic!("must not listen"),
    )
    .unwrap_err()
    .to_string()
}

#[test]
fn nbd_trim_and_write_zeroes_read_back_as_zeroes() {
    let dir = scratch("zeroes");
    let server = start(options(&dir), native_policy("noop").unwrap(), None);
    let mut c = Client::connect(&server.socket);
    let data = pattern(0, 4 * MIB as usize, 0x77);
    for (i, chunk) in data.chunks(MIB as usize).enumerate() {
        assert_eq!(c.write(i as u64 * MIB, chunk), 0);
    }
    assert_eq!(c.call(WRITE_ZEROES, FLAG_FUA, 0, MIB as u32, &[]).0, 0);
    assert_eq!(c.call(TRIM, 0, 2 * MIB, MIB as u32, &[]).0, 0);
    assert_eq!(c.read(0, MIB as u32), vec![0u8; MIB as usize]);
    assert_eq!(
        c.read(MIB, MIB as u32),
        data[MIB as usize..2 * MIB as usize]
    );
    assert_eq!(c.read(2 * MIB, MIB as u32), vec![0u8; MIB as usize]);
    assert_eq!(c.read(3 * MIB, MIB as u32), data[3 * MIB as usize..]);
    drop(c);
    let tally = server.finish().clients.latest[0].tally;
    assert_eq!((tally.zeroes, tally.trims), (1, 1));
}

#[test]
fn nbd_pipelined_writes_then_disconnect_all_reach_the_disk() {
    let dir = scratch("disconnect");
    let server = start(options(&dir), native_policy("cfq").unwrap(), None);
    let mut c = Client::connect(&server.socket);
    // 64 writes and a disconnect, without reading a single reply.
    for i in 0..64u64 {
        let offset = i * 65536;
        c.send(WRITE, 0, offset, 65536, &pattern(offset, 65536, 0x42));
    }
    c.send(DISC, 0, 0, 0, &[]);
    drop(c);
    // Another client sees every write once the first connection's I/O finished.
    let mut check = Client::connect(&server.socket);
    let all_there = |check: &mut Client| {
        (0..64u64).all(|i| check.read(i * 65536, 65536) == pattern(i * 65536, 65536, 0x42))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !all_there(&mut check) {
        assert!(std::time::Instant::now() < deadline, "writes went missing");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(check);
    let served = server.finish();
    let first = served
        .clients
        .latest
        .iter()
        .find(|c| c.tally.writes > 0)
        .unwrap();
    assert_eq!(first.tally.writes, 64);
    assert_eq!(first.tally.errors, 0);
}

#[test]
fn nbd_hostile_clients_are_closed_while_a_good_client_keeps_running() {
    let dir = scratch("hostile");
    let server = start(options(&dir), native_policy("bfq").unwrap(), None);
    let mut good = Client::connect(&server.socket);
    let data = pattern(0, 256 * 1024, 0x11);
    assert_eq!(good.write(0, &data), 0);

    // Garbage instead of a request header.
    let mut garbage = Client::connect(&server.socket);
    garbage.stream.write_all(&[0xff; 28]).unwrap();
    assert!(garbage.is_closed());

    // A write header announcing more payload than the export takes.
    let mut oversize = Client::connect(&server.socket);
    oversize.send(WRITE, 0, 0, 64 << 20, &[]);
    assert!(oversize.is_closed());

    // Unknown client flags during the handshake.
    let mut raw = UnixStream::connect(&server.socket).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut greeting = [0u8; 18];
    raw.read_exact(&mut greeting).unwrap();
    raw.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let mut rest = Vec::new();
    let _ = raw.read_to_end(&mut rest);
    assert!(rest.is_empty(), "closed without a reply");

    // A client that hangs up in the middle of a write's payload.
    let mut quitter = Client::connect(&server.socket);
    quitter.send(WRITE, 0, MIB, 65536, &[0xee; 1000]);
    drop(quitter);

    // The good client never noticed.
    assert_eq!(good.read(0, data.len() as u32), data);
    assert_eq!(
        good.read(MIB, 4096),
        vec![0u8; 4096],
        "the partial write never landed"
    );
    drop(good);
    let served = server.finish();
    let closed: Vec<&str> = served
        .clients
        .latest
        .iter()
        .filter_map(|c| c.closed_because.as_deref())
        .collect();
    assert!(closed.iter().any(|w| w.contains("magic")), "{closed:?}");
    assert!(closed.iter().any(|w| w.contains("exceeds")), "{closed:?}");
    assert!(closed.iter().any(|w| w.contains("payload")), "{closed:?}");
    assert!(served.ejections.is_empty());
}

#[test]
fn nbd_concurrent_clients_get_their_own_ctx_and_their_own_data() {
    let dir = scratch("concurrent");
    let server = start(options(&dir), native_policy("cfq").unwrap(), None);
    let socket = server.socket.clone();
    let workers: Vec<_> = (0..4u64)
        .map(|k| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(&socket);
                let base = k * 4 * MIB;
                for round in 0..8u64 {
                    let offset = base + round * 256 * 1024;
                    let data = pattern(offset, 256 * 1024, k as u8);
                    assert_eq!(c.write(offset, &data), 0);
                }
                for round in 0..8u64 {
                    let offset = base + round * 256 * 1024;
                    assert_eq!(
                        c.read(offset, 256 * 1024),
                        pattern(offset, 256 * 1024, k as u8)
                    );
                }
                // Stay connected until every worker wrote, so the ctxs overlap.
                std::thread::sleep(Duration::from_millis(200));
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let served = server.finish();
    let mut ctxs: Vec<u32> = served.clients.latest.iter().map(|c| c.ctx).collect();
    ctxs.sort_unstable();
    assert_eq!(ctxs, vec![0, 1, 2, 3]);
    assert!(
        served
            .clients
            .latest
            .iter()
            .all(|c| c.tally.writes == 8 && c.tally.reads == 8)
    );
}

/// Threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

#[test]
fn nbd_serves_200_connected_clients_without_a_thread_each() {
    const CLIENTS: u64 = 200;
    let dir = scratch("many_clients");
    let server = start(options(&dir), native_policy("noop").unwrap(), None);
    let mut clients: Vec<Client> = (0..CLIENTS)
        .map(|_| Client::connect(&server.socket))
        .collect();
    for (k, c) in clients.iter_mut().enumerate() {
        let offset = k as u64 * 4096;
        assert_eq!(c.write(offset, &pattern(offset, 4096, k as u8)), 0);
    }
    // Every client is past its handshake and connected. A thread per connection would show
    // here as CLIENTS of them or more; other tests' handshakes in flight are a few dozen.
    let nbd_threads = threads_named("schedhost-nbd");
    assert!(
        nbd_threads < CLIENTS as usize / 2,
        "{nbd_threads} NBD threads for {CLIENTS} connected clients"
    );
    for (k, c) in clients.iter_mut().enumerate().rev() {
        let offset = k as u64 * 4096;
        assert_eq!(c.read(offset, 4096), pattern(offset, 4096, k as u8));
    }
    drop(clients);
    let served = server.finish();
    assert_eq!(served.clients.latest.len(), CLIENTS as usize);
    assert!(
        served
            .clients
            .latest
            .iter()
            .all(|c| c.tally.writes == 1 && c.tally.reads == 1)
    );
}

#[test]
fn nbd_policy_swaps_through_the_control_socket_while_clients_write() {
    let dir = scratch("swaps");
    let control = dir.join("ctl.sock");
    let server = start(
        options(&dir),
        native_policy("noop").unwrap(),
        Some(control.clone()),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let socket = server.socket.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut c = Client::connect(&socket);
            let mut rounds = 0u64;
            while !stop.load(Ordering::Acquire) {
                let offset = (rounds % 32) * 65536;
                let data = pattern(offset, 65536, rounds as u8);
                assert_eq!(c.write(offset, &data), 0);
                assert_eq!(c.read(offset, 65536), data, "round {rounds}");
                rounds += 1;
            }
            rounds
        })
    };
    let names: Vec<String> = ["deadline", "cfq", "bfq", "noop"]
        .iter()
        .map(|n| match component(n) {
            Some(path) => path.display().to_string(),
            None => format!("native:{n}"),
        })
        .collect();
    for i in 0..40 {
        let reply =
            schedhost::control::request(&control, &format!("swap {}", names[i % 4])).unwrap();
        assert_eq!(reply["ok"], true, "swap {i}: {reply}");
    }
    // Tunables too, while the client writes: deadline's fifo_batch.
    let reply = schedhost::control::request(&control, &format!("swap {}", names[0])).unwrap();
    assert_eq!(reply["ok"], true, "{reply}");
    let reply = schedhost::control::request(&control, "set fifo_batch=4").unwrap();
    assert_eq!(reply["ok"], true, "{reply}");
    let tunables = schedhost::control::request(&control, "get").unwrap();
    assert_eq!(tunables["tunables"]["fifo_batch"], 4, "{tunables}");
    let status = schedhost::control::request(&control, "status").unwrap();
    assert_eq!(status["ok"], true);
    stop.store(true, Ordering::Release);
    let rounds = writer.join().unwrap();
    assert!(rounds > 0);
    let served = server.finish();
    assert_eq!(served.swaps.len(), 41);
    assert!(served.swaps.iter().all(|s| s.result.is_ok()));
    assert_eq!(served.clients.latest[0].tally.errors, 0);
}

/// A real client program; `None` (skipped) when it is not installed, unless the tests run
/// under `cargo xtask test`, which installs them and requires them.
fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("SCHEDHOST_REQUIRE_CLIENTS").is_none(),
            "{name} is missing: `cargo xtask test` installs qemu-utils, libnbd-bin and fio"
        );
        eprintln!("skipping: {name} is not installed");
    }
    found
}

/// Runs `command`, failing the test with its output unless it succeeds.
fn succeed(command: &mut Command) -> String {
    let out = command.output().expect("the client starts");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{command:?} failed:\n{text}");
    text
}

#[test]
fn qemu_img_converts_an_image_into_the_export_and_compares_it_back() {
    let Some(qemu_img) = tool("qemu-img") else {
        return;
    };
    let dir = scratch("qemu_img");
    let source = dir.join("source.raw");
    std::fs::write(&source, pattern(0, 12 * MIB as usize, 0x3c)).unwrap();
    let server = start(options(&dir), native_policy("deadline").unwrap(), None);
    let uri = server.uri();
    succeed(
        Command::new(&qemu_img)
            .args(["convert", "-n", "-f", "raw", "-O", "raw"])
            .arg(&source)
            .arg(&uri),
    );
    let compare = succeed(
        Command::new(&qemu_img)
            .args(["compare", "-f", "raw", "-F", "raw"])
            .arg(&source)
            .arg(&uri),
    );
    assert!(compare.contains("Images are identical"), "{compare}");
    let served = server.finish();
    let written: u64 = served
        .clients
        .latest
        .iter()
        .map(|c| c.tally.bytes_written)
        .sum();
    assert!(written >= 12 * MIB, "qemu-img wrote {written} bytes");
}

#[test]
fn qemu_io_writes_and_verifies_patterns_including_unaligned_and_zeroed_ranges() {
    let Some(qemu_io) = tool("qemu-io") else {
        return;
    };
    let dir = scratch("qemu_io");
    let server = start(options(&dir), native_policy("kyber").unwrap(), None);
    let commands = [
        "write -P 0xab 0 1M",
        "write -P 0x11 1 3",
        "read -P 0x11 1 3",
        "read -P 0xab 4 4092",
        "write -z 64k 128k",
        "read -P 0 64k 128k",
        "write -P 0x5e -f 2M 256k",
        "read -P 0x5e 2M 256k",
        "discard 4M 1M",
        "read -P 0 4M 1M",
        "flush",
    ];
    let mut cmd = Command::new(&qemu_io);
    cmd.args(["-f", "raw"]);
    for c in commands {
        cmd.args(["-c", c]);
    }
    let out = succeed(cmd.arg(server.uri()));
    assert!(!out.contains("Pattern verification failed"), "{out}");
    assert!(out.contains("read 3/3 bytes at offset 1"), "{out}");
    server.finish();
}

#[test]
fn nbdinfo_and_nbdcopy_see_and_copy_the_export() {
    let (Some(nbdinfo), Some(nbdcopy)) = (tool("nbdinfo"), tool("nbdcopy")) else {
        return;
    };
    let dir = scratch("nbdcopy");
    let source = dir.join("source.raw");
    let data = pattern(0, 16 * MIB as usize, 0x21);
    std::fs::write(&source, &data).unwrap();
    let server = start(options(&dir), native_policy("cfq").unwrap(), None);
    let uri = server.uri();
    let info = succeed(Command::new(&nbdinfo).arg("--json").arg(&uri));
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    let export = &info["exports"][0];
    assert_eq!(export["export-size"], 16 * MIB);
    assert_eq!(export["can_flush"], true);
    assert_eq!(export["can_multi_conn"], true);
    assert_eq!(export["block_size_minimum"], 512);
    succeed(Command::new(&nbdcopy).arg(&source).arg(&uri));
    let back = dir.join("back.raw");
    succeed(Command::new(&nbdcopy).arg(&uri).arg(&back));
    assert!(
        std::fs::read(&back).unwrap() == data,
        "nbdcopy read back other bytes"
    );
    let served = server.finish();
    assert!(served.clients.latest.len() >= 2);
}

#[test]
fn fio_nbd_engine_verifies_its_writes_through_the_server() {
    let Some(fio) = tool("fio") else { return };
    let dir = scratch("fio_verify");
    let server = start(options(&dir), native_policy("bfq").unwrap(), None);
    let out = succeed(
        Command::new(&fio)
            .current_dir(&dir)
            .args([
                "--name=verify",
                "--ioengine=nbd",
                "--rw=randwrite",
                "--bs=4k",
                "--size=8m",
                "--iodepth=16",
                "--verify=crc32c",
                "--do_verify=1",
                "--verify_state_save=0",
                "--output-format=json",
            ])
            .arg(format!("--uri={}", server.uri())),
    );
    let json_start = out.find('{').expect("fio printed JSON");
    let report: serde_json::Value =
        serde_json::from_str(&out[json_start..out.rfind('}').unwrap() + 1]).unwrap();
    let job = &report["jobs"][0];
    assert_eq!(job["error"], 0);
    assert_eq!(job["write"]["total_ios"], 2048);
    // fio connects once to size the export, then once for the job.
    let served = server.finish();
    let writes: u64 = served.clients.latest.iter().map(|c| c.tally.writes).sum();
    let reads: u64 = served.clients.latest.iter().map(|c| c.tally.reads).sum();
    assert_eq!(writes, 2048);
    assert!(reads >= 2048, "the verify pass read it all back");
}

#[test]
fn nbd_trace_events_record_each_clients_bios_under_its_ctx() {
    let dir = scratch("trace_events");
    let path = dir.join("serve.events");
    let mut opts = options(&dir);
    opts.trace_events = Some(path.clone());
    let server = start(opts, native_policy("noop").unwrap(), None);
    // The second client connects after the first wrote, so the first holds ctx 0.
    let mut a = Client::connect(&server.socket);
    assert_eq!(a.write(0, &[1; 4096]), 0);
    let mut b = Client::connect(&server.socket);
    assert_eq!(b.write(MIB, &[2; 512 * 1024]), 0);
    drop((a, b));
    server.finish();
    let (_, events) = schedhost::observe::events::file::read(&path).unwrap();
    let queued = |ctx: u32| {
        events
            .iter()
            .filter(|e| e.kind == schedhost::observe::events::Kind::Queue && e.ctx == ctx)
            .count()
    };
    assert_eq!(queued(0), 1, "one 4 KiB bio");
    assert_eq!(queued(1), 2, "512 KiB split into two bios");
    assert!(
        events
            .iter()
            .any(|e| matches!(e.kind, schedhost::observe::events::Kind::Complete(0)))
    );
}

/// One exposition sample: name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

/// Checks `text` is well-formed Prometheus exposition (version 0.0.4) and returns its samples.
fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut typed = std::collections::HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            typed.insert(name.to_owned(), kind.to_owned());
            continue;
        }
        if line.starts_with("# HELP ") || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value in {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').expect("labels end with }");
                let mut labels = Vec::new();
                for pair in body.split("\",").filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once("=\"").expect("label=\"value\"");
                    labels.push((k.to_owned(), v.trim_end_matches('"').to_owned()));
                }
                (name, labels)
            }
            None => (series, Vec::new()),
        };
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{name}"
        );
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|f| typed.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        assert!(typed.contains_key(family), "{name} has no TYPE line");
        samples.push((name.to_owned(), labels, value));
    }
    samples
}

#[test]
fn nbd_metrics_endpoint_serves_prometheus_text_that_curl_scrapes_during_io() {
    let Some(curl) = tool("curl") else { return };
    let dir = scratch("metrics");
    let mut opts = options(&dir);
    opts.metrics = Some("127.0.0.1:0".into());
    let server = start(opts, native_policy("cfq").unwrap(), None);
    let address = server.metrics.expect("metrics address");
    let mut a = Client::connect(&server.socket);
    for i in 0..16u64 {
        assert_eq!(a.write(i * 65536, &[3; 65536]), 0);
    }
    let _ = a.read(0, 65536);
    let url = format!("http://{address}/metrics");
    let text = succeed(
        Command::new(&curl)
            .args(["-sS", "--fail", "--max-time", "10"])
            .arg(&url),
    );
    let samples = parse_exposition(&text);
    let find = |name: &str, want: &[(&str, &str)]| {
        samples
            .iter()
            .filter(|(n, labels, _)| {
                n == name
                    && want
                        .iter()
                        .all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|s| s.2)
            .sum::<f64>()
    };
    assert_eq!(
        find("schedhost_ios_total", &[("ctx", "0"), ("op", "write")]),
        16.0
    );
    assert_eq!(
        find("schedhost_bytes_total", &[("ctx", "0"), ("op", "write")]),
        16.0 * 65536.0
    );
    assert_eq!(
        find("schedhost_ios_total", &[("ctx", "0"), ("op", "read")]),
        1.0
    );
    assert_eq!(
        find("schedhost_latency_seconds_count", &[("ctx", "0")]),
        17.0
    );
    assert_eq!(
        find(
            "schedhost_latency_seconds_bucket",
            &[("ctx", "0"), ("le", "+Inf")]
        ),
        17.0
    );
    for op in ["read", "write"] {
        let buckets: Vec<f64> = samples
            .iter()
            .filter(|(n, l, _)| {
                n == "schedhost_latency_seconds_bucket"
                    && l.iter().any(|(k, v)| k == "op" && v == op)
            })
            .map(|s| s.2)
            .collect();
        assert!(
            buckets.windows(2).all(|w| w[0] <= w[1]),
            "cumulative {op} buckets: {buckets:?}"
        );
    }
    assert_eq!(
        find(
            "schedhost_policy_info",
            &[("policy", "cfq"), ("epoch", "0")]
        ),
        1.0,
        "which policy runs is its own series"
    );
    assert!(
        samples
            .iter()
            .filter(|(n, _, _)| n != "schedhost_policy_info")
            .all(|(_, l, _)| l.iter().all(|(k, _)| k != "policy")),
        "no counter carries the policy, so a swap cannot relabel its history"
    );
    assert_eq!(
        find(
            "schedhost_latency_seconds_count",
            &[("ctx", "0"), ("op", "write")]
        ),
        16.0
    );
    assert_eq!(find("schedhost_swaps_total", &[]), 0.0);
    assert_eq!(find("schedhost_tunable_sets_total", &[]), 0.0);
    assert!(find("schedhost_policy_call_seconds_total", &[]) > 0.0);
    // Anything but GET /metrics is refused with a status, not a crash.
    let missing = Command::new(&curl)
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://{address}/other"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&missing.stdout), "404");
    drop(a);
    server.finish();
}

#[test]
fn nbd_a_client_that_never_reads_its_replies_cannot_hold_up_the_others() {
    let dir = scratch("stuck_reader");
    let server = start(options(&dir), native_policy("noop").unwrap(), None);
    let mut stuck = Client::connect(&server.socket);
    // 100 reads of 1 MiB, more than the whole buffer pool, and none of the replies read: its
    // replier blocks once the socket buffer fills, and its reads keep their slots, up to its
    // quota.
    for i in 0..100u64 {
        stuck.send(READ, 0, (i % 16) * MIB, MIB as u32, &[]);
    }
    std::thread::sleep(Duration::from_millis(200));
    let mut good = Client::connect(&server.socket);
    // Without the quota the pool would be empty until the stuck replier's write timeout
    // (30 s); this fails well before that.
    good.stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    for i in 0..32u64 {
        let data = pattern(i * 131_072, 131_072, 0x6c);
        assert_eq!(good.write(i * 131_072, &data), 0);
        assert_eq!(good.read(i * 131_072, 131_072), data, "round {i}");
    }
    drop(good);
    drop(stuck);
    let served = server.finish();
    assert_eq!(served.clients.latest.len(), 2);
}

#[test]
fn nbd_turns_clients_away_past_max_clients_and_serves_the_rest() {
    let dir = scratch("max_clients");
    let mut opts = options(&dir);
    opts.max_clients = 2;
    let server = start(opts, native_policy("noop").unwrap(), None);
    let mut a = Client::connect(&server.socket);
    let _b = Client::connect(&server.socket);
    // The third is closed before the greeting.
    let mut third = UnixStream::connect(&server.socket).unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut greeting = Vec::new();
    let _ = third.read_to_end(&mut greeting);
    assert!(greeting.is_empty(), "{} bytes of greeting", greeting.len());
    assert_eq!(a.write(0, &[5; 4096]), 0);
    assert_eq!(a.read(0, 4096), vec![5; 4096]);
    drop(a);
    drop(_b);
    assert_eq!(server.finish().clients.latest.len(), 2);
}

#[test]
fn nbd_clients_see_device_faults_as_nbd_errors_and_busy_answers_retried_away() {
    let dir = scratch("faults");
    let faulty = |text: &str| RunPlan {
        faults: schedhost::backend::sim::FaultPlan::parse(text).unwrap(),
        ..plan()
    };
    let server = start_planned(
        options(&dir),
        faulty("read_errors=1"),
        native_policy("noop").unwrap(),
        None,
    );
    let mut client = Client::connect(&server.socket);
    assert_eq!(client.write(0, &[9; 4096]), 0, "writes do not fail");
    let (error, _) = client.call(READ, 0, 0, 4096, &[]);
    assert_eq!(error, 5, "a failed read reaches the client as NBD_EIO");
    drop(client);
    server.finish();
    // Busy answers are requeued by the host: the client never sees them.
    let dir = scratch("faults_busy");
    let server = start_planned(
        options(&dir),
        faulty("busy=0.3,seed=5"),
        native_policy("deadline").unwrap(),
        None,
    );
    let mut client = Client::connect(&server.socket);
    for i in 0..32u64 {
        let data = pattern(i * 65536, 65536, 0x5a);
        assert_eq!(client.write(i * 65536, &data), 0, "write {i}");
        assert_eq!(client.read(i * 65536, 65536), data, "read {i}");
    }
}

/// `GET /metrics` over a plain TCP connection: the body.
fn scrape(address: std::net::SocketAddr) -> String {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

#[test]
fn nbd_a_swap_and_a_set_keep_every_counters_series_and_are_recorded() {
    let dir = scratch("swap_metrics");
    let control = dir.join("ctl.sock");
    let mut opts = options(&dir);
    opts.metrics = Some("127.0.0.1:0".into());
    let server = start(opts, native_policy("noop").unwrap(), Some(control.clone()));
    let address = server.metrics.expect("metrics address");
    let mut client = Client::connect(&server.socket);
    for i in 0..8u64 {
        assert_eq!(client.write(i * 65536, &[5; 65536]), 0);
    }
    let before = parse_exposition(&scrape(address));
    let reply = schedhost::control::request(&control, "swap native:deadline").unwrap();
    assert_eq!(reply["ok"], true, "{reply}");
    assert!(reply["stall_ns"].is_u64(), "ctl answers in ns: {reply}");
    let reply = schedhost::control::request(&control, "set fifo_batch=4").unwrap();
    assert_eq!(reply["ok"], true, "{reply}");
    for i in 0..8u64 {
        let _ = client.read(i * 65536, 65536);
    }
    let after = parse_exposition(&scrape(address));
    let value = |samples: &[Sample], name: &str, labels: &[(String, String)]| {
        samples
            .iter()
            .find(|(n, l, _)| n == name && l == labels)
            .map(|s| s.2)
    };
    for (name, labels, old) in &before {
        if name == "schedhost_policy_info" {
            continue;
        }
        let new = value(&after, name, labels)
            .unwrap_or_else(|| panic!("{name}{labels:?} vanished after the swap"));
        if name.ends_with("_total") || name.ends_with("_count") || name.ends_with("_bucket") {
            assert!(
                new >= *old,
                "{name}{labels:?} went back from {old} to {new}"
            );
        }
    }
    let info = |samples: &[Sample]| {
        samples
            .iter()
            .find(|(n, _, _)| n == "schedhost_policy_info")
            .map(|(_, l, _)| l.clone())
            .unwrap()
    };
    assert!(info(&before).contains(&("policy".into(), "noop".into())));
    assert!(info(&after).contains(&("policy".into(), "deadline".into())));
    assert!(info(&after).contains(&("epoch".into(), "1".into())));
    assert_eq!(value(&after, "schedhost_swaps_total", &[]), Some(1.0));
    assert_eq!(
        value(&after, "schedhost_tunable_sets_total", &[]),
        Some(1.0)
    );
    drop(client);
    let served = server.finish();
    assert_eq!(served.swaps.len(), 1);
    assert_eq!(served.swaps[0].from, "noop");
    assert_eq!(served.sets.len(), 1);
    assert_eq!(served.sets[0].name, "fifo_batch");
    let json = serde_json::to_value(&served.sets).unwrap();
    assert_eq!(json[0]["ok"], true, "{json}");
}

#[test]
fn nbd_an_exports_group_limit_holds_every_client_and_ctl_changes_it_while_they_run() {
    let dir = scratch("group_limit");
    let control = dir.join("ctl.sock");
    let mut opts = options(&dir);
    opts.metrics = Some("127.0.0.1:0".into());
    // 20 writes at 20 IOPS: a client slowed by a loaded machine still writes faster than
    // the limit (at 200 IOPS, one taking 5 ms a write was never held, and the suite failed).
    opts.groups =
        vec![schedhost::value::parse_group("tenant:wiops=20,riops_burst=2,riops=100").unwrap()];
    opts.exports[0].group = Some("tenant".into());
    let server = start(opts, native_policy("noop").unwrap(), Some(control.clone()));
    let address = server.metrics.expect("metrics address");
    let mut a = Client::connect(&server.socket);
    let mut b = Client::connect(&server.socket);
    for i in 0..10u64 {
        assert_eq!(a.write(i * 65536, &[1; 65536]), 0);
        assert_eq!(b.write((i + 10) * 65536, &[2; 65536]), 0);
    }
    let samples = parse_exposition(&scrape(address));
    let find = |name: &str, want: &[(&str, &str)]| {
        samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && want
                        .iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|s| s.2)
            .sum::<f64>()
    };
    assert_eq!(
        find(
            "schedhost_group_ios_total",
            &[("group", "tenant"), ("op", "write")]
        ),
        20.0,
        "both clients' writes are the export's group's"
    );
    assert!(find("schedhost_group_throttled_total", &[("group", "tenant")]) > 0.0);
    assert_eq!(
        find(
            "schedhost_group_limit",
            &[("group", "tenant"), ("key", "wiops")]
        ),
        20.0
    );
    let reply = schedhost::control::request(&control, "group tenant:wiops=5000").unwrap();
    assert_eq!(reply["ok"], true, "{reply}");
    let groups = schedhost::control::request(&control, "groups").unwrap();
    assert_eq!(groups["devices"][0]["groups"][0]["wiops"], 5000, "{groups}");
    assert_eq!(
        groups["devices"][0]["groups"][0]["riops"], 100,
        "a key not given keeps its value, as in cgroup's io.max"
    );
    let reply = schedhost::control::request(&control, "group tenant:riops=max").unwrap();
    assert_eq!(reply["ok"], true, "{reply}");
    let orphan = schedhost::control::request(&control, "group tenant:riops_burst=4").unwrap();
    assert_eq!(orphan["ok"], false, "a burst without its rate: {orphan}");
    let groups = schedhost::control::request(&control, "groups").unwrap();
    let tenant = &groups["devices"][0]["groups"][0];
    assert!(tenant["riops"].is_null(), "max removes the limit: {groups}");
    assert_eq!(tenant["wiops"], 5000, "{groups}");
    let unknown = schedhost::control::request(&control, "group other:riops=1").unwrap();
    assert_eq!(unknown["ok"], false);
    assert!(
        unknown["error"]
            .as_str()
            .unwrap()
            .contains("no group \"other\""),
        "{unknown}"
    );
    assert_eq!(a.write(0, &[3; 65536]), 0);
    assert_eq!(
        a.read(0, 65536),
        vec![3; 65536],
        "held I/O is not lost or reordered"
    );
    drop((a, b));
    let served = server.finish();
    assert_eq!(served.clients.latest.len(), 2);
}

#[test]
fn nbd_several_exports_share_one_device_each_in_its_group_or_use_their_own() {
    let dir = scratch("several_exports");
    let control = dir.join("ctl.sock");
    let mut opts = options(&dir);
    let export = |name: &str, file: &str, group: Option<&str>| ExportSpec {
        name: name.into(),
        device: dir.join(file),
        read_only: false,
        group: group.map(Into::into),
    };
    opts.exports = vec![
        export("a", "disk.img", Some("gold")),
        // The same file by another path: still one device.
        export("b", "./disk.img", Some("bronze")),
        export("c", "other.img", None),
    ];
    opts.groups = vec![schedhost::value::parse_group("gold:weight=300,wiops=100000").unwrap()];
    // Two devices: one scheduler (policy instance) each.
    assert_eq!(opts.devices().len(), 2);
    let server = start_noop_devices(opts, plan(), Some(control.clone()));
    let socket = server.socket.clone();
    let mut a = Client::connect_to(&socket, "a");
    let mut b = Client::connect_to(&socket, "b");
    let mut c = Client::connect_to(&socket, "c");
    assert_eq!(a.write(0, &[1; 4096]), 0);
    assert_eq!(b.write(4096, &[2; 8192]), 0);
    assert_eq!(c.write(0, &[3; 4096]), 0);
    // a and b are one file; c is another.
    assert_eq!(b.read(0, 4096), vec![1; 4096]);
    assert_eq!(a.read(4096, 8192), vec![2; 8192]);
    assert_eq!(c.read(0, 4096), vec![3; 4096]);
    let groups = schedhost::control::request(&control, "groups").unwrap();
    let disk = &groups["devices"][0]["groups"];
    assert_eq!(disk[0]["name"], "gold", "{groups}");
    assert_eq!(disk[0]["weight"], 300);
    assert_eq!(disk[0]["ios"][1], 1, "a's write is gold's: {groups}");
    assert_eq!(
        disk[1]["name"], "bronze",
        "a group without --group is a peer"
    );
    assert_eq!(disk[1]["weight"], 100);
    assert_eq!(disk[1]["ios"][1], 1, "b's write is bronze's: {groups}");
    assert!(
        groups["devices"][1]["groups"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let reply = schedhost::control::request(&control, "group gold:weight=50").unwrap();
    assert_eq!(reply["group"]["wiops"], 100000, "{reply}");
    assert_eq!(reply["group"]["weight"], 50, "{reply}");
    drop((a, b, c));
    let served = server.finish();
    let names: Vec<&str> = served.exports.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let mut exports: Vec<&str> = served
        .clients
        .latest
        .iter()
        .map(|c| c.export.as_str())
        .collect();
    exports.sort_unstable();
    assert_eq!(exports, ["a", "b", "c"]);
    assert_eq!(served.groups.len(), 2);
}

#[test]
fn nbd_exports_and_groups_that_do_not_fit_are_refused_by_name() {
    let dir = scratch("bad_exports");
    let mut twice = options(&dir);
    twice.exports.push(twice.exports[0].clone());
    assert!(refusal(&twice).contains("export \"disk\" is named twice"));
    let mut orphan = options(&dir);
    orphan.groups = vec![schedhost::value::parse_group("lost:weight=5").unwrap()];
    let err = refusal(&orphan);
    assert!(err.contains("group \"lost\": no export is in it"), "{err}");
    let mut none = options(&dir);
    none.exports.clear();
    assert!(refusal(&none).contains("nothing to export"));
    assert!(!dir.join("disk.img").exists(), "nothing was created");
}

#[test]
fn nbd_a_tenant_held_by_its_write_limit_never_holds_up_another_exports_clients() {
    let dir = scratch("tenant_isolation");
    let control = dir.join("ctl.sock");
    let mut opts = options(&dir);
    let export = |name: &str, file: &str, group: Option<&str>| ExportSpec {
        name: name.into(),
        device: dir.join(file),
        read_only: false,
        group: group.map(Into::into),
    };
    opts.exports = vec![
        export("slow", "slow.img", Some("slow")),
        export("free", "free.img", None),
    ];
    opts.size = Some(96 * MIB);
    opts.groups = vec![schedhost::value::parse_group("slow:wiops=2").unwrap()];
    let server = start_noop_devices(opts, plan(), Some(control.clone()));
    let socket = server.socket.clone();
    // Five connections each pipeline 64 writes of 256 KiB (a data slot each: more than
    // the whole pool), and one pipelines 400 flushes (more than every control slot).
    let chunk = 256 * 1024;
    let flooders: Vec<_> = (0..6u64)
        .map(|i| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect_to(&socket, "slow");
                c.stream
                    .set_read_timeout(Some(Duration::from_secs(120)))
                    .unwrap();
                let sent = if i < 5 { 64 } else { 400 };
                let mut reader = c.stream.try_clone().unwrap();
                let replies = std::thread::spawn(move || {
                    let mut header = [0u8; 16];
                    let mut errors = 0;
                    for _ in 0..sent {
                        reader.read_exact(&mut header).unwrap();
                        errors += usize::from(header[4..8] != [0; 4]);
                    }
                    errors
                });
                for n in 0..sent {
                    if i < 5 {
                        let offset = (i * 64 + n) * chunk;
                        c.send(
                            WRITE,
                            0,
                            offset,
                            chunk as u32,
                            &vec![i as u8; chunk as usize],
                        );
                    } else {
                        c.send(FLUSH, 0, 0, 0, &[]);
                    }
                }
                replies.join().unwrap()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // The free export's client is served at once, though the slow tenant's bios wait.
    let mut free = Client::connect_to(&socket, "free");
    for timeout in [UnixStream::set_read_timeout, UnixStream::set_write_timeout] {
        timeout(&free.stream, Some(Duration::from_secs(10))).unwrap();
    }
    assert_eq!(
        free.write(0, &vec![7; 1 << 20]),
        0,
        "a 1 MiB write (4 data slots)"
    );
    assert_eq!(free.read(0, 1 << 20), vec![7; 1 << 20]);
    assert_eq!(
        free.call(FLUSH, 0, 0, 0, &[]).0,
        0,
        "a flush (a control slot)"
    );
    // Lift the limit: the slow tenant's requests all finish, none lost.
    let reply = schedhost::control::request(&control, "group slow:wiops=max").unwrap();
    assert_eq!(reply["ok"], true, "{reply}");
    for flooder in flooders {
        assert_eq!(flooder.join().unwrap(), 0, "every slow request succeeded");
    }
    drop(free);
    server.finish();
}

#[test]
fn nbd_resets_under_load_never_hand_one_exports_client_the_other_exports_data() {
    let dir = scratch("reset_two_exports");
    let mut opts = options(&dir);
    let export = |name: &str, file: &str| ExportSpec {
        name: name.into(),
        device: dir.join(file),
        read_only: false,
        group: None,
    };
    opts.exports = vec![export("a", "a.img"), export("b", "b.img")];
    opts.size = Some(32 * MIB);
    let mut plan = plan();
    // Resets from 2 s on, every 500 ms, while both exports' clients keep 32 large reads
    // and writes each in flight until 6.5 s.
    let started = std::time::Instant::now();
    let resets: Vec<String> = (0..8)
        .map(|i| format!("reset={}ms", 2000 + i * 500))
        .collect();
    plan.faults = schedhost::backend::sim::FaultPlan::parse(&resets.join(",")).unwrap();
    let server = start_noop_devices(opts, plan, None);
    let socket = server.socket.clone();
    let chunk: u32 = 1 << 20;
    let clients: Vec<_> = [("a", 1u8), ("b", 2u8)]
        .into_iter()
        .map(|(name, seed)| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect_to(&socket, name);
                let (mut good, mut failed) = (0, 0);
                let blocks = 32 * MIB / u64::from(chunk);
                // Made once, so the load below waits on the server, not on making patterns.
                let patterns: Vec<Vec<u8>> = (0..blocks)
                    .map(|b| pattern(b * u64::from(chunk), chunk as usize, seed))
                    .collect();
                // Each block of the export holds the export's own pattern, written until it
                // succeeds.
                for (block, data) in patterns.iter().enumerate() {
                    let offset = block as u64 * u64::from(chunk);
                    while c.write(offset, data) != 0 {
                        failed += 1;
                    }
                }
                // Past the last reset, and at least half a second of load whatever the
                // layout took on a slow disk.
                let deadline = (started + Duration::from_millis(6500))
                    .max(std::time::Instant::now() + Duration::from_millis(500));
                let mut n = 0u64;
                while std::time::Instant::now() < deadline {
                    // 32 requests of 1 MiB in flight, the two clients together the whole
                    // buffer pool: reads and rewrites of the same pattern.
                    let mut sent = Vec::new();
                    for _ in 0..32 {
                        n += 1;
                        let block = n * 7 % blocks;
                        let offset = block * u64::from(chunk);
                        let read = n.is_multiple_of(2);
                        let cookie = if read {
                            c.send(READ, 0, offset, chunk, &[])
                        } else {
                            c.send(WRITE, 0, offset, chunk, &patterns[block as usize])
                        };
                        sent.push((cookie, offset, read));
                    }
                    for _ in 0..sent.len() {
                        let (cookie, error, data) = c.receive(|cookie| {
                            let read = sent.iter().any(|&(k, _, r)| k == cookie && r);
                            if read { chunk as usize } else { 0 }
                        });
                        let &(_, offset, read) =
                            sent.iter().find(|&&(k, _, _)| k == cookie).unwrap();
                        if error != 0 {
                            failed += 1;
                            continue;
                        }
                        if read {
                            let block = (offset / u64::from(chunk)) as usize;
                            assert!(
                                data == patterns[block],
                                "export {name}: a successful read at {offset} holds other data"
                            );
                            good += 1;
                        }
                    }
                }
                eprintln!("export {name}: {good} good reads, {failed} failed requests");
                (good, failed)
            })
        })
        .collect();
    let mut failed_total = 0;
    for client in clients {
        let (good, failed) = client.join().unwrap();
        assert!(good > 0, "reads succeeded between the resets");
        failed_total += failed;
    }
    assert!(failed_total > 0, "the resets caught I/O in flight");
    server.finish();
}

#[test]
fn nbd_a_stop_refuses_what_a_groups_limit_still_holds_and_answers_every_request() {
    let dir = scratch("stop_throttled");
    let mut opts = options(&dir);
    opts.groups = vec![schedhost::value::parse_group("slow:wiops=1").unwrap()];
    opts.exports[0].group = Some("slow".into());
    let server = start(opts, native_policy("noop").unwrap(), None);
    let mut c = Client::connect(&server.socket);
    let cookies: Vec<u64> = (0..20u64)
        .map(|i| c.send(WRITE, FLAG_FUA, i * 4096, 4096, &[9; 4096]))
        .collect();
    // The first goes at once; the rest wait a second each for the group's rate.
    let (first, error, _) = c.receive(|_| 0);
    assert_eq!((first, error), (cookies[0], 0));
    let stopping = std::thread::spawn(move || server.end());
    let mut answers = vec![(first, error)];
    for _ in 1..cookies.len() {
        let (cookie, error, _) = c.receive(|_| 0);
        answers.push((cookie, error));
    }
    answers.sort_unstable();
    let answered: Vec<u64> = answers.iter().map(|&(c, _)| c).collect();
    assert_eq!(answered, cookies, "every request answered once");
    assert!(
        answers.iter().all(|&(_, e)| e == 0 || e == 108),
        "a write either ran or was refused with ESHUTDOWN: {answers:?}"
    );
    assert!(
        answers.iter().any(|&(_, e)| e == 108),
        "held writes are refused, not waited out at 1 IOPS: {answers:?}"
    );
    drop(c);
    stopping.join().unwrap().expect("the server stops cleanly");
}
