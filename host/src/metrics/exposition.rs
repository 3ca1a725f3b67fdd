//! Prometheus's text exposition format (version 0.0.4) for one server's devices.

use std::fmt::Write;

use crate::core::CoreStats;
use crate::stats::meter::{BUCKET_BOUNDS_NS, Meter};

/// One device as the metrics see it.
#[derive(Debug, Clone)]
pub struct DeviceView {
    /// Its path.
    pub name: String,
    /// The policy's name.
    pub policy: String,
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
}

/// The exposition text for `devices` and the server's `swaps` so far.
pub fn render(devices: &[DeviceView], swaps: usize) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "schedhost_ios_total",
        "counter",
        "Bios completed without error, by client ctx and direction.",
    );
    for d in devices {
        for (ctx, c) in d.meter.ctxs.iter().enumerate() {
            for (dir, name) in ["read", "write"].iter().enumerate() {
                sample(
                    &mut out,
                    "schedhost_ios_total",
                    &labels(d, Some(ctx), &[("op", name)]),
                    c.ios[dir] as f64,
                );
            }
        }
    }
    family(
        &mut out,
        "schedhost_bytes_total",
        "counter",
        "Bytes of bios completed without error.",
    );
    for d in devices {
        for (ctx, c) in d.meter.ctxs.iter().enumerate() {
            for (dir, name) in ["read", "write"].iter().enumerate() {
                sample(
                    &mut out,
                    "schedhost_bytes_total",
                    &labels(d, Some(ctx), &[("op", name)]),
                    c.bytes[dir] as f64,
                );
            }
        }
    }
    family(
        &mut out,
        "schedhost_errors_total",
        "counter",
        "Bios completed with an error.",
    );
    for d in devices {
        for (ctx, c) in d.meter.ctxs.iter().enumerate() {
            sample(
                &mut out,
                "schedhost_errors_total",
                &labels(d, Some(ctx), &[]),
                c.errors as f64,
            );
        }
    }
    family(
        &mut out,
        "schedhost_latency_seconds",
        "histogram",
        "Bio completion latency, from arrival at the host.",
    );
    for d in devices {
        for (ctx, c) in d.meter.ctxs.iter().enumerate() {
            let mut cumulative = 0;
            for (i, &bound) in BUCKET_BOUNDS_NS.iter().enumerate() {
                cumulative += c.buckets[i];
                let le = format!("{}", bound as f64 / 1e9);
                sample(
                    &mut out,
                    "schedhost_latency_seconds_bucket",
                    &labels(d, Some(ctx), &[("le", &le)]),
                    cumulative as f64,
                );
            }
            let count: u64 = c.buckets.iter().sum();
            sample(
                &mut out,
                "schedhost_latency_seconds_bucket",
                &labels(d, Some(ctx), &[("le", "+Inf")]),
                count as f64,
            );
            sample(
                &mut out,
                "schedhost_latency_seconds_sum",
                &labels(d, Some(ctx), &[]),
                c.latency_sum_ns as f64 / 1e9,
            );
            sample(
                &mut out,
                "schedhost_latency_seconds_count",
                &labels(d, Some(ctx), &[]),
                count as f64,
            );
        }
    }
    family(
        &mut out,
        "schedhost_queue_depth",
        "gauge",
        "Requests held by the policy (queued) and on the device (dispatched).",
    );
    for d in devices {
        sample(
            &mut out,
            "schedhost_queue_depth",
            &labels(d, None, &[("where", "policy")]),
            d.queued as f64,
        );
        sample(
            &mut out,
            "schedhost_queue_depth",
            &labels(d, None, &[("where", "device")]),
            d.inflight as f64,
        );
    }
    family(
        &mut out,
        "schedhost_merges_total",
        "counter",
        "Bios merged into requests, by end.",
    );
    for d in devices {
        sample(
            &mut out,
            "schedhost_merges_total",
            &labels(d, None, &[("kind", "back")]),
            d.stats.back_merges as f64,
        );
        sample(
            &mut out,
            "schedhost_merges_total",
            &labels(d, None, &[("kind", "front")]),
            d.stats.front_merges as f64,
        );
    }
    family(
        &mut out,
        "schedhost_requests_dispatched_total",
        "counter",
        "Requests sent to the device.",
    );
    for d in devices {
        sample(
            &mut out,
            "schedhost_requests_dispatched_total",
            &labels(d, None, &[]),
            d.stats.dispatched as f64,
        );
    }
    family(
        &mut out,
        "schedhost_policy_calls_total",
        "counter",
        "Calls into the policy.",
    );
    for d in devices {
        sample(
            &mut out,
            "schedhost_policy_calls_total",
            &labels(d, None, &[]),
            d.stats.policy_calls as f64,
        );
    }
    family(
        &mut out,
        "schedhost_policy_call_seconds_total",
        "counter",
        "Wall-clock time spent in policy calls.",
    );
    for d in devices {
        sample(
            &mut out,
            "schedhost_policy_call_seconds_total",
            &labels(d, None, &[]),
            d.policy_call_ns as f64 / 1e9,
        );
    }
    family(
        &mut out,
        "schedhost_ejections_total",
        "counter",
        "Policies ejected after a fault.",
    );
    for d in devices {
        sample(
            &mut out,
            "schedhost_ejections_total",
            &labels(d, None, &[]),
            d.ejections as f64,
        );
    }
    family(
        &mut out,
        "schedhost_swaps_total",
        "counter",
        "Policy swaps through the control socket.",
    );
    sample(&mut out, "schedhost_swaps_total", "", swaps as f64);
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &str, value: f64) {
    let _ = writeln!(out, "{name}{labels} {value}");
}

/// `{device="...",policy="...",ctx="N",extra...}`.
fn labels(d: &DeviceView, ctx: Option<usize>, extra: &[(&str, &str)]) -> String {
    let mut pairs = vec![
        format!("device=\"{}\"", escape(&d.name)),
        format!("policy=\"{}\"", escape(&d.policy)),
    ];
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
            meter,
            stats: CoreStats::default(),
            queued: 1,
            inflight: 2,
            ejections: 0,
            policy_call_ns: 1_500_000,
        };
        let text = render(&[d], 3);
        assert!(
            text.contains(
                r#"schedhost_ios_total{device="/tmp/a \"b\"",policy="cfq",ctx="0",op="read"} 2"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"le="0.000025"} 0"#), "{text}");
        assert!(text.contains(r#"le="0.00005"} 1"#), "{text}");
        assert!(text.contains(r#"le="2.5"} 1"#), "{text}");
        assert!(text.contains(r#"le="+Inf"} 2"#), "{text}");
        assert!(text.contains("schedhost_swaps_total 3"), "{text}");
        assert!(
            text.contains("schedhost_policy_call_seconds_total{device="),
            "{text}"
        );
        assert!(text.contains("policy=\"cfq\"} 0.0015"), "{text}");
        assert!(text.contains(r#"where="device"} 2"#), "{text}");
    }
}
