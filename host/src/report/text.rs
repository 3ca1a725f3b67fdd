//! The text report, laid out like fio's normal output.

use std::fmt::Write;

use hdrhistogram::Histogram;

use super::{PERCENTILES, Summary, rates};
use crate::observe::stats::{DIRECTIONS, OpStats, short_count};

/// The report as fio-like text.
pub fn to_text(summary: &Summary<'_>) -> String {
    let mut out = String::new();
    let outcome = summary.outcome;
    for entry in summary.entries() {
        let first = &outcome.submitters[entry.members[0]];
        let job = &summary.jobs[first.placement.job];
        let error = entry
            .members
            .iter()
            .map(|&i| outcome.stats[i].first_error)
            .find(|&e| e != 0)
            .unwrap_or(0);
        let ctxs: Vec<String> = entry
            .members
            .iter()
            .map(|&i| outcome.submitters[i].ctx.to_string())
            .collect();
        let _ = writeln!(
            out,
            "{}: (groupid={}, jobs={}): err={error:>2}: ctx={} rw={}, bs={}, iodepth={}",
            job.name,
            entry.group,
            entry.members.len(),
            ctxs.join(","),
            job.rw_name(),
            job.bs,
            job.iodepth
        );
        for (d, name) in DIRECTIONS.iter().enumerate() {
            let mut op = OpStats::default();
            for &i in &entry.members {
                op.merge(&outcome.stats[i].dirs[d]);
            }
            if op.ios > 0 {
                direction(&mut out, name, &op, summary.entry_runtime_ns(&entry));
            }
        }
    }
    for (group, members) in summary.groups() {
        let _ = writeln!(out, "\nRun status group {group} (all jobs):");
        for (d, name) in DIRECTIONS.iter().enumerate() {
            let mut total = OpStats::default();
            let mut span = (u64::MAX, 0u64);
            let mut per_job = Vec::new();
            for &i in &members {
                let op = &outcome.stats[i].dirs[d];
                if op.ios == 0 {
                    continue;
                }
                total.merge(op);
                let s = &outcome.submitters[i];
                span = (span.0.min(s.started_ns), span.1.max(s.finished_ns));
                per_job.push((
                    rates(op, summary.runtime_ns(i)).bw_bytes,
                    summary.runtime_ns(i).div_ceil(1_000_000),
                ));
            }
            if total.ios == 0 {
                continue;
            }
            let r = rates(&total, span.1.saturating_sub(span.0));
            let (bw_min, bw_max) = per_job.iter().fold((f64::MAX, 0f64), |(lo, hi), (bw, _)| {
                (lo.min(*bw), hi.max(*bw))
            });
            let (run_min, run_max) = per_job.iter().fold((u64::MAX, 0u64), |(lo, hi), (_, ms)| {
                (lo.min(*ms), hi.max(*ms))
            });
            let _ = writeln!(
                out,
                "  {:>5}: bw={} ({}), {}-{}, io={} ({}), run={run_min}-{run_max}msec",
                name.to_uppercase(),
                binary_rate(r.bw_bytes),
                decimal_rate(r.bw_bytes),
                binary_rate(bw_min),
                binary_rate(bw_max),
                binary_bytes(total.bytes as f64),
                decimal_bytes(total.bytes as f64),
            );
        }
    }
    let info = summary.info;
    let c = &outcome.core;
    let _ = writeln!(
        out,
        "\nschedhost: policy {} {} ({}) on {} [{}], seed {}",
        outcome.policy.name,
        outcome.policy.version,
        info.policy_source,
        info.device,
        info.device_model,
        info.seed
    );
    let _ = writeln!(
        out,
        "  queue: hw_queues={} depth={} nr_requests={} max_sectors={} rotational={}{}",
        outcome.config.hw_queues,
        outcome.config.queue_depth,
        outcome.config.nr_requests,
        outcome.config.max_sectors,
        u8::from(outcome.config.rotational),
        match outcome.config.plug {
            crate::core::Plug::None => String::new(),
            plug => format!(" plug={}", plug.name()),
        }
    );
    let _ = writeln!(
        out,
        "  bios={} requests={} merges: back={} front={} coalesced={} vetoed={}; dispatched={} completed={} policy calls={}",
        c.bios,
        c.requests,
        c.back_merges,
        c.front_merges,
        c.coalesced,
        c.merges_vetoed,
        c.dispatched,
        c.completed,
        c.policy_calls
    );
    if let Some(t) = &info.trace {
        let recorded = t.recorded.map_or(String::new(), |r| {
            format!(
                "; in the trace: merges back={} front={} plugs={} unplugs={} timer={}, here: merges back={} front={} plugs={} unplugs={} timer={} threshold={}",
                r.back_merges,
                r.front_merges,
                r.plugs,
                r.unplugs,
                r.timer_unplugs,
                c.back_merges,
                c.front_merges,
                c.plugs,
                c.unplugs,
                c.timer_unplugs,
                c.threshold_unplugs
            )
        });
        let _ = writeln!(
            out,
            "  replayed {} ({}): {} I/Os from {} streams{recorded}",
            t.path,
            t.format.name(),
            t.ios,
            t.streams
        );
    }
    for e in &outcome.ejections {
        let _ = writeln!(
            out,
            "  ejected at {:.3} ms: {} in `{}`; {} ({} requests handed over): {}",
            e.at_ns as f64 / 1e6,
            e.kind,
            e.call,
            match e.recovery {
                crate::core::Recovery::Fallback => "fell back to the built-in FIFO",
                crate::core::Recovery::Restarted => "restarted the policy",
            },
            e.requeued,
            e.message.lines().next().unwrap_or_default()
        );
    }
    for g in &outcome.groups {
        let _ = writeln!(
            out,
            "  group {} ({}): reads={} writes={}, {} held by the limits ({:.3} ms waited in all)",
            g.limits.name,
            group_parameters(&g.limits),
            g.stats.ios[0],
            g.stats.ios[1],
            g.stats.throttled,
            g.stats.throttled_ns as f64 / 1e6
        );
    }
    if let Some(note) = unbound_weights(&outcome.groups) {
        let _ = writeln!(out, "  note: {note}");
    }
    for swap in &outcome.swaps {
        let _ = writeln!(out, "  {}", swap.line());
    }
    for set in &outcome.sets {
        let _ = writeln!(out, "  {}", set.line());
    }
    match &info.real {
        None => {
            let _ = writeln!(out, "  virtual time: {:.3} s", outcome.end_ns as f64 / 1e9);
        }
        Some(real) => {
            for t in &real.targets {
                let _ = writeln!(
                    out,
                    "  device {}: {:?}, {} bytes{}; requests={} merges={}",
                    t.path,
                    t.kind,
                    t.capacity,
                    if t.created {
                        ", created by this run"
                    } else {
                        ""
                    },
                    t.core.requests,
                    t.core.back_merges + t.core.front_merges
                );
            }
            let _ = writeln!(
                out,
                "  elapsed: {:.3} s; verified blocks: {}; io_uring fixed buffers: {}",
                outcome.end_ns as f64 / 1e9,
                outcome.verified_blocks,
                if real.fixed_buffers { "yes" } else { "no" }
            );
        }
    }
    out
}

