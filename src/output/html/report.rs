// SPDX-License-Identifier: Apache-2.0
//! The report page: the first screen's figures per target, where the TLS CPU goes, CPU per handshake, the
//! handshake mix, the figures over the recording, advice, the flame graph, and the accounting collapsed.

use std::fmt::{self, Write};

use super::charts::{self, Band, Bar, Series};
use super::page::{fig, table, Esc};
use crate::analyze::groups::{self, GroupFigures};
use crate::analyze::{Analysis, StageSummary, Summary};
use crate::model::untrusted::{printable, Printable};
use crate::output::mix;

/// A heading (`tag`: h1, h2) and a lede: who was recorded, for how long, and how far the figures go.
pub fn header(out: &mut String, tag: &str, what: &str, s: &Summary) -> fmt::Result {
    let names: Vec<String> = groups::by_name(s).into_iter().map(|g| g.name).collect();
    writeln!(
        out,
        "<{tag}>{}: {} for {:.1} s</{tag}>",
        Esc(what),
        Esc(&names.join(", ")),
        s.duration_s
    )?;
    let how = if s.probing.part_time {
        format!(
            "Estimated from {} probe windows ({} of the time); figures marked ≈ are estimates over the whole \
             recording with their 95% intervals in brackets.",
            s.probing.windows,
            fig(s.probing.fraction, 0, "").percent()
        )
    } else {
        "Exact: the probes were attached throughout.".to_string()
    };
    let cost = s.probe_cost_share().map_or(String::new(), |c| {
        format!(
            " The probes cost {} of the targets' CPU.",
            fig(c, 2, "").percent().said("estimated")
        )
    });
    let own = match s.own_programs_share() {
        Some(c) if c > 0.0 => format!(
            " tlsprof's other programs (samplers, counters, hello capture) cost {} more.",
            fig(c, 2, "").percent().said("measured in their runs")
        ),
        _ => String::new(),
    };
    let lost = if s.lost.undercounts() {
        " Events were lost: counts undercount."
    } else {
        ""
    };
    writeln!(out, "<p class=\"lede\">{how}{cost}{own}{lost}</p>")
}

/// The whole recording's headline figures, then one row per target group.
pub fn targets(out: &mut String, s: &Summary, prefix: &str) -> fmt::Result {
    let h = &s.handshakes;
    let ci = |c: [u64; 2]| [c[0] as f64, c[1] as f64];
    let tls_share = match s.tls_share {
        Some(share) => fig(share, 1, "")
            .percent()
            .said("measured: the TLS CPU the probe windows saw over the targets' CPU then")
            .key(format!("{prefix}tls_share"))
            .to_string(),
        None => "–".into(),
    };
    writeln!(
        out,
        "<p>TLS CPU {} ({tls_share} of the targets' CPU while probed) · {} handshakes completed ({} full, {} \
         resumed) · {} handshakes/s · CPU per handshake: mean {}, p50 {}, p99 {}</p>",
        fig(s.tls_cpu_ms, 1, "ms")
            .ci(s.tls_cpu_ms_ci95)
            .key(format!("{prefix}tls_cpu_ms")),
        fig(h.total as f64, 0, "")
            .ci(ci(h.total_ci95))
            .key(format!("{prefix}handshakes.total")),
        fig(h.full as f64, 0, "")
            .ci(ci(h.full_ci95))
            .key(format!("{prefix}handshakes.full")),
        fig(h.resumed as f64, 0, "")
            .ci(ci(h.resumed_ci95))
            .key(format!("{prefix}handshakes.resumed")),
        fig(h.rate_per_s, 1, "")
            .ci(h.rate_ci95)
            .key(format!("{prefix}handshakes.rate_per_s")),
        fig(h.cpu_ms.mean, 3, "ms")
            .said("of the handshakes seen")
            .key(format!("{prefix}handshakes.cpu_ms.mean")),
        fig(h.cpu_ms.p50, 3, "ms").said("of the handshakes seen"),
        fig(h.cpu_ms.p99, 3, "ms").said("of the handshakes seen"),
    )?;
    let rows: Vec<Vec<String>> = groups::rows(s)
        .iter()
        .enumerate()
        .map(|(i, g)| group_row(g, &format!("{prefix}group.{i}.")))
        .collect();
    table(
        out,
        &[
            "target",
            "TLS share of its CPU",
            "handshakes",
            "handshakes/s",
            "resumed (of those seen)",
            "CPU per full handshake",
            "CPU per resumed handshake",
            "top stage (share of its TLS CPU)",
        ],
        &rows,
    )
}

