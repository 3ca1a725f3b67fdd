//! `schedhost compare`: the same jobs under several policies, optionally swept over a fio
//! option and repeated with different seeds, as a table like the kernel community's
//! (rows = sweep value, columns = policies, cells = mean (stddev) of one metric).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use schedhost::backend::sim::FaultPlan;
use schedhost::frontend::jobs::JobSpec;
use schedhost::frontend::outcome::Outcome;
use schedhost::frontend::plan::{Observe, RunPlan};
use schedhost::frontend::run::{Device, PolicyPlan, run};
use schedhost::observe::stats::OpStats;
use schedhost::policy::{Loaded, WasmRuntime, load};
use schedhost::report::rates;
use serde_json::json;

use super::plan::{QueueArgs, RingArgs, SandboxArgs, parse_device};
use super::run::{ReplayArgs, read_jobs};

/// What a cell shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Metric {
    /// Read IOPS summed over jobs.
    ReadIops,
    /// Write IOPS summed over jobs.
    WriteIops,
    /// Smallest read completion latency, ms.
    ReadMinLat,
    /// Largest read completion latency, ms.
    ReadMaxLat,
    /// 99th percentile of read completion latency over all jobs, ms.
    ReadP99Lat,
    /// Largest write completion latency, ms.
    WriteMaxLat,
    /// 99th percentile of write completion latency over all jobs, ms.
    WriteP99Lat,
    /// Longest a read waited in the scheduler (submission to dispatch), ms.
    ReadMaxSched,
    /// Longest a write waited in the scheduler (submission to dispatch), ms.
    WriteMaxSched,
    /// Read bandwidth summed over jobs, MiB/s.
    ReadBw,
    /// Write bandwidth summed over jobs, MiB/s.
    WriteBw,
    /// Mean read completion latency, ms.
    ReadMeanLat,
    /// Median read completion latency, ms.
    ReadP50Lat,
    /// 99.9th percentile of read completion latency, ms.
    ReadP999Lat,
    /// Mean write completion latency, ms.
    WriteMeanLat,
    /// 99th percentile of a read's time in the scheduler, ms.
    ReadP99Sched,
    /// Jain's fairness index over the submitters' IOPS: 1 when all get the same, 1/n when
    /// one gets everything.
    Fairness,
    /// The smallest submitter's share of all I/Os completed, percent.
    MinShare,
}

