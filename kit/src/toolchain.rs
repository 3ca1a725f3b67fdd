//! Which Rust on this machine can build a policy for `wasm32-unknown-unknown`.
//!
//! Two kinds work: a rustup toolchain with the wasm32 target installed, or Debian's
//! `rustc-web` (Rust 1.96, whose std is built from `rust-web-src`, linked by `lld-22`), which
//! is the only route on machines where rustup cannot download targets.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Result, bail};

/// The target every policy is built for.
pub const TARGET: &str = "wasm32-unknown-unknown";

/// What to install when no toolchain is found: Debian's packages.
pub const DEBIAN_PACKAGES: &[&str] = &["rustc-web", "cargo-web", "rust-web-src", "lld-22"];

const DEBIAN_CARGO: &str = "/usr/bin/cargo";
const DEBIAN_RUSTC: &str = "/usr/bin/rustc";
const DEBIAN_STD_SOURCES: &str = "/usr/lib/rustlib/src/rust/library";
const DEBIAN_WASM_LD: &str = "/usr/lib/llvm-22/bin/wasm-ld";

/// A cargo that can build for wasm32, and how it must be called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WasmToolchain {
    /// Debian's Rust: std is compiled from source (`-Zbuild-std`), and Debian's binaries
    /// and linker must come before rustup's on PATH.
    Debian,
    /// The cargo on PATH, whose rustup toolchain has the wasm32 target.
    Rustup,
}

impl WasmToolchain {
    /// The first toolchain here that can build a policy.
    ///
    /// # Errors
    /// None can; the message says exactly what to install.
    pub fn find() -> Result<Self> {
        if debian_complete() {
            return Ok(Self::Debian);
        }
        if rustup_has_wasm32() {
            return Ok(Self::Rustup);
        }
        bail!(
            "no Rust on this machine can build for {TARGET}.\n\
             Install one of:\n  \
             sudo apt-get install {}   (Debian's Rust 1.96 with std sources and its wasm linker)\n  \
             rustup target add {TARGET}                          (where rustup can download targets)",
            DEBIAN_PACKAGES.join(" ")
        )
    }

    /// `cargo build --release` for wasm32 with this toolchain, not yet given a manifest.
    pub fn cargo_build(&self) -> Command {
        let mut cmd = match self {
            Self::Debian => {
                let mut cmd = Command::new(DEBIAN_CARGO);
                let path = std::env::var("PATH").unwrap_or_default();
                // Debian's rustc and its linker must be found before rustup's.
                cmd.env("PATH", format!("/usr/bin:{path}"))
                    .env("RUSTC", DEBIAN_RUSTC)
                    .env("RUSTC_BOOTSTRAP", "1")
                    .env_remove("RUSTUP_TOOLCHAIN");
                cmd
            }
            Self::Rustup => Command::new("cargo"),
        };
        cmd.args(["build", "--release", "--target", TARGET])
            .env_remove("CARGO_TARGET_DIR")
            .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
            .env("CARGO_PROFILE_RELEASE_LTO", "true")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
            .env("CARGO_PROFILE_RELEASE_PANIC", "abort");
        if *self == Self::Debian {
            cmd.arg("-Zbuild-std=std,panic_abort");
        }
        cmd
    }

    /// For messages: which toolchain this is.
    pub fn describe(&self) -> &'static str {
        match self {
            Self::Debian => "Debian's rustc-web (std built from rust-web-src, linked by lld-22)",
            Self::Rustup => "rustup's cargo with the wasm32-unknown-unknown target",
        }
    }
}

fn debian_complete() -> bool {
    [
        DEBIAN_CARGO,
        DEBIAN_RUSTC,
        DEBIAN_STD_SOURCES,
        DEBIAN_WASM_LD,
    ]
    .iter()
    .all(|p| Path::new(p).exists())
}

fn rustup_has_wasm32() -> bool {
    let Ok(out) = Command::new("rustc").args(["--print", "sysroot"]).output() else {
        return false;
    };
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    sysroot
        .join("lib/rustlib")
        .join(TARGET)
        .join("lib")
        .is_dir()
}
