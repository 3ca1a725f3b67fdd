//! `cargo xtask bench-nbd`, in three parts (`--only` picks one):
//! - `qemu`: one fio client (the nbd engine) against `schedhost serve` and against qemu-nbd
//!   on the same file, interleaved round by round;
//! - `share`: two fio clients on one export at once, under each policy: how the disk is
//!   shared between clients (mean IOPS per client and the second one's share);
//! - `clients`: N clients at once (default 1000), each at QD1 reading and checking 4 KiB
//!   blocks: every client's rate against the mean, and the server's thread count while all
//!   are connected;
//! - `tenants`: two exports of one server sharing the file, each in its own group, a fio
//!   client on each: weights 3:1 under bfq and mclock, then a 1000 IOPS limit on one.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

const POLICIES: &[&str] = &["noop", "deadline", "cfq", "bfq", "kyber"];

/// Two clients: (label, iodepth of the first, iodepth of the second).
const SCENARIOS: &[(&str, u32, u32)] = &[
    ("equal clients, QD8 each", 8, 8),
    ("QD32 client vs QD1 client", 32, 1),
];

/// Bytes of the exported file; each client reads its own half.
pub const FILE_BYTES: u64 = 256 << 20;

/// Where a benchmark's server, files and sockets are.
pub struct Bench {
    /// The release build.
    pub schedhost: PathBuf,
    /// Its scratch folder.
    pub dir: PathBuf,
    /// The exported file, [`FILE_BYTES`] of random data.
    pub disk: PathBuf,
}

/// The scratch folder and the exported file, made once.
pub fn prepare(root: &Path) -> Result<Bench> {
    let dir = root.join("target/bench-nbd");
    std::fs::create_dir_all(&dir)?;
    let disk = dir.join("disk.img");
    fill(&disk)?;
    Ok(Bench {
        schedhost: root.join("target/release/schedhost"),
        dir,
        disk,
    })
}

/// The `qemu` part, then the `share` part, as `wanted` says.
pub fn run(
    bench: &Bench,
    rounds: usize,
    seconds: u32,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<()> {
    let Bench {
        schedhost,
        dir,
        disk,
    } = bench;
    if wanted("qemu") {
        against_qemu_nbd(schedhost, dir, disk, rounds, seconds)?;
    }
    if wanted("share") {
        sharing(schedhost, dir, disk, rounds, seconds)?;
    }
    if wanted("tenants") {
        tenants(schedhost, dir, disk, rounds, seconds)?;
    }
    Ok(())
}

/// Two tenants: (label, policy, group a's keys, group b's keys, what a's figure is held to).
const TENANTS: &[(&str, &str, &str, &str, Target)] = &[
    (
        "weights 3:1",
        "bfq",
        "weight=300",
        "weight=100",
        Target::Share(0.75),
    ),
    (
        "weights 3:1",
        "mclock",
        "weight=300",
        "weight=100",
        Target::Share(0.75),
    ),
    (
        "a limited to 1000 IOPS",
        "noop",
        "riops=1000",
        "weight=100",
        Target::Iops(1000.0),
    ),
    (
        "a limited to 1000 IOPS",
        "mclock",
        "riops=1000",
        "weight=100",
        Target::Iops(1000.0),
    ),
    (
        "a limited to 1000 IOPS",
        "bfq",
        "riops=1000",
        "weight=100",
        Target::Iops(1000.0),
    ),
];

/// What a tenants scenario holds group a to.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// Its share of the two clients' IOPS.
    Share(f64),
    /// Its IOPS.
    Iops(f64),
}

/// Driver tags for the tenants scenarios: fewer than the clients' 32 requests, so requests
/// wait in the scheduler and the policy chooses (with more tags than requests, every
/// request is dispatched as it comes and no policy can share anything).
const TENANT_TAGS: &str = "4";

