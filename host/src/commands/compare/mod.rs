//! `schedhost compare`: the same jobs under several policies, optionally swept over a fio
//! option and repeated with different seeds, as a table like the kernel community's
//! (rows = sweep value, columns = policies, cells = mean (stddev) of one metric).

mod columns;
mod metric;
mod parallel;
mod table;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use schedhost::backend::sim::FaultPlan;
use schedhost::core::DEFAULT_WATCHDOG_NS;
use schedhost::frontend::jobs::JobSpec;
use schedhost::frontend::run::{Device, PolicyPlan, run};

use super::OutputFormat;
use super::flags::{Devices, PolicyFlags, RunFlags, Scope, SwapPolicy, parse_device, swaps};
use super::run::{ReplayArgs, read_jobs};

pub use columns::{Column, column};
use columns::{TunableSweep, parse_sweep, row_settings, tunable_sweep};
pub use metric::Metric;
pub use parallel::parallel;
use table::{Rows, to_csv};
pub use table::{figure, mean_stddev};

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
    /// [default: sim:hdd]
    #[arg(long = "device")]
    pub devices: Vec<String>,
    /// Threads for the simulated cells (default: every core). The table does not depend on
    /// it; real devices are measured one run at a time, every cell's first run before any
    /// cell's second.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Sweep a fio option over every job: numjobs=1..8 or iodepth=1,32,2048.
    #[arg(long, value_name = "OPTION=VALUES")]
    pub sweep: Option<String>,
    /// Runs per cell, with seeds seed, seed+1, …
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
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
    /// The report on standard output: the tables as text, or as the JSON `--json` writes
    /// (`json+` is `json` here).
    #[arg(long, value_enum, default_value_t = OutputFormat::Normal)]
    pub output_format: OutputFormat,
    /// Write the report to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Draw the table as an SVG chart (compare.svg) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// The run flags, as `run`'s, for every cell; `--seed` is the first cell's seed
    /// (repeats take the next ones).
    #[command(flatten)]
    pub flags: RunFlags,
    /// The policy's flags, as `run`'s, for every cell: `--set` before each column's own
    /// tunables (`-p cfq:quantum=1` wins), `--swap-at` in every simulated cell.
    #[command(flatten)]
    pub policy_flags: PolicyFlags,
    /// A trace to replay in every cell instead of jobs, paced as `run`'s.
    #[command(flatten)]
    pub trace: ReplayArgs,
    /// A group's parameters for the jobs that say `cgroup=NAME`, as `run`'s (repeatable).
    #[arg(long = "group", value_name = "NAME:KEY=VALUE,...", value_parser = super::flags::parse_group)]
    pub groups: Vec<schedhost::core::GroupSpec>,
}

