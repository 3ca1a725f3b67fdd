//! The seeded workloads a check runs: random and sequential readers (whose 4 KiB reads
//! merge), a sequential writer, a mixed real-time submitter that thinks 2 ms between
//! requests (one that never paused would hold every lower class back under deadline's
//! `dd_queued` rule, and nothing would be left to merge), an idle-class one, a 64-deep
//! one that keeps more queued than the device takes (so budgets bind), random I/O deep in
//! a 256 KiB region, a deep appender, and a deep random reader over its whole file whose
//! requests queue up long past any FIFO expiry on a slow disk, with depths, sizes and
//! priorities drawn from the seed. The random jobs keep to small regions, so whichever submitter a policy serves, the
//! bio that follows a completion lands beside a request it still holds: merges at either
//! end of queued requests, and coalescing, reach every policy.

use crate::frontend::jobs::{JobSpec, Rng, parse_job_file};

/// The jobs for `seed`, each running `runtime_ns` of virtual time.
///
/// # Errors
/// Only if this module's own job text stops parsing (a bug, reported, never a panic).
pub fn jobs(seed: u64, runtime_ns: u64) -> Result<Vec<JobSpec>, String> {
    let mut rng = Rng::new(seed);
    let mut pick = |choices: &[u64]| choices[rng.below(choices.len() as u64) as usize];
    let text = format!(
        "[global]\nruntime={runtime}us\ntime_based=1\nsize=32m\ncontinue_on_error=all\n\
         [reader]\nrw=randread\nbs=4k\nsize=1m\niodepth={reader_depth}\nnumjobs={readers}\nprioclass=2\nprio={prio}\n\
         [streamer]\nrw=read\nbs=4k\niodepth=8\n\
         [writer]\nrw=write\nbs={write_kb}k\niodepth=4\n\
         [mixed]\nrw=randrw\nrwmixread={mix}\nbs=8k\niodepth=2\nthinktime=2ms\nprioclass=1\nprio={rt_prio}\n\
         [background]\nrw=randread\nbs=4k\niodepth=1\nprioclass=3\n\
         [burst]\nrw=randread\nbs=4k\nsize=512k\niodepth=64\n\
         [neighbours]\nrw=randrw\nbs=4k\nsize=256k\niodepth={neighbour_depth}\n\
         [appender]\nrw=write\nbs=4k\niodepth=32\n\
         [far]\nrw=randread\nbs=4k\niodepth=96\n\
         [paced-append]\nrw=write\nbs=4k\niodepth=128\nrate_iops=1500\n\
         [paced-neighbours]\nrw=randwrite\nbs=4k\nsize=256k\niodepth=128\nrate_iops=1500\n",
        runtime = (runtime_ns / 1000).max(1),
        reader_depth = pick(&[1, 4, 16]),
        readers = pick(&[1, 2, 3]),
        prio = pick(&[0, 4, 7]),
        write_kb = pick(&[16, 64, 256]),
        mix = pick(&[50, 70, 90]),
        rt_prio = pick(&[0, 3]),
        neighbour_depth = pick(&[16, 32, 48]),
    );
    parse_job_file("policy check workload", &text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_parse_and_differ_by_seed() {
        let a = jobs(1, 1_000_000_000).unwrap();
        assert_eq!(a.len(), 11);
        let differ = (2..20).any(|s| {
            let b = jobs(s, 1_000_000_000).unwrap();
            b.iter()
                .zip(&a)
                .any(|(x, y)| x.iodepth != y.iodepth || x.numjobs != y.numjobs || x.bs != y.bs)
        });
        assert!(differ);
    }
}
