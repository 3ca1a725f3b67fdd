//! Seed 2: completion work placed by rq_affinity on a real file.

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use schedhost::core::RqAffinity;
use schedhost::frontend::jobs::{JobSpec, parse_job_file};
use schedhost::frontend::outcome::Outcome;
use schedhost::frontend::run::{Device, PolicyPlan, run};
use serde_json::{Value, json};

use crate::commands::compare::{column, mean_stddev};

use super::*;

impl ReproduceArgs {
    /// Seed 2: completion work placed by rq_affinity, with submitter threads on a real
    /// file. Four threads read back verified 128 KiB blocks (the CRC is the completion
    /// work); elapsed time per mode, interleaved round by round.
    pub(super) fn seed2(&self, scratch: &Scratch) -> Result<(String, Value)> {
        let (size, rounds) = if self.quick { ("8m", 2) } else { ("64m", 7) };
        let job = |rw: &str| -> Result<Vec<JobSpec>> {
            let text = format!(
                "[r]\nrw={rw}\nbs=128k\nsize={size}\nnumjobs=4\niodepth=8\nverify=crc32c\n"
            );
            parse_job_file("seed2", &text).map_err(|e| anyhow::anyhow!("{e}"))
        };
        let runtime = self.runtime()?;
        let noop = column(&runtime, &self.policy("noop"))?;
        let path = scratch.clear()?.to_path_buf();
        let real = |jobs: &[JobSpec], threads: Option<RqAffinity>| -> Result<Outcome> {
            let mut plan = self.plan()?;
            plan.ring.threads = threads;
            // The scratch file is this command's own, made empty by `clear`.
            plan.ring.allow_overwrite = true;
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
