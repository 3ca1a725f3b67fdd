//! `schedhost policy inspect`: what a policy component is and what it can be tuned with.

use anyhow::{Result, anyhow};
use schedhost::output::printable_lines;
use schedhost::policy::{Loaded, load};

use super::flags::LimitArgs;

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// A component (PATH.wasm), a bundled name, or native:NAME.
    pub policy: String,
    /// What the instance inspected may use, as `run`'s.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// `writeln!` into a String, which cannot fail.
macro_rules! line {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

impl InspectArgs {
    pub fn execute(self) -> Result<()> {
        let runtime = self.limits.runtime(None)?;
        let (source, loaded) = load(&runtime, &self.policy)?;
        let mut policy = loaded.instantiate()?;
        let info = policy.info().map_err(|f| anyhow!("{f}"))?;
        let tunables = policy.tunables().map_err(|f| anyhow!("{f}"))?;
        // The policy names and describes itself: its text is escaped before the terminal.
        let mut out = String::new();
        line!(out, "policy:     {} {}", info.name, info.version);
        line!(out, "source:     {}", source.label());
        line!(
            out,
            "interface:  schedhost:policy/scheduler@{}",
            schedhost_sdk::INTERFACE_VERSION
        );
        let calls = match &loaded {
            Loaded::Wasm(component) => format!("through its {}", component.crossing()),
            Loaded::Native(_) => "natively (linked into the host)".to_owned(),
        };
        line!(out, "called:     {calls}");
        line!(
            out,
            "merge veto: {}",
            if info.merge_veto {
                "yes (asked before merges into queued requests)"
            } else {
                "no"
            }
        );
        line!(
            out,
            "completions: {}",
            if info.completions {
                "yes"
            } else {
                "no (never told of finished requests)"
            }
        );
        line!(
            out,
            "group tags: {}",
            if info.weighted_tags {
                "by weight (scheduler tags shared between groups in proportion to their weights)"
            } else {
                "equal parts"
            }
        );
        if tunables.is_empty() {
            line!(out, "tunables:   none");
            print!("{}", printable_lines(&out));
            return Ok(());
        }
        line!(out, "tunables:");
        let width = tunables.iter().map(|t| t.name.len()).max().unwrap_or(0);
        for t in &tunables {
            let unit = if t.unit.is_empty() {
                String::new()
            } else {
                format!(" {}", t.unit)
            };
            line!(
                out,
                "  {:width$}  default {}{unit}, range {}..={}  {}",
                t.name,
                t.default,
                t.min,
                t.max,
                t.help
            );
        }
        print!("{}", printable_lines(&out));
        Ok(())
    }
}