/// Two fio clients at QD16, each on its own export of one server sharing the file, each
/// export in its own group.
fn tenants(schedhost: &Path, dir: &Path, disk: &Path, rounds: usize, seconds: u32) -> Result<()> {
    println!(
        "\ntwo exports on one file, a fio client each (4k randread, QD16), {TENANT_TAGS} driver tags, {seconds} s, {rounds} rounds (mean IOPS)"
    );
    println!(
        "{:<24} {:<8} {:>10} {:>10} {:>10} {:>10} {:>7}",
        "scenario", "policy", "a", "b", "figure", "target", "off"
    );
    let socket = dir.join("nbd.sock");
    let device = disk.display().to_string();
    for &(label, policy, keys_a, keys_b, target) in TENANTS {
        let (mut sum_a, mut sum_b) = (0.0, 0.0);
        for _ in 0..rounds {
            let exports = [
                format!("name=a,device={device},group=a"),
                format!("name=b,device={device},group=b"),
            ];
            let groups = [format!("a:{keys_a}"), format!("b:{keys_b}")];
            let _ = std::fs::remove_file(&socket);
            let server = Server(
                Command::new(schedhost)
                    .args(["serve", "--allow-overwrite", "--policy", policy])
                    .args(["--queue-depth", TENANT_TAGS])
                    .arg("--nbd")
                    .arg(format!("unix:{}", socket.display()))
                    .args(["--export", &exports[0], "--export", &exports[1]])
                    .args(["--group", &groups[0], "--group", &groups[1]])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .context("starting schedhost serve")?,
            );
            wait_for(&socket)?;
            let a = client_of(dir, &socket, "a", 0, 16, seconds)?;
            let b = client_of(dir, &socket, "b", 1, 16, seconds)?;
            let (a, b) = (iops(a)?, iops(b)?);
            server.stop()?;
            sum_a += a;
            sum_b += b;
        }
        let (a, b) = (sum_a / rounds as f64, sum_b / rounds as f64);
        let (figure, want) = match target {
            Target::Share(share) => (a / (a + b), share),
            Target::Iops(iops) => (a, iops),
        };
        println!(
            "{label:<24} {policy:<8} {a:>10.0} {b:>10.0} {figure:>10.3} {want:>10.3} {:>6.1}%",
            100.0 * (figure - want) / want
        );
    }
    Ok(())
}

/// Two clients at once under each policy.
fn sharing(schedhost: &Path, dir: &Path, disk: &Path, rounds: usize, seconds: u32) -> Result<()> {
    for &(label, depth_a, depth_b) in SCENARIOS {
        println!("\n{label}: 4k randread, {seconds} s, {rounds} rounds (mean IOPS)");
        println!(
            "{:<10} {:>12} {:>12} {:>14}",
            "policy", "client A", "client B", "B's share"
        );
        let mut sums = vec![(0.0, 0.0); POLICIES.len()];
        for _ in 0..rounds {
            for (i, policy) in POLICIES.iter().enumerate() {
                let (a, b) = round(schedhost, dir, disk, policy, seconds, [depth_a, depth_b])?;
                sums[i].0 += a;
                sums[i].1 += b;
            }
        }
        for (policy, (a, b)) in POLICIES.iter().zip(sums) {
            let (a, b) = (a / rounds as f64, b / rounds as f64);
            println!(
                "{policy:<10} {a:>12.0} {b:>12.0} {:>13.1}%",
                100.0 * b / (a + b)
            );
        }
    }
    Ok(())
}

/// One fio client against `schedhost serve` (noop) and against qemu-nbd (O_DIRECT, native
/// AIO) on the same file, interleaved round by round: what the scheduler's path costs a
/// client.
fn against_qemu_nbd(
    schedhost: &Path,
    dir: &Path,
    disk: &Path,
    rounds: usize,
    seconds: u32,
) -> Result<()> {
    println!("\none client, 4k randread, {seconds} s, {rounds} rounds (mean IOPS)");
    println!(
        "{:<6} {:>12} {:>12} {:>12} {:>8} {:>10}",
        "depth", "raw fio", "qemu-nbd", "schedhost", "ratio", "of raw"
    );
    let socket = dir.join("nbd.sock");
    for depth in [1, 16] {
        let (mut raw, mut qemu, mut ours) = (0.0, 0.0, 0.0);
        for _ in 0..rounds {
            raw += raw_fio(dir, disk, depth, seconds)?;
            let _ = std::fs::remove_file(&socket);
            let server = Server(
                Command::new("qemu-nbd")
                    .args(["--persistent", "--shared=4", "--format=raw", "--cache=none"])
                    .args(["--aio=native", "--socket"])
                    .arg(&socket)
                    .arg(disk)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .context("starting qemu-nbd (apt-get install qemu-utils)")?,
            );
            wait_for(&socket)?;
            qemu += fio(dir, &socket, 0, depth, seconds)?;
            server.stop()?;
            let server = serve(schedhost, &socket, disk, "noop")?;
            ours += fio(dir, &socket, 0, depth, seconds)?;
            server.stop()?;
        }
        let (raw, qemu, ours) = (
            raw / rounds as f64,
            qemu / rounds as f64,
            ours / rounds as f64,
        );
        println!(
            "QD{depth:<4} {raw:>12.0} {qemu:>12.0} {ours:>12.0} {:>8.3} {:>10.3}",
            ours / qemu,
            ours / raw
        );
    }
    Ok(())
}

/// `schedhost serve` on `socket` under `policy`, once it listens.
pub fn serve(schedhost: &Path, socket: &Path, disk: &Path, policy: &str) -> Result<Server> {
    serve_with(schedhost, socket, disk, policy, &[])
}

