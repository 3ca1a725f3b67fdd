//! The jobs front-end: fio job files and options, where each clone's I/O goes on the
//! device, the submitters that issue it, and running them on a simulated device ([`sim`])
//! or on real ones ([`real`]).

pub mod distribution;
pub mod feed;
mod file;
pub mod job;
pub mod real;
pub mod replay;
mod rng;
pub mod sim;
mod stream;
pub mod submitter;
pub use crate::value;

pub use crate::input::Location;
pub use file::{parse_cmdline, parse_job_file};
pub use job::{ContinueOn, Direction, JobError, JobSpec, Pattern};
pub use replay::jobs_for_trace;
pub use rng::{Permutation, Rng};
pub use stream::{Pacing, ReplaySpec};
pub use submitter::{Next, Placement, Submitter};

pub use crate::core::MAX_SUBMITTERS;

/// Clones a job file (or command line) may have in all: fio's own limit (`FIO_MAX_JOBS`).
/// Each is a submitter with its own statistics (up to four latency histograms and a
/// timeline), so a job file of a few lines cannot ask for more memory than the machine has.
/// A replay's streams are bounded by [`MAX_SUBMITTERS`] instead: each is a line of its trace.
pub const MAX_CLONES: u64 = 4096;

/// Bios the jobs may keep in flight together (every clone's iodepth, summed): each one is
/// host state (a request slot, a buffer on a real device), so a job file of a few lines
/// cannot ask for gigabytes.
pub const MAX_BIOS_IN_FLIGHT: u64 = 1 << 20;

/// Files start on 1 MiB boundaries, as a filesystem would place them.
const FILE_ALIGN_SECTORS: u64 = 2048;

use crate::core::MAX_SECTOR;
use value::MAX_BYTES;

/// Places every clone of every job on a device of `capacity_sectors`: each file (a job's
/// `filename`, or one per clone as fio's default) gets its own extent; a clone's region is
/// `offset + clone × offset_increment` within its file. Every sum is checked: a region
/// that would end past the device, or past [`MAX_SECTOR`], is an error, never a wrapped
/// address.
///
/// # Errors
/// Names the job (and where it was defined) that does not fit.
pub fn place(jobs: &[JobSpec], capacity_sectors: u64) -> Result<Vec<Placement>, String> {
    let capacity_sectors = capacity_sectors.min(MAX_SECTOR);
    let mut files: Vec<(String, u64, u64)> = Vec::new(); // name, start sector, sectors
    // By name, so a job file of many files places in linear time.
    let mut file_index: std::collections::HashMap<String, usize> = Default::default();
    let mut placements = Vec::new();
    let (mut group, mut phase) = (0u32, 0u32);
    let mut next_free = 0u64;
    let mut in_flight = 0u64;
    for (index, job) in jobs.iter().enumerate() {
        in_flight = in_flight.saturating_add(u64::from(job.numjobs) * u64::from(job.iodepth));
        if in_flight > MAX_BIOS_IN_FLIGHT {
            return Err(format!(
                "{}: job '{}': the jobs would keep {in_flight} bios in flight (numjobs × iodepth, summed over the jobs so far); at most {MAX_BIOS_IN_FLIGHT}",
                job.location, job.name
            ));
        }
        if index > 0 && (job.stonewall || job.new_group) {
            group += 1;
        }
        if index > 0 && job.stonewall {
            phase += 1;
        }
        let size = job.size.unwrap_or(u64::from(job.bs));
        for clone in 0..job.numjobs {
            if placements.len() >= MAX_SUBMITTERS {
                return Err(format!(
                    "{}: job '{}': the jobs have more than {MAX_SUBMITTERS} clones in all",
                    job.location, job.name
                ));
            }
            let shared = job.filename.is_some() || job.offset_increment.is_some();
            let file_name = match (&job.filename, shared) {
                (Some(name), _) => name.clone(),
                (None, true) => format!("{}.0", job.name),
                (None, false) => format!("{}.{clone}.0", job.name),
            };
            let increment = if shared {
                job.offset_increment.unwrap_or(0)
            } else {
                0
            };
            let within = u64::from(clone)
                .checked_mul(increment)
                .and_then(|step| step.checked_add(job.offset))
                .filter(|&within| within <= MAX_BYTES);
            let needed = within
                .and_then(|within| within.checked_add(size))
                .map(|end| end.div_ceil(512))
                .filter(|&needed| needed <= MAX_SECTOR);
            let (Some(within), Some(needed)) = (within, needed) else {
                return Err(format!(
                    "{}: job '{}': clone {clone}'s region (offset {} + {clone} × offset_increment {increment}, size {size}) ends past the largest address, 2^54 sectors",
                    job.location, job.name, job.offset
                ));
            };
            let known = file_index.get(&file_name).map(|&i| &mut files[i]);
            let start = match known {
                Some((_, start, sectors)) if *sectors >= needed => *start,
                Some((_, start, sectors)) if *start + *sectors == next_free => {
                    next_free = *start + needed;
                    *sectors = needed;
                    *start
                }
                Some(_) => {
                    return Err(format!(
                        "job '{}': file {file_name} grows after another file was placed behind it; give its largest job first",
                        job.name
                    ));
                }
                None => {
                    let start = next_free.next_multiple_of(FILE_ALIGN_SECTORS);
                    next_free = start + needed;
                    file_index.insert(file_name.clone(), files.len());
                    files.push((file_name, start, needed));
                    start
                }
            };
            // Both terms are at most MAX_SECTOR (2^54), so the sums above cannot wrap.
            if next_free > capacity_sectors {
                return Err(format!(
                    "job '{}': its files need {} MiB but the device has {} MiB",
                    job.name,
                    next_free / 2048,
                    capacity_sectors / 2048
                ));
            }
            placements.push(Placement {
                job: index,
                clone,
                region_start: start + within / 512,
                region_sectors: size / 512,
                group,
                phase,
            });
        }
    }
    Ok(placements)
}

