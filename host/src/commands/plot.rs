//! `schedhost plot REPORT.json...`: SVG plots (with PNG and PDF beside them) from saved JSON
//! reports, sized for a paper; `--plot DIR` on `run` and `compare` calls the same code with
//! the report just made and the default options.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use schedhost::observe::plot::{self, Latency, Options, Report, Scale, Svg};
use serde_json::Value;

/// PNGs' resolution when `--dpi` is not given: print quality.
pub const DEFAULT_DPI: u32 = 300;

#[derive(Debug, clap::Args)]
pub struct PlotArgs {
    /// JSON reports: from `run --output-format json` (several are overlaid on one latency
    /// plot) or from `compare --json`.
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// Directory for the plots (created if missing).
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Page size in inches, WIDTHxHEIGHT (default: 3.5 wide, a column's width; taller for
    /// panels and for compare's devices).
    #[arg(long, value_name = "WxH", value_parser = parse_size)]
    pub size: Option<(f64, f64)>,
    /// Text size in points.
    #[arg(long, value_name = "PT", default_value_t = 8.0, value_parser = parse_font)]
    pub font_pt: f64,
    /// PNG resolution in dots per inch.
    #[arg(long, default_value_t = DEFAULT_DPI, value_parser = clap::value_parser!(u32).range(10..=1200))]
    pub dpi: u32,
    /// Leave the title out (a paper's caption says it).
    #[arg(long)]
    pub no_title: bool,
    /// Latency plot: `tail` (1 − CDF, log y: latency-tail.svg), `cdf` (linear y:
    /// latency-cdf.svg) or `both`.
    #[arg(long, default_value = "tail", value_parser = ["tail", "cdf", "both"])]
    pub latency: String,
    /// Y axis of IOPS over time and of compare's chart: `auto` (log for compare when its
    /// means span more than a decade, linear for IOPS), `linear` or `log`.
    #[arg(long, default_value = "auto", value_parser = ["auto", "linear", "log"])]
    pub y: String,
    /// IOPS over time as a panel per job, each with its own y axis.
    #[arg(long)]
    pub panels: bool,
    /// Only these jobs, by job name or a clone's NAME.K (comma-separated).
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    pub series: Vec<String>,
    /// A job's clones (numjobs) as one series: completions summed, latencies merged.
    #[arg(long)]
    pub per_job: bool,
}

/// `WxH` in inches, each from 1 to 20.
fn parse_size(text: &str) -> Result<(f64, f64), String> {
    let bad =
        || format!("{text:?}: expected WIDTHxHEIGHT in inches, each from 1 to 20, e.g. 3.5x2.6");
    let (w, h) = text.split_once(['x', 'X']).ok_or_else(bad)?;
    let inches = |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| (1.0..=20.0).contains(v))
            .ok_or_else(bad)
    };
    Ok((inches(w)?, inches(h)?))
}

/// A font size in points, from 4 to 36.
fn parse_font(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|v| (4.0..=36.0).contains(v))
        .ok_or_else(|| format!("{text:?}: expected a size in points from 4 to 36"))
}

impl PlotArgs {
    fn options(&self) -> Options {
        Options {
            size_in: self.size,
            font_pt: self.font_pt,
            title: !self.no_title,
            latency: match self.latency.as_str() {
                "cdf" => Latency::Cdf,
                "both" => Latency::Both,
                _ => Latency::Tail,
            },
            y: match self.y.as_str() {
                "linear" => Scale::Linear,
                "log" => Scale::Log,
                _ => Scale::Auto,
            },
            panels: self.panels,
            series: self.series.clone(),
            per_job: self.per_job,
        }
    }

    pub fn execute(self) -> Result<()> {
        let options = self.options();
        let docs = self
            .reports
            .iter()
            .map(|path| {
                let text = schedhost::input::read_text(path, schedhost::input::MAX_REPORT_BYTES)
                    .with_context(|| format!("reading {}", path.display()))?;
                let doc: Value = serde_json::from_str(&text)
                    .with_context(|| format!("{}: not JSON", path.display()))?;
                Ok(doc)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut runs = Vec::new();
        let mut svgs = Vec::new();
        for (doc, path) in docs.iter().zip(&self.reports) {
            match Report::of(doc).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))? {
                Report::Run(doc) => runs.push(doc),
                Report::Compare(doc) => {
                    if !svgs.is_empty() {
                        bail!("plot one compare table at a time");
                    }
                    svgs.push(plot::compare(doc, &options).map_err(anyhow::Error::msg)?);
                }
            }
        }
        if !runs.is_empty() {
            svgs.extend(plot::runs(&runs, &options).map_err(anyhow::Error::msg)?);
        }
        write(&self.out, &svgs, self.dpi)
    }
}

/// Writes `svgs` into `dir`, creating it, each with a PNG (at `dpi`) and a PDF of it
/// beside, and says where they went.
pub fn write(dir: &Path, svgs: &[Svg], dpi: u32) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, svg) in svgs {
        let path = dir.join(name);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        let png = plot::png(svg, dpi).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let pdf = plot::pdf(svg).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        for (extension, bytes) in [("png", png), ("pdf", pdf)] {
            let beside = path.with_extension(extension);
            std::fs::write(&beside, bytes)
                .with_context(|| format!("writing {}", beside.display()))?;
        }
        eprintln!("schedhost: wrote {} (and .png, .pdf)", path.display());
    }
    Ok(())
}
