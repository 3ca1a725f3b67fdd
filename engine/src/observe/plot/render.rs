//! A plot's SVG as PNG and PDF, its text in the system's fonts.

/// The most pixels a PNG may have (400 MB of pixmap): `--size 20x20 --dpi 1200` would ask
/// for 576 million.
const MAX_PNG_PIXELS: u64 = 100_000_000;

/// `svg` rendered to PNG at `dpi` dots per inch of its stated size, its text in the
/// system's fonts (a machine with no fonts gets the lines and no text).
///
/// # Errors
/// The SVG does not parse, `dpi` is outside 10..=1200, the picture would have more than
/// `MAX_PNG_PIXELS`, or it cannot be encoded.
pub fn png(svg: &str, dpi: u32) -> Result<Vec<u8>, String> {
    if !(10..=1200).contains(&dpi) {
        return Err(format!("{dpi} dpi: expected 10 to 1200"));
    }
    let tree = parsed(svg)?;
    let scale = dpi as f32 / super::page::PX_PER_INCH as f32;
    let size = tree
        .size()
        .to_int_size()
        .scale_by(scale)
        .ok_or("the plot has no area")?;
    let pixels = u64::from(size.width()) * u64::from(size.height());
    if pixels > MAX_PNG_PIXELS {
        return Err(format!(
            "the PNG would be {}×{} pixels, more than {MAX_PNG_PIXELS}: a smaller --size or --dpi",
            size.width(),
            size.height()
        ));
    }
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("the plot has no area")?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| format!("encoding the PNG: {e}"))
}

/// `svg` as a one-page PDF, its text kept as text in embedded subsets of the system's fonts.
///
/// # Errors
/// The SVG does not parse, or the PDF cannot be made.
pub fn pdf(svg: &str) -> Result<Vec<u8>, String> {
    let tree = parsed(svg)?;
    svg2pdf::to_pdf(
        &tree,
        svg2pdf::ConversionOptions::default(),
        svg2pdf::PageOptions::default(),
    )
    .map_err(|e| format!("making the PDF: {e}"))
}

/// `svg` parsed with the system's fonts (loaded once).
fn parsed(svg: &str) -> Result<resvg::usvg::Tree, String> {
    static FONTS: std::sync::OnceLock<std::sync::Arc<resvg::usvg::fontdb::Database>> =
        std::sync::OnceLock::new();
    let fonts = FONTS.get_or_init(|| {
        let mut db = resvg::usvg::fontdb::Database::new();
        db.load_system_fonts();
        db.set_sans_serif_family("DejaVu Sans");
        std::sync::Arc::new(db)
    });
    parsed_with(svg, fonts)
}

/// `svg` parsed with the fonts of `fonts`.
pub(super) fn parsed_with(
    svg: &str,
    fonts: &std::sync::Arc<resvg::usvg::fontdb::Database>,
) -> Result<resvg::usvg::Tree, String> {
    let options = resvg::usvg::Options {
        fontdb: std::sync::Arc::clone(fonts),
        ..resvg::usvg::Options::default()
    };
    resvg::usvg::Tree::from_str(svg, &options).map_err(|e| format!("reading the SVG: {e}"))
}
