//! The seeds run as tables of policies (1, 3 and 4): their rows, and the claims each
//! table is about.

use std::path::Path;

use anyhow::Result;
use schedhost::backend::sim::DeviceSpec;

use crate::commands::compare::Metric;

use super::*;

impl ReproduceArgs {
    pub(super) fn seed1_table(&self) -> Result<Table> {
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

    pub(super) fn seed3_table(&self) -> Result<Table> {
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

    pub(super) fn seed3_repeat(&self) -> u32 {
        if self.quick { 1 } else { 3 }
    }

    pub(super) fn seed4_tables(&self) -> Result<Vec<Table>> {
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
}

/// The seed's claims about a table, checked against the figures.
pub(super) fn shapes(seed: u8, table: &Table, m: &Measured) -> Vec<Shape> {
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
                    figure: None,
                },
                Shape {
                    claim: "8 readers: time-slice over noop, at least 1.45×".into(),
                    holds: t >= 1.45 * n,
                    figure: Some(Figure {
                        measured: t / n.max(1e-9),
                        seed: 1.48,
                    }),
                },
                Shape {
                    claim: "8 readers: cfq over noop, at least 2×".into(),
                    holds: c >= 2.0 * n,
                    figure: Some(Figure {
                        measured: c / n.max(1e-9),
                        seed: 2.10,
                    }),
                },
                Shape {
                    claim: "8 readers: noop < time-slice < cfq, the seed's order".into(),
                    holds: n < t && t < c,
                    figure: None,
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
                        figure: None,
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
                        figure: None,
                    });
                }
                let others = (0..table.policies.len()).filter(|&p| p != noop);
                let noop_worst = others.clone().all(|p| m.mean(r, p) <= n);
                out.push(Shape {
                    claim: format!("{}: noop the worst", row.label),
                    holds: noop_worst,
                    figure: None,
                });
            }
            out
        }
    }
}
