// SPDX-License-Identifier: Apache-2.0
//! What `tlsprof top` shows, derived once from a span's analysis: a row per process (or per program), the
//! header's totals and the advice that saves the most. The screen and the batch lines render these.

use crate::analyze::groups::{self, GroupFigures};
use crate::analyze::{Analysis, Reason, Summary};
use crate::catalogue::families::{self, Symbols};
use crate::catalogue::Stage;
use crate::model::untrusted::Printable;
use crate::model::Role;
use crate::output::first_screen;

/// A figure over the span: exact, or estimated with its 95% interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figure {
    pub value: f64,
    /// None when exact.
    pub ci95: Option<[f64; 2]>,
}

impl Figure {
    fn new(value: f64, ci95: Option<[f64; 2]>) -> Figure {
        Figure {
            value,
            ci95: ci95.filter(|[lo, hi]| lo < hi),
        }
    }

    pub fn scaled(self, by: f64) -> Figure {
        Figure {
            value: self.value * by,
            ci95: self.ci95.map(|[lo, hi]| [lo * by, hi * by]),
        }
    }

    /// "512" when exact, "≈512±12" when estimated (the larger side of its interval).
    pub fn text(&self, digits: usize) -> String {
        match self.ci95 {
            None => format!("{:.digits$}", self.value),
            Some([lo, hi]) => {
                let half = (self.value - lo).max(hi - self.value);
                format!("≈{:.digits$}±{half:.digits$}", self.value)
            }
        }
    }

    /// "512" when exact, "≈512" when estimated.
    pub fn value_text(&self, digits: usize) -> String {
        let approx = if self.ci95.is_some() { "≈" } else { "" };
        format!("{approx}{:.digits$}", self.value)
    }

    /// The interval as "lo-hi", or "exact".
    pub fn interval(&self, digits: usize) -> String {
        match self.ci95 {
            None => "exact".into(),
            Some([lo, hi]) => format!("{lo:.digits$}-{hi:.digits$}"),
        }
    }
}

/// How rows are grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowGroup {
    Process,
    /// Processes of one name as one (an nginx master and its workers).
    Program,
}

/// One row: a process, or the processes of a program.
#[derive(Clone, Debug)]
pub struct Row {
    /// Stays the same from one refresh to the next (the selection follows it).
    pub key: String,
    pub name: String,
    /// The process's id (a program's row has none).
    pub pid: Option<u32>,
    pub exited: bool,
    /// TLS CPU over its CPU, and over the machine's.
    pub tls_share: Option<Figure>,
    pub machine_share: Option<Figure>,
    /// Completed handshakes per second.
    pub rate: Option<Figure>,
    /// Of the completed handshakes the probes saw, the resumed share (exact).
    pub resumed_share: Option<f64>,
    /// Abandoned handshakes and refused resumptions per second, scaled as the completed ones are.
    pub abandoned_rate: Option<Figure>,
    pub refused_rate: Option<Figure>,
    pub refused_reason: Option<Reason>,
    /// Mean CPU of a full handshake seen, in ms (exact).
    pub full_ms: Option<f64>,
    /// Its stages by their share of its stages' CPU, largest first.
    pub stages: Vec<(Stage, f64)>,
    /// The TLS library and how tlsprof found its functions ("OpenSSL 3.0.17, public API").
    pub library: Option<String>,
}

/// The header's figures.
#[derive(Clone, Debug)]
pub struct Totals {
    pub span_s: f64,
    pub processes: usize,
    pub cpus: usize,
    /// The recording's TLS CPU over the machine's.
    pub machine_share: Option<Figure>,
    pub rate: Figure,
    /// The probes' and tlsprof's other programs' cost over the targets' CPU, and the budget (%).
    pub cost_share: Option<f64>,
    pub budget_pct: f64,
    /// Estimated from probe windows (else exact: attached throughout).
    pub estimated: bool,
    pub windows: u32,
    pub live_fraction: f64,
    /// Events were lost: counts undercount.
    pub lost: bool,
}

