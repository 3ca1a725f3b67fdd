//! The series a run report holds: each job's latency distribution per direction and its
//! completions over time, named by job (clones numbered as fio numbers them), picked by
//! `--series` and summed over a job's clones by `--per-job`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Options, Series, plausible};

/// One curve's points.
type Points = Vec<(f64, f64)>;

/// A job of a report as a plot shows it: one entry, or (`--per-job`) a job's clones
/// together.
#[derive(Debug)]
pub(super) struct Job<'a> {
    /// Its name in legends: `reader`, or a clone's `reader.1`.
    pub name: String,
    /// The job's name as the job file gave it.
    pub jobname: String,
    /// The report's job entries it stands for.
    entries: Vec<&'a Value>,
}

/// The jobs of `doc` the plot draws: every entry, or the clones of each job together, and
/// only those `--series` names.
pub(super) fn jobs<'a>(doc: &'a Value, options: &Options) -> Vec<Job<'a>> {
    let entries: Vec<&Value> = doc["jobs"].as_array().into_iter().flatten().collect();
    let jobname = |j: &Value| j["jobname"].as_str().unwrap_or("job").to_owned();
    let mut jobs: Vec<Job<'a>> = Vec::new();
    if options.per_job {
        // Each job's place by name: a report of many jobs costs a lookup per entry, not a
        // scan of the jobs so far.
        let mut at: BTreeMap<String, usize> = BTreeMap::new();
        for entry in entries {
            let name = jobname(entry);
            if let Some(&i) = at.get(&name) {
                jobs[i].entries.push(entry);
            } else {
                at.insert(name.clone(), jobs.len());
                jobs.push(Job {
                    name: name.clone(),
                    jobname: name,
                    entries: vec![entry],
                });
            }
        }
    } else {
        let names = clone_names(&entries);
        for (entry, name) in entries.into_iter().zip(names) {
            jobs.push(Job {
                name,
                jobname: jobname(entry),
                entries: vec![entry],
            });
        }
    }
    jobs.retain(|j| picked(options, j));
    jobs
}

/// Whether `--series` (if given) names `job`, by its job name or its clone's name.
fn picked(options: &Options, job: &Job<'_>) -> bool {
    options.series.is_empty()
        || options
            .series
            .iter()
            .any(|s| *s == job.name || *s == job.jobname)
}

/// Each `--series` name that no job of `docs` has, with the names they do have.
///
/// # Errors
/// A name matches nothing: the message lists what the reports hold.
pub(super) fn check_series(docs: &[&Value], options: &Options) -> Result<(), String> {
    let everything = Options {
        series: Vec::new(),
        ..options.clone()
    };
    let mut names: Vec<String> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for doc in docs {
        for job in jobs(doc, &everything) {
            for name in [job.jobname, job.name] {
                if seen.insert(name.clone()) {
                    names.push(name);
                }
            }
        }
    }
    let missing: Vec<&str> = options
        .series
        .iter()
        .filter(|s| !seen.contains(*s))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "--series {}: no job of that name in the report(s); they hold {}",
            missing.join(","),
            names.join(", ")
        ))
    }
}

/// Each job entry's name in a legend: its job name, and for the clones of a job
/// (`numjobs`), which clone (`reader.0`, `reader.1`), as fio numbers them.
fn clone_names(jobs: &[&Value]) -> Vec<String> {
    let name = |j: &Value| j["jobname"].as_str().unwrap_or("job").to_owned();
    // Counted first, then numbered: two passes with a map, not a scan per entry.
    let mut clones: BTreeMap<String, usize> = BTreeMap::new();
    for j in jobs {
        *clones.entry(name(j)).or_default() += 1;
    }
    let mut next: BTreeMap<String, usize> = BTreeMap::new();
    jobs.iter()
        .map(|j| {
            let n = name(j);
            if clones.get(&n).copied().unwrap_or(0) < 2 {
                return n;
            }
            let k = next.entry(n.clone()).or_default();
            let label = format!("{n}.{k}");
            *k += 1;
            label
        })
        .collect()
}

