//! Hostile peers: the NBD server, the control socket and the metrics endpoint, each driven by
//! idle, dripping, non-reading and oversized peers while a well-behaved client must still be
//! served within seconds. Deadlines are set short where the server takes them as options.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use schedhost::policy::native_policy;

use crate::nbd::{Client, MIB, READ, WRITE, options, pattern, scratch, start};

/// How long a well-behaved client may wait while others misbehave.
const BOUND: Duration = Duration::from_secs(5);

/// Opens `n` connections that never say anything.
fn idle_sockets(socket: &Path, n: usize) -> Vec<UnixStream> {
    (0..n)
        .map(|_| UnixStream::connect(socket).unwrap())
        .collect()
}

#[test]
fn hostile_nbd_silent_sockets_cannot_lock_real_clients_out() {
    let dir = scratch("hostile_silent");
    let mut opts = options(&dir);
    opts.max_clients = 4;
    opts.handshake_timeout = Duration::from_secs(30);
    let server = start(opts, native_policy("noop").unwrap(), None);
    let _established = Client::connect(&server.socket);
    // More silent sockets than --max-clients: each new one ends the oldest handshake.
    let _idle = idle_sockets(&server.socket, 16);
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let mut good = Client::connect(&server.socket);
    good.stream.set_read_timeout(Some(BOUND)).unwrap();
    assert_eq!(good.write(0, &[7; 4096]), 0);
    assert_eq!(good.read(0, 4096), vec![7; 4096]);
    assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
}

