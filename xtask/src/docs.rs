//! `cargo xtask docs-plots` and `docs-reproduce`: the figures and tables in docs/, made by
//! running the commands the docs show.

use crate::*;

/// Draws each plot kind from the example jobs (simulated, so the same every time) into
/// `docs/plots/` as PNGs, through the CLI as a user would.
pub(crate) fn docs_plots(root: &Path) -> Result<()> {
    let out = root.join("docs/plots");
    let scratch = root.join("target/docs-plots");
    fs::create_dir_all(&scratch).context("creating target/docs-plots")?;
    fs::create_dir_all(&out).context("creating docs/plots")?;
    let schedhost = root.join("target/debug/schedhost");
    let run = |args: &[&str]| -> Result<Vec<u8>> {
        let output = Command::new(&schedhost)
            .args(args)
            .current_dir(root)
            .stderr(Stdio::inherit())
            .output()
            .context("running schedhost")?;
        ensure!(
            output.status.success(),
            "schedhost {} failed",
            args.join(" ")
        );
        Ok(output.stdout)
    };
    let json = |name: &str, args: &[&str]| -> Result<String> {
        let path = scratch.join(name);
        let mut all = args.to_vec();
        all.extend(["--output-format", "json"]);
        fs::write(&path, run(&all)?).with_context(|| format!("writing {}", path.display()))?;
        Ok(path.to_string_lossy().into_owned())
    };
    let four = "examples/jobs/seed1-four-readers.fio";
    let noop = json("noop.json", &["--policy", "native:noop", four])?;
    let cfq = json("cfq.json", &["--policy", "native:cfq", four])?;
    let mixed = json(
        "mixed.json",
        &[
            "--policy",
            "native:cfq",
            "--device",
            "sim:ssd",
            "examples/jobs/readers-and-writer.fio",
        ],
    )?;
    let sweep = scratch.join("sweep.json").to_string_lossy().into_owned();
    run(&[
        "compare",
        "-p",
        "native:noop",
        "-p",
        "native:deadline",
        "-p",
        "native:cfq",
        "--sweep",
        "numjobs=1,2,4,8",
        "--json",
        &sweep,
        "examples/jobs/seed1-sequential-readers.fio",
        "--runtime=1s",
    ])?;
    let devices = scratch.join("devices.json").to_string_lossy().into_owned();
    run(&[
        "compare",
        "-p",
        "native:noop",
        "-p",
        "native:deadline",
        "-p",
        "native:cfq",
        "--device",
        "sim:ssd",
        "--device",
        "sim:hdd",
        "--metric",
        "read-p99-lat",
        "--json",
        &devices,
        "--name=r",
        "--rw=randread",
        "--size=256m",
        "--iodepth=8",
        "--runtime=200ms",
        "--time_based",
    ])?;
    // (plot arguments, the file it draws, its name in docs/plots/)
    let plots: [(Vec<&str>, &str, &str); 6] = [
        (
            vec![&noop, &cfq, "--per-job"],
            "latency-tail.png",
            "latency-tail.png",
        ),
        (
            vec![&noop, &cfq, "--per-job", "--latency", "cdf"],
            "latency-cdf.png",
            "latency-cdf.png",
        ),
        (vec![&cfq], "iops.png", "iops.png"),
        (
            vec![&mixed, "--per-job", "--panels", "--y", "log"],
            "iops.png",
            "iops-panels-log.png",
        ),
        (vec![&sweep], "compare.png", "compare-sweep.png"),
        (vec![&devices], "compare.png", "compare-devices.png"),
    ];
    for (args, drawn, name) in plots {
        let dir = scratch.join("drawn");
        let mut all = vec!["plot"];
        all.extend(args);
        let dir_text = dir.to_string_lossy().into_owned();
        all.extend(["--out", &dir_text, "--dpi", "200"]);
        run(&all)?;
        fs::copy(dir.join(drawn), out.join(name))
            .with_context(|| format!("copying {drawn} to docs/plots/{name}"))?;
        println!("docs/plots/{name}");
    }
    Ok(())
}

/// docs/reproduce.md's tables are `schedhost reproduce all`'s output: this runs it and
/// replaces what stands between the markers, leaving the rest of the file as it is.
pub(crate) fn docs_reproduce(root: &Path) -> Result<()> {
    const BEGIN: &str = "<!-- reproduce:begin (cargo xtask docs-reproduce writes this part) -->\n";
    const END: &str = "<!-- reproduce:end -->\n";
    let out = Command::new(root.join("target/release/schedhost"))
        .args(["reproduce", "all"])
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .context("running schedhost reproduce all")?;
    ensure!(out.status.success(), "schedhost reproduce all failed");
    let tables = String::from_utf8(out.stdout).context("reproduce printed non-UTF-8")?;
    let path = root.join("docs/reproduce.md");
    let readme = fs::read_to_string(&path).context("reading docs/reproduce.md")?;
    let (Some(start), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
        bail!("docs/reproduce.md has no reproduce markers");
    };
    ensure!(
        start < end,
        "docs/reproduce.md's reproduce markers are out of order"
    );
    let updated = format!(
        "{}{BEGIN}\n{}\n{}",
        &readme[..start],
        tables.trim_end(),
        &readme[end..]
    );
    fs::write(&path, updated).context("writing docs/reproduce.md")?;
    println!("docs/reproduce.md: reproduction tables written");
    Ok(())
}
