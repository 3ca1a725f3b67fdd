//! `cargo xtask bench-drives [DIR...]`: cross-validation of the drive model. Every DiskSim
//! drive in the folders given (default `examples/validation`) that has a recorded trace
//! beside it is imported and replayed with `schedhost validate`, and its RMS is printed beside
//! DiskSim's own figure for that drive, with what the importer could not represent. A model
//! change is judged on all of them at once: on DiskSim's own `valid/` folder this checks the
//! drives the model was never tuned on. Simulated, so one run is the measurement.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// A drive's description and its recorded trace.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pair {
    parv: PathBuf,
    trace: PathBuf,
}

/// The drives of `dir`: each `NAME.parv` with a trace named `NAME.trace` or `trace.NAME`
/// (DiskSim's older trees), `_validate` left off the name for the second. Sorted by name.
fn pairs(dir: &Path) -> Result<Vec<Pair>> {
    let mut found = Vec::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for entry in entries {
        let parv = entry?.path();
        if parv.extension().is_none_or(|e| e != "parv") {
            continue;
        }
        let Some(name) = parv.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let short = name.trim_end_matches("_validate");
        let candidates = [
            format!("{name}.trace"),
            format!("{short}.trace"),
            format!("trace.{name}"),
            format!("trace.{short}"),
        ];
        if let Some(trace) = candidates.iter().map(|c| dir.join(c)).find(|p| p.is_file()) {
            found.push(Pair { parv, trace });
        }
    }
    found.sort_by(|a, b| a.parv.cmp(&b.parv));
    Ok(found)
}

/// What one drive gave: its RMS and DiskSim's (when the trace is DiskSim's), or why it
/// failed; and the importer's notes.
struct Row {
    name: String,
    rms_ms: Option<f64>,
    /// The same as DiskSim's rms tool computes it (over its buckets), the way DiskSim's
    /// own figures were reached.
    tool_ms: Option<f64>,
    /// Where `validate` puts the model against DiskSim's figure, by the tool: `under`,
    /// `at` or `over`.
    standing: Option<String>,
    disksim_ms: Option<f64>,
    /// Requests replayed, and the part within a millisecond of the recorded time.
    within: Option<(u64, f64)>,
    /// DiskSim's own part within a millisecond, on the drive's whole trace.
    disksim_within: Option<(u64, f64)>,
    failed: Option<String>,
    not_represented: Vec<String>,
}

/// What `import-disksim` says it cannot represent of the drive of `parv` (its spec written
/// to a scratch file and removed).
fn not_represented(schedhost: &Path, parv: &Path, scratch: &Path) -> Result<Vec<String>> {
    let _ = std::fs::remove_file(scratch);
    let out = Command::new(schedhost)
        .arg("import-disksim")
        .arg(parv)
        .arg("-o")
        .arg(scratch)
        .output()
        .context("running schedhost import-disksim")?;
    let _ = std::fs::remove_file(scratch);
    Ok(String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| l.split_once("not represented: ").map(|(_, n)| n.to_owned()))
        .collect())
}

fn validate(schedhost: &Path, pair: &Pair) -> Row {
    let name = pair
        .parv
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let mut row = Row {
        name,
        rms_ms: None,
        tool_ms: None,
        standing: None,
        disksim_ms: None,
        within: None,
        disksim_within: None,
        failed: None,
        not_represented: Vec::new(),
    };
    let out = Command::new(schedhost)
        .arg("validate")
        .arg("--device")
        .arg(&pair.parv)
        .arg(&pair.trace)
        .arg("--output-format=json")
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            row.failed = Some(e.to_string());
            return row;
        }
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        row.failed = Some(stderr.lines().last().unwrap_or("failed").to_owned());
        return row;
    }
    match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(v) => {
            row.rms_ms = v["rms_ms"].as_f64();
            row.tool_ms = v["rms_tool_ms"].as_f64();
            row.standing = v["disksim_standing"].as_str().map(str::to_owned);
            row.disksim_ms = v["disksim"]["rms_ms"].as_f64();
            row.within = within_one_ms(&v["validation"]["differences"]);
            row.disksim_within = within_one_ms(&v["disksim"]["own"]);
        }
        Err(e) => row.failed = Some(format!("the report: {e}")),
    }
    row
}

/// From `validate`'s per-request differences (DiskSim's buckets): the requests counted, and
/// the part within a millisecond of the recorded time (the bucket under 1 ms).
fn within_one_ms(differences: &Value) -> Option<(u64, f64)> {
    let counts: Vec<u64> = differences["requests"]
        .as_array()?
        .iter()
        .map(Value::as_u64)
        .collect::<Option<_>>()?;
    let total: u64 = counts.iter().sum();
    let under_one = differences["edges_ms"]
        .as_array()?
        .iter()
        .position(|e| e.as_i64() == Some(1))?;
    Some((total, *counts.get(under_one)? as f64 / total.max(1) as f64))
}