impl Metric {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Metric::ReadIops => "read-iops",
            Metric::WriteIops => "write-iops",
            Metric::ReadMinLat => "read-min-lat",
            Metric::ReadMaxLat => "read-max-lat",
            Metric::ReadP99Lat => "read-p99-lat",
            Metric::WriteMaxLat => "write-max-lat",
            Metric::WriteP99Lat => "write-p99-lat",
            Metric::ReadMaxSched => "read-max-sched",
            Metric::WriteMaxSched => "write-max-sched",
            Metric::ReadBw => "read-bw",
            Metric::WriteBw => "write-bw",
            Metric::ReadMeanLat => "read-mean-lat",
            Metric::ReadP50Lat => "read-p50-lat",
            Metric::ReadP999Lat => "read-p999-lat",
            Metric::WriteMeanLat => "write-mean-lat",
            Metric::ReadP99Sched => "read-p99-sched",
            Metric::Fairness => "fairness",
            Metric::MinShare => "min-share",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Metric::ReadIops => "read IOPS (sum over jobs)",
            Metric::WriteIops => "write IOPS (sum over jobs)",
            Metric::ReadMinLat => "min read latency (ms)",
            Metric::ReadMaxLat => "max read latency (ms)",
            Metric::ReadP99Lat => "p99 read latency (ms)",
            Metric::WriteMaxLat => "max write latency (ms)",
            Metric::WriteP99Lat => "p99 write latency (ms)",
            Metric::ReadMaxSched => "max read time in the scheduler (ms)",
            Metric::WriteMaxSched => "max write time in the scheduler (ms)",
            Metric::ReadBw => "read bandwidth (MiB/s, sum over jobs)",
            Metric::WriteBw => "write bandwidth (MiB/s, sum over jobs)",
            Metric::ReadMeanLat => "mean read latency (ms)",
            Metric::ReadP50Lat => "median read latency (ms)",
            Metric::ReadP999Lat => "p99.9 read latency (ms)",
            Metric::WriteMeanLat => "mean write latency (ms)",
            Metric::ReadP99Sched => "p99 read time in the scheduler (ms)",
            Metric::Fairness => "Jain's fairness index over the jobs' IOPS",
            Metric::MinShare => "smallest job's share of the I/Os (%)",
        }
    }

    /// This metric of a run.
    pub fn of(self, outcome: &Outcome) -> f64 {
        let dir = usize::from(matches!(
            self,
            Metric::WriteIops
                | Metric::WriteMaxLat
                | Metric::WriteP99Lat
                | Metric::WriteMaxSched
                | Metric::WriteBw
                | Metric::WriteMeanLat
        ));
        // Each job's rate over its own active span.
        let per_job = |d: usize| {
            outcome
                .stats
                .iter()
                .zip(&outcome.submitters)
                .map(move |(s, sub)| {
                    rates(&s.dirs[d], sub.finished_ns.saturating_sub(sub.started_ns))
                })
        };
        match self {
            Metric::ReadIops | Metric::WriteIops => per_job(dir).map(|r| r.iops).sum(),
            Metric::ReadBw | Metric::WriteBw => {
                per_job(dir).map(|r| r.bw_bytes).sum::<f64>() / 1_048_576.0
            }
            Metric::Fairness | Metric::MinShare => {
                let iops: Vec<f64> = per_job(0)
                    .zip(per_job(1))
                    .map(|(r, w)| r.iops + w.iops)
                    .collect();
                let ios: Vec<f64> = outcome
                    .stats
                    .iter()
                    .map(|s| (s.dirs[0].ios + s.dirs[1].ios) as f64)
                    .collect();
                if self == Metric::Fairness {
                    jain(&iops)
                } else {
                    let total: f64 = ios.iter().sum();
                    let least = ios.iter().copied().fold(f64::INFINITY, f64::min);
                    if total > 0.0 {
                        100.0 * least / total
                    } else {
                        0.0
                    }
                }
            }
            _ => {
                let mut all = OpStats::default();
                for s in &outcome.stats {
                    all.merge(&s.dirs[dir]);
                }
                if all.clat.is_empty() {
                    return 0.0;
                }
                let ns = match self {
                    Metric::ReadMinLat => all.clat.min() as f64,
                    Metric::ReadMaxLat | Metric::WriteMaxLat => all.clat.max() as f64,
                    Metric::ReadMaxSched | Metric::WriteMaxSched => all.sched.max() as f64,
                    Metric::ReadMeanLat | Metric::WriteMeanLat => all.clat.mean(),
                    Metric::ReadP50Lat => all.clat.value_at_percentile(50.0) as f64,
                    Metric::ReadP999Lat => all.clat.value_at_percentile(99.9) as f64,
                    Metric::ReadP99Sched => all.sched.value_at_percentile(99.0) as f64,
                    _ => all.clat.value_at_percentile(99.0) as f64,
                };
                ns / 1e6
            }
        }
    }
}

/// Jain's fairness index of `x`: (Σx)² / (n · Σx²).
fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    if squares == 0.0 {
        return 0.0;
    }
    sum * sum / (x.len() as f64 * squares)
}

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// A policy to compare, repeatable: NAME, PATH.wasm or native:NAME, with tunables after a
    /// colon: --policy time-slice:time_slice_us=250.
    #[arg(long = "policy", short = 'p', required = true)]
    pub policies: Vec<String>,
    /// fio job files; fio options may be given instead or as well.
    pub jobs: Vec<PathBuf>,
    /// A device, repeatable (each is a group of columns): sim:hdd, sim:ssd, sim:null, a spec
    /// file, a DiskSim .diskspecs or .parv, or real files and block devices (a:b).
    #[arg(long = "device", default_value = "sim:hdd")]
    pub devices: Vec<String>,
    /// Threads for the simulated cells (default: every core). The table does not depend on
    /// it; real devices are measured one cell at a time.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Sweep a fio option over every job: numjobs=1..8 or iodepth=1,32,2048.
    #[arg(long, value_name = "OPTION=VALUES")]
    pub sweep: Option<String>,
    /// Runs per cell, with seeds seed, seed+1, …
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// What the cells show, repeatable: one table per metric, all from the same runs
    /// (default read-iops).
    #[arg(long = "metric", value_enum)]
    pub metrics: Vec<Metric>,
    /// Write each run's full JSON report into DIR (ROW_POLICY_DEVICE_seedN.json).
    #[arg(long, value_name = "DIR")]
    pub keep_runs: Option<PathBuf>,
    /// Also write the table as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the table as CSV (sweep, policy, mean, stddev, values).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Draw the table as an SVG chart (compare.svg) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// The queue's attributes, as `run`'s, for every run.
    #[command(flatten)]
    pub queue: QueueArgs,
    /// Real devices: how they are driven, as `run`'s.
    #[command(flatten)]
    pub ring: RingArgs,
    /// The sandbox, as `run`'s: every cell's policy runs under these limits.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// A trace to replay in every cell instead of jobs, paced as `run`'s.
    #[command(flatten)]
    pub trace: ReplayArgs,
    /// A group's parameters for the jobs that say `cgroup=NAME`, as `run`'s (repeatable).
    #[arg(long = "group", value_name = "NAME:KEY=VALUE,...", value_parser = super::plan::parse_group)]
    pub groups: Vec<schedhost::core::GroupSpec>,
}

