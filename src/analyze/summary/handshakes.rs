// SPDX-License-Identifier: Apache-2.0
//! Handshakes over the whole recording, by kind, with their CPU.

use serde::Serialize;

use super::windows::Windows;
use crate::analyze::estimate::Estimate;
use crate::model::{CpuHistogram, HandshakeCounts, HandshakeKind, Outcome, Recording, Role, WindowPart};

/// Handshakes over the whole recording (exact when the probes were attached throughout, else estimated
/// from the probe windows, with 95% intervals), and what the windows saw.
#[derive(Clone, Debug)]
pub struct HandshakeSummary {
    pub estimated: bool,
    /// Completed handshakes (server and client, whose start was seen); the figures up to `rate_ci95` are
    /// theirs.
    pub total: u64,
    pub total_ci95: [u64; 2],
    pub full: u64,
    pub full_ci95: [u64; 2],
    pub resumed: u64,
    pub resumed_ci95: [u64; 2],
    pub server: u64,
    pub server_ci95: [u64; 2],
    pub client: u64,
    pub client_ci95: [u64; 2],
    pub rate_per_s: f64,
    pub rate_ci95: [f64; 2],
    /// Exact counts of the handshakes the probes saw complete.
    pub observed: HandshakeCounts,
    /// CPU per handshake seen.
    pub cpu_ms: CpuStats,
    /// Handshakes that did work (keygen, sign, ...) but whose connection ended before they completed (the
    /// peer went away after the server's flight, or they failed), whose start was seen; and their CPU.
    pub abandoned: u64,
    pub abandoned_ci95: [u64; 2],
    pub abandoned_cpu_ms: CpuStats,
    pub kinds: Vec<KindSummary>,
    pub cpu: CpuHistogram,
    pub abandoned_cpu: CpuHistogram,
    pub total_estimate: Estimate,
    /// The probed processes' handshakes as their sockets showed them, where the socket programs ran with the
    /// probes (--hello-capture always): what the probes' counts are checked with. None where they did not.
    pub wire: Option<WireCheck>,
}

/// Handshakes of the probed processes counted from their sockets, estimated from the probe windows as the
/// probes' are (exact when attached throughout).
#[derive(Clone, Debug, Serialize)]
pub struct WireCheck {
    pub total: u64,
    pub total_ci95: [u64; 2],
    pub full: u64,
    pub resumed: u64,
    pub abandoned: u64,
    /// As counted in the windows.
    pub observed: HandshakeCounts,
}

#[derive(Clone, Debug, Serialize)]
pub struct CpuStats {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
}

impl CpuStats {
    /// In ms.
    pub(super) fn of(h: &CpuHistogram) -> CpuStats {
        CpuStats {
            mean: h.mean_ns() / 1e6,
            p50: h.quantile_ns(0.5) / 1e6,
            p99: h.quantile_ns(0.99) / 1e6,
        }
    }
}

/// A kind of handshake one process made.
#[derive(Clone, Debug, Serialize)]
pub struct KindSummary {
    /// The process; None in recordings that did not tell processes' handshakes apart.
    pub pid: Option<u32>,
    pub outcome: Outcome,
    pub role: Role,
    pub resumed: bool,
    pub resumption: Option<String>,
    pub version: Option<String>,
    pub cipher: Option<String>,
    pub key_exchange: Option<String>,
    pub certificate_key: Option<String>,
    pub count: u64,
    /// None: counted from the wire, CPU unknown.
    pub cpu_ms: Option<CpuStats>,
    /// Counted from the process's sockets alone.
    pub from_wire: bool,
    /// Made over QUIC.
    pub quic: bool,
}

