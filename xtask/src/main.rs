//! Project chores: install the wasm toolchain, build policies as components, run the demo and
//! the test suite. `cargo xtask help` lists the commands.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::{env, fs};

use anyhow::{Context, Result, bail, ensure};
use docs::{docs_plots, docs_reproduce};
use example_tests::{test_author_kit, test_examples};

mod bench_all;
mod bench_calibrate;
mod bench_check;
mod bench_clients;
mod bench_drives;
mod bench_fio;
mod bench_instructions;
mod bench_kernel;
mod bench_nbd;
mod bench_qos;
mod bench_sweep;
mod docs;
mod example_tests;
mod loop_device;
mod toolchain;

const USAGE: &str = "\
cargo xtask <command>

  setup               install the wasm toolchains (Debian's Rust 1.96, std sources, lld-22; clang-22, wasi-libc, compiler-rt) if missing
  build               build every policy as a component into target/policies/, and the host (release)
  build-policy DIR    build the policy crate in DIR (out of tree is fine) into target/policies/NAME.wasm
  demo                build, then run the bundled job on the simulated HDD with the noop policy
  test                build, then run every test, the wasm ones included
  bench-all           the benches behind BENCHMARKS.md's opening table (about 15 minutes; the loop
                      device's needs root), and the table written into BENCHMARKS.md
  bench-fio [--file PATH] [--rounds N] [--seconds S] [--only LABEL] [--baseline BINARY]
                      raw fio against schedhost's noop, deadline and cfq on one file (needs fio);
                      with --baseline, each policy under an older schedhost binary as well
  docs-plots          draw every plot kind from the example jobs into docs/plots/ (PNG, 200 dpi)
  docs-reproduce      build (release), run `schedhost reproduce all` and put its tables into
                      docs/reproduce.md between the reproduce markers
  bench-affinity [--file PATH] [--rounds N]
                      elapsed time under rq_affinity 0, 1 and 2 with submitter threads (seed 2)
  fuzz [SECONDS]      run every fuzz target in fuzz/ for SECONDS each (default 60); installs cargo-fuzz
  bench-instructions [--policy NAME] [--iodepth N]...
                      instructions per bio, component against native, counted by callgrind on
                      sim:null (needs valgrind); default noop at iodepth 1 and 32
  bench-check [--rounds N] [--baseline DIR] [--count] [--only P1,P2]
                      policy check's cost per request for every bundled policy, component and
                      native, beside an older build (DIR/schedhost and DIR/policies/); with
                      --count, instructions per request counted by callgrind (needs valgrind)
  bench-loop [--rounds N] [--seconds S]
                      on a loop device (root): the kernel's mq-deadline, bfq and kyber under fio
                      against schedhost's deadline, bfq and kyber over the kernel's none
  bench-kernel [--rounds N] [--seconds S] [--only LABEL] [--load fio|schedhost]
                      the differential harness, on a loop device (root): multi-job workloads
                      under each kernel scheduler and schedhost's counterpart over none; per
                      job IOPS share, p50, p99 and the ratios to the kernel's; the kernel's
                      side is driven by fio (default) or by schedhost passing every request
                      through (--load schedhost: one load generator on both sides)
  bench-sweep [--cells N] [--seed S]
                      the QoS property sweep: N cells (default 500) of policy, device, 2-6
                      weighted groups, iodepth and nr_requests generated from seed S; what held
                      and the worst cells
  bench-drives [DIR...]
                      cross-validation: every DiskSim drive (NAME.parv with NAME.trace or
                      trace.NAME) in DIR (default examples/validation) replayed by `validate`,
                      its RMS (also as DiskSim's rms tool reads it) beside DiskSim's own, the
                      part within 1 ms beside DiskSim's, and what the importer could not
                      represent
  bench-calibrate [--file PATH] [--spec SPEC] [--seconds S] [--rounds N] [--ramp S]
                      sim-to-real for policies: every bundled policy on a spec calibrated to
                      PATH (default target/bench/calibrate.img; a PATH given must not exist
                      yet: the bench creates and writes it) and on PATH itself, three shapes;
                      predicted against measured read-IOPS ratio to noop and p99 (defaults:
                      3 rounds of 2 s, as BENCHMARKS.md measures it); --ramp S: fio's
                      ramp_time for every run (nothing counted in its first S seconds)
  bench-qos           groups sharing a simulated SSD under mclock, bfq and noop: weights, a
                      reservation, io.max limits, a latency target, a hot swap (deterministic)
  bench-nbd [--rounds N] [--seconds S] [--only qemu|share|clients|tenants] [--clients N]
                      fio's nbd engine against qemu-nbd (QD1, QD16); two fio nbd clients on one
                      `schedhost serve` export: each policy's split; N clients (default 1000)
                      at QD1 with verified reads: shares and the server's threads; two
                      exports of one file in groups: weights 3:1, then a 1000 IOPS limit
";

/// Folders whose subfolders with a Cargo.toml are policy crates built by `build` (tests/ has
/// the chaos policy the sandbox tests run).
const POLICY_PARENTS: &[&str] = &["policies", "examples", "tests"];

fn main() {
    if let Err(err) = run(env::args().skip(1).collect()) {
        eprintln!("xtask: {err:#}");
        std::process::exit(1);
    }
}

fn run(args: Vec<String>) -> Result<()> {
    let root = workspace_root();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["setup"] => toolchain::ensure(),
        ["build"] => build_all(&root),
        ["build-policy", dir] => {
            toolchain::ensure()?;
            let out = build_policy(&root, Path::new(dir))?;
            println!("{}", out.display());
            Ok(())
        }
        ["demo"] => {
            build_policies(&root)?;
            build_host(&root, Profile::Dev)?;
            let job = root.join("examples/jobs/demo.fio");
            cargo_status(
                &root,
                Command::new(root.join("target/debug/schedhost"))
                    .args(["--policy", "noop"])
                    .arg(job),
            )
        }
        ["test"] => {
            build_policies(&root)?;
            toolchain::ensure_clients()?;
            let mut test = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            test.args(["test", "--workspace", "--exclude", "xtask"])
                .env("SCHEDHOST_REQUIRE_WASM", "1")
                .env("SCHEDHOST_REQUIRE_CLIENTS", "1");
            cargo_status(&root, &mut test)?;
            // xtask's own tests (the bench tables' readers), built apart from the workspace's
            // so its features do not change theirs.
            let mut own = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            own.args(["test", "-p", "xtask"]);
            cargo_status(&root, &mut own)?;
            test_examples(&root)?;
            test_author_kit(&root)
        }
        ["bench-fio", rest @ ..] => {
            build_all(&root)?;
            let (mut file, mut rounds, mut seconds, mut only) = (None, 3, 5, "");
            let mut baseline = None;
            for pair in rest.chunks(2) {
                match pair {
                    ["--file", path] => file = Some(PathBuf::from(path)),
                    ["--rounds", n] => rounds = n.parse().context("--rounds takes a number")?,
                    ["--seconds", n] => seconds = n.parse().context("--seconds takes a number")?,
                    ["--only", label] => only = label,
                    ["--baseline", path] => baseline = Some(PathBuf::from(path)),
                    other => bail!("bench-fio: unknown option {:?}\n\n{USAGE}", other.join(" ")),
                }
            }
            bench_fio::run(&root, file, rounds, seconds, only, baseline.as_deref())
        }
        ["bench-all"] => {
            build_all(&root)?;
            bench_all::run(&root)
        }
        ["docs-plots"] => {
            build_host(&root, Profile::Dev)?;
            docs_plots(&root)
        }
        ["docs-reproduce"] => {
            build_all(&root)?;
            docs_reproduce(&root)
        }
        ["bench-affinity", rest @ ..] => {
            build_all(&root)?;
            let (mut file, mut rounds) = (None, 5);
            for pair in rest.chunks(2) {
                match pair {
                    ["--file", path] => file = Some(PathBuf::from(path)),
                    ["--rounds", n] => rounds = n.parse().context("--rounds takes a number")?,
                    other => bail!(
                        "bench-affinity: unknown option {:?}\n\n{USAGE}",
                        other.join(" ")
                    ),
                }
            }
            bench_fio::affinity(&root, file, rounds)
        }
        ["bench-check", rest @ ..] => {
            build_all(&root)?;
            let (mut rounds, mut baseline, mut only) = (5, None, None);
            let count = rest.contains(&"--count");
            let options: Vec<&str> = rest.iter().copied().filter(|&a| a != "--count").collect();
            for pair in options.chunks(2) {
                match pair {
                    ["--rounds", n] => rounds = n.parse().context("--rounds takes a number")?,
                    ["--baseline", dir] => baseline = Some(PathBuf::from(dir)),
                    ["--only", names] => only = Some(names.split(',').collect::<Vec<_>>()),
                    other => bail!(
                        "bench-check: unknown option {:?}\n\n{USAGE}",
                        other.join(" ")
                    ),
                }
            }
            bench_check::run(&root, rounds, baseline.as_deref(), count, only.as_deref())
        }
        ["bench-instructions", rest @ ..] => {
            build_all(&root)?;
            let (mut policy, mut depths) = ("noop", Vec::new());
            for pair in rest.chunks(2) {
                match pair {
                    ["--policy", name] => policy = name,
                    ["--iodepth", n] => depths.push(n.parse().context("--iodepth takes a number")?),
                    other => bail!(
                        "bench-instructions: unknown option {:?}\n\n{USAGE}",
                        other.join(" ")
                    ),
                }
            }
            if depths.is_empty() {
                depths = vec![1, 32];
            }
            bench_instructions::run(&root, policy, &depths)
        }
        ["bench-loop", rest @ ..] => {
            build_all(&root)?;
            let (rounds, seconds) = rounds_and_seconds("bench-loop", rest)?;
            bench_fio::loop_device(&root, rounds, seconds)
        }
        ["bench-kernel", rest @ ..] => {
            build_all(&root)?;
            let mut only = String::new();
            let mut load = bench_kernel::Load::Fio;
            let mut timing = Vec::new();
            for pair in rest.chunks(2) {
                match pair {
                    ["--only", label] => only = label.to_string(),
                    ["--load", name] => load = bench_kernel::Load::parse(name)?,
                    other => timing.extend_from_slice(other),
                }
            }
            let (rounds, seconds) = rounds_and_seconds("bench-kernel", &timing)?;
            bench_kernel::run(&root, rounds, seconds, &only, load)
        }
        ["bench-sweep", rest @ ..] => {
            build_all(&root)?;
            let (mut cells, mut seed) = (500, 1);
            for pair in rest.chunks(2) {
                match pair {
                    ["--cells", n] => cells = n.parse().context("--cells takes a number")?,
                    ["--seed", n] => seed = n.parse().context("--seed takes a number")?,
                    other => bail!(
                        "bench-sweep: unknown option {:?}\n\n{USAGE}",
                        other.join(" ")
                    ),
                }
            }
            bench_sweep::sweep(&root, seed, cells)
        }
        ["bench-calibrate", rest @ ..] => {
            build_all(&root)?;
            let mut options = bench_calibrate::Options {
                file: None,
                spec: None,
                seconds: 2.0,
                rounds: 3,
                ramp: 0.0,
            };
            for pair in rest.chunks(2) {
                match pair {
                    ["--file", path] => options.file = Some(path.into()),
                    ["--spec", path] => options.spec = Some(path.into()),
                    ["--seconds", s] => {
                        options.seconds = s.parse().context("--seconds takes a number")?;
                    }
                    ["--rounds", n] => {
                        options.rounds = n.parse().context("--rounds takes a number")?
                    }
                    ["--ramp", s] => options.ramp = s.parse().context("--ramp takes a number")?,
                    other => bail!(
                        "bench-calibrate: unknown option {:?}\n\n{USAGE}",
                        other.join(" ")
                    ),
                }
            }
            ensure!(
                options.seconds >= 0.001
                    && options.seconds <= 600.0
                    && options.rounds >= 1
                    && (0.0..=60.0).contains(&options.ramp),
                "bench-calibrate: --seconds from 0.001 to 600, --rounds 1 or more, --ramp from 0 to 60"
            );
            bench_calibrate::run(&root, &options)
        }
        ["bench-drives", dirs @ ..] => {
            build_all(&root)?;
            let dirs: Vec<String> = dirs.iter().map(|d| d.to_string()).collect();
            bench_drives::run(&root, &dirs)
        }
        ["bench-qos"] => {
            build_all(&root)?;
            bench_qos::run_all(&root)
        }
        ["bench-nbd", rest @ ..] => {
            build_all(&root)?;
            let mut only = None;
            let mut clients = 1000;
            let mut timing = Vec::new();
            for pair in rest.chunks(2) {
                match pair {
                    ["--only", part] => only = Some(part.to_string()),
                    ["--clients", n] => clients = n.parse().context("--clients takes a number")?,
                    other => timing.extend_from_slice(other),
                }
            }
            let (rounds, seconds) = rounds_and_seconds("bench-nbd", &timing)?;
            ensure!(
                only.as_deref()
                    .is_none_or(|o| ["qemu", "share", "clients", "tenants"].contains(&o)),
                "bench-nbd: --only takes qemu, share, clients or tenants"
            );
            let wanted = |part: &str| only.as_deref().is_none_or(|o| o == part);
            let bench = bench_nbd::prepare(&root)?;
            bench_nbd::run(&bench, rounds, seconds, &wanted)?;
            if wanted("clients") {
                bench_clients::run(&bench, clients, seconds)?;
            }
            Ok(())
        }
        ["fuzz", rest @ ..] => {
            let seconds: u64 = match rest {
                [] => 60,
                [n] => n.parse().context("fuzz takes a number of seconds")?,
                _ => bail!("fuzz takes at most one argument, the seconds per target\n\n{USAGE}"),
            };
            fuzz(&root, seconds)
        }
        ["help"] | ["--help"] | ["-h"] | [] => {
            print!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown command {:?}\n\n{USAGE}", other.join(" ")),
    }
}

/// `[--rounds N] [--seconds S]` for `command` (defaults 3 and 4).
fn rounds_and_seconds(command: &str, rest: &[&str]) -> Result<(usize, u32)> {
    let (mut rounds, mut seconds) = (3, 4);
    for pair in rest.chunks(2) {
        match pair {
            ["--rounds", n] => rounds = n.parse().context("--rounds takes a number")?,
            ["--seconds", n] => seconds = n.parse().context("--seconds takes a number")?,
            other => bail!("{command}: unknown option {:?}\n\n{USAGE}", other.join(" ")),
        }
    }
    Ok((rounds, seconds))
}

/// The fuzz targets: each listed in fuzz/Cargo.toml, run for `seconds` with cargo-fuzz.
/// cargo-fuzz wants nightly features; `RUSTC_BOOTSTRAP=1` lets this toolchain provide them.
/// Coverage instrumentation only: the parsers are safe Rust, so a sanitizer adds nothing.
fn fuzz(root: &Path, seconds: u64) -> Result<()> {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let installed = Command::new(&cargo)
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        cargo_status(
            root,
            Command::new(&cargo).args(["install", "cargo-fuzz", "--locked"]),
        )?;
    }
    let manifest = fs::read_to_string(root.join("fuzz/Cargo.toml"))?;
    let targets: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|name| *name != "schedhost-fuzz")
        .collect();
    for target in targets {
        let mut run = Command::new(&cargo);
        run.env("RUSTC_BOOTSTRAP", "1")
            .env("CARGO_TARGET_DIR", root.join("target/fuzz"))
            .args([
                "fuzz",
                "run",
                "--fuzz-dir",
                "fuzz",
                "-s",
                "none",
                target,
                "--",
            ])
            .arg(format!("-max_total_time={seconds}"));
        cargo_status(root, &mut run).with_context(|| format!("fuzz target {target}"))?;
    }
    Ok(())
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Which cargo profile a host build uses: `Dev` is the one `test` builds too, so the README's
/// two commands compile the dependencies once; `Release` is for users and the benches.
#[derive(Clone, Copy, Debug)]
enum Profile {
    Dev,
    Release,
}

/// Set by `bench-all` for the benches it runs: it built everything once before them, so
/// nothing changes under a bench while the set runs.
const BUILT: &str = "XTASK_BENCH_ALL_BUILT";

fn build_all(root: &Path) -> Result<()> {
    if env::var_os(BUILT).is_some() {
        return Ok(());
    }
    build_policies(root)?;
    build_host(root, Profile::Release)
}

fn build_host(root: &Path, profile: Profile) -> Result<()> {
    let mut host = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    match profile {
        Profile::Release => host.args(["build", "--release", "--package", "schedhost"]),
        // The same packages as `test` builds, so cargo resolves the same features for the
        // dependencies they share and builds them once.
        Profile::Dev => host.args(["build", "--workspace", "--exclude", "xtask", "--bins"]),
    };
    cargo_status(root, &mut host)
}

fn build_policies(root: &Path) -> Result<()> {
    toolchain::ensure()?;
    for dir in policy_dirs(root)? {
        let out = build_policy(root, &dir)?;
        eprintln!(
            "xtask: built {}",
            out.strip_prefix(root).unwrap_or(&out).display()
        );
    }
    Ok(())
}

/// Every policy crate in the repository, in a stable order.
fn policy_dirs(root: &Path) -> Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for parent in POLICY_PARENTS {
        for entry in
            fs::read_dir(root.join(parent)).with_context(|| format!("listing {parent}/"))?
        {
            let path = entry?.path();
            if is_rust_policy(&path)? || schedhost_kit::c::is_c_policy(&path) {
                dirs.push(path);
            }
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// A crate that builds to a component: a `cdylib` (not `examples/embed`, a program).
fn is_rust_policy(dir: &Path) -> Result<bool> {
    let manifest = dir.join("Cargo.toml");
    if !manifest.is_file() {
        return Ok(false);
    }
    let text =
        fs::read_to_string(&manifest).with_context(|| format!("reading {}", manifest.display()))?;
    Ok(text.contains("\"cdylib\""))
}

/// Builds the policy in `dir` into `target/policies/NAME.wasm`: the same build as
/// `schedhost policy build`, with every Rust policy's cargo artifacts in one `target/wasm`.
fn build_policy(root: &Path, dir: &Path) -> Result<PathBuf> {
    if schedhost_kit::c::is_c_policy(dir) {
        let toolchain = schedhost_kit::c::CToolchain::find()?;
        let built =
            schedhost_kit::c::build_c_policy(&toolchain, dir, &root.join("target/policies"))
                .with_context(|| format!("building the C policy in {}", dir.display()))?;
        return Ok(built.component);
    }
    let toolchain = schedhost_kit::WasmToolchain::find()?;
    let built = schedhost_kit::build_policy(
        &toolchain,
        dir,
        Some(&root.join("target/wasm")),
        &root.join("target/policies"),
    )
    .with_context(|| format!("building the policy in {}", dir.display()))?;
    Ok(built.component)
}

fn cargo_status(root: &Path, cmd: &mut Command) -> Result<()> {
    let status = cmd
        .current_dir(root)
        .status()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    ensure!(
        status.success(),
        "{:?} failed ({status})",
        cmd.get_program()
    );
    Ok(())
}
