// SPDX-License-Identifier: Apache-2.0
//! The text report: the first screen (first_screen.rs), then sections in the order a reader asks: advice,
//! stages, handshake mix, causes within stages, the call tree, and last the recording's accounting (how
//! every figure was made).

mod accounting;
mod mix;
mod resumption;
mod stages;
mod tree;

use super::styled::{self, Color, Line, Tone};
use super::{first_screen, Group};
use crate::analyze::advice::Advice;
use crate::analyze::{Analysis, CpuStats, Summary};
use crate::catalogue::families::{self, Family};

/// The first screen, then everything the recording says, section by section.
pub fn text(analysis: &Analysis, group: Group, color: Color) -> String {
    let s = &analysis.summary;
    let mut lines = first_screen::styled_lines(analysis);
    section(&mut lines, "Advice", advice_lines(analysis));
    section(&mut lines, "Stages", stages::table(s));
    section(&mut lines, "Handshake mix", mix::lines(s));
    section(&mut lines, "Resumption", resumption::lines(s));
    section(&mut lines, "Causes within stages", stages::causes(s));
    section(&mut lines, "Call tree", tree::lines(s, group));
    section(&mut lines, "Accounting", accounting::lines(s));
    styled::render(&lines, color)
}

/// The first screen alone (--brief): who was recorded, and the answer.
pub fn brief(analysis: &Analysis, color: Color) -> String {
    styled::render(&first_screen::styled_lines(analysis), color)
}

/// A section under its heading, after a blank line; none when it has nothing to say.
fn section(lines: &mut Vec<Line>, title: &str, body: Vec<Line>) {
    if body.is_empty() {
        return;
    }
    lines.push(Line::row(""));
    lines.push(Line::toned(Tone::Heading, format!("== {title} ==")));
    lines.extend(body);
}

/// Every advice item with its evidence and saving.
fn advice_lines(analysis: &Analysis) -> Vec<Line> {
    let best = first_screen::best_advice(analysis);
    analysis
        .advice
        .iter()
        .flat_map(|a| {
            [
                Line::prose(format!("  [{}] {}", a.id, a.change)),
                Line::prose(format!("    evidence: {}", a.evidence)),
                saving_line(a, best.is_some_and(|b| std::ptr::eq(b, a))),
            ]
        })
        .collect()
}

/// The best item's saving stands out as on the first screen: its figure where the text quotes it, else
/// the whole of it.
fn saving_line(a: &Advice, best: bool) -> Line {
    let line = Line::prose("    saving: ");
    let text = &a.estimated_saving;
    if !best {
        return line.push(Tone::Plain, text.clone());
    }
    match first_screen::saving(a).and_then(|figure| text.find(&figure).map(|at| (at, figure.len()))) {
        Some((at, len)) => line
            .push(Tone::Plain, &text[..at])
            .push(Tone::Key, &text[at..at + len])
            .push(Tone::Plain, &text[at + len..]),
        None => line.push(Tone::Key, text.clone()),
    }
}