/// What `compare` does with the run flags: its cells run in parallel and are judged by
/// their reports, so nothing is shown or recorded as they run.
const SCOPE: Scope = Scope {
    command: "compare",
    devices: Devices::Either,
    own_seed: None,
    own_queue: None,
    own_on_fault: None,
    own_ring: None,
    own_threads: None,
    own_status: Some("compare's cells run in parallel; watch one run with `run --status-interval`"),
    own_events: Some("compare runs many cells; record one run's events with `run --trace-events`"),
    default_fuel: None,
    default_watchdog_ns: Some(DEFAULT_WATCHDOG_NS),
};

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
    pub fn execute(mut self, fio_options: Vec<String>) -> Result<()> {
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
        if self.devices.is_empty() {
            super::run::refuse_a_real_filename_in_simulation(&jobs)?;
            self.devices.push("sim:hdd".into());
        }
        super::flags::apply_groups(&mut jobs, &self.groups)?;
        let devices = self
            .devices
            .iter()
            .map(|d| parse_device(d).with_context(|| format!("--device {d}")))
            .collect::<Result<Vec<_>>>()?;
        // Every cell's plan before its seed and device's faults: refused flags stop here.
        let base = self.flags.plan(&SCOPE, FaultPlan::default(), false)?;
        self.policy_flags.refuse(
            "compare",
            None,
            Some("compare runs many cells; control one run with `run --control`"),
        )?;
        let runtime = self.flags.runtime(&SCOPE)?;
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
                    seed: base.seed.wrapping_add(i),
                })
            })
            .collect();
        let swap_policies = self.policy_flags.swap_policies(&runtime)?;
        let values = self.measure(
            &work,
            &row_jobs,
            &devices,
            &columns,
            (&sweep_values, tunable.as_ref()),
            &swap_policies,
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
        let report = match self.output_format {
            OutputFormat::Normal => schedhost::output::printable_lines(&text),
            OutputFormat::Json | OutputFormat::JsonPlus => format!("{:#}\n", doc()),
        };
        match &self.output {
            Some(path) => std::fs::write(path, report)
                .with_context(|| format!("writing the report to {}", path.display()))?,
            None => print!("{report}"),
        }
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
            let svg = schedhost::observe::plot::compare(&doc(), &Default::default())
                .map_err(anyhow::Error::msg)?;
            super::plot::write(dir, &[svg], super::plot::DEFAULT_DPI)?;
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
    /// a time so they do not disturb each other, in rounds ([`interleaved`]).
    fn measure(
        &self,
        work: &[Trial],
        row_jobs: &[Vec<JobSpec>],
        devices: &[(Device, FaultPlan)],
        columns: &[Cell<'_>],
        (sweep_values, tunable): (&[String], Option<&TunableSweep>),
        swap_policies: &[SwapPolicy],
    ) -> Result<Vec<Measured>> {
        let base = self.flags.plan(&SCOPE, FaultPlan::default(), false)?;
        // Files a cell of this comparison created: later cells reuse them as their own
        // (fio's runs reuse the file they laid out), without --allow-overwrite.
        let made: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
        let ours = |device: &Device| match device {
            Device::Real(paths) => {
                let made = made
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                paths.iter().all(|p| !p.exists() || made.contains(p))
            }
            Device::Sim(_) => false,
        };
        let measure = |w: &Trial| -> Result<Measured> {
            let cell = &columns[w.column];
            let context = || {
                format!(
                    "policy {} on {} at sweep value {:?}, seed {}",
                    cell.policy.label, self.devices[cell.device], sweep_values[w.row], w.seed
                )
            };
            let (device, faults) = &devices[cell.device];
            let mut plan = base;
            plan.seed = w.seed;
            plan.faults = *faults;
            plan.ring.allow_overwrite |= ours(device);
            let mut settings = self.policy_flags.settings.clone();
            for (name, value) in row_settings(cell.policy, tunable, w.row) {
                settings.retain(|(n, _)| *n != name);
                settings.push((name, value));
            }
            let policy = PolicyPlan {
                swaps: swaps(swap_policies),
                ..PolicyPlan::fixed(&cell.policy.loaded, &settings)
            };
            let ran =
                run(&row_jobs[w.row], device, policy, &plan, &mut |_| {}).with_context(context)?;
            if let Some(real) = &ran.real {
                let mut made = made
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                made.extend(
                    real.targets
                        .iter()
                        .filter(|t| t.created)
                        .map(|t| PathBuf::from(&t.path)),
                );
            }
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
        let mut real_values: Vec<Option<Measured>> = work.iter().map(|_| None).collect();
        let real: Vec<usize> = (0..work.len()).filter(|&k| !simulated(&work[k])).collect();
        for k in interleaved(&real, self.repeat) {
            real_values[k] = Some(measure(&work[k])?);
        }
        let mut values = Vec::with_capacity(work.len());
        for (w, real) in work.iter().zip(real_values) {
            values.push(if simulated(w) {
                sim_values
                    .next()
                    .context("a simulated run went missing")??
            } else {
                real.context("a real run went missing")?
            });
        }
        Ok(values)
    }
}

/// The order real runs are measured in: `work`'s indices `real` (each cell's `repeat` runs
/// next to each other), taken round by round, every cell's first run, then every cell's
/// second, so that a device drifting over the comparison (a disk warming, a neighbour's
/// load) moves every cell alike instead of the cells measured last. Each round starts one
/// cell further on (round r at the r-th cell, wrapping), so that no cell always runs in the
/// same place of its round, after the same cell: over as many rounds as cells each takes
/// each place once. (The very first real run is still the first cell's.)
fn interleaved(real: &[usize], repeat: u32) -> Vec<usize> {
    let n = repeat.max(1) as usize;
    let mut rounds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut sorted = real.to_vec();
    sorted.sort_unstable();
    for k in sorted {
        rounds[k % n].push(k);
    }
    rounds
        .into_iter()
        .enumerate()
        .flat_map(|(round, mut cells)| {
            if !cells.is_empty() {
                let start = round % cells.len();
                cells.rotate_left(start);
            }
            cells
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::interleaved;

    #[test]
    fn real_runs_are_measured_round_by_round_not_cell_by_cell() {
        // Three cells of three runs each, `work`'s order: cell-major. The middle cell is
        // simulated (not measured here).
        let real = [0, 1, 2, 6, 7, 8];
        assert_eq!(interleaved(&real, 3), [0, 6, 7, 1, 2, 8]);
        assert_eq!(
            interleaved(&real, 1),
            real,
            "one run a cell: the cells in order"
        );
    }

    #[test]
    fn each_round_starts_one_cell_further_so_every_cell_takes_every_place() {
        // Four cells of four runs each, all real: cell c's run r is index 4c + r.
        let real: Vec<usize> = (0..16).collect();
        let order = interleaved(&real, 4);
        let rounds: Vec<Vec<usize>> = order
            .chunks(4)
            .map(|r| r.iter().map(|k| k / 4).collect())
            .collect();
        assert_eq!(
            rounds,
            [[0, 1, 2, 3], [1, 2, 3, 0], [2, 3, 0, 1], [3, 0, 1, 2]]
        );
        for (round, cells) in order.chunks(4).enumerate() {
            assert!(
                cells.iter().all(|k| k % 4 == round),
                "round {round} holds each cell's run {round}"
            );
        }
        for cell in 0..4 {
            let places: Vec<usize> = rounds
                .iter()
                .map(|r| r.iter().position(|&c| c == cell).unwrap())
                .collect();
            let mut sorted = places.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2, 3], "cell {cell} took places {places:?}");
        }
    }
}