fn direction(out: &mut String, name: &str, op: &OpStats, runtime_ns: u64) {
    let r = rates(op, runtime_ns);
    let _ = writeln!(
        out,
        "  {name}: IOPS={}, BW={} ({})({}/{}msec)",
        short_count(r.iops),
        binary_rate(r.bw_bytes),
        decimal_rate(r.bw_bytes),
        binary_bytes(op.bytes as f64),
        r.runtime_ms
    );
    if op.errors > 0 {
        let _ = writeln!(out, "    errors: {} of {} I/Os failed", op.errors, op.ios);
    }
    if op.clat.is_empty() {
        return;
    }
    let h = op.clat.histogram();
    let (unit, div) = summary_line(out, "clat", &h);
    let _ = writeln!(out, "    clat percentiles ({unit}):");
    for row in PERCENTILES.chunks(4) {
        let cells: Vec<String> = row
            .iter()
            .map(|p| format!("{p:>5.2}th=[{:>6}]", h.value_at_percentile(*p) / div))
            .collect();
        let _ = writeln!(out, "     | {}", cells.join(", "));
    }
    summary_line(out, "sched", &op.sched.histogram());
}

/// `label (unit): min=…, max=…, avg=…, stdev=…` in the unit fio would pick; returns it.
fn summary_line(out: &mut String, label: &str, h: &Histogram<u64>) -> (&'static str, u64) {
    let (unit, div) = latency_unit(h.mean());
    let _ = writeln!(
        out,
        "    {label} ({unit}): min={}, max={}, avg={:.2}, stdev={:.2}",
        h.min() / div,
        h.max() / div,
        h.mean() / div as f64,
        h.stdev() / div as f64
    );
    (unit, div)
}

