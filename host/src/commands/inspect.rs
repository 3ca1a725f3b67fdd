//! `schedhost policy inspect`: what a policy component is and what it can be tuned with.

use anyhow::{Context, Result, anyhow};
use schedhost::policy::{Loaded, WasmRuntime, load};

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// A component (PATH.wasm), a bundled name, or native:NAME.
    pub policy: String,
}

impl InspectArgs {
    pub fn execute(self) -> Result<()> {
        let runtime = WasmRuntime::new().context("setting up the WebAssembly engine")?;
        let (source, loaded) = load(&runtime, &self.policy)?;
        let mut policy = loaded.instantiate()?;
        let info = policy.info().map_err(|f| anyhow!("{f}"))?;
        let tunables = policy.tunables().map_err(|f| anyhow!("{f}"))?;
        println!("policy:     {} {}", info.name, info.version);
        println!("source:     {}", source.label());
        println!(
            "interface:  schedhost:policy/scheduler@{}",
            schedhost_sdk::INTERFACE_VERSION
        );
        let calls = match &loaded {
            Loaded::Wasm(component) => format!("through its {}", component.crossing()),
            Loaded::Native(_) => "natively (linked into the host)".to_owned(),
        };
        println!("called:     {calls}");
        println!(
            "merge veto: {}",
            if info.merge_veto {
                "yes (asked before merges into queued requests)"
            } else {
                "no"
            }
        );
        println!(
            "completions: {}",
            if info.completions {
                "yes"
            } else {
                "no (never told of finished requests)"
            }
        );
        if tunables.is_empty() {
            println!("tunables:   none");
            return Ok(());
        }
        println!("tunables:");
        let width = tunables.iter().map(|t| t.name.len()).max().unwrap_or(0);
        for t in &tunables {
            let unit = if t.unit.is_empty() {
                String::new()
            } else {
                format!(" {}", t.unit)
            };
            println!(
                "  {:width$}  default {}{unit}, range {}..={}  {}",
                t.name, t.default, t.min, t.max, t.help
            );
        }
        Ok(())
    }
}
