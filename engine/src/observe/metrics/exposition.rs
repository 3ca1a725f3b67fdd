//! Prometheus's text exposition format (version 0.0.4) for one server's devices.

use std::fmt::Write;

use crate::core::CoreStats;
use crate::observe::stats::meter::{BUCKET_BOUNDS_NS, CtxMeter, Meter};

/// One device as the metrics see it.
#[derive(Debug, Clone)]
pub struct DeviceView {
    /// Its path.
    pub name: String,
    /// The policy's name.
    pub policy: String,
    /// Which policy this is since the run began: 0 for the first, one more at each swap
    /// or ejection.
    pub epoch: u64,
    /// Per-ctx counters.
    pub meter: Meter,
    /// The core's counters.
    pub stats: CoreStats,
    /// Requests the policy holds.
    pub queued: usize,
    /// Requests on the device.
    pub inflight: usize,
    /// Policy ejections so far.
    pub ejections: usize,
    /// Wall-clock ns spent in policy calls.
    pub policy_call_ns: u64,
    /// Limited groups: their limits and what they did.
    pub groups: Vec<crate::core::GroupReport>,
}

/// The exposition text for `devices` and the server's `swaps` and tunable `sets` so far.
///
/// Counters carry the device and ctx, never the policy: a swap must not move a counter's
/// history to a new series. Which policy runs is its own series, `schedhost_policy_info`,
/// with the policy's name and epoch; joined on `device`, it tells what ran when.
pub fn render(devices: &[DeviceView], swaps: usize, sets: usize) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "schedhost_policy_info",
        "gauge",
        "The policy running on a device (always 1), by name and epoch (0 at the start, one more at each swap or ejection).",
    );
    for d in devices {
        let epoch = d.epoch.to_string();
        let labels = labels(d, None, &[("policy", &d.policy), ("epoch", &epoch)]);
        sample(&mut out, "schedhost_policy_info", &labels, 1.0);
    }
    per_direction(
        &mut out,
        devices,
        (
            "schedhost_ios_total",
            "Bios completed without error, by client ctx and direction.",
        ),
        |c, dir| c.ios[dir] as f64,
    );
    per_direction(
        &mut out,
        devices,
        (
            "schedhost_bytes_total",
            "Bytes of bios completed without error.",
        ),
        |c, dir| c.bytes[dir] as f64,
    );
    family(
        &mut out,
        "schedhost_errors_total",
        "counter",
        "Bios completed with an error.",
    );
    for d in devices {
        for (ctx, c) in d.meter.ctxs.iter().enumerate() {
            let labels = labels(d, Some(ctx), &[]);
            sample(&mut out, "schedhost_errors_total", &labels, c.errors as f64);
        }
    }
    latency(&mut out, devices);
    per_device(
        &mut out,
        devices,
        ("schedhost_queue_depth", "gauge"),
        "Requests held by the policy (queued) and on the device (dispatched).",
        |d| {
            vec![
                (Some(("where", "policy")), d.queued as f64),
                (Some(("where", "device")), d.inflight as f64),
            ]
        },
    );
    per_device(
        &mut out,
        devices,
        ("schedhost_merges_total", "counter"),
        "Bios merged into requests, by end.",
        |d| {
            vec![
                (Some(("kind", "back")), d.stats.back_merges as f64),
                (Some(("kind", "front")), d.stats.front_merges as f64),
            ]
        },
    );
    let counters: [Counter; 4] = [
        (
            "schedhost_requests_dispatched_total",
            "Requests sent to the device.",
            |d| d.stats.dispatched as f64,
        ),
        (
            "schedhost_policy_calls_total",
            "Calls into the policy.",
            |d| d.stats.policy_calls as f64,
        ),
        (
            "schedhost_policy_call_seconds_total",
            "Wall-clock time spent in policy calls.",
            |d| d.policy_call_ns as f64 / 1e9,
        ),
        (
            "schedhost_ejections_total",
            "Policies ejected after a fault.",
            |d| d.ejections as f64,
        ),
    ];
    for (name, help, value) in counters {
        per_device(&mut out, devices, (name, "counter"), help, |d| {
            vec![(None, value(d))]
        });
    }
    groups(&mut out, devices);
    family(
        &mut out,
        "schedhost_swaps_total",
        "counter",
        "Policy swaps through the control socket.",
    );
    sample(&mut out, "schedhost_swaps_total", "", swaps as f64);
    family(
        &mut out,
        "schedhost_tunable_sets_total",
        "counter",
        "Tunable changes through the control socket, refused ones included.",
    );
    sample(&mut out, "schedhost_tunable_sets_total", "", sets as f64);
    out
}