fn group_row(g: &GroupFigures, key: &str) -> Vec<String> {
    let or_dash = |f: Option<String>| f.unwrap_or_else(|| "–".into());
    let share_said = if g.whole {
        "measured: the TLS CPU the probe windows saw over the targets' CPU then"
    } else {
        "estimated; no joint interval for several estimated processes"
    };
    let seen = |n: u64| {
        if n == 1 {
            "mean of 1 handshake seen"
        } else {
            "mean of the handshakes seen"
        }
    };
    vec![
        Esc(&g.label).to_string(),
        or_dash(g.tls_share.map(|v| {
            let f = fig(v, 1, "");
            match (g.whole, g.tls_share_ci95) {
                (false, Some(ci)) => f.ci(ci).percent(),
                _ => f.said(share_said).percent(),
            }
            .to_string()
        })),
        or_dash(g.handshakes.map(|n| {
            fig(n as f64, 0, "")
                .ci_or(g.handshakes_ci95, "estimated; no joint interval")
                .key(format!("{key}handshakes"))
                .to_string()
        })),
        or_dash(g.rate_per_s.map(|r| {
            fig(r, 1, "")
                .ci_or(g.rate_ci95, "estimated; no joint interval")
                .to_string()
        })),
        or_dash(
            g.resumed_share()
                .map(|r| fig(r, 0, "").said("of the handshakes seen").percent().to_string()),
        ),
        or_dash(g.full_ms.map(|ms| fig(ms, 2, "ms").said(seen(g.full_seen)).to_string())),
        or_dash(
            g.resumed_ms
                .map(|ms| fig(ms, 2, "ms").said(seen(g.resumed_seen)).to_string()),
        ),
        or_dash(
            g.top_stage()
                .map(|(stage, share)| format!("{} {}", stage.name(), fig(share, 0, "").said("estimated").percent())),
        ),
    ]
}

/// Each stage's self CPU as a bar with its interval, and the table of their figures, largest first.
fn stages(out: &mut String, s: &Summary) -> fmt::Result {
    out.push_str("<h2>Where the TLS CPU goes</h2>\n");
    if s.stages.is_empty() {
        return writeln!(
            out,
            "<p class=\"note\">No stage ran while the probes were attached.</p>"
        );
    }
    let mut ranked: Vec<&StageSummary> = s.stages.iter().collect();
    ranked.sort_by(|a, b| b.self_cpu_ms.total_cmp(&a.self_cpu_ms));
    let bars: Vec<Bar> = ranked.iter().enumerate().map(|(i, st)| stage_bar(s, st, i)).collect();
    charts::bars(out, "self CPU per stage", &bars)?;
    writeln!(
        out,
        "<p class=\"note\">Self CPU over the recording; ≈: estimated, 95% interval in brackets and as \
         whiskers; %: share of the TLS CPU.</p>"
    )?;
    let rows: Vec<Vec<String>> = ranked.iter().map(|st| stage_row(s, st)).collect();
    table(
        out,
        &[
            "stage",
            "self CPU",
            "share of TLS CPU",
            "calls",
            "per call",
            "largest named cause",
        ],
        &rows,
    )?;
    writeln!(
        out,
        "<p class=\"note\">Self CPU: in the stage and no deeper one, over the whole recording. Sampled stages \
         (the record layer without --all-probes) are the targets' CPU times their share of the CPU samples, not \
         part of the TLS CPU above.</p>"
    )
}

