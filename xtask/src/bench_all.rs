//! `cargo xtask bench-all`: the benches whose figures open BENCHMARKS.md, re-run in one go
//! (about a quarter of an hour here), and the table of their headline figures written between
//! BENCHMARKS.md's markers, each row with the command that measured it. Every bench's whole
//! output is kept in `target/bench-all/` beside the table.
//!
//! Each step runs as its own process (an xtask bench, or the release binary), as a user
//! would run it; its rows are read from what it printed, so a bench's printout and the table
//! cannot disagree. A step that cannot run here (no root for a loop device) gives a row
//! saying so, never a number.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;
use std::{env, fs};

use anyhow::{Context, Result, bail, ensure};

const BEGIN: &str = "<!-- bench-all:begin (cargo xtask bench-all writes this part) -->\n";
const END: &str = "<!-- bench-all:end -->\n";

/// One row of the table: what, the figure, and the command that measured it.
struct Row {
    what: String,
    figure: String,
    command: &'static str,
}

/// One bench: its name (its output's file), the command a user types, how to run it, and
/// how to read its rows from what it printed.
struct Step {
    name: &'static str,
    command: &'static str,
    program: Program,
    args: &'static [&'static str],
    rows: fn(&str, &'static str) -> Vec<Row>,
    /// Needs root (a loop device).
    root: bool,
}

enum Program {
    /// `cargo xtask ARGS`: this very xtask.
    Xtask,
    /// `target/release/schedhost ARGS`.
    Schedhost,
}

const STEPS: &[Step] = &[
    Step {
        name: "bench",
        command: "schedhost bench --rounds 7",
        program: Program::Schedhost,
        args: &["bench", "--rounds", "7"],
        rows: bench_rows,
        root: false,
    },
    Step {
        name: "bench-check",
        command: "cargo xtask bench-check --rounds 3",
        program: Program::Xtask,
        args: &["bench-check", "--rounds", "3"],
        rows: check_rows,
        root: false,
    },
    Step {
        name: "bench-qos",
        command: "cargo xtask bench-qos",
        program: Program::Xtask,
        args: &["bench-qos"],
        rows: qos_rows,
        root: false,
    },
    Step {
        name: "bench-fio",
        command: "cargo xtask bench-fio --rounds 3 --seconds 3",
        program: Program::Xtask,
        args: &["bench-fio", "--rounds", "3", "--seconds", "3"],
        rows: fio_rows,
        root: false,
    },
    Step {
        name: "bench-nbd",
        command: "cargo xtask bench-nbd --only qemu --rounds 3 --seconds 3",
        program: Program::Xtask,
        args: &[
            "bench-nbd",
            "--only",
            "qemu",
            "--rounds",
            "3",
            "--seconds",
            "3",
        ],
        rows: nbd_rows,
        root: false,
    },
    Step {
        name: "bench-loop",
        command: "cargo xtask bench-loop --rounds 3 --seconds 3",
        program: Program::Xtask,
        args: &["bench-loop", "--rounds", "3", "--seconds", "3"],
        rows: loop_rows,
        root: true,
    },
    Step {
        name: "reproduce",
        command: "schedhost reproduce all",
        program: Program::Schedhost,
        args: &["reproduce", "all"],
        rows: reproduce_rows,
        root: false,
    },
];

