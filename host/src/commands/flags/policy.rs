//! The policy's flags: its tunables, swaps at set times and the control socket.

use anyhow::{Result, bail};
use schedhost::engine::ScheduledSwap;
use schedhost::policy::{Loaded, WasmRuntime, load};

/// The policy's own flags, one group for every command that runs a policy over I/O: its
/// tunables (`--set`), swaps at set times of virtual time (`--swap-at`) and the control
/// socket (`--control`). A command that cannot honour one refuses it by name
/// ([`PolicyFlags::refuse`]).
#[derive(Debug, Clone, clap::Args)]
pub struct PolicyFlags {
    /// Set a policy tunable (repeatable): --set fifo_batch=8. Unknown names and values out
    /// of range are refused with the valid range.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = crate::commands::parse_setting)]
    pub settings: Vec<(String, i64)>,
    /// Simulated devices: swap to POLICY at TIME of virtual time (repeatable), e.g.
    /// `--swap-at 2s:cfq`, with tunables after a colon as `--policy` takes them
    /// (`--swap-at 2s:cfq:quantum=4`); otherwise the new policy starts with its defaults.
    #[arg(long, value_name = "TIME:POLICY", value_parser = parse_swap_at)]
    pub swap_at: Vec<(u64, String)>,
    /// Real devices: listen on this unix socket (mode 0600) for `schedhost ctl` requests:
    /// swap a policy, set or get tunables, status and stats, while the I/O runs.
    #[arg(long, value_name = "SOCKET")]
    pub control: Option<std::path::PathBuf>,
}

impl PolicyFlags {
    /// Refuses `--swap-at` and `--control` where `command` says why it cannot honour them.
    ///
    /// # Errors
    /// The flag given, with the command and the reason.
    pub fn refuse(
        &self,
        command: &str,
        swap_at: Option<&str>,
        control: Option<&str>,
    ) -> Result<()> {
        if let (Some(why), false) = (swap_at, self.swap_at.is_empty()) {
            bail!("{command}: --swap-at does not apply: {why}");
        }
        if let (Some(why), Some(_)) = (control, &self.control) {
            bail!("{command}: --control does not apply: {why}");
        }
        Ok(())
    }

    /// `--policy POLICY:k=v,...` with these flags: the policy to load, and its tunables in
    /// the order given, `--set`'s last (so that one wins over the same name in `--policy`).
    ///
    /// # Errors
    /// A tunable in `--policy` that is not `NAME=INTEGER`.
    pub fn policy_and_settings<'a>(&self, spec: &'a str) -> Result<(&'a str, Vec<(String, i64)>)> {
        let mut settings = policy_tunables(spec)?;
        settings.extend(self.settings.iter().cloned());
        Ok((policy_and_tunables(spec).0, settings))
    }

    /// The `--swap-at` policies, compiled once before the run; each cell or run makes its
    /// swaps from them ([`swaps`]).
    ///
    /// # Errors
    /// A policy that does not load, or a tunable after it that is not `NAME=INTEGER`.
    pub fn swap_policies(&self, runtime: &WasmRuntime) -> Result<Vec<SwapPolicy>> {
        self.swap_at
            .iter()
            .map(|(at_ns, spec)| {
                Ok(SwapPolicy {
                    at_ns: *at_ns,
                    label: spec.clone(),
                    loaded: load(runtime, policy_and_tunables(spec).0)?.1,
                    settings: policy_tunables(spec)?,
                })
            })
            .collect()
    }
}

/// A `--swap-at` policy, compiled: when, what was asked for, and its tunables.
#[derive(Clone)]
pub struct SwapPolicy {
    at_ns: u64,
    label: String,
    loaded: Loaded,
    settings: Vec<(String, i64)>,
}

/// One run's swaps from [`PolicyFlags::swap_policies`], each instantiated when it is due
/// and given the tunables its `--swap-at` named.
pub fn swaps(policies: &[SwapPolicy]) -> Vec<ScheduledSwap> {
    policies
        .iter()
        .map(|p| {
            let loaded = p.loaded.clone();
            ScheduledSwap {
                at_ns: p.at_ns,
                label: p.label.clone(),
                policy: Box::new(move || loaded.instantiate().map_err(|e| format!("{e:#}"))),
                settings: p.settings.clone(),
            }
        })
        .collect()
}

/// `TIME:POLICY`: when (fio's time notation; seconds by default) and to what.
fn parse_swap_at(text: &str) -> Result<(u64, String), String> {
    let (time, policy) = text
        .split_once(':')
        .filter(|(_, p)| !p.is_empty())
        .ok_or_else(|| format!("{text}: expected TIME:POLICY, e.g. 2s:cfq"))?;
    let at = schedhost::frontend::jobs::value::duration_ns(time, "s")?;
    Ok((at, policy.to_owned()))
}

/// `POLICY[:k=v,k=v]` as `--policy` takes it: the policy (a bundled name, `native:NAME` or
/// a component's path) and the text of its tunables. A component's path may hold colons
/// (and `.wasm` in a folder's name): its tunables follow its last `.wasm`.
pub fn policy_and_tunables(spec: &str) -> (&str, &str) {
    let (prefix, rest) = match spec.strip_prefix("native:") {
        Some(rest) => ("native:".len(), rest),
        None => (0, spec),
    };
    let end = if prefix == 0 && rest.contains(".wasm") {
        rest.rfind(".wasm")
            .map_or(rest.len(), |i| i + ".wasm".len())
    } else {
        rest.find(':').unwrap_or(rest.len())
    };
    let (name, tunables) = spec.split_at(prefix + end);
    (name, tunables.strip_prefix(':').unwrap_or(tunables))
}

/// The tunables of `--policy POLICY:k=v,k=v`, each as `--set` takes one.
///
/// # Errors
/// A pair that is not `NAME=INTEGER`, with the whole `--policy` text.
pub fn policy_tunables(spec: &str) -> Result<Vec<(String, i64)>> {
    policy_and_tunables(spec)
        .1
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            crate::commands::parse_setting(s).map_err(|e| anyhow::anyhow!("--policy {spec}: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_and_its_tunables_split_where_a_path_keeps_its_colons() {
        assert_eq!(policy_and_tunables("cfq"), ("cfq", ""));
        assert_eq!(policy_and_tunables("cfq:quantum=1"), ("cfq", "quantum=1"));
        assert_eq!(
            policy_and_tunables("native:cfq:slice_idle=0,quantum=2"),
            ("native:cfq", "slice_idle=0,quantum=2")
        );
        assert_eq!(
            policy_and_tunables("/a:b/my.wasm:x=1"),
            ("/a:b/my.wasm", "x=1")
        );
        assert_eq!(policy_and_tunables("/a:b/my.wasm"), ("/a:b/my.wasm", ""));
        assert_eq!(
            policy_and_tunables("/p.wasm.d/my.wasm:x=1"),
            ("/p.wasm.d/my.wasm", "x=1")
        );
        assert_eq!(
            policy_tunables("native:cfq:slice_idle=0,quantum=2").unwrap(),
            [("slice_idle".to_owned(), 0), ("quantum".to_owned(), 2)]
        );
        let bad = policy_tunables("cfq:quantum").unwrap_err().to_string();
        assert!(bad.contains("--policy cfq:quantum"), "{bad}");
    }
}
