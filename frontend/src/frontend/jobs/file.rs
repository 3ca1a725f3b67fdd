//! fio job files and command-line options: sections and `[global]` inheritance, each job
//! checked whole once every option is set.

use super::MAX_CLONES;
use super::job::{JobError, JobSpec, validate_job};
use crate::input::Location;

/// Parses a fio job file; `source` names it in errors.
///
/// # Errors
/// The first bad line, with its number.
pub fn parse_job_file(source: &str, text: &str) -> Result<Vec<JobSpec>, JobError> {
    let mut sections: Vec<Section> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let location = Location {
            source: source.to_owned(),
            line: n + 1,
        };
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let Some(name) = rest
                .strip_suffix(']')
                .map(str::trim)
                .filter(|n| !n.is_empty())
            else {
                return Err(JobError {
                    location,
                    message: format!("bad section header `{line}`: expected [name]"),
                });
            };
            sections.push(Section {
                name: name.to_owned(),
                location,
                options: Vec::new(),
            });
            continue;
        }
        let Some(section) = sections.last_mut() else {
            return Err(JobError {
                location,
                message: format!("`{line}` comes before any [section]"),
            });
        };
        let (key, value) = line
            .split_once('=')
            .map_or((line, ""), |(k, v)| (k.trim(), v.trim()));
        section
            .options
            .push((key.to_owned(), value.to_owned(), location));
    }
    build(
        sections,
        &Location {
            source: source.to_owned(),
            line: 0,
        },
    )
}

/// Parses job options given on the command line (`--name=a`, `--rw=read`, …). Options before
/// the first `--name` are global, as in fio.
///
/// # Errors
/// The first bad option.
pub fn parse_cmdline(options: &[String]) -> Result<Vec<JobSpec>, JobError> {
    let location = Location {
        source: "command line".into(),
        line: 0,
    };
    let mut sections = vec![Section {
        name: "global".into(),
        location: location.clone(),
        options: Vec::new(),
    }];
    for option in options {
        let text = option.trim_start_matches('-');
        let (key, value) = text.split_once('=').map_or((text, ""), |(k, v)| (k, v));
        let location = Location {
            source: format!("command line option --{key}"),
            line: 0,
        };
        if key == "name" {
            // A job's own checks (rate= on a mixed job, size below bs) are about the job,
            // not about its --name: they are placed on the command line as a whole.
            sections.push(Section {
                name: value.to_owned(),
                location: Location {
                    source: "command line".into(),
                    line: 0,
                },
                options: Vec::new(),
            });
        } else if let Some(section) = sections.last_mut() {
            section
                .options
                .push((key.to_owned(), value.to_owned(), location));
        }
    }
    if sections.len() == 1 {
        // Options without --name: one job named after fio's default.
        let options = std::mem::take(&mut sections[0].options);
        sections.push(Section {
            name: "job".into(),
            location: location.clone(),
            options,
        });
    }
    build(sections, &location)
}

struct Section {
    name: String,
    location: Location,
    options: Vec<(String, String, Location)>,
}

fn build(sections: Vec<Section>, whole: &Location) -> Result<Vec<JobSpec>, JobError> {
    let mut global: Vec<(String, String, Location)> = Vec::new();
    let mut jobs = Vec::new();
    let mut clones = 0u64;
    for section in sections {
        if section.name == "global" {
            global.extend(section.options);
            continue;
        }
        let mut job = JobSpec::new(&section.name, section.location.clone());
        for (key, value, location) in global.iter().chain(&section.options) {
            job.apply(key, value).map_err(|message| JobError {
                location: location.clone(),
                message,
            })?;
        }
        validate_job(&job).map_err(|message| JobError {
            location: section.location.clone(),
            message,
        })?;
        clones += u64::from(job.numjobs);
        if clones > MAX_CLONES {
            return Err(JobError {
                location: section.location,
                message: format!(
                    "job '{}': the jobs have more than {MAX_CLONES} clones in all (numjobs summed over the jobs; fio's limit too)",
                    job.name
                ),
            });
        }
        jobs.push(job);
    }
    if jobs.is_empty() {
        return Err(JobError {
            location: whole.clone(),
            message: "no job defined (add a [jobname] section or --name=…)".into(),
        });
    }
    Ok(jobs)
}