/// A span's view.
#[derive(Clone, Debug)]
pub struct View {
    pub totals: Totals,
    pub rows: Vec<Row>,
    /// "Serve an ECDSA P-256 certificate: about -54% TLS CPU [ecdsa_cert]".
    pub advice: Option<String>,
}

/// The view of a span's analysis, on a machine of `cpus` CPUs.
pub fn view(analysis: &Analysis, group: RowGroup, cpus: usize) -> View {
    let s = &analysis.summary;
    let machine_ms = s.duration_s * 1000.0 * cpus.max(1) as f64;
    let per_s = if s.duration_s > 0.0 { 1.0 / s.duration_s } else { 0.0 };
    let groups = match group {
        RowGroup::Process => groups::by_process(s),
        RowGroup::Program => groups::by_name(s),
    };
    let rows = groups.iter().map(|g| row(s, g, group, machine_ms, per_s)).collect();
    let estimated = s.probing.part_time;
    let totals = Totals {
        span_s: s.duration_s,
        processes: s.targets.len(),
        cpus,
        machine_share: (machine_ms > 0.0)
            .then(|| Figure::new(s.tls_cpu_ms, Some(s.tls_cpu_ms_ci95)).scaled(1.0 / machine_ms)),
        rate: Figure::new(s.handshakes.rate_per_s, estimated.then_some(s.handshakes.rate_ci95)),
        cost_share: match (s.probe_cost_share(), s.own_programs_share()) {
            (Some(p), Some(o)) => Some(p + o),
            (p, _) => p,
        },
        budget_pct: s.probing.max_overhead_pct,
        estimated,
        windows: s.probing.windows,
        live_fraction: s.probing.fraction,
        lost: s.lost.undercounts(),
    };
    let advice = first_screen::best_advice(analysis).map(|a| match first_screen::saving(a) {
        Some(saving) => format!("{}: {saving} [{}]", a.title, a.id),
        None => format!("{} [{}]", a.title, a.id),
    });
    View { totals, rows, advice }
}

fn row(s: &Summary, g: &GroupFigures, group: RowGroup, machine_ms: f64, per_s: f64) -> Row {
    let pid = match group {
        RowGroup::Process => g.pids.first().copied(),
        RowGroup::Program => None,
    };
    let key = match pid {
        Some(pid) => pid.to_string(),
        None => g.name.clone(),
    };
    let name = match pid {
        Some(_) => {
            let t = s.targets.iter().find(|t| Some(t.target.pid) == pid);
            t.map_or_else(|| g.name.clone(), |t| Printable(&t.target.comm).to_string())
        }
        None => g.name.clone(),
    };
    // What each completed handshake seen stands for over the span.
    let seen = g.full_seen + g.resumed_seen;
    let scale = match (g.handshakes, seen) {
        (Some(n), seen) if seen > 0 => Some(n as f64 / seen as f64),
        _ => None,
    };
    let refused: Vec<_> = s
        .resumption
        .iter()
        .filter(|r| r.role == Role::Server && r.pid.is_some_and(|p| g.pids.contains(&p)))
        .collect();
    let refused_rate = (!refused.is_empty()).then(|| {
        let (value, lo, hi, exact) = refused.iter().fold((0.0, 0.0, 0.0, true), |(v, lo, hi, ex), r| {
            let e = &r.refused_total;
            (v + e.value, lo + e.ci95[0], hi + e.ci95[1], ex && e.exact)
        });
        Figure::new(value, (!exact).then_some([lo, hi])).scaled(per_s)
    });
    let mut reasons: Vec<(Reason, u64)> = Vec::new();
    for rc in refused.iter().flat_map(|r| &r.refused_by) {
        match reasons.iter_mut().find(|(r, _)| *r == rc.reason) {
            Some((_, n)) => *n += rc.count,
            None => reasons.push((rc.reason, rc.count)),
        }
    }
    let rate_ci = g.rate_ci95.filter(|_| s.probing.part_time);
    let cpu_ms: f64 = s
        .targets
        .iter()
        .filter(|t| g.pids.contains(&t.target.pid))
        .map(|t| t.target.process_cpu_ms)
        .sum();
    Row {
        key,
        name,
        pid,
        exited: g.exited,
        // Its estimated TLS CPU over its CPU, with the interval of the first (the whole recording's share, as
        // the first screen gives it, is measured in the probe windows alone).
        tls_share: g
            .tls_cpu_ms
            .zip((cpu_ms > 0.0).then_some(cpu_ms))
            .map(|(ms, cpu)| Figure::new(ms, g.tls_cpu_ms_ci95).scaled(1.0 / cpu)),
        machine_share: g
            .tls_cpu_ms
            .filter(|_| machine_ms > 0.0)
            .map(|ms| Figure::new(ms, g.tls_cpu_ms_ci95).scaled(1.0 / machine_ms)),
        rate: g.rate_per_s.map(|v| Figure::new(v, rate_ci)),
        resumed_share: g.resumed_share(),
        abandoned_rate: scale.map(|k| {
            let rate = g.abandoned_seen as f64 * k * per_s;
            // Scaled as the completed ones are: their interval, relatively.
            let ci = rate_ci.zip(g.rate_per_s).filter(|(_, r)| *r > 0.0);
            Figure::new(rate, ci.map(|([lo, hi], r)| [rate * lo / r, rate * hi / r]))
        }),
        refused_rate,
        refused_reason: reasons.iter().max_by_key(|(_, n)| *n).map(|(r, _)| *r),
        full_ms: g.full_ms,
        stages: g.stages.clone(),
        library: library(s, &g.pids),
    }
}

