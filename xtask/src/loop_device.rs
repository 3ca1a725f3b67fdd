//! A loop device over a benchmark file, for the benches that put schedhost beside the
//! kernel's schedulers.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};

/// A loop device over a file, detached (and its scheduler put back) when dropped.
pub struct LoopDevice {
    pub path: String,
    scheduler: PathBuf,
    original: String,
}

impl LoopDevice {
    pub fn attach(file: &Path) -> Result<Self> {
        let out = Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on"])
            .arg(file)
            .output()
            .context("running losetup (util-linux)")?;
        ensure!(
            out.status.success(),
            "losetup failed (root is needed): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let name = path.trim_start_matches("/dev/");
        let scheduler = PathBuf::from(format!("/sys/block/{name}/queue/scheduler"));
        let current = std::fs::read_to_string(&scheduler).unwrap_or_default();
        let original = current
            .split_whitespace()
            .find(|s| s.starts_with('['))
            .map(|s| s.trim_matches(['[', ']']).to_owned())
            .unwrap_or_else(|| "none".into());
        Ok(Self {
            path,
            scheduler,
            original,
        })
    }

    /// Whether the kernel offers scheduler `name` for this device.
    pub fn offers(&self, name: &str) -> bool {
        std::fs::read_to_string(&self.scheduler)
            .unwrap_or_default()
            .split_whitespace()
            .any(|s| s.trim_matches(['[', ']']) == name)
    }

    /// The (kernel scheduler, schedhost policy) pairs whose kernel side this device offers.
    /// Kernels offer different schedulers (bfq is a module some do not build): a pair whose
    /// kernel side is missing is left out, and said so.
    pub fn offered<'a>(&self, pairs: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        pairs
            .iter()
            .copied()
            .filter(|(kernel, _)| {
                let offered = self.offers(kernel);
                if !offered {
                    println!(
                        "{kernel}: not offered by this kernel ({}), left out",
                        self.path
                    );
                }
                offered
            })
            .collect()
    }

    pub fn set_scheduler(&self, name: &str) -> Result<()> {
        std::fs::write(&self.scheduler, name)
            .with_context(|| format!("setting {} to {name}", self.scheduler.display()))
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.scheduler, &self.original);
        let _ = Command::new("losetup")
            .args(["--detach", &self.path])
            .status();
    }
}