/// Runs every step, then writes the table into BENCHMARKS.md.
pub fn run(root: &Path) -> Result<()> {
    let out_dir = root.join("target/bench-all");
    fs::create_dir_all(&out_dir).context("creating target/bench-all")?;
    let started = Instant::now();
    let mut rows = Vec::new();
    for step in STEPS {
        if step.root && !is_root() {
            rows.push(Row {
                what: format!("{}: not run (needs root for a loop device)", step.name),
                figure: "—".into(),
                command: step.command,
            });
            continue;
        }
        let begun = Instant::now();
        eprintln!("bench-all: {} ...", step.command);
        let text = run_step(root, step, &out_dir)?;
        let found = (step.rows)(&text, step.command);
        ensure!(
            !found.is_empty(),
            "{}: no figures found in its output (target/bench-all/{}.txt)",
            step.command,
            step.name
        );
        eprintln!(
            "bench-all: {} done in {:.0} s, {} rows",
            step.name,
            begun.elapsed().as_secs_f64(),
            found.len()
        );
        rows.extend(found);
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    let table = table(root, &rows, minutes)?;
    fs::write(out_dir.join("table.md"), &table).context("writing target/bench-all/table.md")?;
    write_into_benchmarks(root, &table)?;
    println!("{table}");
    println!("BENCHMARKS.md: current figures written ({minutes:.1} minutes)");
    Ok(())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs `step`, its stdout kept in `dir/NAME.txt` and its stderr in `dir/NAME.err`, and
/// returns its stdout.
fn run_step(root: &Path, step: &Step, dir: &Path) -> Result<String> {
    let mut cmd = match step.program {
        Program::Xtask => Command::new(env::current_exe().context("finding the running xtask")?),
        Program::Schedhost => Command::new(root.join("target/release/schedhost")),
    };
    let err_path = dir.join(format!("{}.err", step.name));
    let err =
        fs::File::create(&err_path).with_context(|| format!("creating {}", err_path.display()))?;
    let out = cmd
        .args(step.args)
        .env(crate::BUILT, "1")
        .current_dir(root)
        .stderr(Stdio::from(err))
        .output()
        .with_context(|| format!("running {}", step.command))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    fs::write(dir.join(format!("{}.txt", step.name)), &text)
        .with_context(|| format!("writing target/bench-all/{}.txt", step.name))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}); its output is in target/bench-all/{}.txt and .err",
            step.command,
            out.status,
            step.name
        );
    }
    Ok(text)
}

/// The table, headed by when, where and at which commit it was measured.
fn table(root: &Path, rows: &[Row], minutes: f64) -> Result<String> {
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut out = format!(
        "Measured {date} at commit {commit} by `cargo xtask bench-all` ({minutes:.0} minutes), \
         {cpus} CPUs, Linux {}. Ratios are this machine's, from one run; the sections below \
         give each bench's history and spread.\n\n\
         | figure | this run | command |\n| --- | --- | --- |\n",
        kernel.trim()
    );
    for row in rows {
        out.push_str(&format!(
            "| {} | {} | `{}` |\n",
            row.what, row.figure, row.command
        ));
    }
    Ok(out)
}

/// Puts `table` between BENCHMARKS.md's markers, which stand after its opening paragraphs.
fn write_into_benchmarks(root: &Path, table: &str) -> Result<()> {
    let path = root.join("BENCHMARKS.md");
    let text = fs::read_to_string(&path).context("reading BENCHMARKS.md")?;
    let (Some(start), Some(end)) = (text.find(BEGIN), text.find(END)) else {
        bail!("BENCHMARKS.md has no bench-all markers");
    };
    ensure!(
        start < end,
        "BENCHMARKS.md's bench-all markers are out of order"
    );
    let updated = format!("{}{BEGIN}\n{table}\n{}", &text[..start], &text[end..]);
    fs::write(&path, updated).context("writing BENCHMARKS.md")
}

/// The numbers in `line`, in order (`0.862`, `4.57`, `-33.3`).
fn numbers(line: &str) -> Vec<f64> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .filter_map(|t| t.parse().ok())
        .collect()
}

fn row(what: impl Into<String>, figure: impl Into<String>, command: &'static str) -> Row {
    Row {
        what: what.into(),
        figure: figure.into(),
        command,
    }
}

/// `schedhost bench`: the noop component's throughput against its native build.
fn bench_rows(text: &str, command: &'static str) -> Vec<Row> {
    text.lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("component throughput / native throughput:")
        })
        .map(|ratio| {
            row(
                "host + noop policy, component / native throughput (sim:null, 4k randread QD32)",
                format!("{}×", ratio.trim()),
                command,
            )
        })
        .collect()
}

/// `bench-check`: each policy's check cost, component over native.
fn check_rows(text: &str, command: &'static str) -> Vec<Row> {
    let mut per_policy = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        if line.starts_with("policy ") && line.contains("native") {
            in_table = true;
            continue;
        }
        if in_table {
            let name = line.split_whitespace().next().unwrap_or_default();
            let n = numbers(line);
            if name.is_empty() || n.len() < 3 {
                break;
            }
            per_policy.push(format!("{name} {:.0}/{:.0} ns ({:.2}×)", n[0], n[1], n[2]));
        }
    }
    if per_policy.is_empty() {
        return Vec::new();
    }
    vec![row(
        "`policy check` cost per request, component / native (ns of policy calls)",
        per_policy.join("; "),
        command,
    )]
}