/// Per group: bios and bytes past its limits by direction, bios held and how long, and
/// its limits as gauges.
fn groups(out: &mut String, devices: &[DeviceView]) {
    if devices.iter().all(|d| d.groups.is_empty()) {
        return;
    }
    type PerOp = fn(&crate::core::GroupReport, usize) -> u64;
    let per_op: [(&str, &str, PerOp); 2] = [
        (
            "schedhost_group_ios_total",
            "Bios a group's limits let through, by direction.",
            |g, d| g.stats.ios[d],
        ),
        ("schedhost_group_bytes_total", "Their bytes.", |g, d| {
            g.stats.bytes[d]
        }),
    ];
    for (name, help, value) in per_op {
        family(out, name, "counter", help);
        for d in devices {
            for g in &d.groups {
                for (dir, op) in ["read", "write"].iter().enumerate() {
                    let labels = labels(d, None, &[("group", &g.limits.name), ("op", op)]);
                    sample(out, name, &labels, value(g, dir) as f64);
                }
            }
        }
    }
    family(
        out,
        "schedhost_group_throttled_total",
        "counter",
        "Bios a group's limits held back.",
    );
    family(
        out,
        "schedhost_group_throttled_seconds_total",
        "counter",
        "Time those bios waited, added up.",
    );
    family(
        out,
        "schedhost_group_limit",
        "gauge",
        "A group's limits (io.max's keys).",
    );
    for d in devices {
        for g in &d.groups {
            let name = g.limits.name.as_str();
            let group = labels(d, None, &[("group", name)]);
            sample(
                out,
                "schedhost_group_throttled_total",
                &group,
                g.stats.throttled as f64,
            );
            sample(
                out,
                "schedhost_group_throttled_seconds_total",
                &group,
                g.stats.throttled_ns as f64 / 1e9,
            );
            let l = &g.limits;
            for (key, value) in [
                ("riops", l.riops),
                ("wiops", l.wiops),
                ("rbps", l.rbps),
                ("wbps", l.wbps),
            ] {
                if let Some(v) = value {
                    let keyed = labels(d, None, &[("group", name), ("key", key)]);
                    sample(out, "schedhost_group_limit", &keyed, v as f64);
                }
            }
        }
    }
}

/// A per-device counter: name, help, value.
type Counter = (&'static str, &'static str, fn(&DeviceView) -> f64);

/// A counter per device, ctx and direction.
fn per_direction(
    out: &mut String,
    devices: &[DeviceView],
    (name, help): (&str, &str),
    value: impl Fn(&CtxMeter, usize) -> f64,
) {
    family(out, name, "counter", help);
    for d in devices {
        for (ctx, c) in d.meter.ctxs.iter().enumerate() {
            for (dir, op) in ["read", "write"].iter().enumerate() {
                sample(
                    out,
                    name,
                    &labels(d, Some(ctx), &[("op", op)]),
                    value(c, dir),
                );
            }
        }
    }
}

/// A family with samples per device, each with at most one extra label.
fn per_device(
    out: &mut String,
    devices: &[DeviceView],
    (name, kind): (&str, &str),
    help: &str,
    samples: impl Fn(&DeviceView) -> Vec<(Option<(&'static str, &'static str)>, f64)>,
) {
    family(out, name, kind, help);
    for d in devices {
        for (extra, value) in samples(d) {
            let extra: Vec<(&str, &str)> = extra.into_iter().collect();
            sample(out, name, &labels(d, None, &extra), value);
        }
    }
}

