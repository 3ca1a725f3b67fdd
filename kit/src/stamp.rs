//! What a shared wasm target directory last built under each package name. cargo keys a
//! path package's artifacts by its name and version and its path *relative to its own
//! workspace root*, which is empty for every standalone policy crate: two crates with one
//! package name (a copied folder, the usual start of a variant) share fingerprints and the
//! final module in a shared target directory, and the second build can hand back the
//! first's component. So each build records the crate it came from (its canonical path and
//! a hash of its sources), and a build from another crate, or of other sources, first
//! removes that package's fingerprints and module there, so cargo builds it afresh.

use std::fs;
use std::hash::Hasher;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Sources hashed at most: past it the crate is not worth keying, and is always rebuilt.
const MAX_SOURCE_BYTES: u64 = 64 << 20;

/// The crate in `dir` as a key: its canonical path and a hash of every file in it (names and
/// bytes, in name order) but its `target/` and hidden entries. `None`: too big to hash.
///
/// # Errors
/// The directory cannot be read.
pub fn source_key(dir: &Path) -> Result<Option<String>> {
    let root = dir
        .canonicalize()
        .with_context(|| format!("finding {}", dir.display()))?;
    let mut files = Vec::new();
    collect(&root, &root, &mut files)?;
    files.sort();
    // `DefaultHasher::new` has fixed keys: the same bytes give the same key in every run
    // of one build of the kit (a new Rust may change it, which costs one rebuild).
    let mut hash = std::collections::hash_map::DefaultHasher::new();
    let mut total = 0u64;
    for file in &files {
        let bytes =
            fs::read(root.join(file)).with_context(|| format!("reading {}", file.display()))?;
        total += bytes.len() as u64;
        if total > MAX_SOURCE_BYTES {
            return Ok(None);
        }
        hash.write(file.as_os_str().as_encoded_bytes());
        hash.write_u8(0);
        hash.write_usize(bytes.len());
        hash.write(&bytes);
    }
    Ok(Some(format!(
        "{}\n{:016x}\n",
        root.display(),
        hash.finish()
    )))
}

/// The files under `dir`, relative to `root`, but `root/target` and hidden entries; links
/// are not followed.
fn collect(root: &Path, dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        if name.as_encoded_bytes().starts_with(b".") || (dir == root && name == "target") {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect(root, &path, files)?;
        } else if kind.is_file() {
            files.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        }
    }
    Ok(())
}

/// Before building package `package` (its library `lib`) from the crate keyed `key` into
/// `profile_dir` (cargo's `TARGET/release`): unless the last build of that package there
/// came from the same key, its fingerprints and its module are removed, so cargo cannot
/// take another crate's build for this one's.
///
/// # Errors
/// A stale artifact cannot be removed.
pub fn forget_other_builds(
    profile_dir: &Path,
    package: &str,
    lib: &str,
    key: Option<&str>,
) -> Result<()> {
    let stamp = stamp_path(profile_dir, package);
    let same = key.is_some_and(|key| fs::read_to_string(&stamp).is_ok_and(|last| last == key));
    if same {
        return Ok(());
    }
    let _ = fs::remove_file(&stamp);
    let fingerprints = profile_dir.join(".fingerprint");
    if let Ok(entries) = fs::read_dir(&fingerprints) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            // `PACKAGE-HASH`: a hash of hex digits after the package's own name.
            let ours = name
                .strip_prefix(package)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|hash| {
                    !hash.is_empty() && hash.chars().all(|c| c.is_ascii_hexdigit())
                });
            if ours {
                fs::remove_dir_all(entry.path())
                    .with_context(|| format!("removing {}", entry.path().display()))?;
            }
        }
    }
    let module = profile_dir.join(format!("{lib}.wasm"));
    match fs::remove_file(&module) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", module.display()))
        }
        _ => Ok(()),
    }
}

/// After a build of `package` from the crate keyed `key`: the next build knows where it
/// came from.
///
/// # Errors
/// The stamp cannot be written.
pub fn remember_build(profile_dir: &Path, package: &str, key: Option<&str>) -> Result<()> {
    let stamp = stamp_path(profile_dir, package);
    match key {
        Some(key) => fs::write(&stamp, key).with_context(|| format!("writing {}", stamp.display())),
        None => Ok(()),
    }
}

fn stamp_path(profile_dir: &Path, package: &str) -> PathBuf {
    profile_dir.join(format!("schedhost-built-{package}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crate_is_keyed_by_its_path_and_sources_and_a_build_from_another_forgets_the_last() {
        let base = std::env::temp_dir().join(format!("kit-stamp-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let (a, b) = (base.join("a"), base.join("b"));
        for dir in [&a, &b] {
            fs::create_dir_all(dir.join("src")).unwrap();
            fs::create_dir_all(dir.join("target")).unwrap();
            fs::write(dir.join("Cargo.toml"), "[package]\nname = \"p\"\n").unwrap();
            fs::write(dir.join("src/lib.rs"), "fn a() {}").unwrap();
        }
        let key_a = source_key(&a).unwrap().unwrap();
        assert_ne!(
            Some(&key_a),
            source_key(&b).unwrap().as_ref(),
            "same sources, another path"
        );
        fs::write(a.join("target/x.wasm"), "built").unwrap();
        assert_eq!(
            Some(&key_a),
            source_key(&a).unwrap().as_ref(),
            "target/ is not a source"
        );
        fs::write(a.join("src/lib.rs"), "fn b() {}").unwrap();
        assert_ne!(
            Some(&key_a),
            source_key(&a).unwrap().as_ref(),
            "other sources"
        );

        let profile = base.join("release");
        let fingerprint = profile.join(".fingerprint/p-0123456789abcdef");
        let other = profile.join(".fingerprint/p-sdk-0123456789abcdef");
        fs::create_dir_all(&fingerprint).unwrap();
        fs::create_dir_all(&other).unwrap();
        fs::write(profile.join("p.wasm"), "a's").unwrap();
        remember_build(&profile, "p", Some(&key_a)).unwrap();
        forget_other_builds(&profile, "p", "p", Some(&key_a)).unwrap();
        assert!(
            fingerprint.exists(),
            "the same crate keeps cargo's own freshness"
        );
        let key_b = source_key(&b).unwrap();
        forget_other_builds(&profile, "p", "p", key_b.as_deref()).unwrap();
        assert!(
            !fingerprint.exists(),
            "another crate's fingerprints are gone"
        );
        assert!(!profile.join("p.wasm").exists(), "and its module");
        assert!(other.exists(), "another package's are kept");
        fs::remove_dir_all(&base).unwrap();
    }
}