/// A probed stage's share of the TLS CPU (a sampled one is not part of it).
fn tls_share_of(s: &Summary, st: &StageSummary) -> Option<f64> {
    s.share_of_tls(st.self_cpu_ms).filter(|_| !st.sampled)
}

fn stage_bar(s: &Summary, st: &StageSummary, i: usize) -> Bar {
    let f = fig(st.self_cpu_ms, 1, "ms").ci(st.self_cpu_ms_ci95);
    Bar {
        label: format!("{}{}", st.name.name(), if st.sampled { " (sampled)" } else { "" }),
        value: st.self_cpu_ms,
        ci: Some(st.self_cpu_ms_ci95),
        text: match tls_share_of(s, st) {
            Some(share) => format!("{} · {:.0}%", f.plain(), 100.0 * share),
            None => f.plain(),
        },
        colour: charts::colour(i),
    }
}

fn stage_row(s: &Summary, st: &StageSummary) -> Vec<String> {
    let cause = st.largest_named_cause().map_or("–".into(), |c| {
        let share = fig(c.share, 0, "").said("of the stage's CPU samples").percent();
        format!("{} {share}", c.name.name())
    });
    vec![
        format!(
            "{}{}",
            st.name.name(),
            if st.sampled { " (from CPU samples)" } else { "" }
        ),
        fig(st.self_cpu_ms, 1, "ms")
            .ci(st.self_cpu_ms_ci95)
            .key(format!("stage.{}.self_cpu_ms", st.name.name()))
            .to_string(),
        tls_share_of(s, st).map_or("–".into(), |share| {
            fig(share, 1, "")
                .said("of the TLS CPU (estimated)")
                .percent()
                .to_string()
        }),
        st.calls.map_or("–".into(), |n| n.to_string()),
        st.cpu_us_per_call
            .map_or("–".into(), |us| fig(us, 1, "µs").said("as seen").to_string()),
        cause,
    ]
}

/// Full against resumed CPU per handshake, per target group.
fn per_handshake(out: &mut String, s: &Summary) -> fmt::Result {
    out.push_str("<h2>CPU per handshake: full and resumed</h2>\n");
    let mut bars = Vec::new();
    for (i, g) in groups::rows(s).iter().enumerate() {
        for (kind, ms, n) in [
            ("full", g.full_ms, g.full_seen),
            ("resumed", g.resumed_ms, g.resumed_seen),
        ] {
            if let Some(ms) = ms {
                bars.push(Bar {
                    label: format!("{} {kind}", g.label),
                    value: ms,
                    ci: None,
                    text: format!("{ms:.3} ms (mean of {n} seen)"),
                    colour: charts::colour(2 * i + usize::from(kind == "resumed")),
                });
            }
        }
    }
    if bars.is_empty() {
        return writeln!(out, "<p class=\"note\">No completed handshake was seen.</p>");
    }
    charts::bars(out, "CPU per full and resumed handshake", &bars)
}

/// Each process's kinds of handshake.
fn handshake_mix(out: &mut String, s: &Summary) -> fmt::Result {
    out.push_str("<h2>Handshake mix</h2>\n");
    let (_, mixes) = mix::by_process(s);
    if mixes.is_empty() {
        return writeln!(out, "<p class=\"note\">No handshake was seen.</p>");
    }
    for m in mixes {
        let name = m.pid.map_or("all targets".into(), |p| s.process_label(p));
        writeln!(out, "<h3>{}: {} handshakes seen</h3>", Esc(&name), m.of)?;
        let rows: Vec<Vec<String>> = m
            .kinds
            .iter()
            .map(|g| {
                let w = mix::words(g);
                let share = if m.of > 0 { g.count as f64 / m.of as f64 } else { 0.0 };
                let mut row = vec![Esc(&format!("{} {}", w.kind, w.role)).to_string()];
                row.extend(w.fields.iter().enumerate().map(|(i, f)| {
                    let transport = if i == 0 { w.transport } else { "" };
                    Esc(&format!("{transport}{}", Printable(f))).to_string()
                }));
                row.push(g.count.to_string());
                row.push(fig(share, 1, "").said("of its handshakes seen").percent().to_string());
                match &g.cpu_ms {
                    Some(c) => row.extend([c.mean, c.p50, c.p99].map(|v| fig(v, 3, "ms").said("as seen").to_string())),
                    None => row.extend(["from the wire: CPU not seen".to_string(), String::new(), String::new()]),
                }
                row
            })
            .collect();
        table(
            out,
            &[
                "kind",
                "version",
                "cipher",
                "key exchange",
                "certificate key",
                "seen",
                "share",
                "CPU mean",
                "p50",
                "p99",
            ],
            &rows,
        )?;
    }
    writeln!(
        out,
        "<p class=\"note\">Version, cipher and group from ServerHellos seen on the sockets; certificate key from \
         signature lengths; \"?\": not seen.</p>"
    )
}

