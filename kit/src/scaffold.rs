//! `schedhost policy new DIR`: a policy crate that builds anywhere. The SDK's sources and the
//! WIT are copied into `DIR/vendor/` from the ones this binary was built with, so the crate
//! needs no schedhost checkout, and the interface it builds against is exactly the one the
//! host that made it loads. Only `wit-bindgen` comes from crates.io.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};

/// The SDK's sources, as `vendor/schedhost-sdk/src/NAME`.
const SDK_SOURCES: &[(&str, &str)] = &[
    ("lib.rs", include_str!("../../sdk/src/lib.rs")),
    (
        "block_cache.rs",
        include_str!("../../sdk/src/block_cache.rs"),
    ),
    (
        "collections/mod.rs",
        include_str!("../../sdk/src/collections/mod.rs"),
    ),
    (
        "collections/elevator.rs",
        include_str!("../../sdk/src/collections/elevator.rs"),
    ),
    (
        "collections/expiry_fifo.rs",
        include_str!("../../sdk/src/collections/expiry_fifo.rs"),
    ),
    (
        "collections/id_map.rs",
        include_str!("../../sdk/src/collections/id_map.rs"),
    ),
    (
        "collections/sector_set.rs",
        include_str!("../../sdk/src/collections/sector_set.rs"),
    ),
    (
        "collections/word_map.rs",
        include_str!("../../sdk/src/collections/word_map.rs"),
    ),
    ("guest.rs", include_str!("../../sdk/src/guest.rs")),
    (
        "device_share/mod.rs",
        include_str!("../../sdk/src/device_share/mod.rs"),
    ),
    (
        "device_share/knee.rs",
        include_str!("../../sdk/src/device_share/knee.rs"),
    ),
    (
        "device_share/pace.rs",
        include_str!("../../sdk/src/device_share/pace.rs"),
    ),
    (
        "device_share/tests.rs",
        include_str!("../../sdk/src/device_share/tests.rs"),
    ),
    ("habits.rs", include_str!("../../sdk/src/habits.rs")),
    ("hw_tag.rs", include_str!("../../sdk/src/hw_tag.rs")),
    ("interface.rs", include_str!("../../sdk/src/interface.rs")),
    ("packed.rs", include_str!("../../sdk/src/packed.rs")),
    ("policy.rs", include_str!("../../sdk/src/policy.rs")),
    ("runtime.rs", include_str!("../../sdk/src/runtime.rs")),
    ("types.rs", include_str!("../../sdk/src/types.rs")),
];

/// The interface, as `vendor/wit/policy.wit` (the SDK's bindings read `../wit`).
pub(crate) const WIT: &str = include_str!("../../wit/policy.wit");

/// The vendored SDK's manifest: the workspace's settings written out.
const SDK_MANIFEST: &str = r#"[package]
name = "schedhost-sdk"
description = "Write schedhost scheduling policies in safe Rust (vendored by `schedhost policy new`)"
version = "0.1.0"
edition = "2024"
license = "Apache-2.0"
publish = false

[dependencies]

[target.'cfg(target_arch = "wasm32")'.dependencies]
wit-bindgen = { version = "0.60", default-features = false, features = ["macros", "realloc"] }
"#;

const POLICY_MANIFEST: &str = include_str!("../template/Cargo.toml");
const POLICY_SOURCE: &str = include_str!("../template/lib.rs");
const POLICY_README: &str = include_str!("../template/README.md");
const POLICY_GITIGNORE: &str = "/target\n";

/// The lock file this host was built and tested with. A new crate starts from it, so its
/// build takes the versions the host's own policies were built with (cargo keeps what the
/// crate uses and drops the rest); without it cargo takes the newest releases, and a build
/// directory shared with the host's policies compiles a second set of macro crates.
const LOCK: &str = include_str!("../../Cargo.lock");

/// What `new_policy` wrote.
#[derive(Debug, Clone)]
pub struct Scaffolded {
    /// The policy's name (its component is `NAME.wasm`).
    pub name: String,
    /// Every file written, in order.
    pub files: Vec<PathBuf>,
}

