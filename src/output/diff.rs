// SPDX-License-Identifier: Apache-2.0
//! Comparing two recordings (before and after a change): handshake mix, CPU per handshake, each stage's CPU
//! per handshake, and a differential flame graph.

use std::io::Write;

use anyhow::{bail, Context, Result};
use inferno::{differential, flamegraph};
use serde_json::{json, Value};

use super::styled::{self, Color, Line, Tone};
use super::{flame, Group};
use crate::analyze::{HandshakeSummary, Summary};
use crate::catalogue::Stage;
use crate::model::{Recording, Role};

/// The servers' resumption in one recording, among the ClientHellos read.
#[derive(Default)]
pub struct Funnel {
    pub read: u64,
    pub offered: u64,
    pub accepted: u64,
    pub refused: u64,
}

impl Funnel {
    fn of(s: &Summary) -> Funnel {
        let mut f = Funnel::default();
        for r in s.resumption.iter().filter(|r| r.role == Role::Server) {
            f.read += r.read;
            f.offered += r.offered();
            f.accepted += r.accepted;
            f.refused += r.refused;
        }
        f
    }

    pub fn offered_share(&self) -> f64 {
        self.offered as f64 / self.read.max(1) as f64
    }

    pub fn refused_share(&self) -> f64 {
        self.refused as f64 / self.offered.max(1) as f64
    }
}

/// The figures of one recording that a comparison needs, normalized per handshake where it matters: what
/// the text, JSON and HTML diffs render.
pub struct Side<'a> {
    pub handshakes: &'a HandshakeSummary,
    pub resumption: Funnel,
    pub tls_share: Option<f64>,
    /// Stage self CPU per handshake, in µs.
    stage_us_per_handshake: Vec<(Stage, f64)>,
}

impl Side<'_> {
    fn of(s: &Summary) -> Side<'_> {
        // Per handshake as the probes saw them: stage CPU and handshakes from the same windows.
        let per = s.handshakes.observed.total.max(1) as f64;
        Side {
            tls_share: s.tls_share,
            stage_us_per_handshake: s
                .stages
                .iter()
                .filter(|st| !st.sampled)
                .map(|st| (st.name, st.self_ns as f64 / 1e3 / per))
                .collect(),
            handshakes: &s.handshakes,
            resumption: Funnel::of(s),
        }
    }

    /// Self CPU per handshake in `stage`, in µs.
    pub fn stage(&self, stage: Stage) -> f64 {
        self.stage_us_per_handshake
            .iter()
            .find(|(s, _)| *s == stage)
            .map_or(0.0, |(_, v)| *v)
    }

    /// The resumed share of the handshakes seen.
    pub fn resumed_share(&self) -> f64 {
        self.handshakes.observed.resumed as f64 / self.handshakes.observed.total.max(1) as f64
    }

    /// The stages either recording spent CPU in, in the catalogue's order.
    pub fn stages_compared(&self, other: &Side) -> Vec<Stage> {
        Stage::ALL
            .into_iter()
            .filter(|&s| self.stage(s) > 0.0 || other.stage(s) > 0.0)
            .collect()
    }
}

/// Both recordings' sides, when each has handshakes to compare per handshake.
pub fn sides<'a>(before: &'a Summary, after: &'a Summary) -> Result<(Side<'a>, Side<'a>)> {
    check_comparable(before, after)?;
    Ok((Side::of(before), Side::of(after)))
}

/// Relative change, or None when there is nothing to compare against.
pub fn change(before: f64, after: f64) -> Option<f64> {
    (before > 0.0).then(|| after / before - 1.0)
}

fn change_text(before: f64, after: f64) -> String {
    change(before, after).map_or("-".into(), |c| format!("{:+.1}%", c * 100.0))
}

fn check_comparable(before: &Summary, after: &Summary) -> Result<()> {
    if before.handshakes.observed.total == 0 || after.handshakes.observed.total == 0 {
        bail!("a recording has no completed handshakes, so there is nothing per handshake to compare: record under TLS load");
    }
    Ok(())
}

