// SPDX-License-Identifier: Apache-2.0
//! The report's first screen: how much of each target's CPU is TLS, where it goes, what to do first, and
//! how far the figures can be trusted, in a few lines no wider than a terminal. The sections after it say
//! the rest.

use super::styled::{Line, Tone, WIDTH};
use crate::analyze::advice::Advice;
use crate::analyze::groups::{self, GroupFigures};
use crate::analyze::{Analysis, Summary};
use crate::model::untrusted::Printable;

/// Stages named on the where-it-goes line, at most (as many as fit).
const STAGES_SHOWN: usize = 8;
/// A file unnamed in this share of the samples or more is worth a line.
const UNNAMED_WORTH_A_LINE: f64 = 0.2;

/// The first screen's lines, none wider than `WIDTH` columns, with the figures a reader came for toned.
pub fn styled_lines(analysis: &Analysis) -> Vec<Line> {
    let s = &analysis.summary;
    let names: Vec<String> = groups::by_name(s).into_iter().map(|g| g.name).collect();
    let mut out = vec![Line::toned(
        Tone::Heading,
        format!("tlsprof: {} for {:.1} s", names.join(", "), s.duration_s),
    )];
    let rows = groups::rows(s);
    // With one group the Stages line below names its top stage.
    let several = rows.len() > 1;
    out.extend(rows.iter().map(|g| group_line(g, several)));
    out.extend(stages_line(s).map(Line::prose));
    out.push(advice_line(analysis));
    out.push(confidence_line(s));
    out.extend(unnamed_line(s).map(Line::prose));
    out.into_iter().map(|l| l.fit(WIDTH)).collect()
}

/// A group of targets: its TLS share of its CPU, handshakes per second with the resumed share, CPU per full
/// and resumed handshake (as the probes saw them), and, where it fits, its top stage with its share of the
/// group's TLS CPU.
fn group_line(g: &GroupFigures, with_top_stage: bool) -> Line {
    let tls = match (g.wire_only, g.tls_share) {
        (true, Some(share)) => Some(format!(
            "from the wire, TLS ≈{:.0}% of CPU by its frames",
            100.0 * share
        )),
        (true, None) => Some("from the wire, TLS CPU not seen".to_string()),
        (false, share) => share.map(|share| format!("TLS {:.0}% of CPU", 100.0 * share)),
    };
    let mut parts = Vec::new();
    if let Some(rate) = g.rate_per_s {
        // Tenths only where they tell something: the line has room for every figure it carries.
        let digits = if rate >= 100.0 { 0 } else { 1 };
        let mut text = format!("{rate:.digits$} handshakes/s");
        if let Some(resumed) = g.resumed_share() {
            text.push_str(&format!(", {:.0}% resumed", 100.0 * resumed));
        }
        parts.push(text);
    }
    match (g.full_ms, g.resumed_ms) {
        (Some(f), Some(r)) => parts.push(format!("{f:.2} ms full, {r:.2} resumed")),
        (Some(f), None) => parts.push(format!("{f:.2} ms a full handshake")),
        (None, Some(r)) => parts.push(format!("{r:.2} ms a resumed handshake")),
        (None, None) => {}
    }
    let line = |parts: &[String]| {
        let line = Line::prose(format!("  {}: ", g.label));
        match (&tls, parts.is_empty()) {
            (Some(tls), true) => line.push(Tone::Key, tls),
            (Some(tls), false) => line
                .push(Tone::Key, tls)
                .push(Tone::Plain, format!(" · {}", parts.join(" · "))),
            (None, false) => line.push(Tone::Plain, parts.join(" · ")),
            (None, true) => line.push(Tone::Plain, "no handshakes seen"),
        }
    };
    // The top stage where it fits: the figures before it matter more.
    if let Some((stage, share)) = g.top_stage().filter(|_| with_top_stage) {
        let mut with = parts.clone();
        with.push(format!("{} {:.0}%", stage.name(), 100.0 * share));
        let longer = line(&with);
        if longer.plain().chars().count() <= WIDTH {
            return longer;
        }
    }
    line(&parts)
}

