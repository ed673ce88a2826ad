// SPDX-License-Identifier: Apache-2.0
//! Charts as plain inline SVG: horizontal bars with their intervals, and figures over the recording with
//! the probe windows they come from and the estimate's band.

use std::fmt::{self, Write};

use super::page::Esc;

const WIDTH: f64 = 960.0;
const PALETTE: [&str; 8] = [
    "#2a7ae2", "#e8743b", "#19a979", "#945ecf", "#ed4a7b", "#13a4b4", "#bf8b12", "#525df4",
];

/// The palette's colour for the n-th series or bar group.
pub fn colour(n: usize) -> &'static str {
    PALETTE[n % PALETTE.len()]
}

/// One bar: its label, value (in the chart's unit), 95% interval if estimated, and the text beside it.
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub ci: Option<[f64; 2]>,
    pub text: String,
    pub colour: &'static str,
}

/// Horizontal bars, longest scale at the largest value or interval bound.
pub fn bars(out: &mut String, title: &str, bars: &[Bar]) -> fmt::Result {
    const ROW: f64 = 26.0;
    const LABEL: f64 = 190.0;
    const TEXT: f64 = 330.0;
    let area = WIDTH - LABEL - TEXT;
    let top = bars
        .iter()
        .map(|b| b.ci.map_or(b.value, |c| c[1].max(b.value)))
        .fold(0.0, f64::max);
    let scale = if top > 0.0 { area / top } else { 0.0 };
    let height = ROW * bars.len() as f64 + 8.0;
    open_svg(out, height, title)?;
    for (i, b) in bars.iter().enumerate() {
        let y = 4.0 + ROW * i as f64;
        let w = (b.value * scale).max(0.0);
        write!(
            out,
            "<g><title>{}: {}</title>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <rect x=\"{LABEL}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"18\" fill=\"{}\" rx=\"2\"/>",
            Esc(&b.label),
            Esc(&b.text),
            LABEL - 8.0,
            y + 13.0,
            Esc(&b.label),
            b.colour
        )?;
        if let Some([lo, hi]) = b.ci.filter(|c| c[0] != c[1]) {
            let (x0, x1, mid) = (LABEL + lo * scale, LABEL + hi * scale, y + 9.0);
            write!(
                out,
                "<path d=\"M{x0:.1} {mid:.1}H{x1:.1}M{x0:.1} {:.1}V{:.1}M{x1:.1} {:.1}V{:.1}\" \
                 stroke=\"#1d232b\" stroke-width=\"1.2\" fill=\"none\"/>",
                mid - 5.0,
                mid + 5.0,
                mid - 5.0,
                mid + 5.0
            )?;
        }
        writeln!(
            out,
            "<text class=\"value\" x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
            LABEL + area + 8.0,
            y + 13.0,
            Esc(&b.text)
        )?;
    }
    out.push_str("</svg>\n");
    Ok(())
}

/// A line over the recording: one point per probe window, at its middle.
pub struct Series {
    pub name: String,
    /// (window start, window end, value), in s and the chart's unit.
    pub points: Vec<(f64, f64, f64)>,
    pub colour: &'static str,
    pub dashed: bool,
}

/// The estimate over the whole recording, with its 95% interval.
pub struct Band {
    pub name: String,
    pub value: f64,
    pub ci: [f64; 2],
}

/// Figures over the recording: the probe windows shaded, each series as a line with a marker per window,
/// and the whole recording's estimate as a line in its band.
pub fn timeline(out: &mut String, unit: &str, duration_s: f64, series: &[Series], band: Option<&Band>) -> fmt::Result {
    let (left, right, top, bottom, height) = (64.0, 16.0, 28.0, 34.0, 250.0);
    let plot = (WIDTH - left - right, height - top - bottom);
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.2))
        .chain(band.map(|b| b.ci[1].max(b.value)))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.08;
    let x_max = duration_s.max(1e-9);
    let x = |t: f64| left + plot.0 * (t / x_max).clamp(0.0, 1.0);
    let y = |v: f64| top + plot.1 * (1.0 - (v / y_max).clamp(0.0, 1.0));
    open_svg(out, height, &format!("{unit} over the recording"))?;
    for (start, end, _) in series.first().map_or(&[][..], |s| &s.points[..]) {
        write!(
            out,
            "<rect x=\"{:.1}\" y=\"{top}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#eef2f8\"/>",
            x(*start),
            (x(*end) - x(*start)).max(1.0),
            plot.1
        )?;
    }
    axes(out, unit, x_max, y_max, &x, &y, (left, top, plot))?;
    if let Some(b) = band {
        writeln!(
            out,
            "<g><title>{}: ≈ {:.1} {}, 95% interval {:.1}–{:.1}</title>\
             <rect x=\"{left}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#7a8899\" opacity=\"0.22\"/>\
             <line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#56606c\" stroke-dasharray=\"6 4\"/></g>",
            Esc(&b.name),
            b.value,
            Esc(unit),
            b.ci[0],
            b.ci[1],
            y(b.ci[1]),
            plot.0,
            (y(b.ci[0]) - y(b.ci[1])).max(1.0),
            left + plot.0,
            y(b.value),
            y(b.value)
        )?;
    }
    for s in series {
        line(out, s, unit, &x, &y)?;
    }
    legend(out, series, band, left)?;
    out.push_str("</svg>\n");
    Ok(())
}