/// Bytes from the device's start to the end of the furthest region: what a target must hold.
pub fn extent_bytes(placements: &[Placement]) -> u64 {
    // `place` keeps every region below MAX_SECTOR, so the product stays below 2^63.
    placements
        .iter()
        .map(|p| (p.region_start + p.region_sectors) * 512)
        .max()
        .unwrap_or(0)
}

/// The groups of `submitters` (in ctx order) of `jobs`: `None` when no job names one.
/// Groups are numbered in the order their first job comes; a `cgroup=` without `--group`
/// is a group of the default weight (or its first job's `cgroup_weight=`) without limits.
pub fn throttle_for(jobs: &[JobSpec], submitters: &[Submitter]) -> Option<crate::core::Throttle> {
    let mut groups: Vec<crate::core::GroupSpec> = Vec::new();
    let member = submitters
        .iter()
        .map(|s| {
            let job = &jobs[s.placement.job];
            let name = job.cgroup.as_ref()?;
            let index = match groups.iter().position(|g| &g.name == name) {
                Some(i) => i,
                None => {
                    let mut spec =
                        job.group_limits
                            .clone()
                            .unwrap_or_else(|| crate::core::GroupSpec {
                                name: name.clone(),
                                ..crate::core::GroupSpec::default()
                            });
                    if let Some(weight) = job.cgroup_weight {
                        spec.weight = weight;
                    }
                    groups.push(spec);
                    groups.len() - 1
                }
            };
            u16::try_from(index).ok()
        })
        .collect();
    (!groups.is_empty()).then(|| crate::core::Throttle::new(groups, member))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_that_would_wrap_is_refused_with_the_job_named() {
        let jobs = parse_job_file(
            "w.fio",
            "[w]\nrw=write\nsize=1m\noffset=18446744073709547520\n",
        );
        // The offset itself is past the 8 EiB limit of a size.
        assert!(jobs.unwrap_err().to_string().contains("too large"));
        let jobs = parse_job_file("w.fio", "[w]\nrw=write\nsize=1m\noffset=8192p\n").unwrap();
        let err = place(&jobs, u64::MAX).unwrap_err();
        assert!(err.contains("w.fio:1: job 'w'"), "{err}");
        assert!(err.contains("2^54 sectors"), "{err}");
    }

    #[test]
    fn clone_offsets_that_overflow_are_refused() {
        let jobs = parse_job_file(
            "c.fio",
            "[c]\nrw=write\nsize=4k\nnumjobs=4096\noffset_increment=4p\n",
        )
        .unwrap();
        let err = place(&jobs, u64::MAX).unwrap_err();
        assert!(err.contains("job 'c': clone 2048"), "{err}");
    }

    #[test]
    fn clones_times_depth_past_the_in_flight_limit_are_refused() {
        let jobs = parse_job_file("d.fio", "[d]\nsize=4k\nnumjobs=4096\niodepth=65536\n").unwrap();
        let err = place(&jobs, u64::MAX).unwrap_err();
        assert!(
            err.contains("d.fio:1: job 'd'") && err.contains("bios in flight"),
            "{err}"
        );
        let jobs = parse_job_file("d.fio", "[d]\nsize=4k\nnumjobs=16\niodepth=65536\n").unwrap();
        assert!(place(&jobs, u64::MAX).is_ok(), "16 × 65536 is at the limit");
    }

    #[test]
    fn more_clones_than_fios_limit_of_4096_are_refused_and_placing_more_than_the_submitter_limit_is_too()
     {
        let text = "[a]\nsize=4k\nnumjobs=2048\n".repeat(2);
        let jobs = parse_job_file("many.fio", &text).unwrap();
        assert_eq!(place(&jobs, u64::MAX).unwrap().len() as u64, MAX_CLONES);
        let err = parse_job_file("many.fio", &format!("{text}[b]\nsize=4k\n")).unwrap_err();
        assert_eq!(err.location.to_string(), "many.fio:7");
        assert!(
            err.message.contains("job 'b'") && err.message.contains("more than 4096 clones"),
            "{}",
            err.message
        );
        let err = parse_cmdline(&[
            "--size=4k".into(),
            "--name=c".into(),
            "--numjobs=4096".into(),
            "--name=d".into(),
        ])
        .unwrap_err();
        assert!(err.message.contains("job 'd'"), "{}", err.message);
        // Jobs made otherwise (a replay's streams) are held to the submitter limit.
        let many: Vec<JobSpec> = jobs.iter().cycle().take(33).cloned().collect();
        let err = place(&many, u64::MAX).unwrap_err();
        assert!(err.contains("more than 65536 clones"), "{err}");
    }

    #[test]
    fn regions_within_the_limit_are_placed_on_1mib_boundaries() {
        let jobs = parse_job_file("p.fio", "[a]\nsize=4k\nnumjobs=2\n").unwrap();
        let placements = place(&jobs, 1 << 20).unwrap();
        assert_eq!(placements[0].region_start, 0);
        assert_eq!(placements[1].region_start, 2048);
        assert_eq!(extent_bytes(&placements), (2048 + 8) * 512);
    }
}
