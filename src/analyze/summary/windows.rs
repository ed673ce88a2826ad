// SPDX-License-Identifier: Apache-2.0
//! The probe windows: what the stage probes saw while attached, and the figures over the whole recording
//! estimated from them.

use serde::Serialize;

use crate::analyze::estimate::{self, Estimate, Spread};
use crate::model::{Recording, WindowPart};

#[derive(Clone, Copy, Debug, Serialize)]
pub struct WindowSpan {
    pub start_unix_ns: u64,
    pub live_s: f64,
}

#[derive(Clone, Debug)]
pub struct ProbingSummary {
    /// The budget, in percent of the targets' CPU; 100: attached throughout.
    pub max_overhead_pct: f64,
    pub live_s: f64,
    /// Share of the recording's time the stage probes were attached.
    pub fraction: f64,
    /// Share of the targets' own CPU (without the probes' cost) used while they were attached.
    pub cpu_share: f64,
    pub windows: u32,
    pub peak_overhead: f64,
    /// When each window opened (ns since the Unix epoch) and how long it stayed: the moments the stage
    /// figures come from. Windows of recordings that did not date them are left out.
    pub window_spans: Vec<WindowSpan>,
    /// What each dated window of the recording saw, in the order they opened (windows of recordings that
    /// did not date them, with no start date of their own, or standing in from before it, are left out).
    pub timeline: Vec<WindowPoint>,
    /// The duty cycle paused the stage probes at some point.
    pub part_time: bool,
}

/// What one probe window saw in all the targets, exactly: the points of the figures over the recording.
#[derive(Clone, Copy, Debug)]
pub struct WindowPoint {
    /// When it opened, in s from the recording's start.
    pub at_s: f64,
    pub live_s: f64,
    /// Connections the targets accepted or opened in it.
    pub connections: u64,
    /// Handshakes completed in it.
    pub handshakes: u64,
    /// Self CPU in the stages, the probes' cost taken out, in ms.
    pub tls_cpu_ms: f64,
}

/// The dated windows of a recording that is dated itself.
fn timeline(rec: &Recording) -> Vec<WindowPoint> {
    let Some(start) = rec.start_unix_ns else {
        return Vec::new();
    };
    rec.probing
        .window_figures
        .iter()
        .filter(|w| !w.stands_in)
        .filter_map(|w| {
            let opened = w.start_unix_ns?;
            let whole = w.whole();
            Some(WindowPoint {
                at_s: opened.saturating_sub(start) as f64 / 1e9,
                live_s: w.live_s,
                connections: whole.connections,
                handshakes: whole.handshakes.total,
                tls_cpu_ms: whole.stage_self_ns.values().sum::<u64>() as f64 / 1e6,
            })
        })
        .collect()
}

/// The probe windows as the estimates see them: each window's own CPU, against the targets' own CPU over
/// the recording (the probes' estimated cost taken out of both).
pub(super) struct Windows {
    /// Each window's figures for all the recording's processes together; None when the probes were
    /// attached throughout: every figure is exact.
    pub(super) windows: Option<Vec<WindowPart>>,
    /// Which of them stand in for the recording (ProbeWindow::stands_in).
    stand_ins: Vec<bool>,
    /// For recordings that kept no windows one by one: all windows as one.
    pub(super) merged: Option<WindowPart>,
    total_cpu_ms: f64,
    /// Connections the targets accepted or opened over the recording.
    connections: f64,
}

impl Windows {
    pub(super) fn of(rec: &Recording, probing: &ProbingSummary, total_cpu_ms: f64, probed_cpu_ms: f64) -> Windows {
        if !probing.part_time {
            return Windows {
                windows: None,
                stand_ins: Vec::new(),
                merged: None,
                total_cpu_ms,
                connections: 0.0,
            };
        }
        let merged = rec.probing.window_figures.is_empty().then(|| WindowPart {
            // Without the windows' own CPU, the probed share of the CPU stands for it.
            own_cpu_ms: probing.cpu_share * total_cpu_ms.max(probed_cpu_ms),
            ..WindowPart::default()
        });
        Windows {
            windows: Some(rec.probing.window_figures.iter().map(|w| w.whole()).collect()),
            stand_ins: rec.probing.window_figures.iter().map(|w| w.stands_in).collect(),
            merged,
            total_cpu_ms,
            connections: rec.connections() as f64,
        }
    }