pub fn run(root: &Path, dirs: &[String]) -> Result<()> {
    let schedhost = root.join("target/release/schedhost");
    let dirs: Vec<PathBuf> = if dirs.is_empty() {
        vec![root.join("examples/validation")]
    } else {
        dirs.iter().map(PathBuf::from).collect()
    };
    let mut all = Vec::new();
    for dir in &dirs {
        all.extend(pairs(dir)?);
    }
    if all.is_empty() {
        bail!(
            "no drive with a trace in {}: each NAME.parv needs NAME.trace or trace.NAME beside it",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    println!(
        "{:<24} {:>10} {:>8} {:>10} {:>7}  {:>8} {:>9} {:>9} {:>6}  not represented",
        "drive", "RMS ms", "by tool", "DiskSim", "ratio", "requests", "in 1 ms", "DiskSim", "σ"
    );
    let (mut judged, mut held, mut held_by_tool) = (0, 0, 0);
    let (mut agreements, mut agreed) = (0, 0);
    let scratch = root.join(format!(
        "target/bench/bench-drives-{}.spec",
        std::process::id()
    ));
    std::fs::create_dir_all(root.join("target/bench"))?;
    for pair in &all {
        let mut row = validate(&schedhost, pair);
        row.not_represented = not_represented(&schedhost, &pair.parv, &scratch)?;
        let notes = row.not_represented.len();
        match (row.failed, row.rms_ms) {
            (Some(why), _) => println!("{:<24} failed: {why}", row.name),
            (None, Some(rms)) => {
                let tool = row.tool_ms.unwrap_or(f64::NAN);
                let (theirs, ratio) = match row.disksim_ms {
                    Some(d) => {
                        judged += 1;
                        held += usize::from(rms <= d);
                        held_by_tool += usize::from(row.standing.as_deref() != Some("over"));
                        (format!("{d:.3}"), format!("{:.2}", tool / d))
                    }
                    None => ("-".into(), "-".into()),
                };
                let (requests, within) = row.within.map_or_else(
                    || ("-".into(), "-".into()),
                    |(n, w)| (n.to_string(), format!("{:.1} %", 100.0 * w)),
                );
                let disksim_within = row
                    .disksim_within
                    .map_or_else(|| "-".into(), |(_, w)| format!("{:.1} %", 100.0 * w));
                let sigma = match (row.within, row.disksim_within) {
                    (Some(model), Some((_, theirs))) => {
                        let z = standard_errors(model, theirs);
                        agreements += 1;
                        agreed += usize::from(z >= -AGREEMENT_SIGMA);
                        format!("{z:+.1}")
                    }
                    _ => "-".into(),
                };
                println!(
                    "{:<24} {rms:>10.3} {tool:>8.3} {theirs:>10} {ratio:>7}  {requests:>8} {within:>9} {disksim_within:>9} {sigma:>6}  {notes}",
                    row.name
                );
            }
            (None, None) => println!("{:<24} no RMS in the report", row.name),
        }
        for note in &row.not_represented {
            println!("{:<24}   - {note}", "");
        }
    }
    println!(
        "{} drives; at or under DiskSim's own RMS on {held_by_tool} of the {judged} it has a figure for, \
         both read by DiskSim's rms tool (to the three decimals DiskSim states), and on {held} \
         by each request's time against its rank's",
        all.len()
    );
    println!(
        "request by request, within a millisecond as often as DiskSim's own run, or no more than \
         {AGREEMENT_SIGMA} standard errors less, on {agreed} of the {agreements} it has a figure for"
    );
    println!(
        "(in 1 ms: the part of the requests the model puts within a millisecond of the recorded \
         time; DiskSim: its own run's part on the drive's whole trace, which a part of the trace \
         can be judged against within its sampling error, where an RMS on a part cannot; σ: the \
         model's part less DiskSim's, in standard errors of a sample of the requests replayed)"
    );
    Ok(())
}

/// How far short of DiskSim's part a sample may fall and still agree with it: two standard
/// errors (about one drive in forty would fall further by chance alone).
const AGREEMENT_SIGMA: f64 = 2.0;

/// The model's part `within` of `n` requests less DiskSim's part `theirs`, in standard
/// errors of a sample of `n` drawn at DiskSim's rate.
fn standard_errors((n, within): (u64, f64), theirs: f64) -> f64 {
    let error = (theirs * (1.0 - theirs) / n.max(1) as f64).sqrt();
    if error > 0.0 {
        (within - theirs) / error
    } else if within >= theirs {
        0.0
    } else {
        f64::NEG_INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_is_measured_in_standard_errors_of_the_requests_replayed() {
        // The DEC RZ26's first page: 68.4 % of 383 against DiskSim's 74.7 %.
        let z = standard_errors((383, 0.684), 0.747);
        assert!((z - (-2.83)).abs() < 0.01, "{z}");
        // The same shortfall on a whole trace of 10 000 is far outside chance.
        assert!(standard_errors((10_000, 0.684), 0.747) < -14.0);
        assert_eq!(standard_errors((10, 1.0), 1.0), 0.0);
        assert_eq!(standard_errors((10, 0.5), 1.0), f64::NEG_INFINITY);
    }

    #[test]
    fn drives_pair_with_their_traces_by_disksims_names() {
        let dir = std::env::temp_dir().join(format!("bench-drives-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for f in [
            "a.parv",
            "a.trace",
            "b_validate.parv",
            "trace.b",
            "c.parv",
            "notes.txt",
        ] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        let found = pairs(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let names: Vec<(String, String)> = found
            .iter()
            .map(|p| {
                let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
                (name(&p.parv), name(&p.trace))
            })
            .collect();
        assert_eq!(
            names,
            [
                ("a.parv".to_owned(), "a.trace".to_owned()),
                ("b_validate.parv".to_owned(), "trace.b".to_owned())
            ],
            "c.parv has no trace"
        );
    }
}
