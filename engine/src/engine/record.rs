//! What a run's swaps and tunable changes were, for its report, its log and its metrics:
//! plain objects in JSON (`ok`, and `error` when refused), names as the CLI spells them.

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::core::Swapped;

/// One hot swap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapRecord {
    /// When, on the run's clock.
    pub at_ns: u64,
    /// The policy that ran before (its name).
    pub from: String,
    /// What was asked for (`cfq`, a path).
    pub to: String,
    /// What happened: the swap, or why the old policy stayed.
    pub result: Result<Swapped, String>,
    /// Time dispatch waited for the switch (starting the new instance, handing over state
    /// and requests), in ns on the run's clock: the wall clock on real devices; 0 on a
    /// simulated one, where the swap happens at one instant of virtual time.
    pub stall_ns: u64,
}

impl SwapRecord {
    /// The line the log gets: `swap at 1.250 s: deadline → cfq, 12 requests handed over,
    /// dispatch stalled 0.310 ms`.
    pub fn line(&self) -> String {
        let at = self.at_ns as f64 / 1e9;
        match &self.result {
            Ok(s) => format!(
                "swap at {at:.3} s: {} → {} ({}), {} requests handed over{}, dispatch stalled {:.3} ms",
                self.from,
                s.to,
                self.to,
                s.requeued,
                s.state_bytes
                    .map(|b| format!(", {b} bytes of state"))
                    .unwrap_or_default(),
                self.stall_ns as f64 / 1e6
            ),
            Err(why) => format!(
                "swap at {at:.3} s from {} to {}: {}",
                self.from,
                self.to,
                first_line(why)
            ),
        }
    }
}

impl Serialize for SwapRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("at_ns", &self.at_ns)?;
        map.serialize_entry("from", &self.from)?;
        map.serialize_entry("to", &self.to)?;
        map.serialize_entry("ok", &self.result.is_ok())?;
        match &self.result {
            Ok(s) => {
                map.serialize_entry("from_version", &s.from)?;
                map.serialize_entry("to_version", &s.to)?;
                map.serialize_entry("requests_handed_over", &s.requeued)?;
                if let Some(bytes) = s.state_bytes {
                    map.serialize_entry("state_bytes", &bytes)?;
                }
            }
            Err(why) => map.serialize_entry("error", why)?,
        }
        map.serialize_entry("stall_ns", &self.stall_ns)?;
        map.end()
    }
}

/// One change of a tunable (`ctl set`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetRecord {
    /// When, on the run's clock.
    pub at_ns: u64,
    /// The policy that was running.
    pub policy: String,
    /// The tunable.
    pub name: String,
    /// The value asked for.
    pub value: i64,
    /// Done, or why not (the policy's refusal, per device).
    pub result: Result<(), String>,
}

impl SetRecord {
    /// The line the log gets: `set at 2.000 s: deadline fifo_batch=8`.
    pub fn line(&self) -> String {
        let at = self.at_ns as f64 / 1e9;
        match &self.result {
            Ok(()) => format!(
                "set at {at:.3} s: {} {}={}",
                self.policy, self.name, self.value
            ),
            Err(why) => format!(
                "set at {at:.3} s: {} {}={} refused: {}",
                self.policy,
                self.name,
                self.value,
                first_line(why)
            ),
        }
    }
}

/// A message's first line: a log line stays one line (the report keeps the whole, a
/// policy's backtrace included).
fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or_default()
}

impl Serialize for SetRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("at_ns", &self.at_ns)?;
        map.serialize_entry("policy", &self.policy)?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("value", &self.value)?;
        map.serialize_entry("ok", &self.result.is_ok())?;
        if let Err(why) = &self.result {
            map.serialize_entry("error", why)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_serialize_as_plain_objects_with_ok_and_error() {
        let swap = SwapRecord {
            at_ns: 5,
            from: "deadline".into(),
            to: "cfq".into(),
            result: Ok(Swapped {
                from: "deadline 0.1.0".into(),
                to: "cfq 0.1.0".into(),
                requeued: 3,
                state_bytes: None,
            }),
            stall_ns: 7,
        };
        let v = serde_json::to_value(&swap).unwrap();
        assert_eq!(v["ok"], true);
        assert_eq!(v["requests_handed_over"], 3);
        assert_eq!(v["from"], "deadline");
        assert!(v.get("Ok").is_none() && v.get("result").is_none());
        let refused = SwapRecord {
            result: Err("no such policy".into()),
            ..swap
        };
        let v = serde_json::to_value(&refused).unwrap();
        assert_eq!(
            (v["ok"].clone(), v["error"].clone()),
            (false.into(), "no such policy".into())
        );
        let set = SetRecord {
            at_ns: 1,
            policy: "deadline".into(),
            name: "fifo_batch".into(),
            value: 8,
            result: Ok(()),
        };
        let v = serde_json::to_value(&set).unwrap();
        assert_eq!(v["ok"], true);
        assert!(v.get("error").is_none());
        assert_eq!(set.line(), "set at 0.000 s: deadline fifo_batch=8");
    }
}
