//! `schedhost reproduce SEED…|all`: the seed experiments of the design, each run as the
//! seed ran it and printed as a markdown table beside the seed's published numbers, with the
//! ratios the seed's claim is about and whether its shape holds. The README's reproduction
//! tables are this command's output (`cargo xtask readme-reproduce` pastes them in).
//!
//! Seeds 1, 3 and 4 run on simulated devices (deterministic: the same binary prints the same
//! tables); seed 2 and seed 3's last row run on a scratch file this command creates and
//! removes, so their figures are measurements of this machine and move from run to run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use schedhost::backend::sim::DeviceSpec;
use schedhost::core::RqAffinity;
use schedhost::frontend::jobs::{JobSpec, parse_job_file};
use schedhost::frontend::outcome::Outcome;
use schedhost::frontend::plan::{RingOptions, RunPlan};
use schedhost::frontend::run::{Device, PolicyPlan, run};
use serde_json::{Value, json};

use super::compare::{Column, Metric, column, figure, mean_stddev, parallel};
use super::plan::SandboxArgs;

const SEED1: &str = include_str!("../../../examples/jobs/seed1-sequential-readers.fio");
const SEED3: &str = include_str!("../../../examples/jobs/seed3-deep-queue.fio");
const SEED4: &str = include_str!("../../../examples/jobs/seed4-writer-readers.fio");
const IN_ORDER_DISK: &str = include_str!("../../../examples/devices/in-order-disk.spec");