/// A policy: how to build it and its settings.
pub struct Column {
    /// Its name as `--policy` gave it, without tunables (`cfq`, a path's stem).
    pub name: String,
    pub label: String,
    pub loaded: Loaded,
    pub settings: Vec<(String, i64)>,
}

/// A column of the table: a policy on a device.
struct Cell<'a> {
    label: String,
    device: usize,
    policy: &'a Column,
}

/// A cell's runs: the metric of each, and how many had their policy ejected (their figures
/// are partly the fallback FIFO's, and are marked as such).
#[derive(Debug, Clone, Default)]
struct Runs {
    values: Vec<f64>,
    ejected: usize,
}

/// One run's metrics (in `--metric` order), and whether its policy was ejected.
#[derive(Debug, Clone)]
struct Measured {
    values: Vec<f64>,
    ejected: bool,
}

/// One run of the table: a row's jobs, a column, a seed.
#[derive(Debug, Clone, Copy)]
struct Trial {
    row: usize,
    column: usize,
    seed: u64,
}

impl CompareArgs {
    pub fn execute(self, fio_options: Vec<String>) -> Result<()> {
        let jobs = match &self.trace.replay {
            Some(path) => {
                if !self.jobs.is_empty() || !fio_options.is_empty() {
                    bail!("--replay replays a trace; give no job files or fio options with it");
                }
                self.trace.read(path)?.0
            }
            None => read_jobs(&self.jobs, &fio_options)?,
        };
        let mut jobs = jobs;
        super::plan::apply_groups(&mut jobs, &self.groups)?;
        let devices = self
            .devices
            .iter()
            .map(|d| parse_device(d).with_context(|| format!("--device {d}")))
            .collect::<Result<Vec<_>>>()?;
        let runtime = self.sandbox.runtime()?;
        let policies = self
            .policies
            .iter()
            .map(|spec| column(&runtime, spec))
            .collect::<Result<Vec<_>>>()?;
        let columns: Vec<Cell<'_>> = (0..devices.len())
            .flat_map(|device| policies.iter().map(move |policy| (device, policy)))
            .map(|(device, policy)| Cell {
                label: if devices.len() > 1 {
                    format!("{} @ {}", policy.label, self.devices[device])
                } else {
                    policy.label.clone()
                },
                device,
                policy,
            })
            .collect();
        let (sweep_key, sweep_values) = match &self.sweep {
            Some(sweep) => parse_sweep(sweep)?,
            None => (String::new(), vec![String::new()]),
        };
        let tunable = tunable_sweep(&sweep_key, &policies, &sweep_values)?;
        let mut row_jobs = Vec::new();
        for value in &sweep_values {
            let mut jobs = jobs.clone();
            if !sweep_key.is_empty() && tunable.is_none() {
                for job in &mut jobs {
                    job.set_option(&sweep_key, value).map_err(|e| {
                        anyhow::anyhow!("--sweep {sweep_key}={value}: job '{}': {e}", job.name)
                    })?;
                }
            }
            row_jobs.push(jobs);
        }
        let work: Vec<Trial> = (0..row_jobs.len())
            .flat_map(|row| (0..columns.len()).map(move |column| (row, column)))
            .flat_map(|(row, column)| {
                (0..u64::from(self.repeat)).map(move |i| Trial {
                    row,
                    column,
                    seed: self.seed + i,
                })
            })
            .collect();
        let values = self.measure(
            &work,
            &row_jobs,
            &devices,
            &columns,
            &sweep_values,
            tunable.as_ref(),
        )?;
        let metrics = self.metric_list();
        let tables: Vec<Rows> = (0..metrics.len())
            .map(|m| self.rows(m, &values, &sweep_values, columns.len()))
            .collect();
        let mut text = String::new();
        for (metric, rows) in metrics.iter().zip(&tables) {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&self.table(*metric, &sweep_key, &columns, rows));
        }
        print!("{}", schedhost::output::printable_lines(&text));
        let doc = || {
            let mut doc = self.to_json(metrics[0], &sweep_key, &columns, &tables[0]);
            if metrics.len() > 1 {
                doc["tables"] = metrics
                    .iter()
                    .zip(&tables)
                    .map(|(m, rows)| self.to_json(*m, &sweep_key, &columns, rows))
                    .collect();
            }
            doc
        };
        if let Some(path) = &self.json {
            std::fs::write(path, format!("{:#}\n", doc()))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(path) = &self.csv {
            let csv = if metrics.len() == 1 {
                to_csv(&sweep_key, &columns, &self.devices, &tables[0], None)
            } else {
                metrics
                    .iter()
                    .zip(&tables)
                    .enumerate()
                    .map(|(k, (m, rows))| {
                        let csv = to_csv(&sweep_key, &columns, &self.devices, rows, Some(m.name()));
                        // One header for the file.
                        if k == 0 {
                            csv
                        } else {
                            csv.split_once('\n')
                                .map_or(String::new(), |(_, body)| body.to_owned())
                        }
                    })
                    .collect()
            };
            std::fs::write(path, csv).with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(dir) = &self.plot {
            let svg = schedhost::observe::plot::compare(&doc()).map_err(anyhow::Error::msg)?;
            super::plot::write(dir, &[svg])?;
        }
        Ok(())
    }

    /// Writes one run's full JSON report into `dir`, named after its cell.
    fn keep(
        &self,
        dir: &std::path::Path,
        w: &Trial,
        cell: &Cell<'_>,
        (jobs, sweep_value): (&[JobSpec], &str),
        settings: &[(String, i64)],
        ran: &schedhost::frontend::run::Ran,
    ) -> Result<()> {
        let info = schedhost::report::RunInfo {
            policy_source: self.policies[w.column % self.policies.len()].clone(),
            device: self.devices[cell.device].clone(),
            device_model: ran.device_model.clone(),
            seed: w.seed,
            settings: settings.to_vec(),
            real: ran.real.clone(),
            trace: None,
        };
        let summary = schedhost::report::Summary {
            info: &info,
            jobs,
            outcome: &ran.outcome,
        };
        let safe = |s: &str| -> String {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        let row = if sweep_value.is_empty() {
            "run".to_owned()
        } else {
            safe(sweep_value)
        };
        let name = format!(
            "{row}_{}_{}_seed{}.json",
            safe(&cell.policy.label),
            safe(&self.devices[cell.device]),
            w.seed
        );
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!("{:#}\n", schedhost::report::to_json(&summary)),
        )
        .with_context(|| format!("writing {}", path.display()))
    }

    /// The metrics asked for, read-iops when none was.
    fn metric_list(&self) -> Vec<Metric> {
        if self.metrics.is_empty() {
            vec![Metric::ReadIops]
        } else {
            self.metrics.clone()
        }
    }

    /// Metric `m`'s table: per sweep value, each cell's runs.
    fn rows(&self, m: usize, values: &[Measured], sweep_values: &[String], cells: usize) -> Rows {
        let n = self.repeat as usize;
        let mut rows = Vec::new();
        let mut at = 0;
        for value in sweep_values {
            let mut row = Vec::new();
            for _ in 0..cells {
                let runs = &values[at..at + n];
                row.push(Runs {
                    values: runs.iter().map(|r| r.values[m]).collect(),
                    ejected: runs.iter().filter(|r| r.ejected).count(),
                });
                at += n;
            }
            rows.push((value.clone(), row));
        }
        rows
    }

    /// Every run's metric, in `work`'s order: simulated runs on a pool of threads (each run
    /// is deterministic, so the pool's size and order change nothing), then real ones, one at
    /// a time so they do not disturb each other.
    fn measure(
        &self,
        work: &[Trial],
        row_jobs: &[Vec<JobSpec>],
        devices: &[(Device, FaultPlan)],
        columns: &[Cell<'_>],
        sweep_values: &[String],
        tunable: Option<&TunableSweep>,
    ) -> Result<Vec<Measured>> {
        let measure = |w: &Trial| -> Result<Measured> {
            let cell = &columns[w.column];
            let context = || {
                format!(
                    "policy {} on {} at sweep value {:?}, seed {}",
                    cell.policy.label, self.devices[cell.device], sweep_values[w.row], w.seed
                )
            };
            let (device, faults) = &devices[cell.device];
            let plan = RunPlan {
                seed: w.seed,
                queue: self.queue.attrs(),
                supervision: self.sandbox.supervision(),
                observe: Observe::default(),
                faults: *faults,
                ring: self.ring.options(),
            };
            let settings = row_settings(cell.policy, tunable, w.row);
            let policy = PolicyPlan::fixed(&cell.policy.loaded, &settings);
            let ran =
                run(&row_jobs[w.row], device, policy, &plan, &mut |_| {}).with_context(context)?;
            if let Some(dir) = &self.keep_runs {
                let row = (&row_jobs[w.row][..], sweep_values[w.row].as_str());
                self.keep(dir, w, cell, row, &settings, &ran)
                    .with_context(context)?;
            }
            let outcome = ran.outcome;
            Ok(Measured {
                values: self.metric_list().iter().map(|m| m.of(&outcome)).collect(),
                ejected: !outcome.ejections.is_empty(),
            })
        };
        let simulated = |w: &Trial| matches!(devices[columns[w.column].device].0, Device::Sim(_));
        let sims: Vec<Trial> = work.iter().copied().filter(simulated).collect();
        let mut sim_values = parallel(&sims, self.threads, measure).into_iter();
        let mut values = Vec::with_capacity(work.len());
        for w in work {
            values.push(if simulated(w) {
                sim_values
                    .next()
                    .context("a simulated run went missing")??
            } else {
                measure(w)?
            });
        }
        Ok(values)
    }

    /// One metric's table: a block of rows per device (stacked, so two devices do not make
    /// one long row), a column per policy; `mean (stddev)` only when cells have repeats.
    fn table(&self, metric: Metric, sweep_key: &str, columns: &[Cell<'_>], rows: &Rows) -> String {
        let mut out = String::new();
        let repeats = self.repeat > 1;
        let _ = writeln!(
            out,
            "{} on {}, {} run(s) per cell{}",
            metric.label(),
            self.devices.join(", "),
            self.repeat,
            if repeats { ": mean (stddev)" } else { "" }
        );
        let first = if sweep_key.is_empty() { "" } else { sweep_key };
        let fw = first.len().max(10);
        let mut any_ejected = false;
        for (device, name) in self.devices.iter().enumerate() {
            let mine: Vec<usize> = (0..columns.len())
                .filter(|&c| columns[c].device == device)
                .collect();
            if self.devices.len() > 1 {
                let _ = writeln!(out, "device {name}:");
            }
            let widths: Vec<usize> = mine
                .iter()
                .map(|&c| {
                    columns[c]
                        .policy
                        .label
                        .len()
                        .max(if repeats { 16 } else { 10 })
                })
                .collect();
            let _ = write!(out, "{first:<fw$}");
            for (&c, width) in mine.iter().zip(&widths) {
                let _ = write!(out, "  {:>width$}", columns[c].policy.label);
            }
            let _ = writeln!(out);
            for (value, cells) in rows {
                let _ = write!(out, "{value:<fw$}");
                for (&c, width) in mine.iter().zip(&widths) {
                    let runs = &cells[c];
                    let (mean, sd) = mean_stddev(&runs.values);
                    let mark = if runs.ejected > 0 { "*" } else { "" };
                    any_ejected |= runs.ejected > 0;
                    let cell = if repeats {
                        format!("{mark}{} ({})", figure(mean), figure(sd))
                    } else {
                        format!("{mark}{}", figure(mean))
                    };
                    let _ = write!(out, "  {cell:>width$}");
                }
                let _ = writeln!(out);
            }
        }
        if any_ejected {
            let _ = writeln!(
                out,
                "* the policy was ejected in some of the cell's runs: after the ejection its figures are the fallback FIFO's"
            );
        }
        out
    }

    fn to_json(
        &self,
        metric: Metric,
        sweep_key: &str,
        columns: &[Cell<'_>],
        rows: &Rows,
    ) -> serde_json::Value {
        json!({
            "metric": metric.name(),
            "label": metric.label(),
            "device": self.devices.join(", "),
            "devices": self.devices,
            "repeat": self.repeat,
            "seed": self.seed,
            "sweep": sweep_key,
            "policies": columns.iter().map(|c| c.label.clone()).collect::<Vec<_>>(),
            "rows": rows.iter().map(|(value, cells)| json!({
                "value": value,
                "cells": cells.iter().zip(columns).map(|(runs, c)| {
                    let (mean, stddev) = mean_stddev(&runs.values);
                    json!({
                        "policy": c.policy.label,
                        "device": self.devices[c.device],
                        "mean": mean,
                        "stddev": stddev,
                        "values": runs.values,
                        "ejected_runs": runs.ejected,
                    })
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }
}

/// Per sweep value, each cell's runs.
type Rows = Vec<(String, Vec<Runs>)>;

/// The table as CSV; with `metric`, each line starts with its name.
fn to_csv(
    sweep_key: &str,
    columns: &[Cell<'_>],
    devices: &[String],
    rows: &Rows,
    metric: Option<&str>,
) -> String {
    let lead = |m: &str| metric.map_or(String::new(), |_| format!("{m},"));
    let mut out = format!(
        "{}{},policy,device,mean,stddev,values,ejected_runs\n",
        lead("metric"),
        if sweep_key.is_empty() {
            "sweep"
        } else {
            sweep_key
        }
    );
    for (value, cells) in rows {
        for (runs, c) in cells.iter().zip(columns) {
            let (mean, sd) = mean_stddev(&runs.values);
            let list: Vec<String> = runs.values.iter().map(|v| format!("{v:.3}")).collect();
            let _ = writeln!(
                out,
                "{}{value},{},{},{mean:.3},{sd:.3},{},{}",
                lead(metric.unwrap_or_default()),
                c.policy.label,
                devices[c.device],
                list.join(" "),
                runs.ejected
            );
        }
    }
    out
}

/// `NAME[:k=v,k=v]` → a loaded policy with settings.
pub fn column(runtime: &WasmRuntime, spec: &str) -> Result<Column> {
    let (name, settings) = match spec.strip_prefix("native:") {
        Some(rest) => {
            let (n, s) = rest.split_once(':').unwrap_or((rest, ""));
            (format!("native:{n}"), s)
        }
        None => {
            let (n, s) = spec.split_once(':').unwrap_or((spec, ""));
            (n.to_owned(), s)
        }
    };
    let settings = settings
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| super::parse_setting(s).map_err(|e| anyhow::anyhow!("--policy {spec}: {e}")))
        .collect::<Result<Vec<_>>>()?;
    let (_, loaded) = load(runtime, &name).with_context(|| format!("--policy {spec}"))?;
    let base = name.strip_prefix("native:").unwrap_or(&name);
    let base = std::path::Path::new(base)
        .file_stem()
        .map_or(base.to_owned(), |s| s.to_string_lossy().into_owned());
    Ok(Column {
        name: base,
        label: column_label(spec),
        loaded,
        settings,
    })
}

/// `f` of every item, on `threads` threads (default: every core), in the items' order. For
/// simulated runs: each is deterministic, so the pool's size and order change nothing.
pub fn parallel<T: Sync, R: Send>(
    items: &[T],
    threads: Option<u32>,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads
        .map_or_else(
            || std::thread::available_parallelism().map_or(1, usize::from),
            |n| n as usize,
        )
        .min(items.len().max(1));
    let slots: Vec<std::sync::Mutex<Option<R>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(k) else {
                        break;
                    };
                    let result = f(item);
                    *slots[k]
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(result);
                }
            });
        }
    });
    slots
        .into_iter()
        .zip(items)
        .map(|(slot, item)| {
            slot.into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .unwrap_or_else(|| f(item))
        })
        .collect()
}

/// `--sweep POLICY.TUNABLE=V1,V2`: the policy's columns take the tunable at each row's
/// value; the others run as given.
pub struct TunableSweep {
    policy: String,
    tunable: String,
    values: Vec<i64>,
}

/// The tunable sweep `key` names, if it names one (`cfq.slice_idle`).
///
/// # Errors
/// A policy no column runs, or a value that is not an integer.
fn tunable_sweep(key: &str, columns: &[Column], values: &[String]) -> Result<Option<TunableSweep>> {
    let Some((policy, tunable)) = key.split_once('.') else {
        return Ok(None);
    };
    if !columns.iter().any(|c| c.name == policy) {
        let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
        bail!(
            "--sweep {key}: no column runs {policy} (the columns run {})",
            names.join(", ")
        );
    }
    let values = values
        .iter()
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| anyhow::anyhow!("--sweep {key}={v}: a tunable takes integers"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(TunableSweep {
        policy: policy.to_owned(),
        tunable: tunable.to_owned(),
        values,
    }))
}

/// A column's settings in row `row`: its own, with a swept tunable's value on top.
fn row_settings(column: &Column, sweep: Option<&TunableSweep>, row: usize) -> Vec<(String, i64)> {
    let mut settings = column.settings.clone();
    if let Some(s) = sweep.filter(|s| s.policy == column.name) {
        settings.retain(|(name, _)| *name != s.tunable);
        settings.push((s.tunable.clone(), s.values[row]));
    }
    settings
}

/// A column's heading: the policy's name (a component's file stem, `(native)` for a
/// native build), then its tunables: `cfq (native) quantum=1`.
fn column_label(spec: &str) -> String {
    let (native, rest) = match spec.strip_prefix("native:") {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    let (name, tunables) = if native || !rest.contains(".wasm") {
        rest.split_once(':').unwrap_or((rest, ""))
    } else {
        // A path may hold colons; its tunables follow the `.wasm`.
        let end = rest.find(".wasm").map_or(rest.len(), |i| i + 5);
        (&rest[..end], rest[end..].trim_start_matches(':'))
    };
    let stem = std::path::Path::new(name)
        .file_stem()
        .map_or(name.to_owned(), |s| s.to_string_lossy().into_owned());
    let mut label = stem;
    if native {
        label.push_str(" (native)");
    }
    if !tunables.is_empty() {
        label.push(' ');
        label.push_str(&tunables.replace(',', " "));
    }
    label
}

/// `key=a..b` (inclusive, step 1) or `key=a,b,c`.
fn parse_sweep(sweep: &str) -> Result<(String, Vec<String>)> {
    let Some((key, values)) = sweep.split_once('=') else {
        bail!("--sweep {sweep}: expected OPTION=VALUES, e.g. numjobs=1..8 or iodepth=1,32,2048");
    };
    let values: Vec<String> = match values.split_once("..") {
        Some((a, b)) => {
            let (a, b): (u64, u64) = (
                a.trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("--sweep {sweep}: `{a}` is not an integer"))?,
                b.trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("--sweep {sweep}: `{b}` is not an integer"))?,
            );
            if a > b || b - a > 10_000 {
                bail!(
                    "--sweep {sweep}: a range runs from the smaller to the larger value, at most 10000 steps"
                );
            }
            (a..=b).map(|v| v.to_string()).collect()
        }
        None => values
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect(),
    };
    if values.is_empty() {
        bail!("--sweep {sweep}: no values");
    }
    Ok((key.trim().to_owned(), values))
}

/// Mean and population standard deviation.
pub fn mean_stddev(values: &[f64]) -> (f64, f64) {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// A figure with as many decimals as its size deserves.
pub fn figure(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_accepts_ranges_and_lists() {
        assert_eq!(
            parse_sweep("numjobs=1..3").unwrap(),
            ("numjobs".into(), vec!["1".into(), "2".into(), "3".into()])
        );
        assert_eq!(parse_sweep("iodepth=1,32").unwrap().1, vec!["1", "32"]);
        assert!(
            parse_sweep("numjobs=3..1")
                .unwrap_err()
                .to_string()
                .contains("smaller to the larger")
        );
        assert!(parse_sweep("numjobs").is_err());
    }

    #[test]
    fn mean_and_population_stddev() {
        assert_eq!(mean_stddev(&[2.0, 4.0]), (3.0, 1.0));
    }
}
