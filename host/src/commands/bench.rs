//! `schedhost bench`: the host's cost per request on `sim:null` (a device that costs
//! nothing), with the noop policy as a WebAssembly component and natively through the SDK,
//! in alternating rounds of one run so both see the same machine.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use schedhost::backend::sim::{DeviceSpec, FaultPlan};
use schedhost::core::DEFAULT_WATCHDOG_NS;
use schedhost::frontend::jobs::{parse_cmdline, parse_job_file};
use schedhost::frontend::plan::{Observe, RunPlan};
use schedhost::frontend::run::{Device, PolicyPlan, run};
use schedhost::policy::{Loaded, PolicyBackend, PolicySource, WasmRuntime, load, phases, resolve};

use super::flags::{Devices, RunFlags, Scope};

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The component to measure against its native build.
    #[arg(long, default_value = "noop")]
    pub policy: String,
    /// Bios per run.
    #[arg(long, default_value_t = 400_000)]
    pub ios: u64,
    /// Alternating rounds (component, native) to take the median of.
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// I/Os in flight.
    #[arg(long, default_value_t = 32)]
    pub iodepth: u32,
    /// Measure hot swaps instead: this many swaps among noop, deadline, cfq and time-slice
    /// during a simulated run, each from the compiled component (cached), then a few that
    /// compile the component first (uncached); prints how long dispatch stalled.
    #[arg(long, value_name = "N")]
    pub swaps: Option<u64>,
    /// Measure observability instead: the policy's component with nothing on, with the
    /// per-ctx counters of live stats and metrics, and with the event trace.
    #[arg(long)]
    pub observe: bool,
    /// Split one policy call's cost by phase instead (scalars, lists, post-return, arming):
    /// `--ios` calls per phase and round.
    #[arg(long)]
    pub phases: bool,
    /// With --phases: only the phases whose name contains this text.
    #[arg(long, value_name = "TEXT", requires = "phases")]
    pub phase: Option<String>,
    /// The run flags, as `run`'s (--phases measures with and without fuel by itself).
    #[command(flatten)]
    pub flags: RunFlags,
}

/// What `bench` does with the run flags: it runs `sim:null`, and `--observe` measures what
/// recording events costs, writing no file.
const SCOPE: Scope = Scope {
    command: "bench",
    devices: Devices::Sim,
    own_seed: None,
    own_queue: None,
    own_on_fault: None,
    own_ring: None,
    own_threads: None,
    own_status: None,
    own_events: Some(
        "bench writes no event file; `bench --observe` measures what recording them costs",
    ),
    default_fuel: None,
    default_watchdog_ns: Some(DEFAULT_WATCHDOG_NS),
};

