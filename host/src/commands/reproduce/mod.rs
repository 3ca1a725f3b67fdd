//! `schedhost reproduce SEED…|all`: the seed experiments of the design, each run as the
//! seed ran it and printed as a markdown table beside the seed's published numbers, with the
//! ratios the seed's claim is about and whether its shape holds. docs/reproduce.md's
//! tables are this command's output (`cargo xtask docs-reproduce` pastes them in).
//!
//! Seeds 1, 3 and 4 run on simulated devices (deterministic: the same binary prints the same
//! tables); seed 2 and seed 3's last row run on a scratch file this command creates and
//! removes, so their figures are measurements of this machine and move from run to run.

mod scratch;
mod seed2;
mod seeds;
mod tables;

use scratch::Scratch;
use seeds::shapes;
use tables::{markdown, table_json, verdict};

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use schedhost::backend::sim::DeviceSpec;
use schedhost::core::DEFAULT_WATCHDOG_NS;
use schedhost::frontend::jobs::{JobSpec, parse_job_file};
use schedhost::frontend::outcome::Outcome;
use schedhost::frontend::plan::RunPlan;
use schedhost::frontend::run::{Device, PolicyPlan, run};
use serde_json::{Value, json};

use super::compare::{Column, Metric, column, mean_stddev, parallel};
use schedhost::backend::sim::FaultPlan;

use super::flags::{Devices, RunFlags, Scope};

const SEED1: &str = include_str!("../../../../examples/jobs/seed1-sequential-readers.fio");
const SEED3: &str = include_str!("../../../../examples/jobs/seed3-deep-queue.fio");
const SEED4: &str = include_str!("../../../../examples/jobs/seed4-writer-readers.fio");
const IN_ORDER_DISK: &str = include_str!("../../../../examples/devices/in-order-disk.spec");

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
    /// The run flags, as `run`'s: the sandbox every policy runs in; each experiment sets
    /// the rest as the measurement it reproduces did.
    #[command(flatten)]
    pub flags: RunFlags,
}

/// What `reproduce` does with the run flags: each experiment runs as the measurement it
/// reproduces ran, so only the sandbox's are the user's.
const SCOPE: Scope = Scope {
    command: "reproduce",
    devices: Devices::Either,
    own_seed: Some(
        "each experiment seeds its own trials (1, 2, …) so that its table is the published one",
    ),
    own_queue: Some("each experiment runs the queue settings of the measurement it reproduces"),
    own_on_fault: None,
    own_ring: Some("each experiment drives its scratch file as the measurement it reproduces did"),
    own_threads: None,
    own_status: Some(
        "the experiments' runs are short and many; watch one with `run --status-interval`",
    ),
    own_events: Some(
        "the experiments' runs are many; record one run's events with `run --trace-events`",
    ),
    default_fuel: None,
    default_watchdog_ns: Some(DEFAULT_WATCHDOG_NS),
};

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
    /// Where the seed gave a figure for the claim: this run's beside it.
    figure: Option<Figure>,
}

/// A figure this run measured beside the one the seed published.
#[derive(Debug, Clone, Copy)]
struct Figure {
    measured: f64,
    seed: f64,
}

/// How far a figure may be from the seed's and still match it, relative: these machines
/// move 10–20 % between runs, and the simulated devices are not the seed's hardware.
const FIGURE_TOLERANCE: f64 = 0.15;

impl Figure {
    /// The measured figure's distance from the seed's, relative to the seed's.
    fn off_by(self) -> f64 {
        self.measured / self.seed - 1.0
    }

    fn matches(self) -> bool {
        self.off_by().abs() <= FIGURE_TOLERANCE
    }

    /// `3.04× against the seed's 1.48× (+105 %, tolerance ±15 %): does not match`.
    fn verdict(self) -> String {
        format!(
            "{:.2}× against the seed's {:.2}× ({:+.0} %, tolerance ±{:.0} %): {}",
            self.measured,
            self.seed,
            100.0 * self.off_by(),
            100.0 * FIGURE_TOLERANCE,
            if self.matches() {
                "matches"
            } else {
                "does not match"
            }
        )
    }
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
                            schedhost::observe::plot::compare(table, &Default::default())
                                .map_err(anyhow::Error::msg)?;
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
            super::plot::write(dir, &svgs, super::plot::DEFAULT_DPI)?;
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

    /// Every cell's runs: simulated ones on a pool of threads (each is deterministic), then
    /// real ones one at a time, repeats outermost so that the machine's drift spreads over
    /// every policy alike.
    fn measure(&self, table: &Table, scratch: &Scratch) -> Result<Measured> {
        let runtime = self.runtime()?;
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
        let mut plan = self.plan()?;
        plan.seed = seed;
        let device = match &row.place {
            Place::Sim(spec) => Device::Sim(spec.clone()),
            Place::File(bytes) => Device::Real(vec![scratch.file(*bytes)?]),
        };
        let policy = PolicyPlan::fixed(&policy.loaded, &policy.settings);
        Ok(run(&row.jobs, &device, policy, &plan, &mut |_| {})?.outcome)
    }
}

impl ReproduceArgs {
    /// Every experiment's plan before it sets its own parts.
    fn plan(&self) -> Result<RunPlan> {
        self.flags.plan(&SCOPE, FaultPlan::default(), false)
    }

    /// The sandbox's engine, as the flags set it.
    fn runtime(&self) -> Result<schedhost::policy::WasmRuntime> {
        self.flags.runtime(&SCOPE)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_headings_name_a_policy_and_its_seed_tunables_briefly() {
        assert_eq!(label("cfq:quantum=1,slice_async_rq=2"), "cfq q1 s2");
        assert_eq!(label("time-slice:time_slice_us=250"), "time-slice 250 µs");
        assert_eq!(label("anticipatory"), "anticipatory");
    }
}
