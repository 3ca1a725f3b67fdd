//! A plot's page: its size in inches and its text in points, the chart above and the legend
//! below it, and each series' look. Everything is laid out from the font size, so a plot
//! drawn for a 3.5-inch column reads at that width and one drawn for a slide scales with it.

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::{MAX_POINTS_PER_SERIES, MAX_SERIES, Options, Series, err};

/// CSS pixels per inch: the unit of an SVG's user space, as every renderer reads it.
pub(super) const PX_PER_INCH: f64 = 96.0;
/// Points per inch.
const PT_PER_INCH: f64 = 72.0;
/// A sans-serif character's width as a fraction of the font size, a little generous, so
/// labels laid out by it fit.
const CHAR_WIDTH: f64 = 0.6;
/// plotters' SVG backend writes a text's size divided by this (its fonts' em against their
/// line height); asking for size × this writes the size meant.
const SVG_FONT_SHRINK: f64 = 1.24;
/// The share of the page's height the legend may take; past it, series are left out and
/// the legend says how many.
const LEGEND_SHARE: f64 = 0.35;

/// Series colours, in order.
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// A drawing area of a plot.
pub(super) type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// One plot's page: pixel size, font size in pixels, and whether it has a title.
#[derive(Debug, Clone, Copy)]
pub(super) struct Page {
    /// Width and height in CSS pixels.
    pub px: (u32, u32),
    /// Width and height in inches, as the SVG states them.
    inches: (f64, f64),
    /// The text's size in pixels.
    pub font: f64,
    titled: bool,
}

impl Page {
    /// The page `options` ask for, or `default_in` (inches) where they name no size.
    pub fn new(options: &Options, default_in: (f64, f64)) -> Self {
        let inches = options.size_in.unwrap_or(default_in);
        let px = |i: f64| (i * PX_PER_INCH).round().max(1.0) as u32;
        Self {
            px: (px(inches.0), px(inches.1)),
            inches,
            font: options.font_pt * PX_PER_INCH / PT_PER_INCH,
            titled: options.title,
        }
    }

    /// The title's font.
    pub fn caption_font(&self) -> (&'static str, f64) {
        ("sans-serif", self.font * 1.1 * SVG_FONT_SHRINK)
    }

    /// The axis labels' font.
    pub fn label_font(&self) -> (&'static str, f64) {
        ("sans-serif", self.font * SVG_FONT_SHRINK)
    }

    /// `title` cut to the page's width, or nothing when the page has no title.
    pub fn title(&self, title: &str) -> Option<String> {
        if !self.titled {
            return None;
        }
        let fit = (f64::from(self.px.0) / (self.font * 1.1 * CHAR_WIDTH)) as usize;
        Some(clipped(title, fit.max(8)))
    }

    /// Space around a chart.
    pub fn margin(&self) -> u32 {
        (self.font * 0.8).round() as u32
    }

    /// Height of the x axis's tick labels and description.
    pub fn x_label_area(&self) -> u32 {
        (self.font * 3.0).round() as u32
    }

    /// Width of the y axis's tick labels (up to `chars` long) and rotated description.
    pub fn y_label_area(&self, chars: usize) -> u32 {
        (self.font * (CHAR_WIDTH * chars as f64 + 2.4)).round() as u32
    }

    /// Line width in pixels: about 1.5 pt at an 8-pt font.
    pub fn stroke(&self) -> u32 {
        (self.font * 0.15).round().max(1.0) as u32
    }

    /// A marker's size in pixels.
    pub fn marker(&self) -> i32 {
        (self.font * 0.4).round().max(2.0) as i32
    }

    /// Series `i`'s look: a colour and a dash (scaled to the font), both cycling (8
    /// colours, 4 dashes), so no two of the first eight look alike and lines drawn over one
    /// another still both show.
    pub fn look(&self, i: usize) -> (RGBColor, Option<(u32, u32)>) {
        const DASHES: [Option<(f64, f64)>; 4] =
            [None, Some((0.8, 0.4)), Some((0.25, 0.3)), Some((1.2, 0.3))];
        let dash = DASHES[i % DASHES.len()].map(|(on, off)| {
            let px = |f: f64| (f * self.font).round().max(1.0) as u32;
            (px(on), px(off))
        });
        (PALETTE[i % PALETTE.len()], dash)
    }

    /// How the legend under the chart lays out `labels`.
    fn legend(&self, labels: &[String]) -> Legend {
        let width = f64::from(self.px.0) - 2.0 * f64::from(self.margin());
        let sample = self.font * 2.2;
        let pad = self.font * 1.2;
        let char_px = self.font * CHAR_WIDTH;
        let fit = ((width - sample - pad) / char_px).max(4.0) as usize;
        let longest = labels
            .iter()
            .map(|l| l.chars().count().min(fit))
            .max()
            .unwrap_or(0);
        let entry = sample + pad + longest as f64 * char_px;
        let columns = ((width / entry) as usize).max(1);
        let row = self.font * 1.4;
        let max_rows = ((f64::from(self.px.1) * LEGEND_SHARE / row) as usize).max(1);
        let capacity = columns * max_rows;
        let wanted = labels.len().min(MAX_SERIES);
        let shown = if labels.len() <= capacity {
            wanted
        } else {
            wanted.min(capacity - 1)
        };
        let cells = shown + usize::from(shown < labels.len());
        let rows = cells.div_ceil(columns);
        Legend {
            columns,
            entry,
            fit,
            shown,
            hidden: labels.len() - shown,
            height: if rows == 0 {
                0
            } else {
                (rows as f64 * row + self.font * 0.6).round() as u32
            },
        }
    }
}

