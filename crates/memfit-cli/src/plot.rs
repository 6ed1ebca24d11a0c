//! PNG plots drawn with plotters: k-means scatter plots and the EM lower bound.
//!
//! Text uses the bundled DejaVu Sans font, so no system fonts are needed.
//! Every plot is rendered to a hidden temporary file beside its destination
//! and renamed over it, so a failed plot never leaves a half-written file.

use std::fs;
use std::path::Path;
use std::sync::OnceLock;

use anyhow::{anyhow, ensure, Context, Result};
use faer::{Mat, Side};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

/// Width and height of every plot, in pixels.
const SIZE: (u32, u32) = (1000, 800);

/// Bytes a plot's PNG file takes at most: its RGB pixels uncompressed, and
/// room for the format's framing.
pub const PNG_BYTES: u64 = SIZE.0 as u64 * SIZE.1 as u64 * 3 + (64 << 10);

/// Cluster colours, repeating: Tableau's 10 strong colours, then their light variants.
#[rustfmt::skip]
const PALETTE: [RGBColor; 20] = [
    RGBColor(0x1f, 0x77, 0xb4), RGBColor(0xff, 0x7f, 0x0e), RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28), RGBColor(0x94, 0x67, 0xbd), RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2), RGBColor(0x7f, 0x7f, 0x7f), RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf), RGBColor(0xae, 0xc7, 0xe8), RGBColor(0xff, 0xbb, 0x78),
    RGBColor(0x98, 0xdf, 0x8a), RGBColor(0xff, 0x98, 0x96), RGBColor(0xc5, 0xb0, 0xd5),
    RGBColor(0xc4, 0x9c, 0x94), RGBColor(0xf7, 0xb6, 0xd2), RGBColor(0xc7, 0xc7, 0xc7),
    RGBColor(0xdb, 0xdb, 0x8d), RGBColor(0x9e, 0xda, 0xe5),
];

/// Draws a k-means scatter plot to the PNG file `path`, replacing it atomically.
///
/// `values` holds `n_rows = values.len() / n_features` points, row-major, and
/// `labels` the cluster of each; `centers` holds `n_clusters` rows of
/// `n_features`. Without `pca` the axes are features 0 and 1; with it, points
/// and centres are projected onto the first two principal components of
/// `values`. With a single feature, it is plotted against a zero y.
///
/// # Errors
/// When the principal components cannot be computed, or drawing, writing or
/// renaming the file fails.
pub fn scatter_png(
    path: &Path,
    values: &[f64],
    n_features: usize,
    labels: &[u32],
    centers: &[f64],
    n_clusters: usize,
    pca: bool,
) -> Result<()> {
    ensure!(n_features > 0, "cannot plot data with no features");
    let n_rows = values.len() / n_features;
    ensure!(labels.len() == n_rows, "{} labels for {n_rows} points", labels.len());
    ensure!(centers.len() == n_clusters * n_features, "centres do not hold {n_clusters} rows of {n_features}");
    let (origin, axes, names) = if pca && n_features > 1 {
        let (mean, axes) = principal_axes(values, n_features)?;
        (mean, axes, ["PC 1", "PC 2"])
    } else {
        let unit = |j: usize| (0..n_features).map(|i| if i == j { 1.0 } else { 0.0 }).collect();
        let y = if n_features > 1 { "feature 1" } else { "(one feature only)" };
        (vec![0.0; n_features], [unit(0), unit(1)], ["feature 0", y])
    };
    let project = |row: &[f64]| {
        let dot = |axis: &[f64]| row.iter().zip(&origin).zip(axis).map(|((x, m), a)| (x - m) * a).sum::<f64>();
        (dot(&axes[0]), dot(&axes[1]))
    };
    let points: Vec<(f64, f64)> = values.chunks_exact(n_features).map(project).collect();
    let centres: Vec<(f64, f64)> = centers.chunks_exact(n_features).map(project).collect();
    let xs = padded_range(points.iter().chain(&centres).map(|p| p.0));
    let ys = padded_range(points.iter().chain(&centres).map(|p| p.1));
    let title = format!("k-means: {n_clusters} clusters, {n_rows} sampled points");
    let (xs_span, ys_span) = (xs.clone(), ys.clone());

    render(path, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 28))
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(xs, ys)?;
        chart
            .configure_mesh()
            .x_desc(names[0])
            .y_desc(names[1])
            .x_label_formatter(&|v| tick_label(*v, &xs_span))
            .y_label_formatter(&|v| tick_label(*v, &ys_span))
            .label_style(("sans-serif", 16))
            .axis_desc_style(("sans-serif", 18))
            .draw()?;
        chart.draw_series(
            points
                .iter()
                .zip(labels)
                .map(|(&p, &label)| Circle::new(p, 2, PALETTE[label as usize % PALETTE.len()].mix(0.6).filled())),
        )?;
        // White under black, so centres stay visible on any cluster colour.
        chart.draw_series(
            centres
                .iter()
                .flat_map(|&c| [Cross::new(c, 9, WHITE.stroke_width(6)), Cross::new(c, 8, BLACK.stroke_width(3))]),
        )?;
        Ok(())
    })
}

