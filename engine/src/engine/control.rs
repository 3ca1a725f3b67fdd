//! Swaps and control requests (`--control`, `schedhost ctl`), answered between turns: at a
//! batch boundary, so a swap never splits a policy call.

use std::time::Instant;

use serde_json::{Value, json};

use super::{Backend, Engine, Halt};
use crate::control::Command;
use crate::core::Swapped;
use crate::engine::{SetRecord, SwapRecord};
use crate::policy::{Fault, PolicyBackend};

impl<B: Backend> Engine<B> {
    /// Answers every waiting control request; swaps are recorded.
    ///
    /// # Errors
    /// A policy fault in a request (a `set` that traps) when faults stop the run
    /// (`--on-fault abort`), after the request was answered; or the backend refusing the
    /// new policies' first dispatches.
    pub(super) fn serve(&mut self, now: u64) -> Result<(), Halt<B::Error>> {
        let envelopes = match &self.control {
            Some(control) => control.take(),
            None => return Ok(()),
        };
        for envelope in envelopes {
            let (reply, fatal) = self.command(now, envelope.command);
            // A client that left does not need its answer.
            let _ = envelope.reply.send(reply);
            if let Some((lane, fault)) = fatal {
                return Err(self.fault(lane, now, fault).into());
            }
        }
        // Swapped-in policies dispatch at once.
        self.run(now)
    }

    /// Carries out a control command; returns the reply and a fault that must stop the run
    /// (with its lane).
    fn command(&mut self, now: u64, command: Command) -> (Value, Option<(usize, Fault)>) {
        match command {
            Command::Swap {
                label,
                policies,
                load_ns,
                cached,
            } => {
                let started = Instant::now();
                let (results, record) = self.swap(now, label, Ok(policies), &[], started);
                let reply = swap_reply(&results, &record, load_ns, cached);
                self.record_swap(record);
                (reply, None)
            }
            Command::Set { name, value } => self.set(now, &name, value),
            Command::Get => self.tunables(now),
            Command::Status => (self.status(now), None),
            Command::Groups => {
                let devices: Vec<Value> = self
                    .lanes
                    .iter()
                    .map(|lane| {
                        let groups = lane.core.throttle().map(crate::core::Throttle::report);
                        json!({ "device": lane.name, "groups": groups.unwrap_or_default() })
                    })
                    .collect();
                (json!({ "ok": true, "devices": devices }), None)
            }
            Command::Group(edit) => (self.set_group(now, &edit), None),
            Command::Stats => {
                let devices: Vec<Value> = self
                    .lanes
                    .iter()
                    .map(|lane| json!({ "device": lane.name, "requests": lane.core.stats() }))
                    .collect();
                (json!({ "ok": true, "devices": devices }), None)
            }
        }
    }

    /// Replaces each lane's policy with the one made for it; a lane whose new policy will
    /// not start keeps its old one. `started` is when the swap began, for its stall time.
    pub(super) fn swap(
        &mut self,
        now: u64,
        label: String,
        policies: Result<Vec<Box<dyn PolicyBackend>>, String>,
        settings: &[(String, i64)],
        started: Instant,
    ) -> (Vec<Result<Swapped, String>>, SwapRecord) {
        let from = self.policy_name();
        let results: Vec<Result<Swapped, String>> = match policies {
            Ok(policies) => self
                .lanes
                .iter_mut()
                .zip(policies)
                .map(|(lane, policy)| {
                    let policy = lane.timed(policy);
                    lane.core
                        .replace_policy(now, policy, settings)
                        .map_err(|e| format!("{}: refused, the old policy stays: {e}", lane.name))
                })
                .collect(),
            Err(why) => vec![Err(format!("refused, the old policy stays: {why}"))],
        };
        let record = SwapRecord {
            at_ns: now,
            from,
            to: label,
            result: results
                .first()
                .cloned()
                .unwrap_or_else(|| Err("no device".into())),
            // On a virtual clock the swap takes no time at all: it happens between two
            // batches at one instant, and the wall clock must not reach the report.
            stall_ns: if self.backend.virtual_clock() {
                0
            } else {
                started.elapsed().as_nanos() as u64
            },
        };
        (results, record)
    }

    /// Sets tunable `name` on every lane's policy.
    fn set(&mut self, now: u64, name: &str, value: i64) -> (Value, Option<(usize, Fault)>) {
        let policy = self.policy_name();
        let mut errors = Vec::new();
        let mut fatal = None;
        for (l, lane) in self.lanes.iter_mut().enumerate() {
            match lane.core.set_tunable(now, name, value) {
                Ok(Ok(())) => {}
                Ok(Err(refusal)) => errors.push(format!("{}: {refusal}", lane.name)),
                Err(fault) => {
                    errors.push(format!("{}: {fault}", lane.name));
                    fatal.get_or_insert((l, fault));
                }
            }
        }
        let reply = if errors.is_empty() {
            json!({ "ok": true, "set": { name: value } })
        } else {
            json!({ "ok": false, "error": errors.join("; ") })
        };
        self.record_set(SetRecord {
            at_ns: now,
            policy,
            name: name.to_owned(),
            value,
            result: if errors.is_empty() {
                Ok(())
            } else {
                Err(errors.join("; "))
            },
        });
        (reply, fatal)
    }