pub(super) fn handshake_totals(rec: &Recording, windows: &Windows) -> HandshakeSummary {
    let mut observed = HandshakeCounts::default();
    let mut cpu = CpuHistogram::default();
    let mut abandoned_cpu = CpuHistogram::default();
    for g in &rec.handshakes {
        observed.add(&g.kind, g.cpu.count);
        if g.from_wire {
            continue;
        }
        if g.kind.outcome == Outcome::Abandoned {
            abandoned_cpu.merge(&g.cpu);
        } else if g.kind.role != Role::Partial {
            cpu.merge(&g.cpu);
        }
    }
    // A window counts every handshake completed in it; those under way when it opened (partial) have no
    // role or resumption seen, so they count in the total, and the kinds share it as the others do. The
    // wire sees none of those, but stands for those under way when it closed (wire_unseen_at_close).
    let classified: f64 = windows
        .windows
        .as_ref()
        .map_or(0.0, |ws| ws.iter().map(|w| w.handshakes.total as f64).sum());
    let all: f64 = windows.windows.as_ref().map_or(0.0, |ws| {
        ws.iter()
            .map(|w| (w.handshakes.total + w.handshakes.partial) as f64 + w.wire_unseen_at_close)
            .sum()
    });
    let boundary = if windows.merged.is_none() && classified > 0.0 {
        all / classified
    } else {
        1.0
    };
    let count = |field: fn(&HandshakeCounts) -> u64| {
        windows
            .count(|w| field(&w.handshakes) as f64, field(&observed) as f64)
            .scaled(boundary)
    };
    let round = |e: &Estimate| [e.ci95[0].round() as u64, e.ci95[1].round() as u64];
    let (total, full, resumed, server, client) = (
        count(|c| c.total),
        count(|c| c.full),
        count(|c| c.resumed),
        count(|c| c.server),
        count(|c| c.client),
    );
    // Abandoned handshakes are seen when they end, a while after their work: each window's are weighted
    // for their chance to end inside it (those under way as it opened did their work before it, unseen),
    // which stands in for the boundary scaling of the completed ones. Seen throughout, they are counted as
    // they are.
    let abandoned = match windows.count(WindowPart::abandoned_seen, observed.abandoned as f64) {
        e if e.exact => Estimate::exact(observed.abandoned as f64),
        e => e,
    };
    let rate = total.scaled(1.0 / rec.duration_s.max(1e-9));
    let wire = wire_check(rec, windows);
    HandshakeSummary {
        estimated: !total.exact,
        total: total.value.round() as u64,
        total_ci95: round(&total),
        full: full.value.round() as u64,
        full_ci95: round(&full),
        resumed: resumed.value.round() as u64,
        resumed_ci95: round(&resumed),
        server: server.value.round() as u64,
        server_ci95: round(&server),
        client: client.value.round() as u64,
        client_ci95: round(&client),
        rate_per_s: rate.value,
        rate_ci95: rate.ci95,
        observed,
        total_estimate: total,
        cpu_ms: CpuStats::of(&cpu),
        abandoned: abandoned.value.round() as u64,
        abandoned_ci95: round(&abandoned),
        abandoned_cpu_ms: CpuStats::of(&abandoned_cpu),
        kinds: kinds(rec),
        cpu,
        abandoned_cpu,
        wire,
    }
}

fn wire_check(rec: &Recording, windows: &Windows) -> Option<WireCheck> {
    let mut observed = HandshakeCounts::default();
    for p in rec.probing.window_figures.iter().flat_map(|w| &w.processes) {
        observed.add_counts(&p.wire);
    }
    if observed.is_zero() {
        return None;
    }
    let count = |field: fn(&HandshakeCounts) -> u64| windows.count(|w| field(&w.wire) as f64, field(&observed) as f64);
    let total = count(|c| c.total);
    Some(WireCheck {
        total: total.value.round() as u64,
        total_ci95: [total.ci95[0].round() as u64, total.ci95[1].round() as u64],
        full: count(|c| c.full).value.round() as u64,
        resumed: count(|c| c.resumed).value.round() as u64,
        abandoned: count(|c| c.abandoned).value.round() as u64,
        observed,
    })
}

