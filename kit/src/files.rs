//! Writing a build's outputs into a policy directory someone else may have shipped: a
//! symbolic link left in `target/` (to `~/.bashrc`, say) must never be written through. So
//! each directory on the way is checked to be a real directory, and each file is written
//! to a new temporary file in its directory, then renamed over its name: a rename replaces a
//! link itself, never what it points to.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path};

use anyhow::{Context, Result, bail};

/// Makes `dir` (and the directories between `root` and it) if missing, refusing any that
/// is a symbolic link. A `dir` outside `root` is only created.
///
/// # Errors
/// A link on the way, or a directory that cannot be made.
pub(crate) fn real_dir(root: &Path, dir: &Path) -> Result<()> {
    let Ok(inside) = dir.strip_prefix(root) else {
        return fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()));
    };
    let mut at = root.to_path_buf();
    for part in inside.components() {
        let Component::Normal(name) = part else {
            bail!(
                "{}: only plain directory names are written into",
                dir.display()
            );
        };
        at.push(name);
        match at.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => bail!(
                "{} is a symbolic link; policy build writes only into real directories (remove it)",
                at.display()
            ),
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => bail!("{} is not a directory", at.display()),
            Err(_) => fs::create_dir(&at).with_context(|| format!("creating {}", at.display()))?,
        }
    }
    Ok(())
}

/// Writes `bytes` as `path`, replacing whatever entry has that name (a link included)
/// without following it.
///
/// # Errors
/// The temporary file cannot be made or written, or the rename fails.
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}.tmp", std::process::id()));
    let temp = path.with_file_name(temp_name);
    let _ = fs::remove_file(&temp);
    let written = fs::File::options()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| fs::rename(&temp, path));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written.with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("schedhost-kit-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_shipped_link_is_replaced_and_its_target_left_alone() {
        let dir = scratch("replace");
        let victim = dir.join("victim");
        fs::write(&victim, "keep me").unwrap();
        let out = dir.join("policy.wasm");
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        replace(&out, b"component").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"keep me");
        assert_eq!(fs::read(&out).unwrap(), b"component");
        assert!(!out.symlink_metadata().unwrap().file_type().is_symlink());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_linked_directory_on_the_way_is_refused() {
        let dir = scratch("dirs");
        let elsewhere = dir.join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        let policy = dir.join("policy");
        fs::create_dir(&policy).unwrap();
        std::os::unix::fs::symlink(&elsewhere, policy.join("target")).unwrap();
        let err = real_dir(&policy, &policy.join("target/bindings")).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(!elsewhere.join("bindings").exists());
        real_dir(&policy, &policy.join("out/bindings")).unwrap();
        assert!(policy.join("out/bindings").is_dir());
        fs::remove_dir_all(&dir).unwrap();
    }
}
