//! Policies written in C: bindings from wit-bindgen's C generator, clang's wasm32 target
//! with wasi-libc for `malloc`.
//!
//! A C policy is a directory of `.c` files that include `policy.h`. `build_c_policy`
//! writes the bindings (`policy.h`, `policy.c`, and `policy_component_type.o`, which carries
//! the world) to `DIR/target/bindings/`, links everything into one core module, and wraps it
//! as a component like a Rust policy.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail, ensure};
use wit_bindgen_core::Files;
use wit_bindgen_core::wit_parser::Resolve;

use crate::build::{Built, finish};
use crate::scaffold::WIT;

/// What to install when no C compiler for wasm32 is found: Debian's packages.
pub const DEBIAN_PACKAGES: &[&str] = &[
    "clang-22",
    "lld-22",
    "wasi-libc",
    "libclang-rt-22-dev-wasm32",
];

/// clang's wasm32 target with the WASI libc headers (only `malloc`, `memcpy` and friends are
/// used; a policy has no imports, so the module must call nothing of WASI).
const TARGET: &str = "wasm32-wasi";
/// Where Debian's wasi-libc puts its headers and `libc.a`.
const WASI_SYSROOT_HEADER: &str = "/usr/include/wasm32-wasi/stdlib.h";
const CLANGS: &[&str] = &["clang-22", "clang-21", "clang-20", "clang-19", "clang"];

/// A clang that can build a C policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CToolchain {
    clang: String,
}

impl CToolchain {
    /// The first clang on PATH that links a module for wasm32 with wasi-libc.
    ///
    /// # Errors
    /// None can; the message says what to install.
    pub fn find() -> Result<Self> {
        let install = format!("sudo apt-get install {}", DEBIAN_PACKAGES.join(" "));
        if !Path::new(WASI_SYSROOT_HEADER).is_file() {
            bail!(
                "wasi-libc's headers ({WASI_SYSROOT_HEADER}) are missing; install them with:\n  {install}"
            );
        }
        let clang = CLANGS
            .iter()
            .find(|clang| links_for_wasm32(clang))
            .with_context(|| {
                format!(
                    "no clang here links for {TARGET} (tried {}); install one with:\n  {install}",
                    CLANGS.join(", ")
                )
            })?;
        Ok(Self {
            clang: (*clang).to_owned(),
        })
    }

    /// For messages: which compiler this is.
    pub fn describe(&self) -> &str {
        &self.clang
    }

    fn compile(&self) -> Command {
        let mut cmd = Command::new(&self.clang);
        cmd.arg(format!("--target={TARGET}"))
            .args(["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror"])
            // The target's old name is the one Debian's sysroot is laid out for.
            .arg("-Wno-deprecated")
            // A reactor: no `main`, every export named by the bindings.
            .args(["-mexec-model=reactor", "-nostartfiles", "-Wl,--no-entry"])
            .stdin(Stdio::null());
        cmd
    }
}

/// True iff `clang` exists and links an empty reactor for wasm32.
fn links_for_wasm32(clang: &str) -> bool {
    let dir = std::env::temp_dir().join(format!("schedhost-clang-probe-{}", std::process::id()));
    let probe = (|| -> Result<bool> {
        fs::create_dir_all(&dir)?;
        let source = dir.join("probe.c");
        fs::write(
            &source,
            "#include <stdlib.h>\nvoid *probe(size_t n) { return malloc(n); }\n",
        )?;
        let status = Command::new(clang)
            .arg(format!("--target={TARGET}"))
            .args(["-Wno-deprecated", "-nostartfiles", "-Wl,--no-entry", "-o"])
            .arg(dir.join("probe.wasm"))
            .arg(&source)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        Ok(status.success())
    })()
    .unwrap_or(false);
    let _ = fs::remove_dir_all(&dir);
    probe
}

/// True iff `dir` holds a C policy: `.c` files and no Cargo.toml.
pub fn is_c_policy(dir: &Path) -> bool {
    !dir.join("Cargo.toml").exists() && c_sources(dir).is_ok_and(|s| !s.is_empty())
}

/// The policy's `.c` files, sorted.
fn c_sources(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut sources = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "c") && path.is_file() {
            sources.push(path);
        }
    }
    sources.sort();
    Ok(sources)
}

/// The `schedhost:policy` world, parsed from the WIT this kit was built with.
fn world() -> Result<(Resolve, wit_bindgen_core::wit_parser::WorldId)> {
    let mut resolve = Resolve::default();
    let package = resolve
        .push_str("policy.wit", WIT)
        .context("parsing the vendored wit/policy.wit")?;
    let world = resolve
        .select_world(&[package], Some("policy"))
        .context("finding the `policy` world")?;
    Ok((resolve, world))
}

