//! `schedhost validate` and `schedhost import-disksim`: a simulated device against a drive's
//! recorded service times, and DiskSim's drive descriptions as schedhost device specs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use schedhost::backend::sim::DeviceSpec;
use schedhost::backend::sim::drive::disksim;
use schedhost::fidelity::{
    Differences, DiskSimFigure, Distribution, RecordedRequest, Validation, disksim_figure,
    parse_trace, validate,
};
use schedhost::frontend::run::Device;

use super::OutputFormat;

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// A validation trace (DiskSim's format): `R|W Hit|Miss|Doub|Trip blkno bcount
    /// service_us next_us` per line. DiskSim's own figure is printed beside this model's
    /// when the trace is one of DiskSim's validation suite (by its file name).
    pub trace: PathBuf,
    /// The simulated device, as `run --device` names one: sim:hdd, a spec file, or a DiskSim
    /// .diskspecs or .parv (imported); with no fault plan (the recorded times have none).
    #[arg(long)]
    pub device: String,
    /// Write both CDFs as DIR/validate-cdf.svg.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Write each request's recorded and simulated times to FILE (CSV, a new file): to
    /// find which requests the model gets wrong, and what came before them.
    #[arg(long, value_name = "FILE")]
    pub per_request: Option<PathBuf>,
    /// Report format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Normal)]
    pub output_format: OutputFormat,
}

impl ValidateArgs {
    pub fn execute(self) -> Result<()> {
        let text = schedhost::input::read_text(&self.trace, schedhost::input::MAX_TRACE_BYTES)
            .with_context(|| format!("reading {}", self.trace.display()))?;
        let trace = parse_trace(&text).with_context(|| self.trace.display().to_string())?;
        let device = match super::flags::parse_device(&self.device)? {
            (Device::Sim(spec), faults) if faults.is_empty() => spec,
            (Device::Sim(_), _) => bail!(
                "--device {}: a fault plan would fail requests the trace recorded as served",
                self.device
            ),
            (Device::Real(_), _) => bail!(
                "--device {}: validate replays a trace on a simulated device (sim:NAME, a spec or a DiskSim file)",
                self.device
            ),
        };
        let result = validate(&trace, &device)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("replaying {} on {}", self.trace.display(), self.device))?;
        if let Some(path) = &self.per_request {
            write_per_request(path, &trace, &result.by_request)?;
        }
        if let Some(dir) = &self.plot {
            let svg = schedhost::observe::plot::distributions(
                &format!("{} on {}", file_name(&self.trace), self.device),
                &[
                    ("measured".to_owned(), &result.curves.0[..]),
                    (
                        format!("simulated ({})", device.name()),
                        &result.curves.1[..],
                    ),
                ],
            )
            .map_err(anyhow::Error::msg)?;
            super::plot::write(
                dir,
                &[("validate-cdf.svg".to_owned(), svg)],
                super::plot::DEFAULT_DPI,
            )?;
        }
        let disksim = disksim_figure(&file_name(&self.trace));
        match self.output_format {
            OutputFormat::Json | OutputFormat::JsonPlus => {
                let doc = serde_json::json!({
                    "trace": self.trace.display().to_string(),
                    "device": self.device,
                    "model": device.name(),
                    "validation": result,
                    "rms_ms": result.demerit_us / 1000.0,
                    "rms_tool_ms": result.rms_tool_ms,
                    "disksim": disksim,
                    "disksim_standing": disksim.map(|d| standing(result.rms_tool_ms, d.rms_ms)),
                });
                println!("{}", serde_json::to_string_pretty(&doc)?);
            }
            OutputFormat::Normal => print!(
                "{}",
                schedhost::output::printable_lines(&card(
                    &self.trace,
                    &self.device,
                    &result,
                    disksim.as_ref()
                ))
            ),
        }
        Ok(())
    }
}

/// `trace` beside the model's `simulated` times, a CSV row a request, to the new file `path`.
fn write_per_request(path: &Path, trace: &[RecordedRequest], simulated: &[f64]) -> Result<()> {
    use std::io::Write as _;
    let file = schedhost::output::create_new(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => {
            anyhow::anyhow!(
                "--per-request {}: exists; give a new file name",
                path.display()
            )
        }
        _ => anyhow::anyhow!("--per-request {}: {e}", path.display()),
    })?;
    let mut out = std::io::BufWriter::new(file);
    let written = (|| -> std::io::Result<()> {
        writeln!(
            out,
            "request,op,cache,blkno,bcount,recorded_us,simulated_us,recorded_less_simulated_us"
        )?;
        for (i, (r, &us)) in trace.iter().zip(simulated).enumerate() {
            writeln!(
                out,
                "{},{},{},{},{},{:.3},{:.3},{:.3}",
                i + 1,
                r.op.name(),
                r.cache.name(),
                r.sector,
                r.sectors,
                r.service_us,
                us,
                r.service_us - us
            )?;
        }
        out.flush()?;
        out.get_ref().sync_all()
    })();
    if written.is_err() {
        // The file is this run's own, just made: a part of it is no report to leave.
        let _ = std::fs::remove_file(path);
    }
    written.with_context(|| format!("writing {}", path.display()))
}