#[derive(Debug, clap::Args)]
pub struct ReproduceArgs {
    /// Which seed experiments: 1, 2, 3, 4, or all.
    #[arg(required = true, value_name = "SEED")]
    pub seeds: Vec<String>,
    /// Short versions: fewer rows, shorter runs, fewer repeats (for a quick look and CI).
    #[arg(long)]
    pub quick: bool,
    /// The policies' native builds instead of their components (same decisions, no
    /// sandbox; needs no built policies).
    #[arg(long)]
    pub native: bool,
    /// Draw each table as an SVG chart into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Also write every table, its seed numbers and its shapes as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Where the real-file runs (seeds 2 and 3) create their scratch file; it is removed
    /// afterwards. Default: the system's temporary directory, or the working directory
    /// when that one does not take O_DIRECT (a tmpfs).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Threads for the simulated runs (default: every core); the tables do not depend on it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// The sandbox every policy runs in, as `run`'s.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// Where a row's runs happen.
#[derive(Debug, Clone)]
enum Place {
    Sim(DeviceSpec),
    /// The scratch file, `bytes` long.
    File(u64),
}

/// One row of a table: its jobs on a device, read off with one metric.
struct Row {
    label: String,
    jobs: Vec<JobSpec>,
    place: Place,
    metric: Metric,
    /// What the seed published for this row.
    seed: String,
}

/// A table: rows × policies, `repeat` runs per cell with seeds 1, 2, …
struct Table {
    id: &'static str,
    caption: String,
    command: String,
    policies: Vec<(String, String)>,
    rows: Vec<Row>,
    repeat: u32,
}

/// A table's figures: per row, per policy, each run's value.
struct Measured {
    cells: Vec<Vec<Vec<f64>>>,
}

impl Measured {
    fn mean(&self, row: usize, policy: usize) -> f64 {
        mean_stddev(&self.cells[row][policy]).0
    }
}

/// A claim of the seed's about a table, and whether this run bears it out.
struct Shape {
    claim: String,
    holds: bool,
}

impl ReproduceArgs {
    pub fn execute(self) -> Result<()> {
        let seeds = self.selected()?;
        let scratch = Scratch::new(self.scratch.as_deref())?;
        let mut out = String::new();
        let mut docs = Vec::new();
        let mut svgs = Vec::new();
        for seed in seeds {
            let (text, doc) = match seed {
                2 => self.seed2(&scratch)?,
                _ => self.tabled(seed, &scratch)?,
            };
            print!("{}", schedhost::output::printable_lines(&text));
            out.push_str(&text);
            if self.plot.is_some() {
                for table in doc["tables"].as_array().into_iter().flatten() {
                    if table["policies"].is_array() {
                        let (_, svg) =
                            schedhost::observe::plot::compare(table).map_err(anyhow::Error::msg)?;
                        svgs.push((
                            format!("{}.svg", table["id"].as_str().unwrap_or("seed")),
                            svg,
                        ));
                    }
                }
            }
            docs.push(doc);
        }
        if let Some(path) = &self.json {
            let doc = json!({ "quick": self.quick, "seeds": docs });
            std::fs::write(path, format!("{doc:#}\n"))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(dir) = &self.plot {
            super::plot::write(dir, &svgs)?;
        }
        Ok(())
    }

    /// The seeds asked for, in order, each once.
    fn selected(&self) -> Result<Vec<u8>> {
        let mut seeds = Vec::new();
        for word in &self.seeds {
            let more: Vec<u8> = match word.as_str() {
                "all" => vec![1, 2, 3, 4],
                "1" | "2" | "3" | "4" => vec![word.parse()?],
                _ => bail!("seed {word:?}: expected 1, 2, 3, 4 or all"),
            };
            for seed in more {
                if !seeds.contains(&seed) {
                    seeds.push(seed);
                }
            }
        }
        seeds.sort_unstable();
        Ok(seeds)
    }

    fn policy(&self, spec: &str) -> String {
        if self.native {
            format!("native:{spec}")
        } else {
            spec.to_owned()
        }
    }

    /// A seed whose experiment is a table of policies: runs it, and returns its text and
    /// JSON.
    fn tabled(&self, seed: u8, scratch: &Scratch) -> Result<(String, Value)> {
        let tables = match seed {
            1 => vec![self.seed1_table()?],
            3 => vec![self.seed3_table()?],
            _ => self.seed4_tables()?,
        };
        let mut text = String::new();
        let mut docs = Vec::new();
        let title = match seed {
            1 => "Seed 1 (2016): per-software-queue time slices, sequential 4k readers",
            3 => "Seed 3 (2017): deep queues, 4k random reads at iodepth 2048",
            _ => "Seed 4 (2009): a streaming writer starves readers",
        };
        let _ = writeln!(text, "### {title}\n");
        for table in &tables {
            let measured = self.measure(table, scratch)?;
            let shapes = shapes(seed, table, &measured);
            text.push_str(&markdown(table, &measured, &shapes));
            docs.push(table_json(table, &measured, &shapes));
        }
        Ok((
            text,
            json!({ "seed": seed, "title": title, "tables": docs }),
        ))
    }

    fn seed1_table(&self) -> Result<Table> {
        let readers: &[u32] = if self.quick { &[1, 8] } else { &[1, 2, 4, 8] };
        let mut rows = Vec::new();
        for &n in readers {
            let mut jobs = jobs("seed1-sequential-readers.fio", SEED1)?;
            set(&mut jobs, "numjobs", &n.to_string())?;
            if self.quick {
                set(&mut jobs, "runtime", "2s")?;
            }
            rows.push(Row {
                label: n.to_string(),
                jobs,
                place: Place::Sim(sim("sim:hdd")?),
                metric: Metric::ReadIops,
                seed: match n {
                    1 => "~17000–20000 for all".into(),
                    8 => "noop (blk-mq) 6010, time-slice 8909, cfq 12651".into(),
                    _ => String::new(),
                },
            });
        }
        Ok(Table {
            id: "seed1",
            caption: format!(
                "Read IOPS summed over the readers, sim:hdd, {} of virtual time per run.",
                if self.quick { "2 s" } else { "5 s" }
            ),
            command: "schedhost compare -p noop -p time-slice:time_slice_us=250 -p cfq -p deadline -p kyber -p bfq --sweep numjobs=1,2,4,8 examples/jobs/seed1-sequential-readers.fio".into(),
            policies: ["noop", "time-slice:time_slice_us=250", "cfq", "deadline", "kyber", "bfq"]
                .iter()
                .map(|p| (label(p), self.policy(p)))
                .collect(),
            rows,
            repeat: 1,
        })
    }

    fn seed3_table(&self) -> Result<Table> {
        let mut rows = Vec::new();
        for device in ["sim:hdd", "sim:ssd"] {
            let mut jobs = jobs("seed3-deep-queue.fio", SEED3)?;
            if self.quick {
                set(&mut jobs, "runtime", "1s")?;
            }
            rows.push(Row {
                label: device.into(),
                jobs,
                place: Place::Sim(sim(device)?),
                metric: Metric::ReadIops,
                seed: "mq-deadline 280K, legacy deadline 920K (six disks)".into(),
            });
        }
        // On a real file the question is the host's: does deadline keep up at depth 2048
        // when the policy, not the disk, is the work? An unwritten file reads from the page
        // cache's zero pages, so every I/O is CPU.
        let bytes = if self.quick { 64 << 20 } else { 1 << 30 };
        let mut jobs = jobs("seed3-deep-queue.fio", SEED3)?;
        set(&mut jobs, "size", &bytes.to_string())?;
        set(&mut jobs, "runtime", if self.quick { "1s" } else { "3s" })?;
        set(&mut jobs, "time_based", "1")?;
        rows.push(Row {
            label: "scratch file".into(),
            jobs,
            place: Place::File(bytes),
            metric: Metric::ReadIops,
            seed: String::new(),
        });
        Ok(Table {
            id: "seed3",
            caption: format!(
                "Read IOPS, mean (stddev) over {} runs with seeds 1, 2, …; the scratch file's row is measured on this machine.",
                self.seed3_repeat()
            ),
            command: "schedhost compare -p noop -p deadline -p kyber -p bfq --repeat 3 --device sim:hdd --device sim:ssd examples/jobs/seed3-deep-queue.fio".into(),
            policies: ["noop", "deadline", "kyber", "bfq"]
                .iter()
                .map(|p| (label(p), self.policy(p)))
                .collect(),
            rows,
            repeat: self.seed3_repeat(),
        })
    }

    fn seed3_repeat(&self) -> u32 {
        if self.quick { 1 } else { 3 }
    }

    fn seed4_tables(&self) -> Result<Vec<Table>> {
        let mut jobs4 = jobs("seed4-writer-readers.fio", SEED4)?;
        if self.quick {
            set(&mut jobs4, "runtime", "5s")?;
        }
        let in_order = DeviceSpec::parse_file(Path::new("in-order-disk.spec"), IN_ORDER_DISK)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let places = [("depth 31 (NCQ)", sim("sim:hdd")?), ("depth 1", in_order)];
        let mut rows = Vec::new();
        for (name, device) in places {
            let deep = name.starts_with("depth 31");
            for (metric, what) in [(Metric::ReadMaxLat, "max"), (Metric::ReadMinLat, "min")] {
                rows.push(Row {
                    label: format!("{name}, {what}"),
                    jobs: jobs4.clone(),
                    place: Place::Sim(device.clone()),
                    metric,
                    seed: match (deep, what) {
                        (true, "max") => "noop ~40000, deadline 10000–20000, anticipatory 4000–10000, cfq 400–4000".into(),
                        (true, _) => "25–48 for all".into(),
                        _ => String::new(),
                    },
                });
            }
        }
        let policies = [
            "noop",
            "deadline",
            "anticipatory",
            "cfq:quantum=1,slice_async_rq=1",
            "cfq:quantum=1,slice_async_rq=2",
            "cfq:quantum=4,slice_async_rq=1",
            "cfq:quantum=4,slice_async_rq=2",
            "bfq",
            "kyber",
        ];
        Ok(vec![Table {
            id: "seed4",
            caption: format!(
                "Read latency in ms, max and min, over {} after a 2 s ramp; the drive at queue depth 31 (sim:hdd) and 1 (examples/devices/in-order-disk.spec).",
                if self.quick { "5 s" } else { "20 s" }
            ),
            command: "schedhost compare -p noop -p deadline -p anticipatory -p cfq:quantum=1,slice_async_rq=1 … -p bfq -p kyber --metric read-max-lat examples/jobs/seed4-writer-readers.fio".into(),
            policies: policies.iter().map(|p| (label(p), self.policy(p))).collect(),
            rows,
            repeat: 1,
        }])
    }

    /// Every cell's runs: simulated ones on a pool of threads (each is deterministic), then
    /// real ones one at a time, repeats outermost so that the machine's drift spreads over
    /// every policy alike.
    fn measure(&self, table: &Table, scratch: &Scratch) -> Result<Measured> {
        let runtime = self.sandbox.runtime()?;
        let columns = table
            .policies
            .iter()
            .map(|(_, spec)| column(&runtime, spec))
            .collect::<Result<Vec<Column>>>()?;
        let mut trials = Vec::new();
        for repeat in 0..u64::from(table.repeat) {
            for (r, row) in table.rows.iter().enumerate() {
                for p in 0..columns.len() {
                    trials.push((r, p, 1 + repeat, matches!(row.place, Place::Sim(_))));
                }
            }
        }
        let one = |&(r, p, seed, _): &(usize, usize, u64, bool)| -> Result<f64> {
            let row = &table.rows[r];
            let outcome = self
                .run_one(row, &columns[p], seed, scratch)
                .with_context(|| {
                    format!(
                        "seed table {}, row {}, policy {}, seed {seed}",
                        table.id, row.label, table.policies[p].0
                    )
                })?;
            Ok(row.metric.of(&outcome))
        };
        let sims: Vec<_> = trials.iter().filter(|t| t.3).copied().collect();
        let mut sim_values = parallel(&sims, self.threads, one).into_iter();
        let mut cells = vec![vec![Vec::new(); columns.len()]; table.rows.len()];
        for trial in &trials {
            let value = if trial.3 {
                sim_values
                    .next()
                    .context("a simulated run went missing")??
            } else {
                one(trial)?
            };
            cells[trial.0][trial.1].push(value);
        }
        Ok(Measured { cells })
    }

    fn run_one(&self, row: &Row, policy: &Column, seed: u64, scratch: &Scratch) -> Result<Outcome> {
        let plan = RunPlan {
            seed,
            supervision: self.sandbox.supervision(),
            ..RunPlan::default()
        };
        let device = match &row.place {
            Place::Sim(spec) => Device::Sim(spec.clone()),
            Place::File(bytes) => Device::Real(vec![scratch.file(*bytes)?]),
        };
        let policy = PolicyPlan::fixed(&policy.loaded, &policy.settings);
        Ok(run(&row.jobs, &device, policy, &plan, &mut |_| {})?.outcome)
    }

    /// Seed 2: completion work placed by rq_affinity, with submitter threads on a real
    /// file. Four threads read back verified 128 KiB blocks (the CRC is the completion
    /// work); elapsed time per mode, interleaved round by round.
    fn seed2(&self, scratch: &Scratch) -> Result<(String, Value)> {
        let (size, rounds) = if self.quick { ("8m", 2) } else { ("64m", 7) };
        let job = |rw: &str| -> Result<Vec<JobSpec>> {
            let text = format!(
                "[r]\nrw={rw}\nbs=128k\nsize={size}\nnumjobs=4\niodepth=8\nverify=crc32c\n"
            );
            parse_job_file("seed2", &text).map_err(|e| anyhow::anyhow!("{e}"))
        };
        let runtime = self.sandbox.runtime()?;
        let noop = column(&runtime, &self.policy("noop"))?;
        let path = scratch.clear()?.to_path_buf();
        let real = |jobs: &[JobSpec], threads: Option<RqAffinity>| -> Result<Outcome> {
            let plan = RunPlan {
                supervision: self.sandbox.supervision(),
                ring: RingOptions {
                    threads,
                    ..RingOptions::default()
                },
                ..RunPlan::default()
            };
            let policy = PolicyPlan::fixed(&noop.loaded, &noop.settings);
            Ok(run(
                jobs,
                &Device::Real(vec![path.clone()]),
                policy,
                &plan,
                &mut |_| {},
            )?
            .outcome)
        };
        real(&job("write")?, None).context("seed 2: writing the verified blocks")?;
        let reads = job("read")?;
        let modes = [
            ("0: the ring's thread", Some(RqAffinity::Device)),
            ("1: the submitter's group", Some(RqAffinity::Group)),
            ("2: the submitting thread", Some(RqAffinity::Submitter)),
            ("inline (no threads)", None),
        ];
        let mut elapsed = vec![Vec::new(); modes.len()];
        for _ in 0..rounds {
            for (m, (_, threads)) in modes.iter().enumerate() {
                let outcome = real(&reads, *threads).context("seed 2: reading back")?;
                if outcome.verified_blocks == 0 {
                    bail!("seed 2: no block was verified");
                }
                elapsed[m].push(outcome.end_ns as f64 / 1e6);
            }
        }
        let base = mean_stddev(&elapsed[0]).0;
        let mut text = String::from("### Seed 2 (2008): completion work placed by rq_affinity\n\n");
        let _ = writeln!(
            text,
            "Four submitter threads read 4 × {size} of verified 128 KiB blocks (iodepth 8) from a scratch file, noop; elapsed ms, mean (stddev) over {rounds} interleaved rounds. Measured on this machine: the figures move from run to run.\n"
        );
        let _ = writeln!(
            text,
            "```sh\nschedhost reproduce 2    # cargo xtask bench-affinity runs the same\n```\n"
        );
        let _ = writeln!(
            text,
            "| rq_affinity | elapsed ms | stddev | / mode 0 | seed |"
        );
        let _ = writeln!(text, "| --- | ---: | ---: | ---: | --- |");
        let mut rows = Vec::new();
        for (m, (name, _)) in modes.iter().enumerate() {
            let (mean, sd) = mean_stddev(&elapsed[m]);
            let seed = if m == 2 {
                "1–6% faster than 0, tighter spread"
            } else {
                ""
            };
            let _ = writeln!(
                text,
                "| {name} | {mean:.1} | {sd:.1} | {:.3} | {seed} |",
                mean / base
            );
            rows.push(json!({ "label": name, "values": elapsed[m], "mean": mean, "stddev": sd, "ratio": mean / base, "seed": seed }));
        }
        let faster = mean_stddev(&elapsed[2]).0 <= base;
        let claim =
            "completing on the submitting thread (2) takes no longer than on the ring's (0)";
        let _ = writeln!(text, "\n- {claim}: {}\n", verdict(faster));
        let doc = json!({
            "seed": 2,
            "title": "Seed 2 (2008): completion work placed by rq_affinity",
            "tables": [{
                "id": "seed2",
                "measured_here": true,
                "rows": rows,
                "shapes": [{ "claim": claim, "holds": faster }],
            }],
        });
        Ok((text, doc))
    }
}

/// The seed's claims about a table, checked against the figures.
fn shapes(seed: u8, table: &Table, m: &Measured) -> Vec<Shape> {
    let col = |name: &str| table.policies.iter().position(|(label, _)| label == name);
    let last = table.rows.len() - 1;
    match seed {
        1 => {
            let (noop, ts, cfq) = (col("noop"), col("time-slice 250 µs"), col("cfq"));
            let (Some(noop), Some(ts), Some(cfq)) = (noop, ts, cfq) else {
                return Vec::new();
            };
            let one: Vec<f64> = (0..table.policies.len()).map(|p| m.mean(0, p)).collect();
            let (lo, hi) = one
                .iter()
                .fold((f64::MAX, 0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            let (n, t, c) = (m.mean(last, noop), m.mean(last, ts), m.mean(last, cfq));
            vec![
                Shape {
                    claim: "one reader: every policy within 20% of the others".into(),
                    holds: hi <= lo * 1.2,
                },
                Shape {
                    claim: format!(
                        "8 readers: time-slice ≥ 1.45× noop (seed 1.48×): {:.2}×",
                        t / n.max(1e-9)
                    ),
                    holds: t >= 1.45 * n,
                },
                Shape {
                    claim: format!(
                        "8 readers: cfq ≥ 2× noop (seed 2.10×): {:.2}×",
                        c / n.max(1e-9)
                    ),
                    holds: c >= 2.0 * n,
                },
                Shape {
                    claim: "8 readers: noop < time-slice < cfq, the seed's order".into(),
                    holds: n < t && t < c,
                },
            ]
        }
        3 => {
            let (Some(noop), Some(deadline)) = (col("noop"), col("deadline")) else {
                return Vec::new();
            };
            table
                .rows
                .iter()
                .enumerate()
                .map(|(r, row)| {
                    let ratio = m.mean(r, deadline) / m.mean(r, noop).max(1e-9);
                    Shape {
                        claim: format!(
                            "{}: deadline does not collapse at depth, ≥ 0.95× noop: {ratio:.2}×",
                            row.label
                        ),
                        holds: ratio >= 0.95,
                    }
                })
                .collect()
        }
        _ => {
            let (Some(noop), Some(deadline), Some(antic)) =
                (col("noop"), col("deadline"), col("anticipatory"))
            else {
                return Vec::new();
            };
            let cfqs: Vec<usize> = (0..table.policies.len())
                .filter(|&p| table.policies[p].0.starts_with("cfq"))
                .collect();
            let mut out = Vec::new();
            for (r, row) in table.rows.iter().enumerate() {
                if !row.label.ends_with("max") {
                    continue;
                }
                let n = m.mean(r, noop);
                let d = m.mean(r, deadline);
                let worst_cfq = cfqs.iter().map(|&p| m.mean(r, p)).fold(0f64, f64::max);
                let a = m.mean(r, antic);
                // The seed's disk queued 31 commands; at depth 1 its claims are not known.
                if row.label.starts_with("depth 31") {
                    out.push(Shape {
                        claim: format!(
                            "{}: cfq's and anticipatory's max read latency far below deadline's and noop's (≤ 0.25× each): cfq {:.3}× noop, anticipatory {:.3}× noop",
                            row.label,
                            worst_cfq / n.max(1e-9),
                            a / n.max(1e-9)
                        ),
                        holds: worst_cfq.max(a) <= 0.25 * n.min(d),
                    });
                }
                let others = (0..table.policies.len()).filter(|&p| p != noop);
                let noop_worst = others.clone().all(|p| m.mean(r, p) <= n);
                out.push(Shape {
                    claim: format!("{}: noop the worst", row.label),
                    holds: noop_worst,
                });
            }
            out
        }
    }
}

fn verdict(holds: bool) -> &'static str {
    if holds { "holds" } else { "does not hold" }
}

/// The table in markdown: the command, the figures with the seed's beside them, ratios to
/// the first policy, and the shapes.
fn markdown(table: &Table, m: &Measured, shapes: &[Shape]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}\n", table.caption);
    let _ = writeln!(out, "```sh\n{}\n```\n", table.command);
    let _ = write!(out, "| |");
    for (label, _) in &table.policies {
        let _ = write!(out, " {label} |");
    }
    let _ = writeln!(out, " seed |");
    let _ = write!(out, "| --- |");
    for _ in &table.policies {
        let _ = write!(out, " ---: |");
    }
    let _ = writeln!(out, " --- |");
    for (r, row) in table.rows.iter().enumerate() {
        let _ = write!(out, "| {} |", row.label);
        for p in 0..table.policies.len() {
            let (mean, sd) = mean_stddev(&m.cells[r][p]);
            if m.cells[r][p].len() > 1 {
                let _ = write!(out, " {} ({}) |", figure(mean), figure(sd));
            } else {
                let _ = write!(out, " {} |", figure(mean));
            }
        }
        let _ = writeln!(out, " {} |", row.seed);
    }
    let first = &table.policies[0].0;
    let _ = writeln!(out, "\nRatios to {first}:\n");
    for (r, row) in table.rows.iter().enumerate() {
        let base = m.mean(r, 0).max(1e-9);
        let ratios: Vec<String> = (1..table.policies.len())
            .map(|p| format!("{} {:.3}", table.policies[p].0, m.mean(r, p) / base))
            .collect();
        let _ = writeln!(out, "- {}: {}", row.label, ratios.join(", "));
    }
    let _ = writeln!(out);
    for shape in shapes {
        let _ = writeln!(out, "- {}: {}", shape.claim, verdict(shape.holds));
    }
    let _ = writeln!(out);
    out
}

/// The table as JSON, in the shape `schedhost plot` draws (policies, rows of cells with a
/// mean and a stddev), with the seed's figures and the shapes.
fn table_json(table: &Table, m: &Measured, shapes: &[Shape]) -> Value {
    json!({
        "id": table.id,
        "caption": table.caption,
        "label": table.caption,
        "sweep": "",
        "repeat": table.repeat,
        "policies": table.policies.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>(),
        "rows": table.rows.iter().enumerate().map(|(r, row)| json!({
            "value": row.label,
            "metric": row.metric.name(),
            "seed": row.seed,
            "cells": (0..table.policies.len()).map(|p| {
                let (mean, stddev) = mean_stddev(&m.cells[r][p]);
                json!({
                    "policy": table.policies[p].0,
                    "mean": mean,
                    "stddev": stddev,
                    "values": m.cells[r][p],
                    "ratio": mean / m.mean(r, 0).max(1e-9),
                })
            }).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "shapes": shapes.iter().map(|s| json!({ "claim": s.claim, "holds": s.holds })).collect::<Vec<_>>(),
    })
}

/// A policy spec's column heading: `cfq:quantum=1,slice_async_rq=2` → `cfq q1 s2`.
fn label(spec: &str) -> String {
    match spec.split_once(':') {
        Some(("time-slice", "time_slice_us=250")) => "time-slice 250 µs".into(),
        Some(("cfq", tunables)) => {
            let short: Vec<String> = tunables
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| match k {
                    "quantum" => format!("q{v}"),
                    "slice_async_rq" => format!("s{v}"),
                    _ => format!("{k}={v}"),
                })
                .collect();
            format!("cfq {}", short.join(" "))
        }
        _ => spec.to_owned(),
    }
}

fn jobs(name: &str, text: &str) -> Result<Vec<JobSpec>> {
    parse_job_file(name, text).map_err(|e| anyhow::anyhow!("{e}"))
}

fn set(jobs: &mut [JobSpec], key: &str, value: &str) -> Result<()> {
    for job in jobs {
        job.set_option(key, value)
            .map_err(|e| anyhow::anyhow!("{key}={value}: {e}"))?;
    }
    Ok(())
}

fn sim(name: &str) -> Result<DeviceSpec> {
    DeviceSpec::parse(name).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The scratch file the real-file runs use: created by this command under a name of its
/// own (never a file that was there before), and removed when the command ends.
struct Scratch {
    path: PathBuf,
    made: std::sync::atomic::AtomicBool,
}

impl Scratch {
    fn new(dir: Option<&Path>) -> Result<Self> {
        let dir = dir.map_or_else(default_scratch_dir, Path::to_path_buf);
        if !dir.is_dir() {
            bail!("--scratch {}: not a directory", dir.display());
        }
        let name = format!("schedhost-reproduce-{}.dat", std::process::id());
        Ok(Self {
            path: dir.join(name),
            made: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Nothing at the path, and whatever is made there from now on is this command's (and
    /// removed at its end). A file there that this command did not make is left alone.
    fn clear(&self) -> Result<&Path> {
        if self.path.exists() {
            if !self.made.load(std::sync::atomic::Ordering::Relaxed) {
                bail!(
                    "{} exists and was not made by this command; it is left alone",
                    self.path.display()
                );
            }
            std::fs::remove_file(&self.path)
                .with_context(|| format!("removing {}", self.path.display()))?;
        }
        self.made.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(&self.path)
    }

    /// The file, `bytes` long and unwritten (sparse), made on first use.
    fn file(&self, bytes: u64) -> Result<PathBuf> {
        let len = std::fs::metadata(&self.path).map(|m| m.len()).ok();
        if self.made.load(std::sync::atomic::Ordering::Relaxed) && len == Some(bytes) {
            return Ok(self.path.clone());
        }
        self.clear()?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&self.path)
            .with_context(|| format!("creating {}", self.path.display()))?;
        file.set_len(bytes)
            .with_context(|| format!("sizing {}", self.path.display()))?;
        Ok(self.path.clone())
    }
}

/// The temporary directory if its file system takes O_DIRECT (the seeds' jobs read and
/// write direct), else the working directory: a tmpfs `/tmp` refuses O_DIRECT.
fn default_scratch_dir() -> PathBuf {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = std::env::temp_dir();
    let probe = tmp.join(format!("schedhost-direct-probe-{}", std::process::id()));
    let direct = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    let _ = std::fs::remove_file(&probe);
    if direct { tmp } else { PathBuf::from(".") }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.made.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_headings_name_a_policy_and_its_seed_tunables_briefly() {
        assert_eq!(label("cfq:quantum=1,slice_async_rq=2"), "cfq q1 s2");
        assert_eq!(label("time-slice:time_slice_us=250"), "time-slice 250 µs");
        assert_eq!(label("anticipatory"), "anticipatory");
    }

    #[test]
    fn a_scratch_file_this_command_did_not_make_is_left_alone() {
        let dir = std::env::temp_dir().join(format!("schedhost-scratch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let scratch = Scratch::new(Some(&dir)).unwrap();
        std::fs::write(&scratch.path, b"someone's").unwrap();
        assert!(
            scratch.file(4096).is_err(),
            "a file already there is not ours"
        );
        assert_eq!(std::fs::read(&scratch.path).unwrap(), b"someone's");
        std::fs::remove_file(&scratch.path).unwrap();
        let made = scratch.file(4096).unwrap();
        assert_eq!(std::fs::metadata(&made).unwrap().len(), 4096);
        drop(scratch);
        assert!(!made.exists(), "what it made is removed");
        std::fs::remove_dir(&dir).unwrap();
    }
}