/// Per process and role: what clients offered to resume, what was accepted, why the rest was refused and
/// what that cost; the ticket key names offered.
fn resumption(out: &mut String, s: &Summary) -> fmt::Result {
    if s.resumption.is_empty() {
        return Ok(());
    }
    out.push_str("<h2>Resumption</h2>\n");
    let rows: Vec<Vec<String>> = s
        .resumption
        .iter()
        .map(|r| {
            let who = r.pid.map_or("all targets".into(), |p| s.process_label(p));
            let reasons = r
                .refused_by
                .iter()
                .map(|c| format!("{} {}", c.count, c.reason.id()))
                .collect::<Vec<_>>()
                .join(", ");
            let total = &r.refused_total;
            let cost = r
                .cost_ms
                .map_or("–".into(), |c| fig(c.value, 1, "ms").ci(c.ci95).to_string());
            let share = r.cost_tls_pct.map_or("–".into(), |p| {
                fig(p / 100.0, 1, "").said("of TLS CPU").percent().to_string()
            });
            vec![
                Esc(&who).to_string(),
                if r.role == crate::model::Role::Client {
                    "client"
                } else {
                    "server"
                }
                .to_string(),
                r.read.to_string(),
                r.offered().to_string(),
                r.accepted.to_string(),
                r.refused.to_string(),
                Esc(&reasons).to_string(),
                fig(total.value, 0, "").ci(total.ci95).to_string(),
                cost,
                share,
            ]
        })
        .collect();
    table(
        out,
        &[
            "process",
            "role",
            "ClientHellos read",
            "offered",
            "accepted",
            "refused",
            "refused because",
            "refused over the recording",
            "cost",
            "of TLS CPU",
        ],
        &rows,
    )?;
    let keys: Vec<Vec<String>> = s
        .resumption
        .iter()
        .flat_map(|r| &r.ticket_keys)
        .map(|k| {
            let others = k
                .accepted_by_others
                .iter()
                .map(|(pid, at)| format!("pid {pid} until {at:.1} s"))
                .collect::<Vec<_>>()
                .join(", ");
            vec![
                Esc(&s.process_label(k.key.pid)).to_string(),
                Esc(k.key.name.as_deref().unwrap_or("other names")).to_string(),
                k.key.accepted.to_string(),
                (k.key.refused_in_use + k.key.refused_unknown_key).to_string(),
                k.key.last_accepted_s.map_or("–".into(), |t| format!("{t:.1} s")),
                Esc(&others).to_string(),
            ]
        })
        .collect();
    if !keys.is_empty() {
        out.push_str("<h3>Ticket key names offered</h3>\n");
        table(
            out,
            &[
                "server",
                "key name",
                "accepted",
                "refused",
                "last accepted",
                "accepted by others",
            ],
            &keys,
        )?;
    }
    writeln!(
        out,
        "<p class=\"note\">Offers read from the ClientHellos on the sockets; refusals' cost: refused × (a full less a \
         resumed handshake's CPU, both measured here).</p>"
    )
}