impl BenchArgs {
    pub fn execute(self) -> Result<()> {
        if self.rounds == 0 || self.ios == 0 {
            bail!("--rounds and --ios must be at least 1");
        }
        let plan = self.flags.plan(&SCOPE, FaultPlan::default(), false)?;
        let runtime = self.flags.runtime(&SCOPE)?;
        if let Some(swaps) = self.swaps {
            return swap_stalls(&runtime, &plan, swaps);
        }
        let (source, wasm) = load(&runtime, &self.policy)?;
        if self.phases {
            return self.phases(&runtime, &source.label(), &wasm);
        }
        let native_name = format!(
            "native:{}",
            self.policy
                .trim_end_matches(".wasm")
                .rsplit('/')
                .next()
                .unwrap_or("noop")
        );
        let (_, native) = load(&runtime, &native_name)
            .with_context(|| format!("the native twin {native_name}"))?;
        let options = [
            "--name=bench".to_owned(),
            "--rw=randread".to_owned(),
            "--bs=4k".to_owned(),
            "--size=4g".to_owned(),
            format!("--iodepth={}", self.iodepth),
            format!("--number_ios={}", self.ios),
        ];
        let jobs = parse_cmdline(&options)?;
        let device = Device::Sim(DeviceSpec::parse("sim:null")?);
        let measure_with = |loaded: &Loaded, plan: &RunPlan| -> Result<(f64, u64)> {
            let policy = PolicyPlan::fixed(loaded, &[]);
            let start = Instant::now();
            let outcome = run(&jobs, &device, policy, plan, &mut |_| {})?.outcome;
            let elapsed = start.elapsed().as_nanos() as f64;
            let bios = outcome.core.bios;
            Ok((elapsed / bios as f64, outcome.core.policy_calls))
        };
        let measure = |loaded: &Loaded| measure_with(loaded, &plan);
        if self.observe {
            return self.observe(&source.label(), &wasm, &plan, &measure_with);
        }
        // One warm-up of each, then alternate.
        measure(&wasm)?;
        measure(&native)?;
        let (mut wasm_ns, mut native_ns) = (Vec::new(), Vec::new());
        let mut calls = 0;
        for _ in 0..self.rounds {
            let (w, c) = measure(&wasm)?;
            wasm_ns.push(w);
            calls = c;
            native_ns.push(measure(&native)?.0);
        }
        let (w, n) = (median(&mut wasm_ns), median(&mut native_ns));
        println!(
            "schedhost bench: {} bios of 4k randread, iodepth {}, sim:null, {} rounds (median)",
            self.ios, self.iodepth, self.rounds
        );
        println!(
            "  policy calls per bio: {:.3}",
            calls as f64 / self.ios as f64
        );
        println!(
            "  {:<28} {:>12} {:>14}",
            "policy", "ns/request", "requests/s"
        );
        println!("  {:<28} {:>12.0} {:>14.0}", source.label(), w, 1e9 / w);
        println!("  {:<28} {:>12.0} {:>14.0}", native_name, n, 1e9 / n);
        println!("  component throughput / native throughput: {:.3}", n / w);
        Ok(())
    }
}

impl BenchArgs {
    /// Each phase of a call, without and with fuel metering.
    fn phases(&self, runtime: &WasmRuntime, label: &str, wasm: &Loaded) -> Result<()> {
        let Loaded::Wasm(loaded) = wasm else {
            bail!("--phases measures a component; {label} is native");
        };
        let fuel = WasmRuntime::with_limits(schedhost::policy::SandboxLimits {
            fuel: Some(10_000_000),
            ..runtime.limits()
        })?
        .load(&loaded.path)?;
        let component = (**loaded).clone().through_component();
        let only = self.phase.as_deref();
        let core = phases::measure(loaded, self.ios, self.rounds, only)?;
        let fueled = phases::measure(&fuel, self.ios, self.rounds, only)?;
        let api = phases::measure(&component, self.ios, self.rounds, only)?;
        if core.is_empty() {
            bail!("no phase's name contains '{}'", only.unwrap_or_default());
        }
        println!(
            "schedhost bench --phases: {label}, {} calls per phase and round, {} rounds (median)",
            self.ios, self.rounds
        );
        println!(
            "  {:<60} {:>11} {:>11} {:>11}",
            "phase (ns/call)", "core module", "with fuel", "component"
        );
        for ((c, f), a) in core.iter().zip(&fueled).zip(&api) {
            println!(
                "  {:<60} {:>11.1} {:>11.1} {:>11.1}",
                c.name, c.ns, f.ns, a.ns
            );
        }
        Ok(())
    }
}

/// One measured run: ns per request and policy calls.
type Measure<'a> = dyn Fn(&Loaded, &RunPlan) -> Result<(f64, u64)> + 'a;