    /// A group's keys changed on every lane that has the group (a group of several
    /// devices has its parameters on each, as cgroup's io.max has a line per device), or
    /// on none if the change is refused anywhere; logged as a `set` is.
    fn set_group(&mut self, now: u64, edit: &crate::value::GroupEdit) -> Value {
        let mut changes = Vec::new();
        let mut errors = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for (l, lane) in self.lanes.iter().enumerate() {
            let groups = lane.core.throttle().map(|t| t.groups()).unwrap_or_default();
            names.extend(groups.iter().map(|g| g.name.clone()));
            if let Some(current) = groups.iter().find(|g| g.name == edit.name) {
                match edit.apply(current) {
                    Ok(limits) => changes.push((l, limits)),
                    Err(e) => errors.push(format!("{}: {e}", lane.name)),
                }
            }
        }
        if changes.is_empty() && errors.is_empty() {
            let names: Vec<String> = names.into_iter().collect();
            errors.push(if names.is_empty() {
                "this server has no groups (--group)".to_owned()
            } else {
                format!(
                    "no group {:?} (the groups are {})",
                    edit.name,
                    names.join(", ")
                )
            });
        }
        if errors.is_empty() {
            for (l, limits) in &changes {
                if let Err(e) = self.lanes[*l].core.set_group(now, limits.clone()) {
                    errors.push(format!("{}: {e}", self.lanes[*l].name));
                }
            }
        }
        let Some((_, limits)) = changes.first().filter(|_| errors.is_empty()) else {
            let error = errors.join("; ");
            super::log(&format!(
                "group {} at {:.3} s refused: {error}",
                edit.name,
                now as f64 / 1e9
            ));
            return json!({ "ok": false, "error": error });
        };
        super::log(&format!(
            "group {} at {:.3} s: weight={} reserve_iops={:?} limits riops={:?} wiops={:?} rbps={:?} wbps={:?} latency_target_ns={:?} latency_permille={:?}",
            limits.name,
            now as f64 / 1e9,
            limits.weight,
            limits.reserve_iops,
            limits.riops,
            limits.wiops,
            limits.rbps,
            limits.wbps,
            limits.latency_target_ns,
            limits.latency_permille,
        ));
        json!({ "ok": true, "group": limits })
    }

    /// Every lane's policy and queue, and what is in flight.
    fn status(&mut self, now: u64) -> Value {
        let devices: Vec<Value> = self
            .lanes
            .iter_mut()
            .map(|lane| {
                let info = lane.core.policy_info();
                json!({
                    "device": lane.name,
                    "policy": { "name": info.name, "version": info.version },
                    "queued_in_policy": lane.core.queued_in_policy(),
                    "requests_in_host": lane.core.requests_in_flight(),
                    "ejections": lane.core.ejections().len(),
                })
            })
            .collect();
        json!({
            "ok": true,
            "uptime_ms": now / 1_000_000,
            "inflight": self.backend.inflight(),
            "devices": devices,
        })
    }

    /// Every tunable of the first lane's policy (all lanes run the same one), read under
    /// the core's supervision: a policy that fails in `tunables` or `get` is ejected.
    fn tunables(&mut self, now: u64) -> (Value, Option<(usize, Fault)>) {
        let Some(lane) = self.lanes.first_mut() else {
            return (json!({ "ok": false, "error": "no device" }), None);
        };
        match lane.core.tunable_values(now) {
            Ok(Ok(values)) => {
                let values: serde_json::Map<String, Value> = values
                    .into_iter()
                    .map(|(name, v)| (name, json!(v)))
                    .collect();
                (json!({ "ok": true, "tunables": values }), None)
            }
            Ok(Err(why)) => (
                json!({ "ok": false, "error": format!("{}: {why}", lane.name) }),
                None,
            ),
            Err(fault) => (
                json!({ "ok": false, "error": format!("{}: {fault}", lane.name) }),
                Some((0, fault)),
            ),
        }
    }
}

/// The reply to a swap: per lane what happened, and what the swap cost.
fn swap_reply(
    results: &[Result<Swapped, String>],
    record: &SwapRecord,
    load_ns: u64,
    cached: bool,
) -> Value {
    let ok = results.iter().all(Result::is_ok);
    let errors: Vec<String> = results.iter().filter_map(|r| r.clone().err()).collect();
    json!({
        "ok": ok,
        "error": (!ok).then(|| errors.join("; ")),
        "devices": results.iter().map(|r| match r {
            Ok(s) => json!(s),
            Err(e) => json!({ "error": e }),
        }).collect::<Vec<_>>(),
        "stall_ns": record.stall_ns,
        "load_ns": load_ns,
        "cached": cached,
    })
}