/// Handshakes per second and TLS CPU in each probe window, with the whole recording's estimates.
fn over_time(out: &mut String, s: &Summary) -> fmt::Result {
    out.push_str("<h2>Over the recording</h2>\n");
    let windows = &s.probing.timeline;
    if windows.is_empty() {
        return writeln!(
            out,
            "<p class=\"note\">This recording kept no dated probe windows (probes attached throughout, or a \
             recording from an older tlsprof): the figures above cover it as a whole.</p>"
        );
    }
    let per_s = |f: &dyn Fn(&crate::analyze::WindowPoint) -> f64| -> Vec<(f64, f64, f64)> {
        windows
            .iter()
            .filter(|w| w.live_s > 0.0)
            .map(|w| (w.at_s, w.at_s + w.live_s, f(w) / w.live_s))
            .collect()
    };
    let rate = [
        Series {
            name: "handshakes/s in each probe window".into(),
            points: per_s(&|w| w.handshakes as f64),
            colour: charts::colour(0),
            dashed: false,
        },
        Series {
            name: "connections/s".into(),
            points: per_s(&|w| w.connections as f64),
            colour: charts::colour(1),
            dashed: true,
        },
    ];
    let h = &s.handshakes;
    let band = Band {
        name: "estimate over the recording (95% interval)".into(),
        value: h.rate_per_s,
        ci: h.rate_ci95,
    };
    charts::timeline(out, "handshakes/s", s.duration_s, &rate, Some(&band))?;
    let tls = [Series {
        name: "TLS CPU in each probe window".into(),
        points: per_s(&|w| w.tls_cpu_ms),
        colour: charts::colour(2),
        dashed: false,
    }];
    let d = s.duration_s.max(1e-9);
    let band = Band {
        name: "estimate over the recording (95% interval)".into(),
        value: s.tls_cpu_ms / d,
        ci: s.tls_cpu_ms_ci95.map(|v| v / d),
    };
    charts::timeline(out, "TLS CPU, ms per s", s.duration_s, &tls, Some(&band))?;
    writeln!(
        out,
        "<p class=\"note\">Shaded: when the stage probes were attached. Points: what each window saw (exact); \
         between them the line only joins them. The band: the estimate over the whole recording, scaled from \
         the windows by the connections the targets made.</p>"
    )
}

fn advice(out: &mut String, analysis: &Analysis) -> fmt::Result {
    out.push_str("<h2>Advice</h2>\n");
    if analysis.advice.is_empty() {
        return writeln!(out, "<p class=\"note\">Nothing this recording shows a saving for.</p>");
    }
    // Advice quotes names from the targets: escaped for the page, and shown without control characters.
    for a in &analysis.advice {
        writeln!(
            out,
            "<div class=\"advice\"><h3>{} <span class=\"note\">[{}]</span></h3><p>{}</p>\
             <p><b>Evidence:</b> {}</p><p class=\"saving\">Saving: {}</p></div>",
            Esc(a.title),
            Esc(a.id),
            Esc(&printable(&a.change)),
            Esc(&printable(&a.evidence)),
            Esc(&printable(&a.estimated_saving))
        )?;
    }
    Ok(())
}

/// The report's body, the flame graph (already inline SVG, or why there is none) in its place.
pub fn body(analysis: &Analysis, flame_graph: &str) -> Result<String, fmt::Error> {
    let s = &analysis.summary;
    let mut out = String::new();
    header(&mut out, "h1", "tlsprof report", s)?;
    out.push_str("<h2>Targets</h2>\n");
    targets(&mut out, s, "")?;
    advice(&mut out, analysis)?;
    stages(&mut out, s)?;
    per_handshake(&mut out, s)?;
    handshake_mix(&mut out, s)?;
    resumption(&mut out, s)?;
    over_time(&mut out, s)?;
    writeln!(
        out,
        "<h2>Flame graph</h2>\n<p class=\"note\">CPU samples of the recorded processes; stage functions are \
         marked [stage]. Click a frame to zoom, Ctrl-F or Search to highlight.</p>\n\
         <div class=\"flamegraph\">{flame_graph}</div>"
    )?;
    super::accounting::accounting(&mut out, s)?;
    Ok(out)
}
