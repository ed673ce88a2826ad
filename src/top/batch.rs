// SPDX-License-Identifier: Apache-2.0
//! `tlsprof top --batch` (and off a terminal): a line per process and interval, like `vmstat 1`, each
//! interval's figures on their own. Estimates carry "≈" and their 95% interval in the column after; the
//! name is last, as it may hold spaces.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::rows::{self, Figure, Row, View};
use super::{next_interval, TopOptions};
use crate::analyze::analyze;
use crate::model::Recording;

/// The columns' names, in the order and widths of `columns`.
const NAMES: [&str; 16] = [
    "t",
    "pid",
    "tls%",
    "tls%-ci95",
    "mach%",
    "hs/s",
    "hs/s-ci95",
    "res%",
    "abnd/s",
    "refu/s",
    "refused-why",
    "ms/full",
    "stage",
    "stage%",
    "name",
    "",
];

fn columns(c: &[String; 16]) -> String {
    format!(
        "{:>7} {:>8} {:>6} {:>11} {:>6} {:>8} {:>13} {:>4} {:>7} {:>7} {:<18} {:>8} {:<12} {:>6}  {}{}",
        c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15]
    )
}

/// The header line.
pub fn header() -> String {
    columns(&NAMES.map(String::from))
}

pub fn run(rx: &Receiver<Recording>, top: &TopOptions, cpus: usize, stop: &AtomicBool) -> Result<()> {
    let started = Instant::now();
    // When the first interval started, on the recording's clock.
    let mut first_ns = None;
    let mut out = std::io::stdout().lock();
    let mut header_written = false;
    while !stop.load(Ordering::Relaxed) {
        let Ok(interval) = next_interval(rx, Duration::from_millis(200)) else {
            break;
        };
        let Some(interval) = interval else { continue };
        let view = rows::view(&analyze(&interval), top.group, cpus);
        // Each line is stamped with the end of its interval, in seconds since the first began.
        let t = match interval.start_unix_ns {
            Some(ns) => ns.saturating_sub(*first_ns.get_or_insert(ns)) as f64 / 1e9 + interval.duration_s,
            None => started.elapsed().as_secs_f64(),
        };
        if !header_written {
            writeln!(out, "{}", header()).context("cannot write standard output")?;
            header_written = true;
        }
        for line in lines(&view, t) {
            writeln!(out, "{line}").context("cannot write standard output")?;
        }
        out.flush().context("cannot write standard output")?;
        if top.once {
            break;
        }
    }
    Ok(())
}

/// The view's lines, stamped `t`; a line saying so for an interval without targets.
pub fn lines(view: &View, t: f64) -> Vec<String> {
    if view.rows.is_empty() {
        return vec![format!("{t:>7.1}  no target yet")];
    }
    view.rows.iter().map(|r| line(r, t)).collect()
}

fn line(r: &Row, t: f64) -> String {
    let dash = || "-".to_string();
    let value = |f: Option<Figure>, digits| f.map_or_else(dash, |f| f.value_text(digits));
    let interval = |f: Option<Figure>, digits| f.map_or_else(dash, |f| f.interval(digits));
    let pct = |f: Option<Figure>| f.map(|f| f.scaled(100.0));
    let (stage, share) = match r.stages.first() {
        Some((stage, share)) => (stage.name().to_string(), format!("{:.0}", 100.0 * share)),
        None => (dash(), dash()),
    };
    columns(&[
        format!("{t:.1}"),
        r.pid.map_or_else(dash, |p| p.to_string()),
        value(pct(r.tls_share), 1),
        interval(pct(r.tls_share), 1),
        value(pct(r.machine_share), 2),
        value(r.rate, 1),
        interval(r.rate, 1),
        r.resumed_share.map_or_else(dash, |s| format!("{:.0}", 100.0 * s)),
        value(r.abandoned_rate, 1),
        value(r.refused_rate, 1),
        r.refused_reason.map_or_else(dash, |why| why.id().to_string()),
        r.full_ms.map_or_else(dash, |ms| format!("{ms:.3}")),
        stage,
        share,
        r.name.clone(),
        if r.exited { " (exited)".into() } else { String::new() },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::analyze;
    use crate::top::RowGroup;

    #[test]
    fn a_line_per_process_under_the_header_s_columns() {
        let analysis = analyze(&crate::model::tests::two_process_recording());
        let view = rows::view(&analysis, RowGroup::Process, 2);
        let lines = lines(&view, 3.0);
        assert_eq!(lines.len(), analysis.summary.targets.len());
        let header = header();
        assert_eq!(header.split_whitespace().count(), 15);
        for (line, t) in lines.iter().zip(&analysis.summary.targets) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields[0], "3.0");
            assert_eq!(fields[1], t.target.pid.to_string());
            let rate: f64 = fields[5].trim_start_matches('≈').parse().unwrap();
            let n = t.handshakes.unwrap() as f64 / analysis.summary.duration_s;
            assert!((rate - n).abs() <= 0.05, "{line}");
            assert_eq!(fields[14..].join(" "), t.target.comm);
        }
    }
}
