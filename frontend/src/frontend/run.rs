//! One entry for a run of jobs: the plan, the device and the policy in, the outcome out;
//! the device picks the backend (the simulator or io_uring).

use std::path::{Path, PathBuf};

use crate::backend::sim::DeviceSpec;
use crate::engine::ScheduledSwap;
use crate::frontend::RunError;
use crate::frontend::jobs::{JobSpec, real, sim};
use crate::frontend::outcome::{Outcome, RealDetails};
use crate::frontend::plan::RunPlan;
use crate::policy::{Loaded, PolicyBackend, WasmRuntime};

/// Where a run's I/O goes.
#[derive(Debug, Clone)]
pub enum Device {
    /// A simulated device, in virtual time.
    Sim(DeviceSpec),
    /// Files and block devices through io_uring, blocks striped across them.
    Real(Vec<PathBuf>),
}

/// Where a run's policy instances come from.
pub enum Instances<'a> {
    /// A compiled policy: one instance per device.
    Loaded(&'a Loaded),
    /// Instances the caller made (a policy wrapped to be watched, as `policy check` does),
    /// one per device.
    Given(Vec<Box<dyn PolicyBackend>>),
}

impl std::fmt::Debug for Instances<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Instances::Loaded(loaded) => f.debug_tuple("Loaded").field(loaded).finish(),
            Instances::Given(given) => write!(f, "Given({} instances)", given.len()),
        }
    }
}

/// The policy a run starts with, and what may replace it while it runs.
#[derive(Debug)]
pub struct PolicyPlan<'a> {
    /// The policy's instances.
    pub instances: Instances<'a>,
    /// Its tunables, set before the first request.
    pub settings: &'a [(String, i64)],
    /// Swaps at set times of virtual time (simulated devices only).
    pub swaps: Vec<ScheduledSwap>,
    /// A control socket to listen on for swaps and tunables (real devices only), and the
    /// runtime that compiles what it swaps in.
    pub control: Option<(&'a Path, &'a WasmRuntime)>,
}

impl<'a> PolicyPlan<'a> {
    /// `loaded` with `settings`, neither swapped nor controlled.
    pub fn fixed(loaded: &'a Loaded, settings: &'a [(String, i64)]) -> Self {
        Self {
            instances: Instances::Loaded(loaded),
            settings,
            swaps: Vec::new(),
            control: None,
        }
    }
}

/// A finished run of jobs.
#[derive(Debug)]
pub struct Ran {
    /// What the reports print.
    pub outcome: Outcome,
    /// The device model the report names: the simulated device's, or `io_uring`.
    pub device_model: String,
    /// The devices a real run used.
    pub real: Option<RealDetails>,
}

/// Runs `jobs` on `device` under `plan` with `policy`. `progress` hears the virtual time now
/// and then (simulated devices), for progress displays.
///
/// # Errors
/// A [`RunError`] naming what stopped the run, or why it could not start: swaps at set times
/// on a real device, a control socket on a simulated one.
pub fn run(
    jobs: &[JobSpec],
    device: &Device,
    policy: PolicyPlan<'_>,
    plan: &RunPlan,
    progress: &mut dyn FnMut(u64),
) -> Result<Ran, RunError> {
    // What the device cannot take is refused before any instance is made.
    let devices = match device {
        Device::Sim(_) if policy.control.is_some() => {
            return Err(RunError::Setup(
                "--control serves runs on real devices; a simulated run takes its swaps from --swap-at TIME:POLICY".into(),
            ));
        }
        Device::Real(_) if !policy.swaps.is_empty() => {
            return Err(RunError::Setup(
                "--swap-at schedules swaps in virtual time, for simulated devices; on a real device swap with --control SOCKET and `schedhost ctl`".into(),
            ));
        }
        Device::Sim(_) => 1,
        Device::Real(paths) => paths.len(),
    };
    let mut instances = match policy.instances {
        Instances::Loaded(loaded) => (0..devices)
            .map(|_| loaded.instantiate())
            .collect::<anyhow::Result<Vec<_>>>()
            .map_err(|e| RunError::Setup(format!("{e:#}")))?,
        Instances::Given(given) if given.len() == devices => given,
        Instances::Given(given) => {
            return Err(RunError::Setup(format!(
                "{} policy instances for {devices} devices",
                given.len()
            )));
        }
    };
    match device {
        Device::Sim(spec) => {
            let Some(instance) = instances.pop() else {
                return Err(RunError::Setup("no policy instance".into()));
            };
            let outcome = sim::run_swapping(
                jobs,
                spec,
                instance,
                policy.settings,
                plan,
                policy.swaps,
                progress,
            )?;
            Ok(Ran {
                outcome,
                device_model: spec.name().to_owned(),
                real: None,
            })
        }
        Device::Real(paths) => {
            let done = real::run_controlled(
                jobs,
                paths,
                instances,
                policy.settings,
                plan,
                policy.control,
            )?;
            Ok(Ran {
                outcome: done.outcome,
                device_model: "io_uring".to_owned(),
                real: Some(RealDetails {
                    targets: done.targets,
                    fixed_buffers: done.fixed_buffers,
                    completion_instants: done.completion_instants,
                }),
            })
        }
    }
}