pub fn text(before: &Summary, after: &Summary, color: Color) -> Result<String> {
    let (b, a) = sides(before, after)?;
    let mut out = vec![Line::prose(format!(
        "Handshakes: {:.1}/s -> {:.1}/s; resumed {:.1}% -> {:.1}%",
        b.handshakes.rate_per_s,
        a.handshakes.rate_per_s,
        b.resumed_share() * 100.0,
        a.resumed_share() * 100.0
    ))];
    let (bm, am) = (b.handshakes.cpu.mean_ns() / 1e3, a.handshakes.cpu.mean_ns() / 1e3);
    let (bp, ap) = (
        b.handshakes.cpu.quantile_ns(0.5) / 1e3,
        a.handshakes.cpu.quantile_ns(0.5) / 1e3,
    );
    out.push(Line::prose(format!(
        "CPU per handshake: mean {bm:.0} -> {am:.0} µs ({}), p50 {bp:.0} -> {ap:.0} µs ({})",
        change_text(bm, am),
        change_text(bp, ap)
    )));
    let (bf, af) = (&b.resumption, &a.resumption);
    if bf.read > 0 || af.read > 0 {
        out.push(Line::prose(format!(
            "Resumption (servers, of the ClientHellos read): offered {:.1}% -> {:.1}%; refused {:.1}% -> {:.1}% of \
             offers ({} -> {} of {} -> {})",
            bf.offered_share() * 100.0,
            af.offered_share() * 100.0,
            bf.refused_share() * 100.0,
            af.refused_share() * 100.0,
            bf.refused,
            af.refused,
            bf.offered,
            af.offered
        )));
    }
    if let (Some(bs), Some(as_)) = (b.tls_share, a.tls_share) {
        out.push(
            Line::prose("TLS share of process CPU: ")
                .push(Tone::Key, format!("{:.1}% -> {:.1}%", bs * 100.0, as_ * 100.0)),
        );
    }
    out.push(Line::row(""));
    out.push(Line::toned(
        Tone::Heading,
        format!("{:<14}{:>22}{:>12}", "stage", "µs per handshake", "change"),
    ));
    for stage in b.stages_compared(&a) {
        let (x, y) = (b.stage(stage), a.stage(stage));
        out.push(Line::row(format!(
            "{:<14}{:>10.1} -> {:>8.1}{:>12}",
            stage.name(),
            x,
            y,
            change_text(x, y)
        )));
    }
    Ok(styled::render(&out, color))
}

pub fn json(before: &Summary, after: &Summary) -> Result<Value> {
    let (b, a) = sides(before, after)?;
    let stages: Vec<Value> = b
        .stages_compared(&a)
        .into_iter()
        .map(|s| {
            json!({"name": s, "before_us_per_handshake": b.stage(s), "after_us_per_handshake": a.stage(s),
                   "change": change(b.stage(s), a.stage(s))})
        })
        .collect();
    let side = |s: &Side| {
        json!({
            "handshakes": s.handshakes.total, "full": s.handshakes.full, "resumed": s.handshakes.resumed,
            "handshakes_per_s": s.handshakes.rate_per_s, "resumed_share": s.resumed_share(),
            "cpu_us_per_handshake": {"mean": s.handshakes.cpu.mean_ns() / 1e3, "p50": s.handshakes.cpu.quantile_ns(0.5) / 1e3},
            "tls_share": s.tls_share,
            "resumption": {"client_hellos_read": s.resumption.read, "offered": s.resumption.offered,
                           "accepted": s.resumption.accepted, "refused": s.resumption.refused},
        })
    };
    Ok(json!({
        "before": side(&b),
        "after": side(&a),
        "cpu_per_handshake_change": change(b.handshakes.cpu.mean_ns(), a.handshakes.cpu.mean_ns()),
        "stages": stages,
    }))
}