/// The TLS library of these processes and how its functions were found.
fn library(s: &Summary, pids: &[u32]) -> Option<String> {
    let l = s.libraries.iter().find(|l| l.pids.iter().any(|p| pids.contains(p)))?;
    let name = match (&l.version, families::named(&l.family)) {
        (Some(v), _) => Printable(v).to_string(),
        (None, Some(f)) => f.name().to_string(),
        (None, None) => Printable(&l.family).to_string(),
    };
    let how = match l.symbols {
        Symbols::Exported => "public API",
        Symbols::Internal => "symbols",
        Symbols::None => "its callers",
        Symbols::ErrorSites => "error sites",
    };
    Some(format!("{name}, {how}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::analyze;

    #[test]
    fn a_row_per_process_with_its_figures() {
        let analysis = analyze(&crate::model::tests::two_process_recording());
        let v = view(&analysis, RowGroup::Process, 2);
        assert_eq!(v.rows.len(), analysis.summary.targets.len());
        for (row, t) in v.rows.iter().zip(&analysis.summary.targets) {
            assert_eq!(row.pid, Some(t.target.pid));
            let rate = row.rate.unwrap();
            let n = t.handshakes.unwrap() as f64;
            assert!(
                (rate.value * analysis.summary.duration_s - n).abs() < 1e-6,
                "{rate:?} {n}"
            );
            if let Some([lo, hi]) = rate.ci95 {
                assert!(lo <= rate.value && rate.value <= hi);
            }
            let share = row.machine_share.unwrap().value;
            let ms = t.tls_cpu_ms.unwrap();
            assert!((share * analysis.summary.duration_s * 2000.0 - ms).abs() < 1e-6);
            let stages: f64 = row.stages.iter().map(|(_, s)| s).sum();
            assert!(row.stages.is_empty() || (stages - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn figures_say_whether_they_are_exact() {
        assert_eq!(Figure::new(512.0, None).text(0), "512");
        assert_eq!(Figure::new(512.0, Some([512.0, 512.0])).text(0), "512");
        let f = Figure::new(512.0, Some([500.0, 530.0]));
        assert_eq!(f.text(0), "≈512±18");
        assert_eq!(f.interval(0), "500-530");
        assert_eq!(f.value_text(0), "≈512");
        assert_eq!(f.scaled(0.5).text(0), "≈256±9");
    }
}