/// `bench-qos`: shares under weights, a reservation, an io.max limit, a latency target,
/// and a hot swap's split.
fn qos_rows(text: &str, command: &'static str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut section = "";
    for line in text.lines() {
        let trimmed = line.trim();
        if !line.starts_with(' ') && !trimmed.is_empty() {
            section = trimmed;
            continue;
        }
        let policy = trimmed.split_whitespace().next().unwrap_or_default();
        if section.starts_with("weights 3:1") && matches!(policy, "mclock" | "bfq" | "cfq" | "noop")
        {
            let n = numbers(trimmed);
            if let Some(share) = n.first() {
                rows.push(row(
                    format!("weights 3:1, sim:ssd, {policy}: first group's share (0.75 wanted)"),
                    format!("{share:.4}"),
                    command,
                ));
            }
        } else if section.starts_with("reservation") && matches!(policy, "mclock" | "bfq") {
            if let Some(iops) = trimmed
                .split(" r ")
                .nth(1)
                .and_then(|r| numbers(r).first().copied())
            {
                rows.push(row(
                    format!("reserve_iops=2000 beside a weight-1000 flood, {policy}"),
                    format!("{iops:.0} IOPS"),
                    command,
                ));
            }
        } else if section.starts_with("limits")
            && trimmed.starts_with("riops=1000,")
            && policy == "riops=1000,"
            && trimmed.contains("mclock")
        {
            if let Some(iops) = trimmed
                .split("I/Os in")
                .nth(1)
                .and_then(|r| numbers(r).get(1).copied())
            {
                rows.push(row(
                    "io.max riops=1000 beside a flood, 10 s",
                    format!("{iops:.2} IOPS"),
                    command,
                ));
            }
        } else if section.starts_with("latency target")
            && matches!(policy, "mclock" | "bfq" | "noop")
        {
            if let Some(p99) = trimmed
                .split("p99")
                .nth(1)
                .and_then(|r| numbers(r).first().copied())
            {
                rows.push(row(
                    format!(
                        "latency_target_us=150 beside a QD64 group, {policy}: the target's p99"
                    ),
                    format!("{p99:.0} µs"),
                    command,
                ));
            }
        } else if section.starts_with("hot swap")
            && trimmed.starts_with("a:b")
            && let Some(split) = numbers(trimmed).first()
        {
            rows.push(row(
                "weights 3:1 across mclock → bfq → mclock swaps: a:b",
                format!("{split:.3}"),
                command,
            ));
        }
    }
    rows
}

/// `bench-fio`: each policy's IOPS against raw fio on the same file, per job.
fn fio_rows(text: &str, command: &'static str) -> Vec<Row> {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        let Some((job, rest)) = split_job(line) else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let Some(runner) = words.next() else { continue };
        let n = numbers(rest);
        if runner == "fio" || n.len() < 2 {
            continue;
        }
        let cell = format!("{runner} {:.3}", n[1]);
        match rows.iter_mut().find(|(j, _)| *j == job) {
            Some((_, cells)) => cells.push(cell),
            None => rows.push((job, vec![cell])),
        }
    }
    rows.into_iter()
        .map(|(job, cells)| {
            row(
                format!("{job} on a file: IOPS against raw fio"),
                cells.join(", "),
                command,
            )
        })
        .collect()
}

/// A bench table's line as (job label, the rest): labels are `4k randread QD1` and the
/// like, three words ending in a depth.
fn split_job(line: &str) -> Option<(String, &str)> {
    let words: Vec<&str> = line.split_whitespace().take(3).collect();
    if words.len() < 3 || !words[2].starts_with("QD") {
        return None;
    }
    let label = words.join(" ");
    let at = line.find(words[2])? + words[2].len();
    Some((label, &line[at..]))
}

