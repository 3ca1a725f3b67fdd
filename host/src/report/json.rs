//! The JSON report, in fio's `--output-format=json` shape.

use serde_json::{Map, Value, json};

use hdrhistogram::Histogram;

use super::{PERCENTILES, Summary, rates};
use crate::observe::stats::{DIRECTIONS, OpStats, Running};

/// The report as a JSON value; keys are sorted, so equal runs give byte-identical text.
pub fn to_json(summary: &Summary<'_>) -> Value {
    report(summary, false)
}

/// The report as fio's `json+`: [`to_json`]'s, with every completion-latency histogram's
/// bins (`clat_ns.bins`, `"ns": count`), as `fio_jsonplus_clat2csv` reads them.
pub fn to_json_plus(summary: &Summary<'_>) -> Value {
    report(summary, true)
}

fn report(summary: &Summary<'_>, plus: bool) -> Value {
    let outcome = summary.outcome;
    let jobs: Vec<Value> = summary
        .entries()
        .iter()
        .map(|entry| match entry.members.as_slice() {
            [i] => one_job(summary, *i, plus),
            _ => group_entry(summary, entry, plus),
        })
        .collect();
    let info = summary.info;
    let mut doc = json!({
        "fio version": concat!("schedhost-", env!("CARGO_PKG_VERSION")),
        "jobs": jobs,
        "schedhost": {
            "policy": {
                "name": outcome.policy.name,
                "version": outcome.policy.version,
                "source": info.policy_source,
                "settings": info.settings.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<Map<_, _>>(),
            },
            "device": { "spec": info.device, "model": info.device_model, "geometry": outcome.geometry },
            "queue": {
                "hw_queues": outcome.config.hw_queues,
                "queue_depth": outcome.config.queue_depth,
                "nr_requests": outcome.config.nr_requests,
                "max_sectors": outcome.config.max_sectors,
                "rotational": u8::from(outcome.config.rotational),
                "nomerges": match outcome.config.nomerges { crate::core::Nomerges::All => 0, crate::core::Nomerges::OneHit => 1, crate::core::Nomerges::Off => 2 },
            },
            "seed": info.seed,
            "requests": outcome.core,
            "ejections": outcome.ejections,
            "swaps": outcome.swaps,
            "trace": info.trace,
        }
    });
    if !outcome.groups.is_empty()
        && let Some(section) = doc.get_mut("schedhost").and_then(Value::as_object_mut)
    {
        section.insert("groups".into(), json!(outcome.groups));
    }
    if !outcome.sets.is_empty()
        && let Some(section) = doc.get_mut("schedhost").and_then(Value::as_object_mut)
    {
        section.insert("sets".into(), json!(outcome.sets));
    }
    if let Some(plug) = plug_json(outcome.config.plug)
        && let Some(queue) = doc
            .pointer_mut("/schedhost/queue")
            .and_then(Value::as_object_mut)
    {
        queue.insert("plug".into(), plug);
    }
    let clock = match &info.real {
        None => json!({ "virtual_time_ns": outcome.end_ns }),
        Some(real) => json!({
            "elapsed_ns": outcome.end_ns,
            "verified_blocks": outcome.verified_blocks,
            "fixed_buffers": real.fixed_buffers,
            "targets": real.targets,
        }),
    };
    if let (Some(section), Value::Object(extra)) = (doc.get_mut("schedhost"), clock)
        && let Value::Object(section) = section
    {
        section.extend(extra);
    }
    doc
}