/// Differential flame graph: the after profile's shape, coloured by the change from before (normalized to
/// the same sample total, so different load levels compare).
pub fn svg(before: &Recording, after: &Recording, out: impl Write) -> Result<()> {
    let (b, a) = (
        flame::folded(before, Group::Stage).join("\n"),
        flame::folded(after, Group::Stage).join("\n"),
    );
    if b.is_empty() || a.is_empty() {
        bail!("a recording has no CPU samples, so there is no differential flame graph: record for longer");
    }
    let mut diff = Vec::new();
    let opts = differential::Options {
        normalize: true,
        ..Default::default()
    };
    differential::from_readers(opts, b.as_bytes(), a.as_bytes(), &mut diff).context("compare the stacks")?;
    let mut fg = flamegraph::Options::default();
    fg.title = "tlsprof diff: red grew, blue shrank (after vs before)".into();
    fg.count_name = "samples".into();
    fg.deterministic = true;
    let text = String::from_utf8(diff).context("differential output")?;
    flamegraph::from_lines(&mut fg, text.lines(), out).context("draw the differential flame graph")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::summarize;
    use crate::model::tests::sample_recording;
    use crate::model::{CpuHistogram, HandshakeGroup, HandshakeKind, Role};

    /// The same service after switching to ECDSA and turning on resumption: less sign CPU per handshake.
    fn after() -> Recording {
        let mut rec = sample_recording();
        for n in &mut rec.tree {
            if n.path.len() > 1 {
                n.cpu_ns /= 10;
                n.self_ns /= 10;
            }
        }
        let mut resumed = CpuHistogram::default();
        for _ in 0..4 {
            resumed.add(300_000);
        }
        rec.handshakes.push(HandshakeGroup {
            pid: Some(10),
            kind: HandshakeKind {
                role: Role::Server,
                resumed: true,
                certificate_key: None,
                key_exchange: Some("x25519".into()),
                version: Some("TLSv1.3".into()),
                cipher: Some("TLS_AES_256_GCM_SHA384".into()),
                resumption: Some("TLS 1.3 PSK".into()),
                outcome: crate::model::Outcome::Completed,
                offer: None,
                refusal: None,
                quic: false,
            },
            cpu: resumed,
            from_wire: false,
        });
        rec
    }

    #[test]
    fn per_handshake_stage_change_and_resumption() {
        let (b, a) = (summarize(&sample_recording()), summarize(&after()));
        let t = text(&b, &a, Color::Off).unwrap();
        assert!(t.contains("resumed 0.0% -> 50.0%"), "{t}");
        let j = json(&b, &a).unwrap();
        let sign = j["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "sign")
            .unwrap();
        // 4.42 ms of sign over 4 handshakes before; a tenth of it over 8 handshakes after.
        assert!((sign["before_us_per_handshake"].as_f64().unwrap() - 1105.0).abs() < 1e-6);
        assert!((sign["change"].as_f64().unwrap() + 0.95).abs() < 0.01, "{sign}");
    }

    #[test]
    fn the_resumption_funnel_before_and_after() {
        let refused = crate::model::tests::recording_with_refusals();
        let mut fixed = refused.clone();
        for g in &mut fixed.handshakes {
            if g.kind.refusal.take().is_some() {
                g.kind.resumed = true;
            }
        }
        let (b, a) = (summarize(&refused), summarize(&fixed));
        let t = text(&b, &a, Color::Off).unwrap();
        let flowed = t.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flowed.contains("refused 33.3% -> 0.0% of offers (3 -> 0 of 9 -> 9)"),
            "{t}"
        );
        let j = json(&b, &a).unwrap();
        assert_eq!(j["before"]["resumption"]["refused"], 3);
        assert_eq!(j["after"]["resumption"]["accepted"], 9);
        // Recordings without ClientHellos read say nothing of it.
        let t = text(&summarize(&sample_recording()), &summarize(&after()), Color::Off).unwrap();
        assert!(!t.contains("Resumption"), "{t}");
    }

    #[test]
    fn differential_svg_is_drawn() {
        let mut out = Vec::new();
        svg(&sample_recording(), &after(), &mut out).unwrap();
        assert!(String::from_utf8(out).unwrap().contains("EVP_DigestSign [sign]"));
    }

    #[test]
    fn recordings_without_handshakes_are_refused_clearly() {
        let mut empty = sample_recording();
        empty.handshakes.clear();
        let err = text(&summarize(&empty), &summarize(&after()), Color::Off)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no completed handshakes"), "{err}");
    }
}
