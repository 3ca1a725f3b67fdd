//! `schedhost bench`: the host's cost per request on `sim:null` (a device that costs
//! nothing), with the noop policy as a WebAssembly component and natively through the SDK,
//! in alternating rounds of one run so both see the same machine.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use schedhost::device::DeviceSpec;
use schedhost::policy::{Loaded, WasmRuntime, load};
use schedhost::sim::{self, SimOptions};
use schedhost::workload::parse_cmdline;

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
}

impl BenchArgs {
    pub fn execute(self) -> Result<()> {
        if self.rounds == 0 || self.ios == 0 {
            bail!("--rounds and --ios must be at least 1");
        }
        let runtime = WasmRuntime::new().context("setting up the WebAssembly engine")?;
        let (source, wasm) = load(&runtime, &self.policy)?;
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
        let device = DeviceSpec::parse("sim:null")?;
        let measure = |loaded: &Loaded| -> Result<(f64, u64)> {
            let policy = loaded.instantiate()?;
            let start = Instant::now();
            let outcome = sim::run(
                &jobs,
                &device,
                policy,
                &[],
                SimOptions::default(),
                &mut |_| {},
            )?;
            let elapsed = start.elapsed().as_nanos() as f64;
            let bios = outcome.core.bios;
            Ok((elapsed / bios as f64, outcome.core.policy_calls))
        };
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

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
