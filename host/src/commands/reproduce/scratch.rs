//! The scratch file the real rows run on: made by this command, removed by it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use schedhost::signal::{RemovedOnSignal, create_removed_on_signal};

/// The scratch file the real-file runs use: created by this command under a name of its
/// own (never a file that was there before), and removed when the command ends.
pub(super) struct Scratch {
    path: PathBuf,
    made: std::sync::atomic::AtomicBool,
    /// The file there now, removed if a signal ends the command first.
    on_signal: std::sync::Mutex<Option<RemovedOnSignal>>,
}

impl Scratch {
    pub(super) fn new(dir: Option<&Path>) -> Result<Self> {
        let dir = dir.map_or_else(default_scratch_dir, Path::to_path_buf);
        if !dir.is_dir() {
            bail!("--scratch {}: not a directory", dir.display());
        }
        let name = format!("schedhost-reproduce-{}.dat", std::process::id());
        Ok(Self {
            path: dir.join(name),
            made: std::sync::atomic::AtomicBool::new(false),
            on_signal: std::sync::Mutex::new(None),
        })
    }

    /// A new, empty file of this command's at the path (a run given it needs
    /// `allow_overwrite`, as it is there), removed at the command's end or by a signal. A
    /// file there that this command did not make is left alone.
    pub(super) fn clear(&self) -> Result<&Path> {
        self.create(0)?;
        Ok(&self.path)
    }

    /// The file, `bytes` long and written whole (so reads reach the device, not holes),
    /// made on first use.
    pub(super) fn file(&self, bytes: u64) -> Result<PathBuf> {
        let len = std::fs::metadata(&self.path).map(|m| m.len()).ok();
        if self.made.load(std::sync::atomic::Ordering::Relaxed) && len == Some(bytes) {
            return Ok(self.path.clone());
        }
        self.create(bytes)?;
        Ok(self.path.clone())
    }

    /// Replaces what this command made at the path with a new file of `bytes` (sparse).
    fn create(&self, bytes: u64) -> Result<()> {
        let mut on_signal = self
            .on_signal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self.path.exists() {
            if !self.made.load(std::sync::atomic::Ordering::Relaxed) {
                bail!(
                    "{} exists and was not made by this command; it is left alone",
                    self.path.display()
                );
            }
            std::fs::remove_file(&self.path)
                .with_context(|| format!("removing {}", self.path.display()))?;
        }
        *on_signal = None;
        let (file, guard) = create_removed_on_signal(&self.path, |path| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
        })
        .with_context(|| format!("creating {}", self.path.display()))?;
        self.made.store(true, std::sync::atomic::Ordering::Relaxed);
        *on_signal = Some(guard);
        file.set_len(bytes)
            .with_context(|| format!("sizing {}", self.path.display()))?;
        schedhost::backend::ring::lay_out(&file, bytes, 0x9e37_79b9_7f4a_7c15)
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

/// The temporary directory if its file system takes O_DIRECT (the seeds' jobs read and
/// write direct), else the working directory: a tmpfs `/tmp` refuses O_DIRECT.
fn default_scratch_dir() -> PathBuf {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = std::env::temp_dir();
    let probe = tmp.join(format!("schedhost-direct-probe-{}", std::process::id()));
    let direct = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    let _ = std::fs::remove_file(&probe);
    if direct { tmp } else { PathBuf::from(".") }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.made.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_file_this_command_did_not_make_is_left_alone() {
        let dir = std::env::temp_dir().join(format!("schedhost-scratch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let scratch = Scratch::new(Some(&dir)).unwrap();
        std::fs::write(&scratch.path, b"someone's").unwrap();
        assert!(
            scratch.file(4096).is_err(),
            "a file already there is not ours"
        );
        assert_eq!(std::fs::read(&scratch.path).unwrap(), b"someone's");
        std::fs::remove_file(&scratch.path).unwrap();
        let made = scratch.file(4096).unwrap();
        assert_eq!(std::fs::metadata(&made).unwrap().len(), 4096);
        {
            use std::os::unix::fs::MetadataExt;
            let blocks = std::fs::metadata(&made).unwrap().blocks();
            assert!(
                blocks * 512 >= 4096,
                "written whole, not sparse: {blocks} blocks"
            );
        }
        drop(scratch);
        assert!(!made.exists(), "what it made is removed");
        std::fs::remove_dir(&dir).unwrap();
    }
}