#[test]
fn hostile_nbd_a_handshake_that_drips_is_closed_at_the_deadline() {
    let dir = scratch("hostile_drip_handshake");
    let mut opts = options(&dir);
    opts.handshake_timeout = Duration::from_millis(500);
    let server = start(opts, native_policy("noop").unwrap(), None);
    let mut drip = UnixStream::connect(&server.socket).unwrap();
    let mut greeting = [0u8; 18];
    drip.read_exact(&mut greeting).unwrap();
    let started = Instant::now();
    // Client flags and an option header, one byte every 100 ms: each byte would restart a
    // per-call timeout; the deadline is for the whole handshake.
    let mut closed = false;
    for byte in [0u8, 0, 0, 3, b'I', b'H', b'A', b'V', b'E', b'O', b'P', b'T'].repeat(4) {
        if drip.write_all(&[byte]).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drip.set_read_timeout(Some(BOUND)).unwrap();
    let mut rest = Vec::new();
    closed |= drip.read_to_end(&mut rest).is_ok();
    assert!(closed, "the dripping handshake is still open");
    assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
}

#[test]
fn hostile_nbd_clients_that_stop_reading_hold_no_buffers_others_need() {
    let dir = scratch("hostile_nonreaders");
    let mut opts = options(&dir);
    // Long enough that only the buffer pool's fairness can save the good client.
    opts.reply_timeout = Duration::from_secs(60);
    let server = start(opts, native_policy("noop").unwrap(), None);
    // Six clients, each asking for 64 MiB of reads and reading none of it: more than the
    // whole pool (64 MiB) even at one quota (16 MiB) each.
    let stuck: Vec<Client> = (0..6)
        .map(|_| {
            let mut c = Client::connect(&server.socket);
            for i in 0..64u64 {
                c.send(READ, 0, (i % 16) * MIB, MIB as u32, &[]);
            }
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let mut good = Client::connect(&server.socket);
    good.stream.set_read_timeout(Some(BOUND)).unwrap();
    let started = Instant::now();
    for i in 0..16u64 {
        let data = pattern(i * 262_144, 262_144, 0x3c);
        assert_eq!(good.write(i * 262_144, &data), 0);
        assert_eq!(good.read(i * 262_144, 262_144), data, "round {i}");
    }
    assert!(started.elapsed() < 2 * BOUND, "{:?}", started.elapsed());
    drop(stuck);
}

#[test]
fn hostile_nbd_many_non_readers_together_keep_at_most_the_pool_in_copies() {
    let dir = scratch("hostile_many_nonreaders");
    let mut opts = options(&dir);
    // Far past the test: only the server-wide bound on copies can close anyone.
    opts.reply_timeout = Duration::from_secs(120);
    let server = start(opts, native_policy("noop").unwrap(), None);
    // Eight clients, each asking one quota (16 MiB) of reads and reading none: 128 MiB of
    // copies, twice the pool, were kept until the reply deadline before.
    let mut stuck: Vec<Client> = (0..8)
        .map(|_| {
            let mut c = Client::connect(&server.socket);
            for i in 0..16u64 {
                c.send(READ, 0, i * MIB, MIB as u32, &[]);
            }
            c
        })
        .collect();
    // Time for every read to finish and be parked, even on a loaded machine.
    std::thread::sleep(Duration::from_secs(3));
    // A closed client reads what was sent, then the end; an open one blocks for more.
    let mut closed = 0;
    let mut buf = vec![0u8; 1 << 20];
    for c in &mut stuck {
        c.stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    closed += 1;
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
    assert!(
        (3..=5).contains(&closed),
        "{closed} of 8 non-readers closed: the copies of all of them must stay near the pool's 64 MiB"
    );
}

#[test]
fn hostile_nbd_a_reply_that_drips_out_is_cut_off_at_the_reply_deadline() {
    let dir = scratch("hostile_drip_reader");
    let mut opts = options(&dir);
    opts.reply_timeout = Duration::from_millis(500);
    let server = start(opts, native_policy("noop").unwrap(), None);
    let mut drip = Client::connect(&server.socket);
    // 16 MiB of reads, far past the socket buffers, taken 4 KiB every 50 ms: each write
    // call makes progress, the whole reply does not make its deadline.
    for i in 0..16u64 {
        drip.send(READ, 0, i * MIB, MIB as u32, &[]);
    }
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    let mut ended = false;
    while started.elapsed() < 3 * BOUND {
        match drip.stream.read(&mut buf) {
            Ok(0) | Err(_) => {
                ended = true;
                break;
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    assert!(
        ended,
        "the dripping reader is still served after {:?}",
        started.elapsed()
    );
}

#[test]
fn hostile_nbd_a_write_payload_that_drips_is_cut_off_at_the_deadline() {
    let dir = scratch("hostile_drip_payload");
    let mut opts = options(&dir);
    opts.reply_timeout = Duration::from_millis(500);
    let server = start(opts, native_policy("noop").unwrap(), None);
    let mut drip = Client::connect(&server.socket);
    // A 256 KiB write whose payload comes a byte every 50 ms: it holds a buffer slot.
    let header = schedhost::frontend::nbd::Request {
        flags: 0,
        kind: WRITE,
        cookie: 1,
        offset: 0,
        length: 262_144,
    }
    .encode();
    drip.stream.write_all(&header).unwrap();
    let started = Instant::now();
    let mut cut_off = false;
    while started.elapsed() < 3 * BOUND {
        if drip.stream.write_all(&[0x55]).is_err() {
            cut_off = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        cut_off,
        "the dripping writer is still connected after {:?}",
        started.elapsed()
    );
    let mut good = Client::connect(&server.socket);
    assert_eq!(
        good.read(0, 4096),
        vec![0; 4096],
        "nothing of the write landed"
    );
}

#[test]
fn hostile_nbd_a_writer_that_never_reads_its_acknowledgements_is_closed() {
    let dir = scratch("hostile_unread_acks");
    let mut opts = options(&dir);
    // Far longer than the test: only the bound on waiting replies can close it.
    opts.reply_timeout = Duration::from_secs(600);
    let server = start(opts, native_policy("noop").unwrap(), None);
    let mut writer = Client::connect(&server.socket);
    writer.stream.set_write_timeout(Some(BOUND)).unwrap();
    let block = [0x11u8; 512];
    let mut closed = false;
    for i in 0..40_000u64 {
        let mut request = schedhost::frontend::nbd::Request {
            flags: 0,
            kind: WRITE,
            cookie: i,
            offset: 0,
            length: 512,
        }
        .encode()
        .to_vec();
        request.extend_from_slice(&block);
        if writer.stream.write_all(&request).is_err() {
            closed = true;
            break;
        }
    }
    assert!(
        closed,
        "40 000 unread acknowledgements and the connection is still open"
    );
    let mut good = Client::connect(&server.socket);
    assert_eq!(good.read(4096, 512), vec![0; 512]);
}

#[test]
fn hostile_nbd_nothing_sent_after_a_failed_reply_runs() {
    let dir = scratch("hostile_broken_reply");
    let server = start(options(&dir), native_policy("noop").unwrap(), None);
    let mut broken = Client::connect(&server.socket);
    // The client stops reading: the reply to its read cannot be written.
    broken.stream.shutdown(std::net::Shutdown::Read).unwrap();
    broken.send(READ, 0, 0, 4096, &[]);
    std::thread::sleep(Duration::from_millis(300));
    // A write sent after that must not reach the disk.
    let data = pattern(MIB, 4096, 0x99);
    let _ = broken.stream.write_all(&{
        let mut request = schedhost::frontend::nbd::Request {
            flags: 0,
            kind: WRITE,
            cookie: 2,
            offset: MIB,
            length: 4096,
        }
        .encode()
        .to_vec();
        request.extend_from_slice(&data);
        request
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut check = Client::connect(&server.socket);
    assert_eq!(check.read(MIB, 4096), vec![0; 4096], "the write ran");
}

#[test]
fn hostile_nbd_unix_socket_is_private_and_the_path_is_not_described() {
    let dir = scratch("hostile_private");
    let server = start(options(&dir), native_policy("noop").unwrap(), None);
    let mode = std::fs::metadata(&server.socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let infos = info_types(&server.socket, &[2]);
    assert!(infos.contains(&0), "the export info is sent: {infos:?}");
    assert!(
        !infos.contains(&2),
        "a description was sent unasked-for: {infos:?}"
    );
}

/// `NBD_OPT_INFO` asking for `wanted` info types; the types of the `NBD_REP_INFO` replies.
fn info_types(socket: &Path, wanted: &[u16]) -> Vec<u16> {
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    let mut data = 0u32.to_be_bytes().to_vec(); // the default export
    data.extend_from_slice(&(wanted.len() as u16).to_be_bytes());
    for w in wanted {
        data.extend_from_slice(&w.to_be_bytes());
    }
    let mut option = b"IHAVEOPT".to_vec();
    option.extend_from_slice(&6u32.to_be_bytes()); // NBD_OPT_INFO
    option.extend_from_slice(&(data.len() as u32).to_be_bytes());
    option.extend_from_slice(&data);
    s.write_all(&option).unwrap();
    let mut types = Vec::new();
    loop {
        let mut header = [0u8; 20];
        s.read_exact(&mut header).unwrap();
        let kind = u32::from_be_bytes(header[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(header[16..20].try_into().unwrap()) as usize;
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).unwrap();
        match kind {
            1 => return types,
            3 => types.push(u16::from_be_bytes([payload[0], payload[1]])),
            other => panic!("option reply {other:#x}"),
        }
    }
}

#[test]
fn hostile_control_idle_dripping_and_oversized_clients_do_not_hold_up_a_request() {
    let dir = scratch("hostile_control");
    let control = dir.join("ctl.sock");
    let server = start(
        options(&dir),
        native_policy("noop").unwrap(),
        Some(control.clone()),
    );
    let mode = std::fs::metadata(&control).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let _idle = idle_sockets(&control, 3);
    let mut drip = UnixStream::connect(&control).unwrap();
    let dripper = std::thread::spawn(move || {
        for _ in 0..40 {
            if drip.write_all(b"s").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    // A megabyte without a newline: refused at the line limit, the connection closed.
    let mut huge = UnixStream::connect(&control).unwrap();
    huge.set_read_timeout(Some(BOUND)).unwrap();
    let _ = huge.write_all(&vec![b'x'; 1 << 20]);
    let mut rest = Vec::new();
    // The server closes it (EOF, or a reset for the bytes it left unread) rather than
    // reading on until our read times out.
    match huge.read_to_end(&mut rest) {
        Ok(_) => assert!(rest.is_empty(), "{rest:?}"),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
    let started = Instant::now();
    let status = schedhost::control::request(&control, "status").unwrap();
    assert_eq!(status["ok"], true, "{status}");
    assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
    // swap reads only regular files: neither a device that never ends nor a FIFO that
    // never opens holds the control thread.
    let fifo = dir.join("fifo.wasm");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    for path in [Path::new("/dev/zero"), fifo.as_path()] {
        let started = Instant::now();
        let reply =
            schedhost::control::request(&control, &format!("swap {}", path.display())).unwrap();
        assert_eq!(reply["ok"], false, "{reply}");
        let error = reply["error"].as_str().unwrap();
        assert!(error.contains("not a regular file"), "{error}");
        assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
    }
    dripper.join().unwrap();
    server.finish();
}

#[test]
fn hostile_metrics_dripping_and_idle_scrapers_do_not_hold_up_a_scrape() {
    let dir = scratch("hostile_metrics");
    let mut opts = options(&dir);
    opts.metrics = Some("127.0.0.1:0".into());
    let server = start(opts, native_policy("noop").unwrap(), None);
    let address = server.metrics.unwrap();
    let _idle: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(address).unwrap())
        .collect();
    let mut drip = TcpStream::connect(address).unwrap();
    let dripper = std::thread::spawn(move || {
        for byte in b"GET /metrics HTTP/1.1\r\nX: ".repeat(4) {
            if drip.write_all(&[byte]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    // An endless header: refused at the size limit.
    let mut huge = TcpStream::connect(address).unwrap();
    huge.set_read_timeout(Some(BOUND)).unwrap();
    let mut head = b"GET /metrics HTTP/1.1\r\n".to_vec();
    head.extend(std::iter::repeat_n(b'a', 64 * 1024));
    let _ = huge.write_all(&head);
    let mut answer = String::new();
    let _ = huge.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:.60}");
    let started = Instant::now();
    let mut good = TcpStream::connect(address).unwrap();
    good.set_read_timeout(Some(BOUND)).unwrap();
    good.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut scrape = String::new();
    good.read_to_string(&mut scrape).unwrap();
    assert!(scrape.starts_with("HTTP/1.1 200 OK"), "{scrape:.80}");
    assert!(scrape.contains("schedhost_"), "{scrape:.200}");
    assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
    dripper.join().unwrap();
}

#[test]
fn hostile_metrics_a_peer_holding_every_place_with_silent_sockets_cannot_keep_a_scraper_out() {
    let dir = scratch("hostile_metrics_silent");
    let mut opts = options(&dir);
    opts.metrics = Some("127.0.0.1:0".into());
    let server = start(opts, native_policy("noop").unwrap(), None);
    let address = server.metrics.unwrap();
    // As many silent sockets as the endpoint has places: all were 503 for everyone else.
    let _silent: Vec<TcpStream> = (0..schedhost::observe::metrics::MAX_CLIENTS)
        .map(|_| TcpStream::connect(address).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut answered = 0;
    for _ in 0..10 {
        let mut good = TcpStream::connect(address).unwrap();
        good.set_read_timeout(Some(BOUND)).unwrap();
        good.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut scrape = String::new();
        let _ = good.read_to_string(&mut scrape);
        answered += usize::from(scrape.starts_with("HTTP/1.1 200 OK"));
    }
    assert_eq!(
        answered, 10,
        "scrapes answered while silent sockets held the places"
    );
}

#[test]
fn hostile_policy_a_set_that_traps_is_a_fault_at_its_time_and_stops_an_aborting_server() {
    let Some(chaos) = crate::helpers::component("chaos") else {
        return;
    };
    for abort in [false, true] {
        let dir = scratch(&format!("hostile_set_trap_{abort}"));
        let control = dir.join("ctl.sock");
        let mut plan = crate::nbd::plan();
        if abort {
            plan.supervision.on_fault = schedhost::core::OnFault::Abort;
        }
        let policy = crate::helpers::runtime()
            .load(&chaos)
            .unwrap()
            .instantiate()
            .unwrap();
        let server =
            crate::nbd::start_planned(options(&dir), plan, Box::new(policy), Some(control.clone()));
        std::thread::sleep(Duration::from_millis(200));
        let reply = schedhost::control::request(&control, "set panic_on_set=1").unwrap();
        assert_eq!(reply["ok"], false, "{reply}");
        if abort {
            let err = server.end().unwrap_err().to_string();
            assert!(err.contains("trapped in `set`"), "{err}");
        } else {
            let served = server.finish();
            assert_eq!(served.ejections.len(), 1);
            assert!(
                served.ejections[0].at_ns >= 200_000_000,
                "stamped at its time"
            );
        }
    }
}