/// As [`serve`], with more options.
pub fn serve_with(
    schedhost: &Path,
    socket: &Path,
    disk: &Path,
    policy: &str,
    extra: &[&str],
) -> Result<Server> {
    let _ = std::fs::remove_file(socket);
    let server = Server(
        Command::new(schedhost)
            .args(["serve", "--allow-overwrite", "--policy", policy])
            .arg("--nbd")
            .arg(format!("unix:{}", socket.display()))
            .arg("--device")
            .arg(disk)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting schedhost serve")?,
    );
    wait_for(socket)?;
    Ok(server)
}

/// Starts one fio client reading its half `half` of the default export at `depth`.
fn client(dir: &Path, socket: &Path, half: u64, depth: u32, seconds: u32) -> Result<Child> {
    client_of(dir, socket, "", half, depth, seconds)
}

/// Starts one fio client reading its half `half` of export `name` (`""`: the default) at
/// `depth`.
fn client_of(
    dir: &Path,
    socket: &Path,
    name: &str,
    half: u64,
    depth: u32,
    seconds: u32,
) -> Result<Child> {
    let part = FILE_BYTES / 2;
    Command::new("fio")
        .current_dir(dir)
        .args([
            &format!("--name=client{half}{name}"),
            "--ioengine=nbd",
            &format!("--uri=nbd+unix:///{name}?socket={}", socket.display()),
            "--rw=randread",
            "--bs=4k",
            &format!("--iodepth={depth}"),
            &format!("--offset={}", half * part),
            &format!("--size={part}"),
            &format!("--runtime={seconds}"),
            "--time_based",
            "--output-format=json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting fio (apt-get install fio)")
}

/// A finished client's read IOPS.
fn iops(client: Child) -> Result<f64> {
    let out = client.wait_with_output()?;
    ensure!(out.status.success(), "fio failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let json: Value =
        serde_json::from_str(&text[text.find('{').unwrap_or(0)..]).context("parsing fio's JSON")?;
    json["jobs"][0]["read"]["iops"]
        .as_f64()
        .context("no read.iops")
}

/// fio itself on the file (io_uring, O_DIRECT) over the half a client reads: the disk's
/// own rate, which no server in between can beat.
fn raw_fio(dir: &Path, disk: &Path, depth: u32, seconds: u32) -> Result<f64> {
    let child = Command::new("fio")
        .current_dir(dir)
        .args([
            "--name=raw",
            "--ioengine=io_uring",
            "--direct=1",
            &format!("--filename={}", disk.display()),
            "--rw=randread",
            "--bs=4k",
            &format!("--iodepth={depth}"),
            &format!("--size={}", FILE_BYTES / 2),
            &format!("--runtime={seconds}"),
            "--time_based",
            "--output-format=json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting fio (apt-get install fio)")?;
    iops(child)
}

/// One client, run to the end.
fn fio(dir: &Path, socket: &Path, half: u64, depth: u32, seconds: u32) -> Result<f64> {
    iops(client(dir, socket, half, depth, seconds)?)
}

/// One server under `policy` and two concurrent fio clients; their read IOPS.
fn round(
    schedhost: &Path,
    dir: &Path,
    disk: &Path,
    policy: &str,
    seconds: u32,
    depths: [u32; 2],
) -> Result<(f64, f64)> {
    let socket = dir.join("nbd.sock");
    let server = serve(schedhost, &socket, disk, policy)?;
    let a = client(dir, &socket, 0, depths[0], seconds)?;
    let b = client(dir, &socket, 1, depths[1], seconds)?;
    let (a, b) = (iops(a)?, iops(b)?);
    server.stop()?;
    Ok((a, b))
}

/// The server process; stopped with SIGTERM, as an operator would.
pub struct Server(Child);

impl Server {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Stops it and checks it exited cleanly.
    pub fn stop(mut self) -> Result<()> {
        let sent = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()?;
        ensure!(sent.success(), "kill -TERM failed");
        let status = self.0.wait()?;
        ensure!(status.success(), "schedhost serve exited with {status}");
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(socket: &Path) -> Result<()> {
    let started = Instant::now();
    while !socket.exists() {
        if started.elapsed() > Duration::from_secs(30) {
            bail!("schedhost serve did not listen on {}", socket.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Writes the exported file once with data that is not zeroes, so reads reach the disk
/// instead of a sparse file's holes.
fn fill(disk: &PathBuf) -> Result<()> {
    if disk.metadata().is_ok_and(|m| m.len() == FILE_BYTES) {
        return Ok(());
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut block = vec![0u8; 1 << 20];
    let mut file = std::fs::File::create(disk)?;
    for _ in 0..FILE_BYTES >> 20 {
        for chunk in block.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes());
        }
        std::io::Write::write_all(&mut file, &block)?;
    }
    file.sync_all()?;
    Ok(())
}