/// The latency histogram per device, ctx and direction: cumulative buckets, sum and count.
fn latency(out: &mut String, devices: &[DeviceView]) {
    family(
        out,
        "schedhost_latency_seconds",
        "histogram",
        "Bio completion latency, from arrival at the host, by direction.",
    );
    for d in devices {
        for (ctx, c) in d.meter.ctxs.iter().enumerate() {
            for (dir, op) in ["read", "write"].iter().enumerate() {
                let mut cumulative = 0;
                for (i, &bound) in BUCKET_BOUNDS_NS.iter().enumerate() {
                    cumulative += c.buckets[dir][i];
                    let le = format!("{}", bound as f64 / 1e9);
                    let labels = labels(d, Some(ctx), &[("op", op), ("le", &le)]);
                    sample(
                        out,
                        "schedhost_latency_seconds_bucket",
                        &labels,
                        cumulative as f64,
                    );
                }
                let count: u64 = c.buckets[dir].iter().sum();
                let inf = labels(d, Some(ctx), &[("op", op), ("le", "+Inf")]);
                sample(out, "schedhost_latency_seconds_bucket", &inf, count as f64);
                let plain = labels(d, Some(ctx), &[("op", op)]);
                sample(
                    out,
                    "schedhost_latency_seconds_sum",
                    &plain,
                    c.latency_sum_ns[dir] as f64 / 1e9,
                );
                sample(out, "schedhost_latency_seconds_count", &plain, count as f64);
            }
        }
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &str, value: f64) {
    let _ = writeln!(out, "{name}{labels} {value}");
}

/// `{device="...",ctx="N",extra...}`.
fn labels(d: &DeviceView, ctx: Option<usize>, extra: &[(&str, &str)]) -> String {
    let mut pairs = vec![format!("device=\"{}\"", escape(&d.name))];
    if let Some(ctx) = ctx {
        pairs.push(format!("ctx=\"{ctx}\""));
    }
    for (k, v) in extra {
        pairs.push(format!("{k}=\"{}\"", escape(v)));
    }
    format!("{{{}}}", pairs.join(","))
}

/// Label values escape backslash, double quote and newline.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedhost_sdk::Op;

    #[test]
    fn histogram_buckets_are_cumulative_and_labels_are_escaped() {
        let mut meter = Meter::default();
        meter.record(0, Op::Read, 8, 30_000, 0);
        meter.record(0, Op::Read, 8, 3_000_000_000, 0);
        let d = DeviceView {
            name: "/tmp/a \"b\"".into(),
            policy: "cfq".into(),
            epoch: 2,
            meter,
            stats: CoreStats::default(),
            queued: 1,
            inflight: 2,
            ejections: 0,
            policy_call_ns: 1_500_000,
            groups: Vec::new(),
        };
        let text = render(&[d], 3, 1);
        assert!(
            text.contains(r#"schedhost_ios_total{device="/tmp/a \"b\"",ctx="0",op="read"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"schedhost_policy_info{device="/tmp/a \"b\"",policy="cfq",epoch="2"} 1"#
            ),
            "{text}"
        );
        assert!(
            !text
                .lines()
                .filter(|l| !l.starts_with('#') && !l.starts_with("schedhost_policy_info"))
                .any(|l| l.contains("policy=")),
            "no counter carries the policy: {text}"
        );
        assert!(
            text.contains(r#"ctx="0",op="read",le="0.00005"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"ctx="0",op="write",le="+Inf"} 0"#),
            "{text}"
        );
        assert!(text.contains("schedhost_tunable_sets_total 1"), "{text}");
        assert!(text.contains(r#"le="0.000025"} 0"#), "{text}");
        assert!(text.contains(r#"le="0.00005"} 1"#), "{text}");
        assert!(text.contains(r#"le="2.5"} 1"#), "{text}");
        assert!(text.contains(r#"le="+Inf"} 2"#), "{text}");
        assert!(text.contains("schedhost_swaps_total 3"), "{text}");
        assert!(
            text.contains("schedhost_policy_call_seconds_total{device="),
            "{text}"
        );
        assert!(text.contains("\"} 0.0015"), "{text}");
        assert!(text.contains(r#"where="device"} 2"#), "{text}");
    }

    #[test]
    fn a_swap_keeps_every_counter_series_and_moves_only_the_info_series() {
        let mut meter = Meter::default();
        meter.record(0, Op::Write, 8, 30_000, 0);
        let before = DeviceView {
            name: "d".into(),
            policy: "deadline".into(),
            epoch: 0,
            meter,
            stats: CoreStats::default(),
            queued: 0,
            inflight: 0,
            ejections: 0,
            policy_call_ns: 0,
            groups: Vec::new(),
        };
        let after = DeviceView {
            policy: "cfq".into(),
            epoch: 1,
            ..before.clone()
        };
        let series = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.rsplit_once(' ').map(|(key, _)| key.to_owned()))
                .collect()
        };
        let (old, new) = (
            series(&render(&[before], 0, 0)),
            series(&render(&[after], 1, 0)),
        );
        let moved: Vec<&String> = old.iter().filter(|k| !new.contains(k)).collect();
        assert_eq!(
            moved,
            [r#"schedhost_policy_info{device="d",policy="deadline",epoch="0"}"#],
            "only the info series changes"
        );
        assert!(
            new.contains(&r#"schedhost_policy_info{device="d",policy="cfq",epoch="1"}"#.to_owned())
        );
    }
}
