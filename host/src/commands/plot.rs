//! `schedhost plot REPORT.json...`: SVG plots from saved JSON reports; `--plot DIR` on `run`
//! and `compare` calls the same code with the report just made.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use schedhost::observe::plot::{self, Report, Svg};
use serde_json::Value;

#[derive(Debug, clap::Args)]
pub struct PlotArgs {
    /// JSON reports: from `run --output-format json` (several are overlaid on one latency
    /// CDF) or from `compare --json`.
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// Directory for the SVG files (created if missing).
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
}

impl PlotArgs {
    pub fn execute(self) -> Result<()> {
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
                    svgs.push(plot::compare(doc).map_err(anyhow::Error::msg)?);
                }
            }
        }
        if !runs.is_empty() {
            svgs.extend(plot::runs(&runs).map_err(anyhow::Error::msg)?);
        }
        write(&self.out, &svgs)
    }
}

/// Writes `svgs` into `dir`, creating it, each with a PNG and a PDF of it beside, and says
/// where they went.
pub fn write(dir: &Path, svgs: &[Svg]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, svg) in svgs {
        let path = dir.join(name);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        let png = plot::png(svg).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
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