/// Where the legend's entries go.
#[derive(Debug, Clone, Copy)]
struct Legend {
    columns: usize,
    /// An entry's width in pixels.
    entry: f64,
    /// Characters a label keeps.
    fit: usize,
    /// Series the legend names (and the chart draws).
    shown: usize,
    /// Series left out.
    hidden: usize,
    /// Pixels under the chart.
    height: u32,
}

/// `text` cut to `fit` characters, with "..." where it was cut.
pub(super) fn clipped(text: &str, fit: usize) -> String {
    if text.chars().count() <= fit {
        return text.to_owned();
    }
    text.chars().take(fit.saturating_sub(3)).collect::<String>() + "..."
}

/// Draws a plot on `page`: `paint` gets the chart's area and how many of the series
/// (`labels`, in order) it may draw (as many as the legend can name); the legend goes
/// under the chart. Returns the SVG text, its size stated in inches.
///
/// # Errors
/// `paint` failed.
pub(super) fn draw(
    page: &Page,
    labels: &[String],
    paint: impl FnOnce(&Area<'_>, usize) -> Result<(), String>,
) -> Result<String, String> {
    let legend = page.legend(labels);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, page.px).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let chart_height = page.px.1.saturating_sub(legend.height).max(1);
        let (chart, below) = root.split_vertically(chart_height);
        paint(&chart, legend.shown)?;
        draw_legend(page, &below, labels, legend)?;
        root.present().map_err(err)?;
    }
    Ok(in_inches(&svg, page))
}

/// `svg` with its width and height stated in inches, so that it prints at the size asked
/// for; its user space stays in pixels.
fn in_inches(svg: &str, page: &Page) -> String {
    let pixels = format!("width=\"{}\" height=\"{}\"", page.px.0, page.px.1);
    let inches = format!(
        "width=\"{}in\" height=\"{}in\"",
        page.inches.0, page.inches.1
    );
    svg.replacen(&pixels, &inches, 1)
}

/// The legend under the chart: each shown series' look and label, in rows, and how many
/// were left out.
fn draw_legend(
    page: &Page,
    area: &Area<'_>,
    labels: &[String],
    legend: Legend,
) -> Result<(), String> {
    let row = page.font * 1.4;
    let margin = f64::from(page.margin());
    let at = |cell: usize| -> (i32, i32) {
        let x = margin + (cell % legend.columns) as f64 * legend.entry;
        let y = (cell / legend.columns) as f64 * row + page.font * 0.9;
        (x.round() as i32, y.round() as i32)
    };
    let font = page.label_font();
    for (i, label) in labels.iter().take(legend.shown).enumerate() {
        let (x, y) = at(i);
        let (colour, dash) = page.look(i);
        let style = colour.stroke_width(page.stroke());
        let ends = vec![(x, y), (x + (page.font * 1.8) as i32, y)];
        match dash {
            None => area.draw(&PathElement::new(ends, style)).map_err(err)?,
            Some((on, off)) => area
                .draw(&DashedPathElement::new(ends, on, off, style))
                .map_err(err)?,
        }
        let text_x = x + (page.font * 2.2) as i32;
        let text_y = y - (page.font * 0.55) as i32;
        area.draw(&Text::new(
            clipped(label, legend.fit),
            (text_x, text_y),
            font,
        ))
        .map_err(err)?;
    }
    if legend.hidden > 0 {
        let (x, y) = at(legend.shown);
        let more = format!("(and {} more, not drawn: --size, --series)", legend.hidden);
        area.draw(&Text::new(more, (x, y - (page.font * 0.55) as i32), font))
            .map_err(err)?;
    }
    Ok(())
}

/// Draws the first `shown` of `series` as lines in their [`Page::look`].
pub(super) fn lines<'a, X, Y>(
    page: &Page,
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    series: &[Series],
    shown: usize,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, (_, points)) in series.iter().take(shown).enumerate() {
        let points: Vec<(f64, f64)> = thinned(points).collect();
        line(page, chart, i, &points)?;
    }
    Ok(())
}

/// At most [`MAX_POINTS_PER_SERIES`] of `points`, evenly spaced, the last one included.
fn thinned(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    let step = points.len().div_ceil(MAX_POINTS_PER_SERIES).max(1);
    let last = points.len().saturating_sub(1);
    points
        .iter()
        .enumerate()
        .filter(move |(i, _)| i % step == 0 || *i == last)
        .map(|(_, &p)| p)
}

/// Series `k`'s line through `points` in its [`Page::look`].
pub(super) fn line<'a, X, Y>(
    page: &Page,
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    k: usize,
    points: &[(f64, f64)],
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let (colour, dash) = page.look(k);
    let style = colour.stroke_width(page.stroke());
    match dash {
        None => chart
            .draw_series(LineSeries::new(points.iter().copied(), style))
            .map(|_| ())
            .map_err(err),
        Some((on, off)) => chart
            .draw_series(DashedLineSeries::new(points.to_vec(), on, off, style))
            .map(|_| ())
            .map_err(err),
    }
}