/// Writes a new policy crate into `dir`, which must not exist or be empty. Its name is
/// `name`, or `dir`'s last component.
///
/// # Errors
/// `dir` holds files (nothing is overwritten), the name is not a valid policy name, or a
/// file cannot be written.
pub fn new_policy(dir: &Path, name: Option<&str>) -> Result<Scaffolded> {
    let name = match name {
        Some(name) => name.to_owned(),
        None => dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .context("give the new policy's directory, e.g. `schedhost policy new my-policy`")?,
    };
    check_name(&name)?;
    if dir.exists() {
        let mut entries = fs::read_dir(dir)
            .with_context(|| format!("{} exists and is not a directory", dir.display()))?;
        ensure!(
            entries.next().is_none(),
            "{} is not empty; `policy new` writes only into a new or empty directory",
            dir.display()
        );
    }
    let fill = |text: &str| {
        text.replace("{{name}}", &name)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{Type}}", &type_name(&name))
    };
    let mut files = Vec::new();
    let mut write = |rel: &str, text: &str| -> Result<()> {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        files.push(path);
        Ok(())
    };
    write("Cargo.toml", &fill(POLICY_MANIFEST))?;
    write("src/lib.rs", &fill(POLICY_SOURCE))?;
    write("README.md", &fill(POLICY_README))?;
    write(".gitignore", POLICY_GITIGNORE)?;
    write("Cargo.lock", LOCK)?;
    write("vendor/schedhost-sdk/Cargo.toml", SDK_MANIFEST)?;
    for (file, text) in SDK_SOURCES {
        write(&format!("vendor/schedhost-sdk/src/{file}"), text)?;
    }
    write("vendor/wit/policy.wit", WIT)?;
    Ok(Scaffolded { name, files })
}

/// A policy name: lowercase ASCII letters, digits and `-`, starting with a letter, at most
/// 48 characters (it becomes a crate name and a file name).
fn check_name(name: &str) -> Result<()> {
    let valid = name.len() <= 48
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if !valid {
        bail!(
            "{name:?} is not a policy name: use lowercase letters, digits and '-', starting with a letter (at most 48), or pass --name"
        );
    }
    Ok(())
}

/// `my-fifo` → `MyFifo`.
fn type_name(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sdk_source_file_is_vendored() {
        fn files(root: &Path, dir: &Path, into: &mut Vec<String>) {
            for entry in fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    files(root, &path, into);
                } else {
                    let relative = path.strip_prefix(root).unwrap();
                    into.push(relative.to_string_lossy().into_owned());
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/src");
        let mut on_disk = Vec::new();
        files(&root, &root, &mut on_disk);
        on_disk.sort();
        let mut vendored: Vec<String> = SDK_SOURCES.iter().map(|(f, _)| (*f).to_owned()).collect();
        vendored.sort();
        assert_eq!(on_disk, vendored, "add the new SDK file to SDK_SOURCES");
    }

    #[test]
    fn a_new_crate_is_locked_to_the_wit_bindgen_its_vendored_sdk_asks_for() {
        let dir = std::env::temp_dir().join(format!("schedhost-kit-lock-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        new_policy(&dir, Some("locked")).unwrap();
        let lock = fs::read_to_string(dir.join("Cargo.lock")).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        let locked = lock
            .split("[[package]]")
            .find(|p| p.contains("name = \"wit-bindgen\"\n"))
            .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
            .expect("wit-bindgen in the lock")
            .trim_end_matches('"')
            .to_owned();
        let wanted = SDK_MANIFEST
            .lines()
            .find_map(|l| l.strip_prefix("wit-bindgen = { version = \""))
            .and_then(|rest| rest.split('"').next())
            .expect("wit-bindgen in the manifest");
        assert!(
            locked.starts_with(&format!("{wanted}.")),
            "locked {locked}, the manifest asks for {wanted}"
        );
    }

    #[test]
    fn names_are_checked_and_typed() {
        assert!(check_name("my-fifo2").is_ok());
        for bad in ["My", "9x", "a_b", "x-", "", &"a".repeat(49)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(type_name("my-fifo2"), "MyFifo2");
    }

    #[test]
    fn a_non_empty_directory_is_never_written_into() {
        let dir = std::env::temp_dir().join(format!("kit-new-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("keep.txt"), "mine").unwrap();
        let err = new_policy(&dir, Some("p")).unwrap_err();
        assert!(err.to_string().contains("is not empty"), "{err}");
        assert_eq!(fs::read_to_string(dir.join("keep.txt")).unwrap(), "mine");
        fs::remove_dir_all(&dir).unwrap();
    }
}