fn file_name(path: &std::path::Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn card(
    trace: &std::path::Path,
    device: &str,
    v: &Validation,
    disksim: Option<&DiskSimFigure>,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "validate: {} on {device}: {} requests",
        trace.display(),
        v.requests
    );
    let _ = writeln!(
        s,
        "  demerit: {:.2} % of the measured mean ({:.0} µs RMS)",
        v.demerit_percent, v.demerit_us
    );
    let _ = writeln!(
        s,
        "  RMS {:.3} ms; by DiskSim's rms tool over its buckets {:.3} ms",
        v.demerit_us / 1000.0,
        v.rms_tool_ms
    );
    if let Some(d) = disksim {
        let _ = writeln!(
            s,
            "  DiskSim's own on the {}: {:.3} ms by that tool ({}); this model {}",
            d.drive,
            d.rms_ms,
            d.source,
            match standing(v.rms_tool_ms, d.rms_ms) {
                "under" => "under it",
                "at" => "at it, to the three decimals DiskSim states",
                _ => "over it",
            }
        );
        let whole = d.own.total();
        if (v.requests as u64) < whole {
            let _ = writeln!(
                s,
                "  (DiskSim's figure is for its whole trace of {whole} requests and this one has {}: \
                 a part's RMS runs higher; the share within 1 ms below compares within its sampling error)",
                v.requests
            );
        }
    }
    for op in &v.by_op {
        let _ = writeln!(
            s,
            "  {}s alone ({}): {:.2} %",
            op.op, op.requests, op.demerit_percent
        );
    }
    for c in &v.by_cache {
        let _ = writeln!(
            s,
            "  {} alone ({}): {:.2} %",
            c.cache, c.requests, c.demerit_percent
        );
    }
    let _ = writeln!(
        s,
        "  {:<10} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "µs", "mean", "p50", "p90", "p99", "max"
    );
    let row = |s: &mut String, name: &str, d: &Distribution| {
        let _ = writeln!(
            s,
            "  {name:<10} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>9.0}",
            d.mean_us, d.p50_us, d.p90_us, d.p99_us, d.max_us
        );
    };
    row(&mut s, "measured", &v.measured);
    row(&mut s, "simulated", &v.simulated);
    for op in &v.by_op {
        row(&mut s, &format!("{} meas.", op.op), &op.measured);
        row(&mut s, &format!("{} sim.", op.op), &op.simulated);
    }
    differences(&mut s, &v.differences, disksim);
    s
}

/// Where `ours` stands against DiskSim's `theirs` (`under`, `at` or `over`), at the three
/// decimals DiskSim states its figures to ("rms should be about 0.318"): the card says it,
/// and the JSON carries it (`disksim_standing`) for tools that judge by it.
fn standing(ours: f64, theirs: f64) -> &'static str {
    let (ours, theirs) = ((ours * 1000.0).round(), (theirs * 1000.0).round());
    if ours < theirs {
        "under"
    } else if ours == theirs {
        "at"
    } else {
        "over"
    }
}

/// Request by request, the recorded time less the simulated one in DiskSim's buckets (% of
/// the requests), beside DiskSim's own on its whole trace when the trace is of its suite.
fn differences(s: &mut String, model: &Differences, disksim: Option<&DiskSimFigure>) {
    let _ = writeln!(
        s,
        "  request by request, recorded less simulated (% of requests; whole ms, DiskSim's buckets):"
    );
    let mut header = format!("  {:<10}", "");
    for label in Differences::labels() {
        let _ = write!(header, " {label:>5}");
    }
    let _ = writeln!(s, "{header}");
    let line = |s: &mut String, name: &str, d: &Differences| {
        let total = d.total().max(1) as f64;
        let mut line = format!("  {name:<10}");
        for &n in &d.requests {
            let _ = write!(line, " {:>5.1}", 100.0 * f64::from(n) / total);
        }
        let _ = writeln!(s, "{line}");
    };
    line(s, "model", model);
    let within = format!(
        "  within 1 ms of the recorded time: {:.1} % of {} requests",
        100.0 * model.within_one_ms(),
        model.total()
    );
    match disksim {
        Some(d) => {
            line(s, "DiskSim", &d.own);
            let _ = writeln!(
                s,
                "{within}; DiskSim's own on its whole trace: {:.1} % of {} (its valid/ output)",
                100.0 * d.own.within_one_ms(),
                d.own.total()
            );
        }
        None => {
            let _ = writeln!(s, "{within}");
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The drive's .diskspecs (the .model and .seek it names are read beside it), or a
    /// .parv, whose bus timing is taken too.
    pub diskspecs: PathBuf,
    /// Write the spec here instead of standard output (never over an existing file).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

impl ImportArgs {
    pub fn execute(self) -> Result<()> {
        let imported = if self.diskspecs.extension().is_some_and(|e| e == "parv") {
            disksim::import_parv(&self.diskspecs)?
        } else {
            disksim::import(&self.diskspecs)?
        };
        for note in &imported.not_represented {
            eprintln!(
                "schedhost: not represented: {}",
                schedhost::output::printable(note)
            );
        }
        let text = disksim::to_spec_text(&imported, &self.diskspecs);
        // What is written must be what `--device FILE.spec` takes back.
        DeviceSpec::parse_file(Path::new("the imported spec"), &text).map_err(|e| {
            anyhow::anyhow!(
                "{}: the drive imports into a spec schedhost would refuse ({e}); nothing was written",
                self.diskspecs.display()
            )
        })?;
        match &self.output {
            None => print!("{text}"),
            Some(out) => {
                schedhost::output::write_new(out, text.as_bytes()).map_err(anyhow::Error::msg)?;
                eprintln!(
                    "schedhost: wrote {} ({} zones, {} seek points)",
                    out.display(),
                    imported.params.zones.len(),
                    imported.params.seek.len()
                );
            }
        }
        Ok(())
    }
}