/// One submitter's entry, as fio reports a job.
fn one_job(summary: &Summary<'_>, i: usize, plus: bool) -> Value {
    let outcome = summary.outcome;
    let s = &outcome.submitters[i];
    let job = &summary.jobs[s.placement.job];
    let runtime = summary.runtime_ns(i);
    let stats = &outcome.stats[i];
    let mut entry = Map::new();
    entry.insert("jobname".into(), json!(job.name));
    entry.insert("groupid".into(), json!(s.placement.group));
    // fio's `error`: the errno of the job's first failed I/O, 0 if none failed.
    entry.insert("error".into(), json!(stats.first_error));
    entry.insert("job_runtime".into(), json!(runtime / 1_000_000));
    entry.insert("job options".into(), json!({ "rw": job.rw_name(), "bs": job.bs, "iodepth": job.iodepth, "numjobs": job.numjobs }));
    let sampled_ns = s.finished_ns.saturating_sub(stats.measure_from_ns);
    for (d, name) in DIRECTIONS.iter().enumerate() {
        let samples = stats.windows[d].summary(sampled_ns);
        entry.insert(
            (*name).into(),
            direction(&stats.dirs[d], samples, runtime, plus),
        );
    }
    insert_trim(&mut entry, plus);
    entry.insert(
        "schedhost".into(),
        json!({
            "ctx": s.ctx,
            "clone": s.placement.clone,
            "region_start_sector": s.placement.region_start,
            "region_sectors": s.placement.region_sectors,
            "issued": s.issued,
            "completed": s.completed,
            "start_ns": s.started_ns,
            "end_ns": s.finished_ns,
            "timeline": {
                "bucket_ns": stats.bucket_ns,
                "ios": stats.timeline,
            },
            "latency_cdf": {
                "read": cdf(&stats.dirs[0]),
                "write": cdf(&stats.dirs[1]),
            },
        }),
    );
    Value::Object(entry)
}

/// A group's one entry under fio's `group_reporting`: its members' I/O and latencies
/// together, their bandwidth samples added as fio adds them, named after its first job.
fn group_entry(summary: &Summary<'_>, entry_of: &crate::report::Entry, plus: bool) -> Value {
    let outcome = summary.outcome;
    let (group, members) = (entry_of.group, entry_of.members.as_slice());
    let first = &outcome.submitters[members[0]];
    let job = &summary.jobs[first.placement.job];
    let runtime = summary.entry_runtime_ns(entry_of);
    let mut entry = Map::new();
    entry.insert("jobname".into(), json!(job.name));
    entry.insert("groupid".into(), json!(group));
    let error = members
        .iter()
        .map(|&i| outcome.stats[i].first_error)
        .find(|&e| e != 0)
        .unwrap_or(0);
    entry.insert("error".into(), json!(error));
    entry.insert("job_runtime".into(), json!(runtime / 1_000_000));
    entry.insert("job options".into(), json!({ "rw": job.rw_name(), "bs": job.bs, "iodepth": job.iodepth, "numjobs": job.numjobs, "group_reporting": true }));
    let mut dirs = [OpStats::default(), OpStats::default()];
    for (d, name) in DIRECTIONS.iter().enumerate() {
        let mut samples = (Running::default(), Running::default());
        for &i in members {
            let (s, stats) = (&outcome.submitters[i], &outcome.stats[i]);
            dirs[d].merge(&stats.dirs[d]);
            let (bw, iops) =
                stats.windows[d].summary(s.finished_ns.saturating_sub(stats.measure_from_ns));
            samples = (samples.0.plus(&bw), samples.1.plus(&iops));
        }
        entry.insert((*name).into(), direction(&dirs[d], samples, runtime, plus));
    }
    insert_trim(&mut entry, plus);
    let ctxs: Vec<u32> = members.iter().map(|&i| outcome.submitters[i].ctx).collect();
    let sum = |f: fn(&crate::frontend::outcome::SubmitterSummary) -> u64| -> u64 {
        members.iter().map(|&i| f(&outcome.submitters[i])).sum()
    };
    entry.insert(
        "schedhost".into(),
        json!({
            "ctxs": ctxs,
            "issued": sum(|s| s.issued),
            "completed": sum(|s| s.completed),
            "start_ns": members.iter().map(|&i| outcome.submitters[i].started_ns).min(),
            "end_ns": members.iter().map(|&i| outcome.submitters[i].finished_ns).max(),
            "latency_cdf": {
                "read": cdf(&dirs[0]),
                "write": cdf(&dirs[1]),
            },
        }),
    );
    Value::Object(entry)
}

/// fio's consumers expect a `trim` direction; discards count with writes here.
fn insert_trim(entry: &mut Map<String, Value>, plus: bool) {
    let none = crate::observe::stats::Windows::default().summary(0);
    entry.insert("trim".into(), direction(&OpStats::default(), none, 0, plus));
}

