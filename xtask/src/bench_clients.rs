//! `cargo xtask bench-nbd --only clients`: many NBD clients on one export at once, each at
//! QD1 reading random 4 KiB blocks and checking them against the file. Reports each
//! client's rate against the mean and the server's threads with one client and with all of
//! them connected.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};

use crate::bench_nbd::{Bench, FILE_BYTES, serve_with};

const BLOCK: usize = 4096;

pub fn run(bench: &Bench, clients: usize, seconds: u32) -> Result<()> {
    let Bench {
        schedhost,
        dir,
        disk,
    } = bench;
    raise_open_files(clients as u64 * 2 + 256)?;
    let expected = std::fs::read(disk).context("reading the exported file")?;
    ensure!(
        expected.len() as u64 == FILE_BYTES,
        "the exported file changed size"
    );
    let socket = dir.join("many.sock");
    let max = (clients + 16).to_string();
    let server = serve_with(schedhost, &socket, disk, "noop", &["--max-clients", &max])?;
    let mut streams = vec![connect(&socket)?];
    std::thread::sleep(Duration::from_millis(200));
    let threads_one = threads(server.pid())?;
    for _ in 1..clients {
        streams.push(connect(&socket)?);
    }
    std::thread::sleep(Duration::from_millis(200));
    let threads_all = threads(server.pid())?;
    let until = Instant::now() + Duration::from_secs(u64::from(seconds));
    let expected = &expected;
    let (counts, threads_busy) = std::thread::scope(|scope| -> Result<_> {
        let workers: Vec<_> = streams
            .into_iter()
            .enumerate()
            .map(|(k, stream)| {
                std::thread::Builder::new()
                    .stack_size(256 * 1024)
                    .spawn_scoped(scope, move || reads(stream, k as u64, expected, until))
            })
            .collect::<std::io::Result<_>>()?;
        std::thread::sleep(Duration::from_secs(u64::from(seconds)) / 2);
        let busy = threads(server.pid())?;
        let counts = workers
            .into_iter()
            .map(|w| w.join().map_err(|_| anyhow::anyhow!("a client panicked"))?)
            .collect::<Result<Vec<u64>>>()?;
        Ok((counts, busy))
    })?;
    server.stop()?;
    let total: u64 = counts.iter().sum();
    let mean = total as f64 / counts.len() as f64;
    let min = counts.iter().copied().min().unwrap_or(0) as f64;
    let max = counts.iter().copied().max().unwrap_or(0) as f64;
    println!("\n{clients} clients at QD1, 4k random reads checked against the file, {seconds} s");
    println!(
        "total IOPS           {:>10.0}",
        total as f64 / f64::from(seconds)
    );
    println!(
        "per client: mean     {:>10.1} IOPS",
        mean / f64::from(seconds)
    );
    println!("lowest / mean        {:>10.3}", min / mean);
    println!("highest / mean       {:>10.3}", max / mean);
    println!("reads checked        {total:>10} (every one matched)");
    println!(
        "server threads: 1 client connected {threads_one}, all {threads_all}, during the run {threads_busy}"
    );
    Ok(())
}

/// A client past the handshake (fixed newstyle, `NBD_OPT_EXPORT_NAME` of the default export).
fn connect(socket: &Path) -> Result<UnixStream> {
    let mut s = UnixStream::connect(socket).context("connecting")?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting)?;
    ensure!(&greeting[..8] == b"NBDMAGIC", "not an NBD server");
    // Fixed newstyle, no zeroes.
    s.write_all(&3u32.to_be_bytes())?;
    let mut option = Vec::new();
    option.extend_from_slice(b"IHAVEOPT");
    option.extend_from_slice(&1u32.to_be_bytes());
    option.extend_from_slice(&0u32.to_be_bytes());
    s.write_all(&option)?;
    let mut export = [0u8; 10];
    s.read_exact(&mut export)?;
    let size = u64::from_be_bytes(export[..8].try_into()?);
    ensure!(size == FILE_BYTES, "the export is {size} bytes");
    Ok(s)
}

/// Reads random blocks until `until`, checking each; returns how many.
fn reads(mut s: UnixStream, seed: u64, expected: &[u8], until: Instant) -> Result<u64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let blocks = FILE_BYTES / BLOCK as u64;
    let mut data = vec![0u8; BLOCK];
    let mut done = 0u64;
    while Instant::now() < until {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let offset = (x % blocks) * BLOCK as u64;
        let mut request = Vec::with_capacity(28);
        request.extend_from_slice(&0x2560_9513u32.to_be_bytes());
        request.extend_from_slice(&0u16.to_be_bytes());
        request.extend_from_slice(&0u16.to_be_bytes());
        request.extend_from_slice(&done.to_be_bytes());
        request.extend_from_slice(&offset.to_be_bytes());
        request.extend_from_slice(&(BLOCK as u32).to_be_bytes());
        s.write_all(&request)?;
        let mut reply = [0u8; 16];
        s.read_exact(&mut reply)?;
        ensure!(
            reply[..4] == 0x6744_6698u32.to_be_bytes(),
            "bad reply magic"
        );
        ensure!(reply[4..8] == [0; 4], "read at {offset} failed");
        s.read_exact(&mut data)?;
        let at = offset as usize;
        ensure!(
            data == expected[at..at + BLOCK],
            "client {seed}: wrong data at {offset}"
        );
        done += 1;
    }
    // NBD_CMD_DISC.
    let mut disc = Vec::with_capacity(28);
    disc.extend_from_slice(&0x2560_9513u32.to_be_bytes());
    disc.extend_from_slice(&0u16.to_be_bytes());
    disc.extend_from_slice(&2u16.to_be_bytes());
    disc.extend_from_slice(&[0; 20]);
    s.write_all(&disc)?;
    Ok(done)
}

/// The thread count of process `pid`.
fn threads(pid: u32) -> Result<usize> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .context("no Threads: line")?
        .trim()
        .parse()
        .context("parsing Threads:")
}

/// Lets this process (and the server it starts) open `want` descriptors, up to the hard
/// limit.
fn raise_open_files(want: u64) -> Result<()> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer for the duration of the call.
    ensure!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0);
    if limit.rlim_cur < want {
        limit.rlim_cur = want.min(limit.rlim_max);
        // SAFETY: a valid rlimit for the duration of the call.
        ensure!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0);
    }
    Ok(())
}