/// Where the TLS CPU goes: the probed stages by their share of it, largest first, the handshake's own
/// work with its largest named cause.
fn stages_line(s: &Summary) -> Option<String> {
    if s.tls_cpu_ms <= 0.0 {
        return None;
    }
    let mut stages: Vec<_> = s
        .stages
        .iter()
        .filter(|st| !st.sampled && st.self_cpu_ms > 0.0)
        .collect();
    stages.sort_by(|a, b| b.self_cpu_ms.total_cmp(&a.self_cpu_ms));
    let named: Vec<String> = stages
        .iter()
        .take(STAGES_SHOWN)
        .map(|st| {
            let share = 100.0 * s.share_of_tls(st.self_cpu_ms).unwrap_or(0.0);
            let cause = st.largest_named_cause();
            match cause {
                Some(c) if st.name.name() == "handshake" && share * c.share >= 5.0 => format!(
                    "{} {share:.0}% (of which {} {:.0}%)",
                    st.name.name(),
                    c.name.name(),
                    share * c.share
                ),
                _ => format!("{} {share:.0}%", st.name.name()),
            }
        })
        .collect();
    // As many stages as fit, largest first.
    let mut line = "Stages:".to_string();
    for (i, part) in named.iter().enumerate() {
        let sep = if i == 0 { " " } else { " · " };
        if line.chars().count() + sep.len() + part.chars().count() > WIDTH {
            break;
        }
        line.push_str(sep);
        line.push_str(part);
    }
    Some(line)
}

/// The advice that saves the most.
pub fn best_advice(analysis: &Analysis) -> Option<&Advice> {
    let saving = |a: &&Advice| a.saving.map_or(0.0, |s| s.tls_cpu_pct);
    analysis.advice.iter().max_by(|a, b| saving(a).total_cmp(&saving(b)))
}

/// An advice item's saving in a few words ("about -54% TLS CPU"), where it was measured.
pub fn saving(advice: &Advice) -> Option<String> {
    advice.saving.map(|s| {
        let how = if s.at_most { "up to" } else { "about" };
        format!("{how} -{:.0}% TLS CPU", s.tls_cpu_pct)
    })
}

/// The advice that saves the most, and how many more there are.
fn advice_line(analysis: &Analysis) -> Line {
    let Some(best) = best_advice(analysis) else {
        return Line::prose("Do first: nothing this recording shows a saving for");
    };
    let how_much = saving(best).unwrap_or_default();
    let more = match analysis.advice.len() - 1 {
        0 => String::new(),
        1 => " (1 more below)".into(),
        n => format!(" ({n} more below)"),
    };
    let line = Line::prose(format!("Do first: {}", best.title));
    let line = if how_much.is_empty() {
        line
    } else {
        line.push(Tone::Plain, ": ").push(Tone::Key, how_much)
    };
    line.push(Tone::Plain, format!(" [{}]{more}", best.id))
}

/// Whether the figures are exact or estimated, what the probes cost, and whether anything was lost.
fn confidence_line(s: &Summary) -> Line {
    let how = if s.probing.part_time {
        Line::prose("Figures: ").push(
            Tone::Estimate,
            format!(
                "estimated from {} probe windows ({:.0}% of the time)",
                s.probing.windows,
                100.0 * s.probing.fraction
            ),
        )
    } else if s.wire_only().count() == s.targets.len() {
        Line::prose("Figures: exact: sockets read throughout")
    } else {
        Line::prose("Figures: exact: probes attached throughout")
    };
    let cost = match (s.probe_cost_share(), s.own_programs_share()) {
        (Some(probes), Some(own)) if own > 0.0 => format!(
            "; tlsprof cost {:.2}% of CPU (probes {:.2}%)",
            100.0 * (probes + own),
            100.0 * probes
        ),
        (Some(probes), _) => format!("; probes cost {:.2}% of CPU", 100.0 * probes),
        (None, _) => String::new(),
    };
    let mut line = how.push(Tone::Plain, cost);
    let wire_only: Vec<String> = s.wire_only().map(|t| Printable(&t.target.comm).to_string()).collect();
    if !wire_only.is_empty() && wire_only.len() < s.targets.len() {
        line = line.push(Tone::Plain, format!("; from the wire alone: {}", wire_only.join(", ")));
    }
    if s.lost.undercounts() {
        line.push(Tone::Plain, "; ")
            .push(Tone::Warning, "events lost: counts undercount")
    } else {
        line
    }
}