fn cpu_line(c: &CpuStats) -> String {
    format!("mean {:.3} ms, p50 {:.3} ms, p99 {:.3} ms", c.mean, c.p50, c.p99)
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// `value [lo–hi]` with `digits` decimals.
fn interval(value: f64, ci: [f64; 2], digits: usize) -> String {
    format!("{value:.digits$} [{:.digits$}–{:.digits$}]", ci[0], ci[1])
}

/// The TLS library families of the recording's libraries, each once.
fn families_of(s: &Summary) -> Vec<&'static dyn Family> {
    families::of_ids(s.libraries.iter().map(|l| l.family.as_str()))
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::{analyze, summarize};
    use std::collections::BTreeMap;

    use crate::catalogue::Stage;
    use crate::model::tests::sample_recording;
    use crate::model::{HandshakeCounts, ProbeWindow, Recording, WindowPart};

    fn report(rec: &Recording) -> String {
        text(&analyze(rec), Group::Stage, Color::Off)
    }

    #[test]
    fn text_has_headline_stage_table_and_tree() {
        let t = report(&sample_recording());
        assert!(t.contains("nginx (pid 10)"), "{t}");
        assert!(
            t.contains("Handshakes: 4 (2.0/s): 4 full, 0 resumed; 4 server, 0 client"),
            "{t}"
        );
        // TLS CPU 5.17 ms of 10 ms process CPU.
        assert!(t.contains("TLS CPU: 5.2 ms = 51.7% of process CPU"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.starts_with("sign") && l.contains("4.4") && l.contains(" 6 ")),
            "{t}"
        );
        // Indented by depth under the process row: two spaces per level after the calls column.
        assert!(
            t.lines()
                .any(|l| l.ends_with("         4    SSL_do_handshake [handshake]")),
            "{t}"
        );
        assert!(
            t.lines().any(|l| l.ends_with("         4      EVP_DigestSign [sign]")),
            "{t}"
        );
        assert!(t.contains("EVP_DigestSignFinal [sign]"), "{t}");
    }

    #[test]
    fn a_key_exchange_or_certificate_key_not_seen_is_unknown_not_absent() {
        let mut rec = sample_recording();
        let kind = &mut rec.handshakes[0].kind;
        // A full handshake whose ServerHello was not captured and whose signer the probes do not cover.
        (kind.version, kind.cipher, kind.key_exchange, kind.certificate_key) = (None, None, None, None);
        let t = report(&rec);
        assert!(
            t.contains("version ? cipher ? key exchange ? certificate key ?  full server"),
            "{t}"
        );
        assert!(
            t.contains("(\"certificate key ?\": no signature made or checked was seen"),
            "{t}"
        );
        // Resumed, with a ServerHello that names no group (TLS 1.3 psk_ke): nothing was exchanged or signed.
        let kind = &mut rec.handshakes[0].kind;
        (kind.version, kind.resumed) = (Some("TLSv1.3".into()), true);
        let t = report(&rec);
        assert!(
            t.contains("TLSv1.3 cipher ? no key exchange no certificate  resumed server"),
            "{t}"
        );
        assert!(!t.contains("certificate key ?"), "{t}");
        // Full, with a TLS 1.2 ServerHello but no group: its ServerKeyExchange was missed, not absent.
        let kind = &mut rec.handshakes[0].kind;
        (kind.version, kind.resumed) = (Some("TLSv1.2".into()), false);
        let t = report(&rec);
        assert!(
            t.contains("TLSv1.2 cipher ? key exchange ? certificate key ?  full server"),
            "{t}"
        );
    }

    #[test]
    fn steal_time_is_stated_only_when_the_hypervisor_took_some() {
        let mut rec = sample_recording();
        assert!(!report(&rec).contains("Steal time"));
        rec.targets[0].stage_slices_ms = 8.0;
        rec.targets[0].stage_slices_cpu_ms = 7.0;
        let t = report(&rec);
        assert!(
            t.contains("Steal time: 12.5% of the stage threads' time on a CPU was the hypervisor's"),
            "{t}"
        );
        assert_eq!(summarize(&rec).stolen_share, Some(0.125));
    }

    #[test]
    fn causes_show_under_each_stage_and_in_the_tree_grouped_by_cause() {
        let s = analyze(&sample_recording());
        let t = text(&s, Group::Stage, Color::Off);
        assert!(t.contains("Causes within stages"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.starts_with("    public_key") && l.contains("100.0%") && l.contains("bn_mul_mont 5")),
            "{t}"
        );
        assert!(!t.contains("[cause]"), "{t}");
        let grouped = text(&s, Group::Cause, Color::Off);
        assert!(
            grouped.lines().any(|l| l.ends_with("        public_key [cause]")),
            "{grouped}"
        );
        assert!(
            grouped.lines().any(|l| l.ends_with("          bn_mul_mont")),
            "{grouped}"
        );
    }

    #[test]
    fn tls_messages_names_the_library_family_of_the_targets() {
        let mut rec = sample_recording();
        rec.samples[0].frames.push("ossl_statem_accept".into());
        let t = report(&rec);
        assert!(t.contains("tls_messages") && t.contains("libssl's own code"), "{t}");
        rec.libraries[0].family = "go".into();
        rec.samples[0].frames.push("crypto/tls.(*Conn).serverHandshake".into());
        let t = report(&rec);
        assert!(t.contains("Go's crypto/tls package's own code"), "{t}");
        assert!(!t.contains("libssl's own code"), "{t}");
        // The record layer in Go's terms too, on a line wrapped at its spaces.
        let flowed = t.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flowed.contains("(crypto/tls.(*Conn).Read 0.0%, crypto/tls.(*Conn).Write 0.0%)") && !t.contains("SSL_read"),
            "{t}"
        );
    }

    #[test]
    fn part_time_probing_is_stated_even_with_one_window() {
        let mut rec = sample_recording();
        assert!(!report(&rec).contains("Probes attached"));
        // Paused after the first window and never resumed before the end; half the CPU fell in the window.
        rec.probing.live_s = 0.5;
        rec.probe_hits = 0;
        rec.probe_stepped_hits = 0;
        rec.targets[0].probed_cpu_ms = 5.0;
        let t = report(&rec);
        assert!(
            t.contains("Probes attached 0.5 s of 2.0 s (25%, 1 windows, 50% of the targets' CPU)"),
            "{t}"
        );
        // Counts scale by the CPU share: 4 handshakes seen, one window, so random arrivals set the interval:
        // 8 ± 1.96 × √(4 × 0.5) / 0.5.
        assert!(t.contains("Handshakes: ≈ 8 [4–14] (≈ 4.0 [2.0–6.8] /s)"), "{t}");
        assert!(t.contains("seen in the probe windows: 4 full, 0 resumed"), "{t}");
        assert!(t.contains("while probed"), "{t}");
    }

    #[test]
    fn windows_one_by_one_estimate_the_whole_recording() {
        let mut rec = sample_recording();
        // Two windows of 2.5 ms own CPU each out of 10 ms, seeing 2 and 2 of the 4 handshakes.
        rec.probing.live_s = 0.5;
        rec.probe_hits = 0;
        rec.probe_stepped_hits = 0;
        rec.targets[0].probed_cpu_ms = 5.0;
        let window = |full| ProbeWindow {
            start_unix_ns: None,
            live_s: 0.25,
            processes: vec![WindowPart {
                pid: 10,
                own_cpu_ms: 2.5,
                connections: 0,
                handshakes: HandshakeCounts {
                    total: full,
                    full,
                    server: full,
                    ..HandshakeCounts::default()
                },
                stage_self_ns: BTreeMap::from([(Stage::Sign, 2_210_000)]),
                ..WindowPart::default()
            }],
            ..ProbeWindow::default()
        };
        rec.probing.window_figures = vec![window(2), window(2)];
        let s = summarize(&rec);
        assert!(s.handshakes.estimated);
        assert_eq!(s.handshakes.total, 8);
        // Windows that agree still get the spread of random arrivals: 2 handshakes a window, Student's t for
        // one degree of freedom; never below the 4 seen.
        assert_eq!(s.handshakes.total_ci95[0], 4);
        assert!(s.handshakes.total_ci95[1] > 40, "{:?}", s.handshakes.total_ci95);
        let sign = s.stages.iter().find(|st| st.name == Stage::Sign).unwrap();
        assert!((sign.self_cpu_ms - 8.84).abs() < 1e-9, "{sign:?}");
        assert_eq!(sign.observed.as_ref().unwrap().calls, 6);
        assert_eq!(sign.calls, Some(12));
    }
}