/// Draws the EM lower bound (mean log-likelihood per sample) against the
/// iteration number to the PNG file `path`, replacing it atomically.
///
/// # Errors
/// When `lower_bounds` is empty, or drawing, writing or renaming fails.
pub fn lower_bound_png(path: &Path, lower_bounds: &[f64], title: &str) -> Result<()> {
    ensure!(!lower_bounds.is_empty(), "no iterations to plot");
    // Iterations are counted on an integer axis, so its ticks are whole numbers.
    let points: Vec<(i32, f64)> = (1..).zip(lower_bounds.iter().copied()).collect();
    let xs = iteration_range(lower_bounds.len());
    let ys = padded_range(points.iter().map(|p| p.1));
    let ys_span = ys.clone();
    render(path, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 28))
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(100)
            .build_cartesian_2d(xs, ys)?;
        chart
            .configure_mesh()
            .x_desc("EM iteration")
            .y_desc("lower bound (mean log-likelihood per sample)")
            .y_label_formatter(&|v| tick_label(*v, &ys_span))
            .label_style(("sans-serif", 16))
            .axis_desc_style(("sans-serif", 18))
            .draw()?;
        chart.draw_series(LineSeries::new(points.iter().copied(), PALETTE[0].stroke_width(2)))?;
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, PALETTE[0].filled())))?;
        Ok(())
    })
}

/// The data mean and the two principal axes (largest eigenvalue of the
/// covariance first) of `values`, row-major with `d > 1` columns.
fn principal_axes(values: &[f64], d: usize) -> Result<(Vec<f64>, [Vec<f64>; 2])> {
    let n = values.len() / d;
    let mut mean = vec![0.0; d];
    for row in values.chunks_exact(d) {
        mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
    }
    mean.iter_mut().for_each(|m| *m /= n.max(1) as f64);
    let centred = Mat::from_fn(n, d, |i, j| values[i * d + j] - mean[j]);
    let scatter = centred.transpose() * &centred;
    let eigen =
        scatter.self_adjoint_eigen(Side::Lower).map_err(|e| anyhow!("PCA eigen-decomposition failed: {e:?}"))?;
    // faer sorts eigenvalues in nondecreasing order: the last columns are the largest.
    let axis = |k: usize| eigen.U().col(d - k).iter().copied().collect();
    Ok((mean, [axis(1), axis(2)]))
}

/// The label of tick `v` on an axis over `range`: enough decimals for
/// plotters' ticks (steps of 1, 2 or 5 times a power of ten, at most about
/// ten per axis, so at least a hundredth of the range), without trailing
/// zeros, so whole numbers have no ".0" ("100", "2.5", "-3.937031").
fn tick_label(v: f64, range: &std::ops::Range<f64>) -> String {
    let step = (range.end - range.start) / 100.0;
    let decimals = if step > 0.0 { (-step.log10()).ceil().clamp(0.0, 15.0) as usize } else { 6 };
    let text = format!("{v:.decimals$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// The axis for iterations `1..=n`, one step of margin each side.
fn iteration_range(n: usize) -> std::ops::Range<i32> {
    0..i32::try_from(n).unwrap_or(i32::MAX - 1) + 1
}

/// The range of `values` padded by 5% each side, never empty.
fn padded_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return -1.0..1.0;
    }
    let pad = if hi > lo { (hi - lo) * 0.05 } else { lo.abs().max(1.0) * 0.05 };
    lo - pad..hi + pad
}

/// Registers the bundled font once, renders a white `SIZE` canvas with `draw`
/// to a temporary PNG beside `path`, then renames it over `path`.
fn render(path: &Path, draw: impl FnOnce(&DrawingArea<BitMapBackend, Shift>) -> Result<()>) -> Result<()> {
    static FONT: OnceLock<bool> = OnceLock::new();
    let font_ok = *FONT.get_or_init(|| {
        register_font("sans-serif", FontStyle::Normal, include_bytes!("../assets/DejaVuSans.ttf")).is_ok()
    });
    ensure!(font_ok, "the bundled font could not be loaded");
    let name = path.file_name().with_context(|| format!("plot path {} has no file name", path.display()))?;
    // The `.png` suffix matters: the encoder picks the image format from it.
    let tmp = path.with_file_name(format!(".{}.{}.tmp.png", name.to_string_lossy(), std::process::id()));
    let result: Result<()> = (|| {
        let root = BitMapBackend::new(&tmp, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root)?;
        root.present()?;
        drop(root);
        fs::File::open(&tmp)?.sync_all()?;
        fs::rename(&tmp, path)?;
        Ok(())
    })();
    if result.is_err() {
        // The backend writes the file when dropped, so remove it only after the closure ends.
        let _ = fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing plot {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_drop_the_point_zero_of_whole_numbers() {
        let wide = -10.0..110.0;
        for (v, label) in [(100.0, "100"), (0.0, "0"), (-3.0, "-3"), (-1e-12, "0")] {
            assert_eq!(tick_label(v, &wide), label);
        }
        assert_eq!(tick_label(-0.25, &(-1.0..1.0)), "-0.25");
        assert_eq!(tick_label(0.1 + 0.2, &(-1.0..1.0)), "0.3");
        assert_eq!(tick_label(1e9, &(1e9 - 50.0..1e9 + 50.0)), "1000000000");
        // Ticks a millionth apart stay distinct.
        let lb = -3.93704..-3.93702;
        assert_eq!(tick_label(-3.937031, &lb), "-3.937031");
        assert_ne!(tick_label(-3.937031, &lb), tick_label(-3.937032, &lb));
    }

    #[test]
    fn iteration_axis_has_whole_number_ticks() {
        for n in [1, 2, 7, 100, 1000] {
            let axis: plotters::coord::types::RangedCoordi32 = iteration_range(n).into();
            let ticks = axis.key_points(10);
            assert!(ticks.iter().all(|&t| (0..=n as i32 + 1).contains(&t)), "{n}: {ticks:?}");
            assert!(ticks.len() >= 2, "{n}: {ticks:?}");
            if n <= 7 {
                assert!((1..=n as i32).all(|i| ticks.contains(&i)), "{n}: {ticks:?}");
            }
        }
    }

    #[test]
    fn lower_bound_plot_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lb.png");
        lower_bound_png(&path, &[-3.0, -2.0, -1.5], "test").unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 1000);
    }
}
