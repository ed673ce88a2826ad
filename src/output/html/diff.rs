// SPDX-License-Identifier: Apache-2.0
//! The diff page: both recordings' figures side by side, each stage's CPU per handshake before and after,
//! and the differential flame graph.

use std::fmt::{self, Write};

use super::charts::{self, Bar};
use super::page::{fig, table, Esc};
use super::report;
use crate::analyze::Summary;
use crate::output::diff::{change, Side};

fn change_cell(before: f64, after: f64) -> String {
    change(before, after).map_or("–".into(), |c| format!("{:+.1}%", 100.0 * c))
}

/// Before and after, figure by figure (per handshake as the probes saw them).
fn comparison(out: &mut String, b: &Side, a: &Side) -> fmt::Result {
    let row = |name: &str, x: f64, y: f64, digits: usize, unit: &'static str, key: &str| {
        vec![
            Esc(name).to_string(),
            fig(x, digits, unit).key(format!("diff.before.{key}")).to_string(),
            fig(y, digits, unit).key(format!("diff.after.{key}")).to_string(),
            change_cell(x, y),
        ]
    };
    let (bh, ah) = (b.handshakes, a.handshakes);
    let mut rows = vec![
        row("handshakes/s", bh.rate_per_s, ah.rate_per_s, 1, "", "handshakes_per_s"),
        row(
            "resumed share (%)",
            100.0 * b.resumed_share(),
            100.0 * a.resumed_share(),
            1,
            "",
            "resumed_share",
        ),
        row(
            "CPU per handshake, mean (µs)",
            bh.cpu.mean_ns() / 1e3,
            ah.cpu.mean_ns() / 1e3,
            0,
            "",
            "cpu_us_per_handshake.mean",
        ),
        row(
            "CPU per handshake, p50 (µs)",
            bh.cpu.quantile_ns(0.5) / 1e3,
            ah.cpu.quantile_ns(0.5) / 1e3,
            0,
            "",
            "cpu_us_per_handshake.p50",
        ),
    ];
    if let (Some(x), Some(y)) = (b.tls_share, a.tls_share) {
        rows.push(row(
            "TLS share of the targets' CPU (%)",
            100.0 * x,
            100.0 * y,
            1,
            "",
            "tls_share",
        ));
    }
    table(out, &["", "before", "after", "change"], &rows)
}

/// Each stage's self CPU per handshake, before and after, as paired bars and a table.
fn stage_deltas(out: &mut String, b: &Side, a: &Side) -> fmt::Result {
    out.push_str("<h2>Stages: CPU per handshake</h2>\n");
    let stages = b.stages_compared(a);
    let mut bars = Vec::new();
    for stage in &stages {
        for (when, side, n) in [("before", b, 0), ("after", a, 1)] {
            let us = side.stage(*stage);
            bars.push(Bar {
                label: format!("{} {when}", stage.name()),
                value: us,
                ci: None,
                text: format!("{us:.1} µs per handshake (as seen)"),
                colour: charts::colour(n),
            });
        }
    }
    charts::bars(out, "stage CPU per handshake before and after", &bars)?;
    let rows: Vec<Vec<String>> = stages
        .iter()
        .map(|&stage| {
            let (x, y) = (b.stage(stage), a.stage(stage));
            vec![
                stage.name().to_string(),
                fig(x, 1, "µs")
                    .said("per handshake seen")
                    .key(format!("diff.before.stage.{}", stage.name()))
                    .to_string(),
                fig(y, 1, "µs")
                    .said("per handshake seen")
                    .key(format!("diff.after.stage.{}", stage.name()))
                    .to_string(),
                change_cell(x, y),
            ]
        })
        .collect();
    table(out, &["stage", "before", "after", "change"], &rows)
}

/// The diff's body, the differential flame graph (inline SVG) in its place.
pub fn body(before: &Summary, after: &Summary, sides: (Side, Side), flame_graph: &str) -> Result<String, fmt::Error> {
    let (b, a) = sides;
    let mut out = String::new();
    writeln!(out, "<h1>tlsprof diff: before and after</h1>")?;
    writeln!(
        out,
        "<p class=\"lede\">Per handshake as the probes saw them: stage CPU and handshakes from the same windows, \
         so recordings under different loads compare.</p>"
    )?;
    comparison(&mut out, &b, &a)?;
    stage_deltas(&mut out, &b, &a)?;
    for (when, s, prefix) in [("Before", before, "before."), ("After", after, "after.")] {
        report::header(&mut out, "h2", when, s)?;
        report::targets(&mut out, s, prefix)?;
    }
    writeln!(
        out,
        "<h2>Differential flame graph</h2>\n<p class=\"note\">The after profile's shape, coloured by the \
         change from before (normalized to the same sample total): red grew, blue shrank.</p>\n\
         <div class=\"flamegraph\">{flame_graph}</div>"
    )?;
    Ok(out)
}
