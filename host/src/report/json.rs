//! The JSON report, in fio's `--output-format=json` shape.

use serde_json::{Map, Value, json};

use super::{PERCENTILES, Summary, rates};
use crate::observe::stats::{DIRECTIONS, OpStats};

/// The report as a JSON value; keys are sorted, so equal runs give byte-identical text.
pub fn to_json(summary: &Summary<'_>) -> Value {
    let outcome = summary.outcome;
    let jobs: Vec<Value> = outcome
        .submitters
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let job = &summary.jobs[s.placement.job];
            let runtime = summary.runtime_ns(i);
            let mut entry = Map::new();
            entry.insert("jobname".into(), json!(job.name));
            entry.insert("groupid".into(), json!(s.placement.group));
            // fio's `error`: the errno of the job's first failed I/O, 0 if none failed.
            entry.insert("error".into(), json!(outcome.stats[i].first_error));
            entry.insert("job_runtime".into(), json!(runtime / 1_000_000));
            entry.insert("job options".into(), json!({ "rw": job.rw_name(), "bs": job.bs, "iodepth": job.iodepth, "numjobs": job.numjobs }));
            for (d, name) in DIRECTIONS.iter().enumerate() {
                entry.insert((*name).into(), direction(&outcome.stats[i].dirs[d], runtime));
            }
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
                        "bucket_ns": outcome.stats[i].bucket_ns,
                        "ios": outcome.stats[i].timeline,
                    },
                    "latency_cdf": {
                        "read": cdf(&outcome.stats[i].dirs[0]),
                        "write": cdf(&outcome.stats[i].dirs[1]),
                    },
                }),
            );
            Value::Object(entry)
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
                "nomerges": match outcome.config.nomerges { crate::core::Nomerges::All => 0, crate::core::Nomerges::OneHit => 1, crate::core::Nomerges::Off => 2 },
            },
            "seed": info.seed,
            "requests": outcome.core,
            "ejections": outcome.ejections,
            "swaps": outcome.swaps,
            "trace": info.trace,
        }
    });
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

/// The completion-latency distribution as `[ns, fraction]` points, denser in the tail, for
/// plots; empty without completions.
fn cdf(op: &OpStats) -> Vec<(u64, f64)> {
    if op.clat.is_empty() {
        return Vec::new();
    }
    let body = (0..=90).map(|i| f64::from(i) / 100.0);
    let tail = [
        0.92, 0.94, 0.96, 0.98, 0.99, 0.995, 0.999, 0.9995, 0.9999, 1.0,
    ];
    body.chain(tail)
        .map(|q| (op.clat.value_at_quantile(q), q))
        .collect()
}

fn direction(op: &OpStats, runtime_ns: u64) -> Value {
    let r = rates(op, runtime_ns);
    let clat = &op.clat;
    let empty = clat.is_empty();
    let percentile: Map<String, Value> = PERCENTILES
        .iter()
        .map(|p| {
            (
                format!("{p:.6}"),
                json!(if empty {
                    0
                } else {
                    clat.value_at_percentile(*p)
                }),
            )
        })
        .collect();
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
        "clat_ns": {
            "min": if empty { 0 } else { clat.min() },
            "max": if empty { 0 } else { clat.max() },
            "mean": if empty { 0.0 } else { clat.mean() },
            "stddev": if empty { 0.0 } else { clat.stdev() },
            "N": clat.len(),
            "percentile": percentile,
        },
        "sched_ns": {
            "min": if empty { 0 } else { op.sched.min() },
            "max": if empty { 0 } else { op.sched.max() },
            "mean": if empty { 0.0 } else { op.sched.mean() },
            "99.000000": if empty { 0 } else { op.sched.value_at_percentile(99.0) },
        },
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