/// The kinds of handshake of each process, as the recording groups them, whatever their ClientHellos
/// offered (the resumption summary tells that).
fn kinds(rec: &Recording) -> Vec<KindSummary> {
    let mut kinds: Vec<(Option<u32>, HandshakeKind, bool, CpuHistogram)> = Vec::new();
    for g in &rec.handshakes {
        let kind = HandshakeKind {
            offer: None,
            refusal: None,
            ..g.kind.clone()
        };
        match kinds
            .iter_mut()
            .find(|(pid, k, wire, _)| *pid == g.pid && *k == kind && *wire == g.from_wire)
        {
            Some((_, _, _, cpu)) => cpu.merge(&g.cpu),
            None => kinds.push((g.pid, kind, g.from_wire, g.cpu.clone())),
        }
    }
    kinds
        .into_iter()
        .map(|(pid, k, from_wire, cpu)| KindSummary {
            pid,
            outcome: k.outcome,
            role: k.role,
            resumed: k.resumed,
            resumption: k.resumption,
            version: k.version,
            cipher: k.cipher,
            key_exchange: k.key_exchange,
            certificate_key: k.certificate_key,
            count: cpu.count,
            cpu_ms: (!from_wire).then(|| CpuStats::of(&cpu)),
            from_wire,
            quic: k.quic,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::summarize;
    use crate::model::tests::sample_recording;

    #[test]
    fn abandoned_handshakes_are_counted_apart_with_their_cpu() {
        let mut rec = sample_recording();
        let mut group = rec.handshakes[0].clone();
        group.kind.outcome = Outcome::Abandoned;
        group.cpu = CpuHistogram::default();
        group.cpu.add(900_000);
        rec.handshakes.push(group);
        let s = summarize(&rec);
        assert_eq!(
            (s.handshakes.total, s.handshakes.full, s.handshakes.abandoned),
            (4, 4, 1)
        );
        assert!((s.handshakes.abandoned_cpu_ms.mean - 0.9).abs() < 0.01);
        assert!(s.handshakes.cpu_ms.mean > 1.2, "completed handshakes' CPU only");
        let kinds = serde_json::to_value(&s.handshakes.kinds).unwrap();
        assert_eq!(kinds[1]["outcome"], "abandoned");
    }

    /// Windows counted from the wire, each with one handshake under way at its close that it could not follow
    /// to its end: the estimate stands for it as for the probes' partial ones at an opening.
    #[test]
    fn wire_handshakes_under_way_at_a_window_close_count_in_the_estimate() {
        let mut rec = crate::model::tests::two_process_recording();
        let before = summarize(&rec).handshakes.total;
        let seen: u64 = rec
            .probing
            .window_figures
            .iter()
            .flat_map(|w| &w.processes)
            .map(|p| p.handshakes.total)
            .sum();
        let parts = rec
            .probing
            .window_figures
            .iter()
            .map(|w| w.processes.len())
            .sum::<usize>() as f64;
        for w in &mut rec.probing.window_figures {
            for p in &mut w.processes {
                p.wire_unseen_at_close = 1.0;
            }
        }
        let after = summarize(&rec).handshakes.total;
        let expected = before as f64 * (seen as f64 + parts) / seen as f64;
        assert!(
            (after as f64 - expected).abs() <= 1.0,
            "{before} → {after}, expected {expected:.1}"
        );
    }

    /// Windows that saw 2 abandoned handshakes per 7 connections, weighted for their chance to end inside
    /// the window: the whole recording's 140 connections carry 40 of them, or 50 weighted by 1.25.
    #[test]
    fn abandoned_handshakes_are_estimated_from_their_weighted_count_when_windowed() {
        let mut rec = crate::model::tests::two_process_recording();
        let abandon = |rec: &mut Recording, weighted: Option<f64>| {
            for w in &mut rec.probing.window_figures {
                for p in &mut w.processes {
                    p.handshakes.abandoned = 1;
                    p.abandoned_weighted = weighted;
                }
            }
        };
        abandon(&mut rec, None);
        assert_eq!(summarize(&rec).handshakes.abandoned, 40);
        abandon(&mut rec, Some(1.25));
        let s = summarize(&rec).handshakes;
        assert_eq!(s.abandoned, 50);
        assert!(
            s.abandoned_ci95[0] <= 50 && s.abandoned_ci95[1] >= 50,
            "{:?}",
            s.abandoned_ci95
        );
        // Probes attached throughout: the handshakes seen, as counted.
        let mut exact = sample_recording();
        exact.probing.window_figures = vec![crate::model::ProbeWindow {
            start_unix_ns: None,
            live_s: exact.duration_s,
            processes: vec![WindowPart {
                pid: 10,
                connections: exact.connections(),
                handshakes: HandshakeCounts {
                    abandoned: 3,
                    ..HandshakeCounts::default()
                },
                abandoned_weighted: Some(3.3),
                ..WindowPart::default()
            }],
            ..crate::model::ProbeWindow::default()
        }];
        let mut group = exact.handshakes[0].clone();
        group.kind.outcome = Outcome::Abandoned;
        group.cpu = CpuHistogram::default();
        (0..3).for_each(|_| group.cpu.add(900_000));
        exact.handshakes.push(group);
        let s = summarize(&exact).handshakes;
        assert_eq!((s.abandoned, s.abandoned_ci95), (3, [3, 3]));
    }
}