fn latency_unit(mean_ns: f64) -> (&'static str, u64) {
    if mean_ns < 10_000.0 {
        ("nsec", 1)
    } else if mean_ns < 10_000_000.0 {
        ("usec", 1_000)
    } else {
        ("msec", 1_000_000)
    }
}

fn scaled(n: f64, base: f64, units: [&str; 5]) -> String {
    let mut v = n;
    let mut i = 0;
    while v >= base * 10.0 && i < units.len() - 1 {
        v /= base;
        i += 1;
    }
    format!("{v:.1}{}", units[i])
}

fn binary_rate(bytes_per_s: f64) -> String {
    scaled(
        bytes_per_s,
        1024.0,
        ["B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s"],
    )
}

fn decimal_rate(bytes_per_s: f64) -> String {
    scaled(bytes_per_s, 1000.0, ["B/s", "kB/s", "MB/s", "GB/s", "TB/s"])
}

fn binary_bytes(bytes: f64) -> String {
    scaled(bytes, 1024.0, ["B", "KiB", "MiB", "GiB", "TiB"])
}

fn decimal_bytes(bytes: f64) -> String {
    scaled(bytes, 1000.0, ["B", "kB", "MB", "GB", "TB"])
}

/// A group's parameters as `--group` takes them: its weight always, then what is set.
fn group_parameters(g: &crate::core::GroupSpec) -> String {
    let mut words = vec![format!("weight={}", g.weight)];
    let mut set = |key: &str, value: Option<u64>| {
        if let Some(v) = value {
            words.push(format!("{key}={v}"));
        }
    };
    set("reserve_iops", g.reserve_iops);
    set("riops", g.riops);
    set("wiops", g.wiops);
    set("rbps", g.rbps);
    set("wbps", g.wbps);
    for (d, key) in ["r", "w"].iter().enumerate() {
        set(
            &format!("{key}iops_burst"),
            Some(g.iops_burst[d]).filter(|&b| b > 0),
        );
        set(
            &format!("{key}bps_burst"),
            Some(g.bps_burst[d]).filter(|&b| b > 0),
        );
    }
    set("latency_target_us", g.latency_target_ns.map(|ns| ns / 1000));
    if let Some(permille) = g.latency_permille {
        words.push(format!(
            "latency_percentile={}.{}",
            permille / 10,
            permille % 10
        ));
    }
    words.join(" ")
}

/// A note when groups of different weights split the I/O far from their weights (more than
/// ten points of share apart): the weights did not bind, as they cannot while the groups do
/// not keep the device busy together, or under a policy that does not serve weights.
fn unbound_weights(groups: &[crate::core::GroupReport]) -> Option<String> {
    let weights: Vec<f64> = groups.iter().map(|g| f64::from(g.limits.weight)).collect();
    let ios: Vec<f64> = groups
        .iter()
        .map(|g| (g.stats.ios[0] + g.stats.ios[1]) as f64)
        .collect();
    let (weight_sum, io_sum) = (weights.iter().sum::<f64>(), ios.iter().sum::<f64>());
    let differ = weights.iter().any(|&w| w != weights[0]);
    if groups.len() < 2 || !differ || io_sum == 0.0 {
        return None;
    }
    let worst = weights
        .iter()
        .zip(&ios)
        .map(|(w, i)| (w / weight_sum - i / io_sum).abs())
        .fold(0.0, f64::max);
    (worst > 0.10).then(|| {
        let split: Vec<String> = groups
            .iter()
            .zip(&ios)
            .map(|(g, i)| {
                format!(
                    "{} {:.0} % of the I/O at {:.0} % of the weight",
                    g.limits.name,
                    100.0 * i / io_sum,
                    100.0 * f64::from(g.limits.weight) / weight_sum
                )
            })
            .collect();
        format!(
            "the weights did not bind ({}): a weight shares the device only while the groups keep it busy together, and only under a policy that serves weights (bfq, cfq, mclock)",
            split.join(", ")
        )
    })
}