impl Job<'_> {
    /// The job's completion-latency CDF in `dir` (x in µs), its clones' merged by their
    /// completions; empty when it completed nothing there.
    pub fn latency_cdf(&self, dir: &str) -> Vec<(f64, f64)> {
        let curves: Vec<(f64, Vec<(f64, f64)>)> = self
            .entries
            .iter()
            .map(|e| {
                let points: Vec<(f64, f64)> = e["schedhost"]["latency_cdf"][dir]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| {
                        Some((plausible(&p["ns"])? / 1000.0, plausible(&p["fraction"])?))
                    })
                    .collect();
                let weight = plausible(&e[dir]["total_ios"]).unwrap_or(0.0).max(0.0);
                (weight, points)
            })
            .filter(|(_, points)| !points.is_empty())
            .collect();
        match curves.as_slice() {
            [] => Vec::new(),
            [(_, one)] => one.clone(),
            _ => merged(&curves),
        }
    }

    /// Bios the job completed per second, from its 10 ms timeline (its clones' summed),
    /// in bins of about 200 across the run.
    ///
    /// # Errors
    /// A timeline's bucket width is not a plausible number of nanoseconds, or clones'
    /// widths differ.
    pub fn iops(&self, index: usize) -> Result<Vec<(f64, f64)>, String> {
        let mut bucket_ns = None;
        let mut counts: Vec<f64> = Vec::new();
        for entry in &self.entries {
            let timeline = &entry["schedhost"]["timeline"];
            let width = timeline["bucket_ns"].as_f64().unwrap_or(1e7);
            // A zero or absurd width would draw an unbounded axis (plotters never returns).
            if !(1.0..=1e18).contains(&width) {
                return Err(format!(
                    "jobs[{index}].schedhost.timeline.bucket_ns is {width}: expected nanoseconds from 1 to 1e18"
                ));
            }
            if bucket_ns.is_some_and(|w| w != width) {
                return Err(format!(
                    "job {}: its clones' timelines have different bucket widths",
                    self.jobname
                ));
            }
            bucket_ns = Some(width);
            let ios = timeline["ios"].as_array().into_iter().flatten();
            for (i, n) in ios.enumerate() {
                let n = plausible(n).filter(|n| *n >= 0.0).unwrap_or(0.0);
                match counts.get_mut(i) {
                    Some(c) => *c += n,
                    None => counts.push(n),
                }
            }
        }
        let bucket_s = bucket_ns.unwrap_or(1e7) / 1e9;
        let group = counts.len().div_ceil(200).max(1);
        Ok(counts
            .chunks(group)
            .enumerate()
            .map(|(i, c)| {
                let width = bucket_s * c.len() as f64;
                ((i * group) as f64 * bucket_s, c.iter().sum::<f64>() / width)
            })
            .collect())
    }
}

/// One CDF of several, each weighted (by its completions): at every x any of them has, the
/// weighted mean of each one's fraction at or below x. Curves with no weight count alike.
/// One sweep over every point in x order, each moving the sum by its curve's step, so many
/// clones cost their points, not their points times their number.
fn merged(curves: &[(f64, Vec<(f64, f64)>)]) -> Vec<(f64, f64)> {
    let total: f64 = curves.iter().map(|(w, _)| w).sum();
    let weight = |w: f64| {
        if total > 0.0 {
            w / total
        } else {
            1.0 / curves.len() as f64
        }
    };
    let mut steps: Vec<(f64, usize, f64)> = curves
        .iter()
        .enumerate()
        .flat_map(|(k, (_, p))| p.iter().map(move |&(x, f)| (x, k, f)))
        .collect();
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut at = vec![0f64; curves.len()];
    let mut sum = 0.0;
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (x, k, f) in steps {
        // A CDF never falls: a point below the curve's level so far changes nothing.
        if f > at[k] {
            sum += weight(curves[k].0) * (f - at[k]);
            at[k] = f;
        }
        match out.last_mut() {
            Some(last) if last.0 == x => last.1 = sum.min(1.0),
            _ => out.push((x, sum.min(1.0))),
        }
    }
    out
}