impl BenchArgs {
    /// Alternating rounds of the component with nothing, counters, and events on.
    fn observe(
        &self,
        label: &str,
        wasm: &Loaded,
        plan: &RunPlan,
        measure: &Measure<'_>,
    ) -> Result<()> {
        let with = |observe: Observe| {
            let mut plan = *plan;
            plan.observe = observe;
            plan
        };
        let variants = [
            ("off", with(Observe::default())),
            (
                "counters (live stats, metrics)",
                with(Observe {
                    metering: true,
                    ..Observe::default()
                }),
            ),
            (
                "event trace (--trace-events)",
                with(Observe {
                    record_events: true,
                    ..Observe::default()
                }),
            ),
        ];
        for (_, plan) in &variants {
            measure(wasm, plan)?;
        }
        let mut samples = vec![Vec::new(); variants.len()];
        for _ in 0..self.rounds {
            for (i, (_, plan)) in variants.iter().enumerate() {
                samples[i].push(measure(wasm, plan)?.0);
            }
        }
        println!(
            "schedhost bench --observe: {} bios of 4k randread, iodepth {}, sim:null, {label}, {} rounds (median)",
            self.ios, self.iodepth, self.rounds
        );
        println!(
            "  {:<32} {:>12} {:>10}",
            "observability", "ns/request", "vs off"
        );
        let off = median(&mut samples[0].clone());
        for ((name, _), s) in variants.iter().zip(&mut samples) {
            let m = median(s);
            println!("  {name:<32} {m:>12.0} {:>10.3}", m / off);
        }
        Ok(())
    }
}

/// The swap benchmark: stall per swap with cached and with freshly compiled components.
fn swap_stalls(runtime: &WasmRuntime, run_plan: &RunPlan, swaps: u64) -> Result<()> {
    let names = ["deadline", "cfq", "time-slice", "noop"];
    let mut sources = Vec::new();
    for name in names {
        let path = match resolve(name)? {
            PolicySource::Wasm(path) => path,
            PolicySource::Native(_) => bail!("{name} is not a component"),
        };
        let bytes = std::fs::read(&path)?;
        sources.push((
            name,
            path.clone(),
            bytes.clone(),
            runtime.load_bytes(&path, &bytes)?,
        ));
    }
    let jobs = parse_job_file(
        "bench-swap",
        "[r]\nrw=randread\nbs=4k\nsize=64m\niodepth=16\nnumjobs=4\nruntime=10s\ntime_based\n",
    )?;
    let device = Device::Sim(DeviceSpec::parse("sim:hdd")?);
    let uncached = swaps.min(20);
    for (label, count, cached) in [("cached", swaps, true), ("uncached", uncached, false)] {
        let plan = (0..count)
            .map(|i| {
                let (name, path, bytes, loaded) = sources[(i % 4) as usize].clone();
                let engine = runtime.clone();
                let make: schedhost::engine::PolicyMaker = if cached {
                    Box::new(move || {
                        let p = loaded.instantiate().map_err(|e| format!("{e:#}"))?;
                        Ok(Box::new(p) as Box<dyn PolicyBackend>)
                    })
                } else {
                    Box::new(move || {
                        let loaded = engine
                            .load_bytes(&path, &bytes)
                            .map_err(|e| e.to_string())?;
                        let p = loaded.instantiate().map_err(|e| format!("{e:#}"))?;
                        Ok(Box::new(p) as Box<dyn PolicyBackend>)
                    })
                };
                schedhost::engine::ScheduledSwap {
                    at_ns: 1_000_000 + i * (9_000_000_000 / count.max(1)),
                    label: name.into(),
                    policy: make,
                    settings: Vec::new(),
                }
            })
            .collect();
        let first = Loaded::Wasm(Box::new(sources[3].3.clone()));
        let policy = PolicyPlan {
            swaps: plan,
            ..PolicyPlan::fixed(&first, &[])
        };
        let outcome = run(&jobs, &device, policy, run_plan, &mut |_| {})?.outcome;
        let refused = outcome.swaps.iter().filter(|s| s.result.is_err()).count();
        let mut stalls: Vec<f64> = outcome
            .swaps
            .iter()
            .map(|s| s.stall_ns as f64 / 1e3)
            .collect();
        stalls.sort_by(f64::total_cmp);
        let pick = |q: f64| stalls[((stalls.len() - 1) as f64 * q) as usize];
        let lost: u64 = outcome
            .submitters
            .iter()
            .map(|s| s.issued - s.completed)
            .sum();
        println!(
            "{label:>8}: {} swaps ({refused} refused), dispatch stall µs: median {:.1}, p99 {:.1}, max {:.1}; bios lost {lost}",
            stalls.len(),
            pick(0.5),
            pick(0.99),
            pick(1.0)
        );
    }
    Ok(())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