    /// A count over the whole recording: scaled by the connections the targets accepted or opened (each
    /// carries one handshake at most, so the windows' ratio is steady), or by CPU when no connection was
    /// counted (recordings from before, sockets not made by accept or connect).
    pub(super) fn count(&self, per_window: impl Fn(&WindowPart) -> f64, observed: f64) -> Estimate {
        if let (Some(windows), None) = (&self.windows, &self.merged) {
            let connections: Vec<f64> = windows.iter().map(|w| w.connections as f64).collect();
            if connections.iter().sum::<f64>() > 0.0 && self.connections > 0.0 {
                let seen: Vec<f64> = windows.iter().map(&per_window).collect();
                // One handshake under way at each edge of each window.
                let edges = 2.0 * windows.len() as f64;
                return estimate::ratio_with_stand_ins(
                    &seen,
                    &connections,
                    &self.stand_ins,
                    self.connections,
                    Spread::PerUnit,
                    edges,
                );
            }
        }
        self.estimate(per_window, observed)
    }

    /// A figure over the whole recording from what each window saw of it (`per_window`), or from `observed`
    /// when the probes saw everything or kept no windows one by one.
    pub(super) fn estimate(&self, per_window: impl Fn(&WindowPart) -> f64, observed: f64) -> Estimate {
        let Some(windows) = &self.windows else {
            return Estimate::exact(observed);
        };
        if let Some(merged) = &self.merged {
            return estimate::ratio(
                &[observed],
                &[merged.own_cpu_ms],
                self.total_cpu_ms,
                Spread::Arrivals,
                0.0,
            );
        }
        let seen: Vec<f64> = windows.iter().map(per_window).collect();
        let cpu: Vec<f64> = windows.iter().map(|w| w.own_cpu_ms).collect();
        estimate::ratio_with_stand_ins(&seen, &cpu, &self.stand_ins, self.total_cpu_ms, Spread::Arrivals, 0.0)
    }
}

pub(super) fn probing(
    rec: &Recording,
    process_cpu_ms: f64,
    probed_cpu_ms: f64,
    probe_overhead_ms: f64,
) -> ProbingSummary {
    let fraction = (rec.probing.live_s / rec.duration_s.max(1e-9)).min(1.0);
    // The windows' share of the targets' own CPU; the time share when no CPU was seen.
    let total_ms = process_cpu_ms - probe_overhead_ms;
    let probed_ms = probed_cpu_ms - probe_overhead_ms;
    let cpu_share = if total_ms > 0.0 && probed_ms > 0.0 {
        (probed_ms / total_ms).min(1.0)
    } else {
        fraction
    };
    ProbingSummary {
        max_overhead_pct: rec.probing.max_overhead_pct,
        live_s: rec.probing.live_s,
        fraction,
        cpu_share,
        windows: rec.probing.windows,
        peak_overhead: rec.probing.peak_overhead,
        window_spans: rec
            .probing
            .window_figures
            .iter()
            .filter_map(|w| {
                w.start_unix_ns.map(|start_unix_ns| WindowSpan {
                    start_unix_ns,
                    live_s: w.live_s,
                })
            })
            .collect(),
        timeline: timeline(rec),
        part_time: rec.probed_part_time(),
    }
}

#[cfg(test)]
mod tests {
    use crate::analyze::summarize;

    /// The moments the stage figures come from, for judging them against what ran then: dated windows only.
    #[test]
    fn the_probe_windows_are_listed_with_their_dates() {
        let mut rec = crate::model::tests::two_process_recording();
        let n = rec.probing.window_figures.len();
        assert!(n >= 2);
        rec.probing.window_figures[0].start_unix_ns = Some(1_700_000_000_000_000_000);
        let spans = summarize(&rec).probing.window_spans;
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].start_unix_ns, 1_700_000_000_000_000_000);
        assert_eq!(spans[0].live_s, rec.probing.window_figures[0].live_s);
        let json = serde_json::to_value(&spans).unwrap();
        assert_eq!(json[0]["start_unix_ns"], 1_700_000_000_000_000_000u64);
    }

    /// Each dated window's own counts, placed from the recording's start.
    #[test]
    fn the_timeline_has_each_dated_window_from_the_start() {
        let mut rec = crate::model::tests::two_process_recording();
        let start = 1_700_000_000_000_000_000;
        rec.start_unix_ns = Some(start);
        rec.probing.window_figures[1].start_unix_ns = Some(start + 2_500_000_000);
        let timeline = summarize(&rec).probing.timeline;
        assert_eq!(timeline.len(), 1);
        let whole = rec.probing.window_figures[1].whole();
        assert_eq!(timeline[0].at_s, 2.5);
        assert_eq!(timeline[0].handshakes, whole.handshakes.total);
        assert_eq!(timeline[0].connections, whole.connections);
    }
}