/// Axis lines, ticks and labels.
fn axes(
    out: &mut String,
    unit: &str,
    x_max: f64,
    y_max: f64,
    x: &dyn Fn(f64) -> f64,
    y: &dyn Fn(f64) -> f64,
    (left, top, plot): (f64, f64, (f64, f64)),
) -> fmt::Result {
    let bottom = top + plot.1;
    write!(
        out,
        "<path d=\"M{left} {top}V{bottom}H{:.1}\" stroke=\"#8a94a0\" fill=\"none\"/>",
        left + plot.0
    )?;
    let step = tick_step(y_max);
    let mut v = 0.0;
    while v <= y_max {
        write!(
            out,
            "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#e6e9ee\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left + plot.0,
            y(v),
            y(v),
            left - 6.0,
            y(v) + 4.0,
            short(v)
        )?;
        v += step;
    }
    let step = tick_step(x_max);
    let mut t = 0.0;
    while t <= x_max {
        write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{} s</text>",
            x(t),
            bottom + 18.0,
            short(t)
        )?;
        t += step;
    }
    writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
        left + plot.0,
        top - 10.0,
        Esc(unit)
    )
}

fn line(out: &mut String, s: &Series, unit: &str, x: &dyn Fn(f64) -> f64, y: &dyn Fn(f64) -> f64) -> fmt::Result {
    let mid = |p: &(f64, f64, f64)| (x((p.0 + p.1) / 2.0), y(p.2));
    let path: Vec<String> = s
        .points
        .iter()
        .map(|p| {
            let (px, py) = mid(p);
            format!("{px:.1},{py:.1}")
        })
        .collect();
    writeln!(
        out,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>",
        path.join(" "),
        s.colour,
        if s.dashed { " stroke-dasharray=\"4 3\"" } else { "" }
    )?;
    for p in &s.points {
        let (px, py) = mid(p);
        writeln!(
            out,
            "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3.5\" fill=\"{}\"><title>{}: {:.1} {} in the probe \
             window {:.1}–{:.1} s (exact)</title></circle>",
            s.colour,
            Esc(&s.name),
            p.2,
            Esc(unit),
            p.0,
            p.1
        )?;
    }
    Ok(())
}

fn legend(out: &mut String, series: &[Series], band: Option<&Band>, left: f64) -> fmt::Result {
    let mut at = left;
    for s in series {
        write!(
            out,
            "<rect x=\"{at:.1}\" y=\"6\" width=\"14\" height=\"4\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"12\">{}</text>",
            s.colour,
            at + 18.0,
            Esc(&s.name)
        )?;
        at += 30.0 + 7.0 * s.name.chars().count() as f64;
    }
    if let Some(b) = band {
        write!(
            out,
            "<rect x=\"{at:.1}\" y=\"2\" width=\"14\" height=\"12\" fill=\"#7a8899\" opacity=\"0.35\"/>\
             <text x=\"{:.1}\" y=\"12\">{}</text>",
            at + 18.0,
            Esc(&b.name)
        )?;
    }
    out.push('\n');
    Ok(())
}

/// A round step giving about five ticks up to `max`.
fn tick_step(max: f64) -> f64 {
    let rough = max / 5.0;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= rough)
        .unwrap_or(10.0 * magnitude);
    if step.is_finite() && step > 0.0 {
        step
    } else {
        1.0
    }
}

/// A tick label without needless decimals.
fn short(v: f64) -> String {
    if v == v.round() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A chart's `<svg>` element, `label` read out for it.
fn open_svg(out: &mut String, height: f64, label: &str) -> fmt::Result {
    writeln!(
        out,
        "<svg class=\"chart\" viewBox=\"0 0 {WIDTH} {height}\" width=\"{WIDTH}\" height=\"{height}\" \
         role=\"img\" aria-label=\"{}\">",
        Esc(label)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(14.0), 5.0);
        assert_eq!(tick_step(420.0), 100.0);
        assert_eq!(tick_step(0.9), 0.2);
        assert_eq!(tick_step(0.0), 1.0);
    }

    #[test]
    fn bar_labels_are_escaped() {
        let mut out = String::new();
        let bar = Bar {
            label: "<b>".into(),
            value: 1.0,
            ci: Some([0.5, 1.5]),
            text: "1 ms".into(),
            colour: colour(0),
        };
        bars(&mut out, "t", &[bar]).unwrap();
        assert!(out.contains("&lt;b&gt;") && !out.contains("<b>"), "{out}");
    }
}