/// The latency series of `docs`: a curve per run, job and direction with completions,
/// named by job (and by run, when several are overlaid; by direction, when both have
/// curves).
pub(super) fn latency_curves(docs: &[&Value], options: &Options) -> Vec<Series> {
    // (name, direction, points)
    let mut curves: Vec<(String, &str, Points)> = Vec::new();
    for doc in docs {
        let run = super::run_label(doc);
        for job in jobs(doc, options) {
            for dir in ["read", "write"] {
                let points = job.latency_cdf(dir);
                if points.is_empty() {
                    continue;
                }
                let name = if docs.len() > 1 {
                    format!("{run} {}", job.name)
                } else {
                    job.name.clone()
                };
                curves.push((name, dir, points));
            }
        }
    }
    let both = curves.iter().any(|c| c.1 == "read") && curves.iter().any(|c| c.1 == "write");
    curves
        .into_iter()
        .map(|(name, dir, points)| {
            let name = if both { format!("{name} {dir}") } else { name };
            (name, steps(&points))
        })
        .collect()
}

/// A CDF's points drawn as the step function it is: between two measured points the
/// fraction stays where it was, so no line suggests latencies between them that no bio had.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for pair in points.windows(2) {
        let ((x0, f0), (x1, _)) = (pair[0], pair[1]);
        out.push((x0, f0));
        if x1 > x0 {
            out.push((x1, f0));
        }
    }
    out.extend(points.last());
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn clone(cdf: &[(u64, f64)], ios: u64) -> Value {
        let points: Vec<Value> = cdf
            .iter()
            .map(|&(ns, f)| json!({ "ns": ns, "fraction": f }))
            .collect();
        json!({ "jobname": "r", "read": { "total_ios": ios },
                "schedhost": { "latency_cdf": { "read": points },
                               "timeline": { "bucket_ns": 1e7, "ios": [ios, ios] } } })
    }

    #[test]
    fn per_job_merges_clones_weighted_by_their_completions_and_sums_their_iops() {
        // Three quarters of the bios are the fast clone's: at 1 µs, 0.75 are done.
        let doc = json!({ "jobs": [clone(&[(1000, 1.0)], 300), clone(&[(9000, 1.0)], 100)] });
        let options = Options {
            per_job: true,
            ..Options::default()
        };
        let jobs = jobs(&doc, &options);
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].name, "r");
        assert_eq!(jobs[0].latency_cdf("read"), [(1.0, 0.75), (9.0, 1.0)]);
        let curves = latency_curves(&[&doc], &options);
        assert_eq!(
            curves[0].1,
            [(1.0, 0.75), (9.0, 0.75), (9.0, 1.0)],
            "drawn as steps, no slope between measured points"
        );
        let iops = jobs[0].iops(0).unwrap();
        assert_eq!(iops[0], (0.0, 40_000.0), "400 bios in 10 ms");
        let apart = super::jobs(&doc, &Options::default());
        let names: Vec<&str> = apart.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["r.0", "r.1"]);
    }

    #[test]
    fn a_report_of_a_hundred_thousand_clones_is_named_and_grouped_without_a_scan_per_entry() {
        // Numbering clones by scanning every entry for each once made this quadratic: 10^10
        // comparisons, a hang on a report within the size `plot` accepts.
        let one = json!({ "jobname": "r" });
        let doc = json!({ "jobs": vec![one; 100_000] });
        let named = jobs(&doc, &Options::default());
        assert_eq!(named[99_999].name, "r.99999");
        let grouped = jobs(
            &doc,
            &Options {
                per_job: true,
                ..Options::default()
            },
        );
        assert_eq!(grouped.len(), 1);
    }

    #[test]
    fn series_picks_jobs_by_name_or_clone_and_names_what_matches_nothing() {
        let doc = json!({ "jobs": [clone(&[(1000, 1.0)], 3), clone(&[(9000, 1.0)], 1)] });
        let options = Options {
            series: vec!["r.1".into()],
            ..Options::default()
        };
        let picked: Vec<String> = jobs(&doc, &options).into_iter().map(|j| j.name).collect();
        assert_eq!(picked, ["r.1"]);
        let wrong = Options {
            series: vec!["w".into()],
            ..Options::default()
        };
        let err = check_series(&[&doc], &wrong).unwrap_err();
        assert!(
            err.contains("--series w") && err.contains("r, r.0"),
            "{err}"
        );
    }
}