/// `bench-nbd --only qemu`: schedhost's NBD server against qemu-nbd and raw fio.
fn nbd_rows(text: &str, command: &'static str) -> Vec<Row> {
    text.lines()
        .filter(|l| l.starts_with("QD"))
        .filter_map(|l| {
            let depth = l.split_whitespace().next()?;
            let n = numbers(&l[depth.len()..]);
            (n.len() >= 5).then(|| {
                row(
                    format!("NBD, one fio client, 4k randread {depth}: schedhost / qemu-nbd (of raw fio)"),
                    format!("{:.2}× ({:.2})", n[3], n[4]),
                    command,
                )
            })
        })
        .collect()
}

/// `bench-loop`: each policy over the kernel's `none` against the kernel's scheduler, on a
/// loop device.
fn loop_rows(text: &str, command: &'static str) -> Vec<Row> {
    let mut rows = Vec::new();
    for line in text.lines() {
        if let Some((job, rest)) = split_job(line) {
            let words: Vec<&str> = rest.split_whitespace().collect();
            if let (Some(kernel), Some(ratio)) = (words.first(), words.last()) {
                rows.push(row(
                    format!(
                        "loop device, {job}: schedhost's {} / the kernel's {kernel}",
                        words.get(3).unwrap_or(&"?")
                    ),
                    format!("{ratio}×"),
                    command,
                ));
            }
        } else if line.contains("not offered by this kernel") {
            rows.push(row(format!("loop device: {}", line.trim()), "—", command));
        }
    }
    rows
}

/// `reproduce all`: every verdict that compares a figure with the seed's.
fn reproduce_rows(text: &str, command: &'static str) -> Vec<Row> {
    let mut seed = "";
    let mut rows = Vec::new();
    for line in text.lines() {
        if let Some(title) = line.strip_prefix("### ") {
            seed = title.split(':').next().unwrap_or(title);
        } else if let Some(verdict) = line.strip_prefix("- ")
            && let Some(at) = verdict.find(" against the seed's")
        {
            // `CLAIM: FIGURE against the seed's …`: the claim ends at the last ": " before
            // the figure.
            let cut = verdict[..at].rfind(": ").unwrap_or(0);
            let (claim, figure) = (&verdict[..cut], verdict[cut..].trim_start_matches(": "));
            rows.push(row(
                format!("{seed}, {claim}"),
                figure.replace('|', "/"),
                command,
            ));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_benchs_printout_gives_its_rows() {
        let fio = "job runner IOPS ratio p99 ratio\n\
                   4k randread QD1      fio             18612    1.000      136.2    1.000\n\
                   4k randread QD1      noop            15997    0.859      140.7    1.033\n\
                   4k randread QD1      cfq             16252    0.873      140.0    1.028\n";
        let rows = fio_rows(fio, "c");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].figure, "noop 0.859, cfq 0.873");
        let nbd = "depth       raw fio     qemu-nbd    schedhost    ratio     of raw\n\
                   QD1           16674         6343         8329    1.313      0.500\n";
        assert_eq!(nbd_rows(nbd, "c")[0].figure, "1.31× (0.50)");
        let check = "policy         this comp    native   ratio\nnoop 576 126 4.57\ndeadline 1210 417 2.90\n\nother";
        assert_eq!(
            check_rows(check, "c")[0].figure,
            "noop 576/126 ns (4.57×); deadline 1210/417 ns (2.90×)"
        );
        let reproduce = "### Seed 1 (2016): slices\n- 8 readers: cfq over noop, at least 2×: 4.03× against the seed's 2.10× (+92 %, tolerance ±15 %): does not match; as a shape: holds\n- one reader: holds\n";
        let rows = reproduce_rows(reproduce, "c");
        assert_eq!(rows.len(), 1);
        assert_eq!(
            rows[0].what,
            "Seed 1 (2016), 8 readers: cfq over noop, at least 2×"
        );
        assert!(
            rows[0].figure.starts_with("4.03× against the seed's 2.10×"),
            "{}",
            rows[0].figure
        );
        let lp = "4k randread QD1    none             12696     216.1 noop            7918     632.8   0.624\nbfq: not offered by this kernel (/dev/loop0), left out\n";
        let rows = loop_rows(lp, "c");
        assert_eq!(
            rows[0].what,
            "loop device, 4k randread QD1: schedhost's noop / the kernel's none"
        );
        assert_eq!(rows[0].figure, "0.624×");
        assert_eq!(rows[1].figure, "—");
    }
}