/// The completion-latency distribution as `{ns, fraction}` points, denser in the tail, for
/// plots; empty without completions.
fn cdf(op: &OpStats) -> Vec<Value> {
    if op.clat.is_empty() {
        return Vec::new();
    }
    let clat = op.clat.histogram();
    let body = (0..=90).map(|i| f64::from(i) / 100.0);
    let tail = [
        0.92, 0.94, 0.96, 0.98, 0.99, 0.995, 0.999, 0.9995, 0.9999, 1.0,
    ];
    body.chain(tail)
        .map(|q| json!({ "ns": clat.value_at_quantile(q), "fraction": q }))
        .collect()
}

/// A latency histogram as fio prints one: min, max, mean, stddev, N, and (when asked) its
/// percentiles and, for json+, its bins (`"ns": count` for every value recorded).
fn latency(h: &Histogram<u64>, percentiles: bool, bins: bool) -> Value {
    let empty = h.is_empty();
    let mut out = Map::new();
    out.insert("min".into(), json!(if empty { 0 } else { h.min() }));
    out.insert("max".into(), json!(if empty { 0 } else { h.max() }));
    out.insert("mean".into(), json!(if empty { 0.0 } else { h.mean() }));
    out.insert("stddev".into(), json!(if empty { 0.0 } else { h.stdev() }));
    out.insert("N".into(), json!(h.len()));
    if percentiles {
        let percentile: Map<String, Value> = PERCENTILES
            .iter()
            .map(|p| {
                let v = if empty { 0 } else { h.value_at_percentile(*p) };
                (format!("{p:.6}"), json!(v))
            })
            .collect();
        out.insert("percentile".into(), Value::Object(percentile));
    }
    if bins && !empty {
        let bins: Map<String, Value> = h
            .iter_recorded()
            .map(|v| {
                (
                    h.highest_equivalent(v.value_iterated_to()).to_string(),
                    json!(v.count_at_value()),
                )
            })
            .collect();
        out.insert("bins".into(), Value::Object(bins));
    }
    Value::Object(out)
}

/// A direction as fio reports it. `samples` are its bandwidth (bytes/s) and IOPS per
/// half-second window; `plus` is json+ (histogram bins).
fn direction(op: &OpStats, samples: (Running, Running), runtime_ns: u64, plus: bool) -> Value {
    let r = rates(op, runtime_ns);
    let (bw, iops) = samples;
    // A bio enters the host the moment its job issues it: no submission latency, so total
    // latency is completion latency; the time in the scheduler is `sched_ns`.
    let slat = json!({ "min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": op.ios });
    let clat = op.clat.histogram();
    json!({
        "io_bytes": op.bytes,
        "io_kbytes": op.bytes / 1024,
        "bw_bytes": r.bw_bytes.round() as u64,
        "bw": (r.bw_bytes / 1024.0).round() as u64,
        "iops": r.iops,
        "runtime": if op.ios > 0 { r.runtime_ms } else { 0 },
        "total_ios": op.ios,
        "short_ios": 0,
        "drop_ios": 0,
        "errors": op.errors,
        "slat_ns": slat,
        "clat_ns": latency(&clat, true, plus),
        "lat_ns": latency(&clat, false, false),
        "bw_min": (bw.min / 1024.0).round() as u64,
        "bw_max": (bw.max / 1024.0).round() as u64,
        "bw_agg": if bw.n > 0 { 100.0 } else { 0.0 },
        "bw_mean": bw.mean() / 1024.0,
        "bw_dev": bw.stddev() / 1024.0,
        "bw_samples": bw.n,
        "iops_min": iops.min.round() as u64,
        "iops_max": iops.max.round() as u64,
        "iops_mean": iops.mean(),
        "iops_stddev": iops.stddev(),
        "iops_samples": iops.n,
        "sched_ns": latency(&op.sched.histogram(), true, false),
    })
}

/// The queue's plug, when it has one (runs without keep the report they always had).
fn plug_json(plug: crate::core::Plug) -> Option<Value> {
    use crate::core::Plug;
    match plug {
        Plug::None => None,
        Plug::Legacy {
            unplug_thresh,
            unplug_delay_ns,
        } => Some(json!({
            "mode": plug.name(),
            "unplug_thresh": unplug_thresh,
            "unplug_delay_ns": unplug_delay_ns,
        })),
        Plug::Submitter {
            max_requests,
            max_bytes,
        } => Some(json!({
            "mode": plug.name(),
            "max_requests": max_requests,
            "max_bytes": max_bytes,
        })),
    }
}
