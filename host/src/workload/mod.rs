//! Workloads: fio job files and options, where each clone's I/O goes on the device, and the
//! submitters that issue it.

pub mod job;
pub mod replay;
mod rng;
pub mod submitter;
pub mod value;

pub use job::{Direction, JobError, JobSpec, Location, Pattern, parse_cmdline, parse_job_file};
pub use replay::{Pacing, ReplaySpec, jobs_for_trace};
pub use rng::{Permutation, Rng};
pub use submitter::{Next, Placement, Submitter, next_wake, phase_finished, start_phase};

/// Files start on 1 MiB boundaries, as a filesystem would place them.
const FILE_ALIGN_SECTORS: u64 = 2048;

/// Places every clone of every job on a device of `capacity_sectors`: each file (a job's
/// `filename`, or one per clone as fio's default) gets its own extent; a clone's region is
/// `offset + clone × offset_increment` within its file.
///
/// # Errors
/// Names the job that does not fit.
pub fn place(jobs: &[JobSpec], capacity_sectors: u64) -> Result<Vec<Placement>, String> {
    let mut files: Vec<(String, u64, u64)> = Vec::new(); // name, start sector, sectors
    let mut placements = Vec::new();
    let (mut group, mut phase) = (0u32, 0u32);
    let mut next_free = 0u64;
    for (index, job) in jobs.iter().enumerate() {
        if index > 0 && (job.stonewall || job.new_group) {
            group += 1;
        }
        if index > 0 && job.stonewall {
            phase += 1;
        }
        let size = job.size.unwrap_or(u64::from(job.bs));
        for clone in 0..job.numjobs {
            let shared = job.filename.is_some() || job.offset_increment.is_some();
            let file_name = match (&job.filename, shared) {
                (Some(name), _) => name.clone(),
                (None, true) => format!("{}.0", job.name),
                (None, false) => format!("{}.{clone}.0", job.name),
            };
            let within = job.offset
                + if shared {
                    u64::from(clone) * job.offset_increment.unwrap_or(0)
                } else {
                    0
                };
            let needed = (within + size).div_ceil(512);
            let start = match files.iter_mut().find(|(name, ..)| *name == file_name) {
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
                    files.push((file_name, start, needed));
                    start
                }
            };
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
