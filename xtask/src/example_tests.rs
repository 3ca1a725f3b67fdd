//! What `cargo xtask test` runs after the workspace's tests: the example policies (a Rust
//! crate in its own workspace, a C policy through the CLI) and the author kit from an empty
//! directory, as a new author would use it.

use crate::*;

/// Runs the native tests of the out-of-tree policies in examples/. Each has its own
/// workspace and lockfile, so it gets its own target dir: sharing the main one would let the
/// two workspaces overwrite each other's builds of the same crates.
pub(crate) fn test_examples(root: &Path) -> Result<()> {
    for dir in policy_dirs(root)?
        .into_iter()
        .filter(|d| d.starts_with(root.join("examples")))
    {
        if schedhost_kit::c::is_c_policy(&dir) {
            test_c_example(root, &dir)?;
            continue;
        }
        let mut test = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        test.arg("test")
            .arg("--manifest-path")
            .arg(dir.join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", root.join("target/examples"));
        cargo_status(root, &mut test).with_context(|| format!("testing {}", dir.display()))?;
    }
    Ok(())
}

/// A policy in C, as its README builds and checks it, through the CLI (the workspace tests
/// already ran the component `cargo xtask build` made).
fn test_c_example(root: &Path, dir: &Path) -> Result<()> {
    let schedhost = root.join("target/debug/schedhost");
    let out = root.join("target/examples/c");
    let built = Command::new(&schedhost)
        .args(["policy", "build"])
        .arg(dir)
        .arg("--out-dir")
        .arg(&out)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("starting {}", schedhost.display()))?;
    ensure!(
        built.status.success(),
        "schedhost policy build {} failed ({})",
        dir.display(),
        built.status
    );
    let component = String::from_utf8(built.stdout)?.trim().to_owned();
    let status = Command::new(&schedhost)
        .args(["policy", "check", &component])
        .status()
        .with_context(|| format!("starting {}", schedhost.display()))?;
    ensure!(
        status.success(),
        "schedhost policy check {component} failed ({status})"
    );
    Ok(())
}

/// docs/writing-a-policy.md's sequence, as an author outside this repository runs it:
/// from an empty directory, create a policy, test it natively, build it, check it, run it.
pub(crate) fn test_author_kit(root: &Path) -> Result<()> {
    let work = root.join("target/author-kit");
    if work.exists() {
        fs::remove_dir_all(&work).with_context(|| format!("clearing {}", work.display()))?;
    }
    fs::create_dir_all(&work)?;
    let schedhost = root.join("target/debug/schedhost");
    let run = |args: &[&str]| -> Result<()> {
        eprintln!(
            "xtask: (in {}) schedhost {}",
            work.display(),
            args.join(" ")
        );
        let status = Command::new(&schedhost)
            .args(args)
            .current_dir(&work)
            .status()
            .with_context(|| format!("starting {}", schedhost.display()))?;
        ensure!(
            status.success(),
            "schedhost {} failed ({status})",
            args.join(" ")
        );
        Ok(())
    };
    run(&["policy", "new", "my-fifo"])?;
    let mut test = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    test.arg("test").current_dir(work.join("my-fifo"));
    let status = test.status().context("starting cargo test")?;
    ensure!(
        status.success(),
        "cargo test of the new policy failed ({status})"
    );
    // The wasm build directory the bundled policies were built in: the default one (in the
    // user's cache) would build the standard library for wasm a second time on a fresh
    // machine (83 s of the test command's 332 s).
    let wasm_target = root.join("target/wasm");
    let wasm_target = wasm_target.to_str().context("a non-UTF-8 path")?;
    let build = |dir: &str| run(&["policy", "build", "--target-dir", wasm_target, dir]);
    build("my-fifo")?;
    run(&["policy", "check", "my-fifo/target/my-fifo.wasm"])?;
    same_name_variant_builds_its_own_component(&work, &build)?;
    run(&[
        "--policy",
        "my-fifo/target/my-fifo.wasm",
        "--set",
        "idle_us=500",
        "--rw=randread",
        "--bs=4k",
        "--size=64m",
        "--iodepth=4",
        "--numjobs=2",
        "--runtime=2s",
    ])
}

/// A copy of `my-fifo` (one package name, the usual start of a variant) with another
/// default, its files dated before the last build as a copy that keeps dates leaves them:
/// `policy build` must still make the variant's own component, and the original's again
/// after it, though both share one wasm target directory.
fn same_name_variant_builds_its_own_component(
    work: &Path,
    build: &dyn Fn(&str) -> Result<()>,
) -> Result<()> {
    let (original, variant) = (work.join("my-fifo"), work.join("my-fifo-variant"));
    copy_sources(&original, &variant)?;
    let lib = variant.join("src/lib.rs");
    let text = fs::read_to_string(&lib)?;
    ensure!(
        text.contains("default: 200,"),
        "the template's idle_us default moved"
    );
    fs::write(&lib, text.replace("default: 200,", "default: 300,"))?;
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(86_400);
    for file in [lib, variant.join("Cargo.toml")] {
        fs::File::options()
            .write(true)
            .open(&file)?
            .set_modified(past)?;
    }
    let component =
        |dir: &Path, name: &str| fs::read(dir.join("target").join(format!("{name}.wasm")));
    let first = component(&original, "my-fifo")?;
    build("my-fifo-variant")?;
    let built = component(&variant, "my-fifo")?;
    ensure!(
        built != first,
        "policy build handed the variant the original's component"
    );
    build("my-fifo")?;
    ensure!(
        component(&original, "my-fifo")? == first,
        "policy build handed the original the variant's component"
    );
    Ok(())
}

/// Copies a policy crate's sources (not its `target/`), keeping their modification times.
fn copy_sources(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_name() == "target" {
            continue;
        }
        let (source, dest) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            copy_sources(&source, &dest)?;
        } else {
            fs::copy(&source, &dest)?;
            let modified = entry.metadata()?.modified()?;
            fs::File::options()
                .write(true)
                .open(&dest)?
                .set_modified(modified)?;
        }
    }
    Ok(())
}