/// The file whose unnamed code the most samples ran in, when that is a large share of them (a file every
/// stack passes through, as a server's event loop, is not where its CPU went).
fn unnamed_line(s: &Summary) -> Option<String> {
    let u = s.unnamed_files.iter().max_by_key(|u| u.leaf_samples)?;
    let share = u.leaf_samples as f64 / s.samples.max(1) as f64;
    if share < UNNAMED_WORTH_A_LINE {
        return None;
    }
    let file = u.file.path.rsplit('/').next().unwrap_or(&u.file.path);
    let fix = match &u.file.package {
        Some(p) => format!("install {}-dbgsym to name them", Printable(p)),
        None => "install its debug symbols to name them".into(),
    };
    Some(format!(
        "{:.0}% of samples in stripped {}: {fix}",
        100.0 * share,
        Printable(file)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Stage;

    fn group(label: &str) -> GroupFigures {
        GroupFigures {
            name: label.into(),
            label: label.into(),
            pids: vec![1],
            exited: false,
            whole: false,
            tls_share: Some(0.88),
            tls_share_ci95: None,
            tls_cpu_ms: Some(880.0),
            tls_cpu_ms_ci95: None,
            handshakes: Some(6_500),
            handshakes_ci95: None,
            rate_per_s: Some(463.2),
            rate_ci95: None,
            full_seen: 860,
            resumed_seen: 140,
            abandoned_seen: 0,
            full_ms: Some(0.81),
            resumed_ms: Some(0.43),
            stages: vec![(Stage::Handshake, 0.45)],
            wire_only: false,
        }
    }

    #[test]
    fn the_top_stage_is_named_where_it_fits_and_nothing_is_cut() {
        let short = group("ng").plain_line();
        assert!(short.ends_with(" · handshake 45%"), "{short}");
        // 103 columns with the top stage: left out, the rest whole.
        let long = group("nginx ×2").plain_line();
        assert!(
            long.ends_with("0.43 resumed") && long.chars().count() <= WIDTH,
            "{long}"
        );
    }

    /// The file every stack passes through (a server's event loop) is not where the CPU went: the line names
    /// the one whose unnamed code the samples ran in.
    #[test]
    fn the_unnamed_line_names_the_file_the_samples_ran_in() {
        let mut s = crate::analyze::summarize(&crate::model::tests::sample_recording());
        s.samples = 100;
        let unnamed = |path: &str, package: &str, samples, leaf_samples| crate::analyze::UnnamedFileSummary {
            file: crate::model::UnnamedFile {
                path: path.into(),
                build_id: None,
                package: Some(package.into()),
                reason: crate::model::UnnamedReason::NoDebugInfo,
            },
            samples,
            leaf_samples,
        };
        s.unnamed_files = vec![
            unnamed("/usr/sbin/nginx", "nginx", 100, 1),
            unnamed("/usr/lib/libcrypto.so.3", "libssl3", 60, 45),
        ];
        assert_eq!(
            unnamed_line(&s).as_deref(),
            Some("45% of samples in stripped libcrypto.so.3: install libssl3-dbgsym to name them")
        );
        s.unnamed_files[1].leaf_samples = 10;
        assert_eq!(unnamed_line(&s), None, "under a fifth: no line");
    }

    impl GroupFigures {
        fn plain_line(&self) -> String {
            group_line(self, true).plain()
        }
    }
}
