//! From a `--policy` argument to a running instance: a path to a `.wasm` file, the name of a
//! bundled component (`target/policies/NAME.wasm` next to the binary), or `native:NAME`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::wasm::{LoadedPolicy, WasmRuntime};
use super::{PolicyBackend, native_names, native_policy};

/// Where a policy comes from.
#[derive(Debug, Clone)]
pub enum PolicySource {
    /// A component file.
    Wasm(PathBuf),
    /// A policy crate linked into the host.
    Native(String),
}

impl PolicySource {
    /// How reports name it.
    pub fn label(&self) -> String {
        match self {
            PolicySource::Wasm(path) => path.display().to_string(),
            PolicySource::Native(name) => format!("native:{name}"),
        }
    }
}

/// Directories searched for bundled components, in order: `$SCHEDHOST_POLICY_DIR`; for a
/// binary inside a cargo `target/` directory, `target/policies` (where `cargo xtask build`
/// puts them); then `share/schedhost/policies` beside an installed binary's `bin/`.
pub fn bundled_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = std::env::var_os("SCHEDHOST_POLICY_DIR") {
        dirs.push(PathBuf::from(dir));
    }
    if let Ok(exe) = std::env::current_exe() {
        let bin_dir = exe.parent();
        // target/release/schedhost → target; target/debug/deps/test-binary → target.
        let target = [
            bin_dir.and_then(Path::parent),
            bin_dir.and_then(Path::parent).and_then(Path::parent),
        ]
        .into_iter()
        .flatten()
        .find(|dir| dir.file_name().is_some_and(|name| name == "target"));
        match (target, bin_dir.and_then(Path::parent)) {
            (Some(target), _) => dirs.push(target.join("policies")),
            // An installed binary (…/bin/schedhost) finds …/share/schedhost/policies.
            (None, Some(prefix)) => dirs.push(prefix.join("share/schedhost/policies")),
            (None, None) => {}
        }
    }
    dirs
}

/// Resolves a `--policy` argument.
///
/// # Errors
/// When the argument is neither an existing file nor a bundled or native name; the message
/// lists where it looked.
pub fn resolve(arg: &str) -> Result<PolicySource> {
    if let Some(name) = arg.strip_prefix("native:") {
        if native_names().contains(&name) {
            return Ok(PolicySource::Native(name.to_owned()));
        }
        bail!(
            "no native policy '{name}' (built in natively: {})",
            native_names().join(", ")
        );
    }
    let looks_like_path = arg.contains('/') || arg.ends_with(".wasm");
    if looks_like_path {
        let path = Path::new(arg);
        if !path.exists() {
            bail!("policy file {arg} does not exist");
        }
        return Ok(PolicySource::Wasm(path.to_owned()));
    }
    let dirs = bundled_dirs();
    if let Some(found) = dirs
        .iter()
        .map(|dir| dir.join(format!("{arg}.wasm")))
        .find(|p| p.is_file())
    {
        return Ok(PolicySource::Wasm(found));
    }
    let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    bail!(
        "no bundled policy '{arg}' (looked for {arg}.wasm in {}); build the bundled policies with `cargo xtask build`, \
         pass a path to a .wasm component, or use native:NAME ({})",
        looked.join(", "),
        native_names().join(", ")
    )
}

/// Loads (compiles) a resolved policy once; instances come from [`Loaded::instantiate`].
#[derive(Debug, Clone)]
pub enum Loaded {
    /// A compiled component.
    Wasm(Box<LoadedPolicy>),
    /// A native policy by name.
    Native(String),
}

impl Loaded {
    /// A fresh instance for one device.
    ///
    /// # Errors
    /// If the component cannot be instantiated.
    pub fn instantiate(&self) -> Result<Box<dyn PolicyBackend>> {
        match self {
            Loaded::Wasm(policy) => {
                Ok(Box::new(policy.instantiate().with_context(|| {
                    format!("instantiating {}", policy.path.display())
                })?))
            }
            Loaded::Native(name) => {
                native_policy(name).with_context(|| format!("no native policy '{name}'"))
            }
        }
    }
}

/// Resolves and compiles a policy.
///
/// # Errors
/// Names the argument and what is wrong with it.
pub fn load(runtime: &WasmRuntime, arg: &str) -> Result<(PolicySource, Loaded)> {
    let source = resolve(arg)?;
    let loaded = match &source {
        PolicySource::Wasm(path) => Loaded::Wasm(Box::new(runtime.load(path)?)),
        PolicySource::Native(name) => Loaded::Native(name.clone()),
    };
    Ok((source, loaded))
}
