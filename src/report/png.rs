//! Static pictures with plotters: the font they need, writing them, and the charts of `stats --png` (busy time
//! per stream, where kernel time goes). The timeline of `analyze --png` is drawn by timeline_picture.rs.

use std::path::Path;

use anyhow::Context;
use plotters::prelude::*;

pub use super::timeline_picture::{timeline_height, write_timeline};

const WIDTH: u32 = 1600;

/// Where a TrueType font for the pictures' text may be, before a search of the font folders.
const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
];
const FONT_DIRS: &[&str] = &["/usr/share/fonts", "/usr/local/share/fonts"];

/// The TrueType font the pictures' text is drawn with: the file STREAMTRACE_FONT names, else the first found in
/// the usual places. Tests ask it too, to know whether pictures can be drawn on this machine.
pub fn font_path() -> Result<std::path::PathBuf, String> {
    if let Some(named) = std::env::var_os("STREAMTRACE_FONT").map(std::path::PathBuf::from) {
        return if named.is_file() {
            Ok(named)
        } else {
            Err(format!("STREAMTRACE_FONT names {}, which is not a file", named.display()))
        };
    }
    FONT_CANDIDATES
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.is_file())
        .or_else(|| FONT_DIRS.iter().find_map(|dir| first_ttf(Path::new(dir), 4)))
        .ok_or_else(|| "no TrueType font found for the pictures' text: install one (fonts-dejavu-core) or set STREAMTRACE_FONT to a .ttf file".to_string())
}

/// Finds a TrueType font and gives it to plotters as "sans-serif", once per process. Text is drawn with a
/// pure-Rust rasterizer, so that the streamtrace binary needs no fontconfig or FreeType on the machine
/// (capture runs on minimal GPU servers); only the pictures need a font file, named by STREAMTRACE_FONT or
/// found in the usual places.
fn ensure_font() -> anyhow::Result<()> {
    static FONT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    FONT.get_or_init(|| {
        let path = font_path()?;
        let bytes = std::fs::read(&path).map_err(|e| format!("cannot read the font {}: {e}", path.display()))?;
        // plotters keeps registered fonts for the life of the process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{} is not a font plotters can draw with (STREAMTRACE_FONT)", path.display()))
    })
    .clone()
    .map_err(anyhow::Error::msg)
}

/// The first `.ttf` file under `dir`, searching at most `depth` folders down, in name order.
fn first_ttf(dir: &Path, depth: u32) -> Option<std::path::PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    let file = entries.iter().find(|p| p.is_file() && p.extension().is_some_and(|e| e.eq_ignore_ascii_case("ttf")));
    file.cloned().or_else(|| {
        (depth > 0).then(|| entries.iter().filter(|p| p.is_dir()).find_map(|d| first_ttf(d, depth - 1))).flatten()
    })
}

/// Renders into `path` through [`crate::output::write_atomically_with`].
pub(super) fn render(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<BitMapBackend, plotters::coord::Shift>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    // The output path is checked before the font is looked for: a bad target is the first thing to say.
    crate::output::write_atomically_with(path, "png", |tmp| {
        ensure_font()?;
        let root = BitMapBackend::new(tmp, size).into_drawing_area();
        root.fill(&WHITE).context("filling the picture")?;
        draw(&root)?;
        root.present().with_context(|| format!("writing {}", path.display()))
    })
}

/// Two charts side by side: busy time per stream, and the kernels that take the most GPU time.
pub fn write_stats(busy: &[(String, f64)], kernels: &[(String, f64)], path: &Path) -> anyhow::Result<()> {
    let rows = busy.len().max(kernels.len()).max(1) as u32;
    render(path, (WIDTH, stats_height(rows)), |root| {
        let (left, right) = root.split_horizontally(WIDTH / 2);
        bar_chart(&left, "busy time per stream (ms)", busy)?;
        bar_chart(&right, "GPU time per kernel, top 10 (ms)", kernels)?;
        Ok(())
    })
}

/// Height of the stats picture for `rows` rows in its longer chart.
pub fn stats_height(rows: u32) -> u32 {
    80 + rows.min(64) * 34
}

/// A label cut to `max` characters, keeping both ends (template names differ at the end).
pub(super) fn fit(label: &str, max: usize) -> String {
    let chars: Vec<char> = label.chars().collect();
    if chars.len() <= max {
        return label.to_string();
    }
    let head: String = chars[..max / 3].iter().collect();
    let tail: String = chars[chars.len() - (max - max / 3 - 1)..].iter().collect();
    format!("{head}\u{2026}{tail}")
}

/// A horizontal bar chart drawn directly: label, bar, value, one row each.
fn bar_chart(
    area: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    title: &str,
    rows: &[(String, f64)],
) -> anyhow::Result<()> {
    let (width, height) = area.dim_in_pixel();
    area.draw(&Text::new(title.to_string(), (20, 15), ("sans-serif", 18).into_font())).context("drawing the title")?;
    if rows.is_empty() {
        area.draw(&Text::new("(no data)".to_string(), (20, 50), ("sans-serif", 14).into_font()))?;
        return Ok(());
    }
    let max = rows.iter().map(|r| r.1).fold(0.0f64, f64::max).max(1e-12);
    let (label_w, top) = (270i32, 50i32);
    let row_h = ((height as i32 - top - 20) / rows.len() as i32).clamp(12, 40);
    let bar_max = (width as i32 - label_w - 110).max(10) as f64;
    for (i, (label, value)) in rows.iter().enumerate() {
        let y = top + i as i32 * row_h;
        let text = fit(label, 40);
        area.draw(&Text::new(text, (12, y + row_h / 2 - 6), ("sans-serif", 12).into_font()))?;
        let end = label_w + (value / max * bar_max) as i32;
        area.draw(&Rectangle::new(
            [(label_w, y + 3), (end.max(label_w + 1), y + row_h - 3)],
            RGBColor(74, 114, 201).filled(),
        ))?;
        area.draw(&Text::new(format!("{value:.3}"), (end + 6, y + row_h / 2 - 6), ("sans-serif", 12).into_font()))?;
    }
    Ok(())
}
