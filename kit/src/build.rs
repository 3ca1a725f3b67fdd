//! Building a policy crate into a component: cargo for wasm32, then `wit-component` wraps
//! the core module (whose bindings carry the world in a custom section) as a component.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result, bail, ensure};

use crate::toolchain::{TARGET, WasmToolchain};

/// Largest core module read back from cargo's output.
const MAX_MODULE_BYTES: u64 = 256 << 20;

/// A component built from a policy crate.
#[derive(Debug, Clone)]
pub struct Built {
    /// The component's name: the crate's library name without `schedhost_policy_`.
    pub name: String,
    /// Where it was written.
    pub component: PathBuf,
}

/// Builds the policy crate in `dir` with `toolchain` and writes `NAME.wasm` into `out_dir`.
/// cargo's own artifacts go to `target_dir` (default `DIR/target/wasm`).
///
/// # Errors
/// The crate is not a policy crate, cargo failed (its output is on stderr), or the module
/// carries no schedhost bindings.
pub fn build_policy(
    toolchain: &WasmToolchain,
    dir: &Path,
    target_dir: Option<&Path>,
    out_dir: &Path,
) -> Result<Built> {
    let manifest = dir.join("Cargo.toml");
    ensure!(
        manifest.is_file(),
        "{} has no Cargo.toml: give the policy crate's directory (`schedhost policy new DIR` makes one)",
        dir.display()
    );
    let lib = lib_name(&manifest)?;
    let package = package_name(&manifest)?;
    let target_dir = target_dir.map_or_else(|| dir.join("target/wasm"), Path::to_path_buf);
    // cargo writes where it is told, links and all: a link shipped in the policy's
    // `target/` stops the build before cargo runs.
    crate::files::real_dir(dir, &target_dir)?;
    // A target directory shared by several crates of one package name must not hand this
    // crate another's build (see `stamp`).
    let profile_dir = target_dir.join(TARGET).join("release");
    let key = crate::stamp::source_key(dir)?;
    crate::stamp::forget_other_builds(&profile_dir, &package, &lib, key.as_deref())?;
    let status = toolchain
        .cargo_build()
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target_dir)
        .arg("--message-format=short")
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("starting cargo ({})", toolchain.describe()))?;
    ensure!(
        status.success(),
        "cargo could not build {} for {TARGET} ({status}); its errors are above",
        dir.display()
    );
    crate::stamp::remember_build(&profile_dir, &package, key.as_deref())?;
    let module = profile_dir.join(format!("{lib}.wasm"));
    let name = lib
        .strip_prefix("schedhost_policy_")
        .unwrap_or(&lib)
        .replace('_', "-");
    finish(&module, name, dir, out_dir)
}

/// Reads the core module a compiler left at `module`, componentizes it and writes
/// `out_dir/NAME.wasm`: the last steps of every policy build, whatever the language. Inside
/// the policy directory `dir`, nothing is written through a link the build did not make.
pub(crate) fn finish(module: &Path, name: String, dir: &Path, out_dir: &Path) -> Result<Built> {
    let bytes = read_module(module)?;
    let component = componentize(&bytes).with_context(|| module.display().to_string())?;
    crate::files::real_dir(dir, out_dir)?;
    let out = out_dir.join(format!("{name}.wasm"));
    crate::files::replace(&out, &component)?;
    Ok(Built {
        name,
        component: out,
    })
}

/// Wraps a policy's core module as a component, validated.
///
/// # Errors
/// The module has no component-type section (it was not built against the SDK's bindings,
/// or never calls `export!`), or wit-component refuses it.
pub fn componentize(module: &[u8]) -> Result<Vec<u8>> {
    // wit-component turns a module without bindings into an empty component; refuse it here,
    // where the reason is still known.
    ensure!(
        has_bindings(module),
        "the module carries no schedhost bindings (does the crate call schedhost_sdk::export!?)"
    );
    wit_component::ComponentEncoder::default()
        .module(module)
        .context("reading the module's bindings")?
        .validate(true)
        .encode()
        .context("turning the module into a component")
}

/// True iff the module has the custom section wit-bindgen writes for its world.
fn has_bindings(module: &[u8]) -> bool {
    wasmparser::Parser::new(0).parse_all(module).any(|payload| {
        matches!(payload, Ok(wasmparser::Payload::CustomSection(c)) if c.name().starts_with("component-type"))
    })
}

fn read_module(module: &Path) -> Result<Vec<u8>> {
    let meta = fs::metadata(module).with_context(|| {
        format!(
            "cargo built no {} (is the crate type [\"cdylib\", \"rlib\"]?)",
            module.display()
        )
    })?;
    ensure!(
        meta.len() <= MAX_MODULE_BYTES,
        "{} is {} bytes, over the {} MiB a policy module may have",
        module.display(),
        meta.len(),
        MAX_MODULE_BYTES >> 20
    );
    fs::read(module).with_context(|| format!("reading {}", module.display()))
}

/// The crate's library name as cargo names its artifact: `[lib] name`, else the package
/// name, with `-` as `_`.
pub fn lib_name(manifest: &Path) -> Result<String> {
    let text =
        fs::read_to_string(manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let (mut section, mut package, mut lib) = (String::new(), None, None);
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_owned();
        } else if let Some(value) = key_value(line, "name") {
            match section.as_str() {
                "[package]" => package = Some(value),
                "[lib]" => lib = Some(value),
                _ => {}
            }
        }
    }
    match lib.or(package) {
        Some(name) => Ok(name.replace('-', "_")),
        None => bail!("{}: no [package] name", manifest.display()),
    }
}

/// The crate's package name, as cargo names its fingerprints.
fn package_name(manifest: &Path) -> Result<String> {
    let text =
        fs::read_to_string(manifest).with_context(|| format!("reading {}", manifest.display()))?;
    let mut section = "";
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[package]"
            && let Some(value) = key_value(line, "name")
        {
            return Ok(value);
        }
    }
    bail!("{}: no [package] name", manifest.display())
}

fn key_value(line: &str, key: &str) -> Option<String> {
    let rest = line.strip_prefix(key)?.trim_start().strip_prefix('=')?;
    Some(rest.trim().trim_matches('"').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lib_name_prefers_the_lib_section_and_uses_underscores() {
        let dir = std::env::temp_dir().join(format!("kit-lib-name-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let manifest = dir.join("Cargo.toml");
        fs::write(&manifest, "[package]\nname = \"schedhost-policy-x\"\n").unwrap();
        assert_eq!(lib_name(&manifest).unwrap(), "schedhost_policy_x");
        fs::write(
            &manifest,
            "[package]\nname = \"a\"\nversion = \"1\"\n[lib]\nname = \"b-c\"\n",
        )
        .unwrap();
        assert_eq!(lib_name(&manifest).unwrap(), "b_c");
        fs::write(&manifest, "[dependencies]\nname = \"x\"\n").unwrap();
        assert!(
            lib_name(&manifest)
                .unwrap_err()
                .to_string()
                .contains("no [package] name")
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_module_without_bindings_is_refused_with_the_reason() {
        // The smallest valid core module: magic and version.
        let err = componentize(b"\0asm\x01\0\0\0").unwrap_err();
        assert!(
            format!("{err:#}").contains("no schedhost bindings"),
            "{err:#}"
        );
    }
}
