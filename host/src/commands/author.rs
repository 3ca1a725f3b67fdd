//! `schedhost policy new` and `schedhost policy build`: the author's side of a policy, over
//! the kit that `cargo xtask` uses too.

use std::path::PathBuf;

use anyhow::{Context, Result};
use schedhost_kit::c::{CToolchain, build_c_policy, is_c_policy};
use schedhost_kit::{WasmToolchain, build_policy, new_policy};

#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The new crate's directory (must not exist, or be empty).
    pub dir: PathBuf,
    /// The policy's name (default: the directory's name).
    #[arg(long)]
    pub name: Option<String>,
}

impl NewArgs {
    pub fn execute(self) -> Result<()> {
        let made = new_policy(&self.dir, self.name.as_deref())?;
        let dir = self.dir.display();
        println!(
            "created policy '{}' in {dir} ({} files; the SDK and WIT are vendored in {dir}/vendor)",
            made.name,
            made.files.len()
        );
        println!("next:");
        println!("  (cd {dir} && cargo test)");
        println!("  schedhost policy build {dir}");
        println!("  schedhost policy check {dir}/target/{}.wasm", made.name);
        Ok(())
    }
}

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The policy's directory: a Rust crate (Cargo.toml), or C sources (*.c), whose
    /// component is named after the directory without `-policy`.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Where the component goes (default: DIR/target).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// cargo's target directory for the wasm build (default: one shared by every policy,
    /// `$XDG_CACHE_HOME/schedhost/wasm-target` or `~/.cache/schedhost/wasm-target`, so the
    /// standard library is built for wasm once, not once per policy).
    #[arg(long, value_name = "DIR")]
    pub target_dir: Option<PathBuf>,
}

/// The wasm target directory every policy shares: the user's cache directory, if there is
/// one.
fn shared_target_dir() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|home| home.join(".cache"))
        })?;
    Some(cache.join("schedhost").join("wasm-target"))
}

impl BuildArgs {
    pub fn execute(self) -> Result<()> {
        let out_dir = self
            .out_dir
            .clone()
            .unwrap_or_else(|| self.dir.join("target"));
        let built = if is_c_policy(&self.dir) {
            let toolchain = CToolchain::find()?;
            eprintln!("schedhost: building C with {}", toolchain.describe());
            build_c_policy(&toolchain, &self.dir, &out_dir)
        } else {
            let toolchain = WasmToolchain::find()?;
            eprintln!("schedhost: building with {}", toolchain.describe());
            let target_dir = self.target_dir.clone().or_else(shared_target_dir);
            build_policy(&toolchain, &self.dir, target_dir.as_deref(), &out_dir)
        }
        .with_context(|| format!("building the policy in {}", self.dir.display()))?;
        println!("{}", built.component.display());
        Ok(())
    }
}
