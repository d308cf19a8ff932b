//! `bench-report`'s chart, `benches/suite.svg`: [`render_svg`] draws the
//! results with `plotters`' SVG backend, one panel per workload, a group of
//! bars (ops/s, log scale) per variant and size, one bar per runtime in
//! its own color. Text is left to the SVG viewer's fonts, so no font
//! library is needed to build or run it.

use std::collections::BTreeSet;
use std::fmt;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Measurement, RUNTIMES, ReportError, Workload, format_si, group};

/// The color of each of [`RUNTIMES`] (the runtimes the chart draws), in
/// that order.
const COLORS: [RGBColor; RUNTIMES.len()] = [
    RGBColor(31, 119, 180),  // single
    RGBColor(44, 160, 44),   // wstp
    RGBColor(148, 103, 189), // batching
    RGBColor(140, 86, 75),   // spindle_tokio
    RGBColor(255, 127, 14),  // tokio
    RGBColor(214, 39, 40),   // tokio_mt
];

/// [`ReportError::Chart`] for what plotters reports.
fn chart_error(e: impl fmt::Display) -> ReportError {
    ReportError::Chart(e.to_string())
}

/// The summary chart as an SVG document: one panel per workload with
/// ops/s, a group of bars per variant and size, one bar per runtime
/// (Spindle's single, wstp, batching and spindle_tokio next to tokio and
/// tokio_mt), on a log scale.
pub fn render_svg(results: &[Measurement]) -> Result<String, ReportError> {
    let workloads: Vec<Workload<'_>> = group(results);
    let present: Vec<(&str, RGBColor)> = RUNTIMES
        .into_iter()
        .zip(COLORS)
        .filter(|(rt, _)| workloads.iter().any(|w| w.runtimes.contains(rt)))
        .collect();
    let max_rows = workloads.iter().map(|w| w.rows.len()).max().unwrap_or(1);
    let columns = workloads.len().clamp(1, 3);
    let panel_rows = workloads.len().div_ceil(columns).max(1);
    let panel_width = (110 + max_rows * (present.len().max(1) * 12 + 24)).max(380) as u32;
    let panel_height = 270u32;
    let header = 64u32;
    let size = (
        panel_width * columns as u32,
        header + panel_height * panel_rows as u32,
    );

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let (top, body) = root.split_vertically(header);
        top.draw(&Text::new(
            "Spindle suite: ops/s per workload (log scale; higher is faster)",
            (12, 10),
            ("sans-serif", 22).into_font(),
        ))
        .map_err(chart_error)?;
        for (i, (runtime, color)) in present.iter().enumerate() {
            let x = 12 + 120 * i as i32;
            top.draw(&Rectangle::new([(x, 40), (x + 14, 54)], color.filled()))
                .map_err(chart_error)?;
            top.draw(&Text::new(
                *runtime,
                (x + 20, 41),
                ("sans-serif", 17).into_font(),
            ))
            .map_err(chart_error)?;
        }
        if workloads.is_empty() {
            body.draw(&Text::new(
                "no suite.* results",
                (12, 20),
                ("sans-serif", 14).into_font(),
            ))
            .map_err(chart_error)?;
        }
        let panels = body.split_evenly((panel_rows, columns));
        for (panel, workload) in panels.iter().zip(&workloads) {
            draw_panel(panel, workload, &present)?;
        }
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    workload: &Workload<'_>,
    present: &[(&str, RGBColor)],
) -> Result<(), ReportError>
where
    DB::ErrorType: 'static,
{
    let runtimes: Vec<(&str, RGBColor)> = present
        .iter()
        .copied()
        .filter(|(rt, _)| workload.runtimes.contains(rt))
        .collect();
    let values: Vec<f64> = workload
        .rows
        .iter()
        .flat_map(|row| {
            runtimes
                .iter()
                .filter_map(|(rt, _)| Some(row.by_runtime.get(rt)?.ops_per_sec()))
        })
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let lowest = values.iter().copied().fold(f64::INFINITY, f64::min);
    let highest = values.iter().copied().fold(0.0, f64::max);
    // A decade boundary at least 3x below the lowest bar, so that every bar
    // shows.
    let bottom = 10f64.powf((lowest / 3.0).log10().floor());
    let mut top = 10f64.powf(highest.log10().ceil());
    if top <= bottom {
        top = bottom * 10.0;
    }
    let rows = workload.rows.len();
    let several_sizes = workload
        .rows
        .iter()
        .map(|r| r.size)
        .collect::<BTreeSet<_>>()
        .len()
        > 1;

    let mut chart = ChartBuilder::on(area)
        .caption(workload.name, ("sans-serif", 20))
        .margin(8)
        .x_label_area_size(22)
        .y_label_area_size(58)
        .build_cartesian_2d(-0.5f64..rows as f64 - 0.5, (bottom..top).log_scale())
        .map_err(chart_error)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(6)
        .y_label_formatter(&|v| format_si(*v))
        .y_desc("ops/s")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(chart_error)?;

    let slot = 0.8 / runtimes.len().max(1) as f64;
    let mut bars = Vec::new();
    for (i, row) in workload.rows.iter().enumerate() {
        for (k, (rt, color)) in runtimes.iter().enumerate() {
            let Some(value) = row.by_runtime.get(rt).map(|m| m.ops_per_sec()) else {
                continue;
            };
            let x0 = i as f64 - 0.4 + k as f64 * slot;
            bars.push(Rectangle::new(
                [(x0, bottom), (x0 + slot * 0.9, value.max(bottom))],
                color.filled(),
            ));
        }
    }
    chart.draw_series(bars).map_err(chart_error)?;

    let label_style = TextStyle::from(("sans-serif", 14).into_font())
        .pos(Pos::new(HPos::Center, VPos::Top))
        .color(&BLACK);
    let labels = workload.rows.iter().enumerate().map(|(i, row)| {
        let label = match (several_sizes, row.variant.is_empty()) {
            (true, true) => row.size.to_string(),
            (true, false) => format!("{} {}", row.variant, row.size),
            (false, true) => "-".to_string(),
            (false, false) => row.variant.to_string(),
        };
        EmptyElement::at((i as f64, bottom)) + Text::new(label, (0, 5), label_style.clone())
    });
    chart.draw_series(labels).map_err(chart_error)?;
    Ok(())
}
