// SPDX-License-Identifier: Apache-2.0
//! The recording's accounting, collapsed: probe windows, probe cost, samples, lost events, unnamed files.

use std::fmt::{self, Write};

use super::page::{fig, table, Esc};
use crate::analyze::Summary;
use crate::model::untrusted::Printable;
use crate::model::UnnamedReason;

pub fn accounting(out: &mut String, s: &Summary) -> fmt::Result {
    out.push_str("<details class=\"accounting\">\n<summary>Accounting: probe windows, probe cost, samples, lost events, unnamed files</summary>\n");
    windows(out, s)?;
    probe_cost(out, s)?;
    samples(out, s)?;
    unnamed(out, s)?;
    out.push_str("</details>\n");
    Ok(())
}

fn windows(out: &mut String, s: &Summary) -> fmt::Result {
    let p = &s.probing;
    out.push_str("<h3>Probe windows</h3>\n");
    let rows = vec![
        vec!["windows".into(), p.windows.to_string()],
        vec!["probes attached".into(), fig(p.live_s, 2, "s").to_string()],
        vec!["share of the time".into(), fig(p.fraction, 1, "").percent().to_string()],
        vec![
            "share of the targets' own CPU".into(),
            fig(p.cpu_share, 1, "").percent().to_string(),
        ],
        vec!["budget (--max-overhead)".into(), format!("{}%", p.max_overhead_pct)],
        vec![
            "targets' CPU".into(),
            fig(s.process_cpu_ms, 1, "ms").key("process_cpu_ms").to_string(),
        ],
        vec![
            "targets' CPU while probed".into(),
            fig(s.probed_cpu_ms, 1, "ms").to_string(),
        ],
        vec![
            "TLS CPU the windows saw".into(),
            fig(s.observed_tls_cpu_ms, 1, "ms").to_string(),
        ],
    ];
    table(out, &["", ""], &rows)
}

fn probe_cost(out: &mut String, s: &Summary) -> fmt::Result {
    out.push_str("<h3>Probe cost</h3>\n");
    let mut rows = vec![
        vec!["probe hits".into(), s.probe_hits.to_string()],
        vec!["of them single-stepped".into(), s.probe_stepped_hits.to_string()],
        vec![
            "cost to the targets (taken out of the figures)".into(),
            fig(s.probe_overhead_ms, 1, "ms").said("estimated").to_string(),
        ],
        vec![
            "calibrated cost of the hits".into(),
            fig(s.probe_overhead_calibrated_ms, 1, "ms")
                .said("calibrated at attach")
                .to_string(),
        ],
        vec![
            "calibrated per hit, cold caches".into(),
            fig(s.probe_cost_cold_us_per_hit, 1, "µs")
                .said("calibrated at attach")
                .to_string(),
        ],
    ];
    if let Some(share) = s.probe_cost_share() {
        rows.push(vec![
            "share of the targets' CPU".into(),
            fig(share, 2, "").said("estimated").percent().to_string(),
        ]);
    }
    if let Some(t) = &s.probe_traps {
        rows.push(vec![
            format!(
                "measured in the targets' traps ({} of {} samples)",
                t.samples, t.of_samples
            ),
            fig(t.cpu_ms, 1, "ms").ci(t.cpu_ms_ci95).to_string(),
        ]);
    }
    for (name, runs) in s.own_programs.kinds().into_iter().filter(|(_, r)| r.runs > 0) {
        rows.push(vec![
            format!("tlsprof's {name} in the targets ({} runs)", runs.runs),
            fig(runs.ms, 1, "ms").said("measured in its runs").to_string(),
        ]);
    }
    table(out, &["", ""], &rows)
}

fn samples(out: &mut String, s: &Summary) -> fmt::Result {
    out.push_str("<h3>Samples and lost events</h3>\n");
    let mut rows = vec![
        vec![
            format!("CPU samples at {} Hz", s.sample_freq_hz),
            fig(s.samples as f64, 0, "").key("samples").to_string(),
        ],
        vec!["in TLS stages".into(), s.stacks.in_tls.to_string()],
        vec!["with whole stacks".into(), s.stacks.whole.to_string()],
    ];
    if let Some(stolen) = s.stolen_share {
        rows.push(vec![
            "steal (left out of stage CPU)".into(),
            fig(stolen, 1, "").percent().to_string(),
        ]);
    }
    rows.extend(
        s.lost
            .iter()
            .map(|(c, n)| vec![format!("lost: {}", c.label), n.to_string()]),
    );
    table(out, &["", ""], &rows)?;
    if s.lost.undercounts() {
        writeln!(out, "<p class=\"note\">Events were dropped: the counts undercount.</p>")?;
    }
    Ok(())
}

fn unnamed(out: &mut String, s: &Summary) -> fmt::Result {
    out.push_str("<h3>Unnamed files</h3>\n");
    if s.unnamed_files.is_empty() {
        return writeln!(out, "<p class=\"note\">Every sampled frame was named.</p>");
    }
    let rows: Vec<Vec<String>> = s
        .unnamed_files
        .iter()
        .map(|u| {
            let f = &u.file;
            let share = |n: u64| fig(n as f64 / s.samples.max(1) as f64, 1, "").percent();
            vec![
                Esc(&Printable(&f.path).to_string()).to_string(),
                format!("{} ({})", u.samples, share(u.samples)),
                format!("{} ({})", u.leaf_samples, share(u.leaf_samples)),
                match f.reason {
                    UnnamedReason::NoDebugInfo => "stripped; no debug information found",
                    UnnamedReason::NotOnServers => "stripped; not on the debuginfod servers",
                    UnnamedReason::LookupUnfinished => "debug information still being fetched",
                    UnnamedReason::NotCovered => "its symbols do not cover that code",
                }
                .to_string(),
                f.package.as_deref().map_or("–".into(), |p| {
                    Esc(&format!("install {}-dbgsym", Printable(p))).to_string()
                }),
            ]
        })
        .collect();
    table(
        out,
        &[
            "file",
            "samples with a frame in it",
            "samples that ran in it",
            "why",
            "to name them",
        ],
        &rows,
    )
}
