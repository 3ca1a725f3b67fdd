//! The wasm toolchain: this machine's rustup Rust has only the host target, so policies are
//! built with Debian's Rust (1.96, with std sources for `-Zbuild-std`) and lld-22.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

const PACKAGES: &[&str] = schedhost_kit::toolchain::DEBIAN_PACKAGES;
/// clang for wasm32 and wasi-libc, for the policy in C (examples/sstf-policy).
const C_PACKAGES: &[&str] = schedhost_kit::c::DEBIAN_PACKAGES;
const CARGO: &str = "/usr/bin/cargo";

/// The real clients the tests drive: qemu-img and qemu-io, nbdcopy and nbdinfo, fio (its
/// nbd engine, and fio_jsonplus_clat2csv, which needs python3-six), and curl (the metrics
/// endpoint).
const CLIENT_PACKAGES: &[&str] = &["qemu-utils", "libnbd-bin", "fio", "python3-six", "curl"];

/// Installs the wasm toolchain's Debian packages unless all are present.
pub fn ensure() -> Result<()> {
    install_missing(PACKAGES, "the wasm toolchain")?;
    install_missing(C_PACKAGES, "the C toolchain for wasm32")?;
    if !Path::new(CARGO).exists() {
        bail!(
            "{CARGO} is missing although {} are installed",
            PACKAGES.join(" ")
        );
    }
    Ok(())
}

/// Installs the NBD clients the tests use unless all are present.
pub fn ensure_clients() -> Result<()> {
    install_missing(CLIENT_PACKAGES, "the NBD clients for the tests")
}

fn install_missing(packages: &[&str], what: &str) -> Result<()> {
    let missing: Vec<&str> = packages.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("xtask: installing {what}: {}", missing.join(" "));
    let sudo = if is_root() { None } else { Some("sudo") };
    apt(sudo, &["update", "-q"], packages)?;
    let mut install = vec!["install", "-y", "-q"];
    install.extend(&missing);
    apt(sudo, &install, packages)
}

fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("install ok installed"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.starts_with(b"0\n"))
}

fn apt(sudo: Option<&str>, args: &[&str], packages: &[&str]) -> Result<()> {
    let mut cmd = match sudo {
        Some(sudo) => {
            let mut cmd = Command::new(sudo);
            cmd.arg("apt-get");
            cmd
        }
        None => Command::new("apt-get"),
    };
    cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
    let status = cmd
        .status()
        .context("running apt-get (the packages come from Debian's archive)")?;
    if !status.success() {
        bail!(
            "apt-get {} failed ({status}); install {} by hand",
            args.join(" "),
            packages.join(" ")
        );
    }
    Ok(())
}