/// Writes the C bindings (`policy.h`, `policy.c`, `policy_component_type.o`) into `out`,
/// returning their paths.
///
/// # Errors
/// The generator failed, or `out` cannot be written.
pub fn write_bindings(out: &Path) -> Result<Vec<PathBuf>> {
    let (mut resolve, world) = world()?;
    let opts = wit_bindgen_c::Opts::default();
    let mut files = Files::default();
    opts.build()
        .generate(&mut resolve, world, &mut files)
        .context("generating the C bindings")?;
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut written = Vec::new();
    for (name, bytes) in files.iter() {
        let path = out.join(name);
        crate::files::replace(&path, bytes)?;
        written.push(path);
    }
    Ok(written)
}

/// Builds the C policy in `dir` into `out_dir/NAME.wasm`, where NAME is the directory's name
/// without a `-policy` suffix.
///
/// # Errors
/// No C sources, clang failed (its errors are on stderr), or the module is not a policy.
pub fn build_c_policy(toolchain: &CToolchain, dir: &Path, out_dir: &Path) -> Result<Built> {
    let sources = c_sources(dir)?;
    ensure!(!sources.is_empty(), "{} has no .c files", dir.display());
    let name = policy_name(dir)?;
    let work = dir.join("target");
    let bindings = work.join("bindings");
    crate::files::real_dir(dir, &bindings)?;
    let generated = write_bindings(&bindings)?;
    let module = work.join(format!("{name}.core.wasm"));
    // clang writes its output by name: a link shipped there is removed, not written through.
    if module
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        fs::remove_file(&module)
            .with_context(|| format!("removing the link {}", module.display()))?;
    }
    let status = toolchain
        .compile()
        .arg("-I")
        .arg(&bindings)
        .args(&sources)
        .args(
            generated
                .iter()
                .filter(|p| p.extension().is_some_and(|e| e == "c" || e == "o")),
        )
        .arg("-o")
        .arg(&module)
        .status()
        .with_context(|| format!("starting {}", toolchain.describe()))?;
    ensure!(
        status.success(),
        "{} could not build {} ({status}); its errors are above",
        toolchain.describe(),
        dir.display()
    );
    finish(&module, name, dir, out_dir)
}

/// `examples/sstf-policy` → `sstf`.
fn policy_name(dir: &Path) -> Result<String> {
    let base = dir
        .canonicalize()
        .with_context(|| format!("finding {}", dir.display()))?;
    let base = base
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{} has no usable name", dir.display()))?
        .to_owned();
    let name = base.strip_suffix("-policy").unwrap_or(&base);
    ensure!(
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        "a C policy's directory names it: `{base}` should be lower-case letters, digits and '-'"
    );
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_bindings_declare_every_export_of_the_world() {
        let out = std::env::temp_dir().join(format!("schedhost-c-bindings-{}", std::process::id()));
        let files = write_bindings(&out).unwrap();
        let header = fs::read_to_string(out.join("policy.h")).unwrap();
        fs::remove_dir_all(&out).unwrap();
        assert_eq!(files.len(), 3, "{files:?}");
        for export in [
            "insert",
            "dispatch",
            "turn",
            "turn_after_completion",
            "turn_words",
            "take_answer",
            "merge_rules",
            "save_state",
        ] {
            assert!(
                header.contains(&format!("exports_schedhost_policy_scheduler_{export}(")),
                "policy.h lacks {export}"
            );
        }
    }

    #[test]
    fn a_c_policy_is_named_by_its_directory() {
        let parent = std::env::temp_dir().join(format!("schedhost-c-name-{}", std::process::id()));
        let (suffixed, plain, shouting) = (
            parent.join("sstf-policy"),
            parent.join("fifo2"),
            parent.join("Big"),
        );
        for dir in [&suffixed, &plain, &shouting] {
            fs::create_dir_all(dir).unwrap();
        }
        let names = [
            policy_name(&suffixed),
            policy_name(&plain),
            policy_name(&shouting),
        ];
        fs::remove_dir_all(&parent).unwrap();
        let [suffixed, plain, shouting] = names;
        assert_eq!(suffixed.unwrap(), "sstf");
        assert_eq!(plain.unwrap(), "fifo2");
        assert!(shouting.unwrap_err().to_string().contains("lower-case"));
    }
}
