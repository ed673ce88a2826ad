// SPDX-License-Identifier: Apache-2.0
//! Targets grouped by name (an nginx master and its workers), or each on its own, with each group's figures:
//! its TLS share, handshakes per second, CPU per full and resumed handshake and its stages, computed once for
//! every output that shows them (the first screen, the HTML report, `tlsprof top`).

use super::{KindSummary, Summary, TargetSummary};
use crate::catalogue::Stage;
use crate::model::untrusted::Printable;
use crate::model::{Outcome, Role};

/// One group's figures. Rates and shares are estimated over the whole recording (with 95% intervals where
/// the summary has them); CPU per handshake is the mean of the handshakes the probes saw (exact).
#[derive(Clone, Debug)]
pub struct GroupFigures {
    /// "nginx ×2" (names escaped for a terminal).
    pub name: String,
    /// The name on its row: a group that is the whole recording drops its count.
    pub label: String,
    /// Its processes.
    pub pids: Vec<u32>,
    /// Every one of them has exited.
    pub exited: bool,
    /// All the recording's targets: the whole recording's figures.
    pub whole: bool,
    /// The recording's share measured in the probe windows when whole, else the group's estimated TLS CPU
    /// over its CPU.
    pub tls_share: Option<f64>,
    pub tls_share_ci95: Option<[f64; 2]>,
    /// Its estimated TLS CPU over the recording, in ms.
    pub tls_cpu_ms: Option<f64>,
    pub tls_cpu_ms_ci95: Option<[f64; 2]>,
    pub handshakes: Option<u64>,
    pub handshakes_ci95: Option<[f64; 2]>,
    pub rate_per_s: Option<f64>,
    pub rate_ci95: Option<[f64; 2]>,
    /// Completed full and resumed handshakes the probes saw.
    pub full_seen: u64,
    pub resumed_seen: u64,
    /// Abandoned handshakes the probes saw.
    pub abandoned_seen: u64,
    /// Mean CPU of a full and of a resumed handshake seen, in ms.
    pub full_ms: Option<f64>,
    pub resumed_ms: Option<f64>,
    /// Its probed stages by their share of its stages' self CPU, largest first.
    pub stages: Vec<(Stage, f64)>,
    /// Every member's handshakes were counted from its sockets alone: no TLS CPU, no stages.
    pub wire_only: bool,
}

impl GroupFigures {
    /// The stage with the most self CPU, and its share.
    pub fn top_stage(&self) -> Option<(Stage, f64)> {
        self.stages.first().copied()
    }

    /// The resumed share of the handshakes seen.
    pub fn resumed_share(&self) -> Option<f64> {
        let seen = self.full_seen + self.resumed_seen;
        (seen > 0).then(|| self.resumed_seen as f64 / seen as f64)
    }
}

/// Targets of one name, with their figures summed.
struct TargetGroup<'a> {
    name: String,
    members: Vec<&'a TargetSummary>,
}

/// The recording tells each process's handshakes apart.
pub fn attributed(s: &Summary) -> bool {
    s.targets.iter().all(|t| t.handshakes.is_some()) && s.handshakes.kinds.iter().all(|k| k.pid.is_some())
}

/// Every group of targets by name, in the order they were recorded.
pub fn by_name(s: &Summary) -> Vec<GroupFigures> {
    groups(s).iter().map(|g| g.figures(s)).collect()
}

/// Every target on its own, in the order they were recorded ("nginx 4242").
pub fn by_process(s: &Summary) -> Vec<GroupFigures> {
    s.targets
        .iter()
        .map(|t| TargetGroup {
            name: format!("{} {}", member_name(t), t.target.pid),
            members: vec![t],
        })
        .map(|g| g.figures(s))
        .collect()
}

/// The rows a report shows: one per group, or, when the recording does not tell processes' handshakes
/// apart (an older recording), all targets as one.
pub fn rows(s: &Summary) -> Vec<GroupFigures> {
    if attributed(s) {
        return by_name(s);
    }
    let all = TargetGroup {
        name: "all targets".into(),
        members: s.targets.iter().collect(),
    };
    vec![all.figures(s)]
}

fn groups(s: &Summary) -> Vec<TargetGroup<'_>> {
    let mut groups: Vec<TargetGroup> = Vec::new();
    for t in &s.targets {
        let name = member_name(t);
        match groups.iter_mut().find(|g| g.name == name) {
            Some(g) => g.members.push(t),
            None => groups.push(TargetGroup { name, members: vec![t] }),
        }
    }
    groups
}

/// A target's name, and its container's (escaped for a terminal).
fn member_name(t: &TargetSummary) -> String {
    match &t.target.container {
        Some(c) => format!("{} in {}", Printable(&t.target.comm), Printable(c)),
        None => Printable(&t.target.comm).to_string(),
    }
}

/// The sum of members' intervals where at most one is not exact (an nginx master beside its worker);
/// intervals of several estimates do not add up to one of their sum.
fn joint_ci95<T: Copy + Into<f64>>(cis: impl Iterator<Item = Option<[T; 2]>>) -> Option<[f64; 2]> {
    let cis: Vec<[f64; 2]> = cis
        .map(|c| c.map(|[lo, hi]| [lo.into(), hi.into()]))
        .collect::<Option<_>>()?;
    let inexact = cis.iter().filter(|[lo, hi]| lo != hi).count();
    (inexact <= 1).then(|| cis.iter().fold([0.0, 0.0], |[a, b], [lo, hi]| [a + lo, b + hi]))
}

impl TargetGroup<'_> {
    fn figures(&self, s: &Summary) -> GroupFigures {
        let whole = self.members.len() == s.targets.len();
        let name = match self.members.len() {
            1 => self.name.clone(),
            n => format!("{} ×{n}", self.name),
        };
        let label = if whole && s.targets.len() > 1 {
            self.name.clone()
        } else {
            name.clone()
        };
        let (tls_share, tls_share_ci95) = self.tls_share(s, whole);
        let tls_cpu_ms = self.members.iter().map(|t| t.tls_cpu_ms).sum::<Option<f64>>();
        let tls_cpu_ms_ci95 = joint_ci95(self.members.iter().map(|t| t.tls_cpu_ms_ci95));
        let (handshakes, handshakes_ci95) = self.handshakes(s, whole);
        let per_s = |v: f64| (s.duration_s > 0.0).then(|| v / s.duration_s);
        let rate_per_s = handshakes.and_then(|n| per_s(n as f64));
        // The whole recording's rate is the summary's; a group's, its handshakes' interval per second.
        let rate_ci95 = match whole {
            true => per_s(1.0).map(|_| s.handshakes.rate_ci95),
            false => handshakes_ci95.and_then(|[lo, hi]| Some([per_s(lo)?, per_s(hi)?])),
        };
        let seen = self.seen(s, whole);
        let (full_seen, full_ms) = mean_ms(&seen, false);
        let (resumed_seen, resumed_ms) = mean_ms(&seen, true);
        let stages = self.stages(s, whole);
        GroupFigures {
            name,
            label,
            pids: self.members.iter().map(|t| t.target.pid).collect(),
            exited: self.members.iter().all(|t| t.target.exited),
            whole,
            tls_share,
            tls_share_ci95,
            tls_cpu_ms,
            tls_cpu_ms_ci95,
            handshakes,
            handshakes_ci95,
            rate_per_s,
            rate_ci95,
            full_seen,
            resumed_seen,
            abandoned_seen: self.abandoned_seen(s, whole),
            full_ms,
            resumed_ms,
            stages,
            wire_only: self.members.iter().all(|t| t.target.wire_only),
        }
    }

    /// The whole recording's share is the one measured in the probe windows (the report's TLS CPU line); a
    /// group's, its estimated TLS CPU over its CPU (the Processes section's figures).
    fn tls_share(&self, s: &Summary, whole: bool) -> (Option<f64>, Option<[f64; 2]>) {
        // A process counted from the wire alone has only its own figure, from its samples.
        if whole && !self.members.iter().any(|t| t.target.wire_only) {
            return (s.tls_share, None);
        }
        let cpu_ms: f64 = self.members.iter().map(|t| t.target.process_cpu_ms).sum();
        if cpu_ms <= 0.0 {
            return (None, None);
        }
        let tls_ms = self.members.iter().map(|t| t.tls_cpu_ms).sum::<Option<f64>>();
        let ci = joint_ci95(self.members.iter().map(|t| t.tls_cpu_ms_ci95));
        (
            tls_ms.map(|ms| ms / cpu_ms),
            ci.map(|[lo, hi]| [lo / cpu_ms, hi / cpu_ms]),
        )
    }

    /// Handshakes completed over the recording, with their interval.
    fn handshakes(&self, s: &Summary, whole: bool) -> (Option<u64>, Option<[f64; 2]>) {
        if whole {
            let [lo, hi] = s.handshakes.total_ci95;
            return (Some(s.handshakes.total), Some([lo as f64, hi as f64]));
        }
        let n = self.members.iter().map(|t| t.handshakes).sum::<Option<u64>>();
        let ci = joint_ci95(
            self.members
                .iter()
                .map(|t| t.handshakes_ci95.map(|c| c.map(|v| v as f64))),
        );
        (n, ci)
    }

    /// The kinds of handshake its processes made.
    fn kinds<'s>(&self, s: &'s Summary, whole: bool) -> impl Iterator<Item = &'s KindSummary> {
        let pids: Vec<u32> = self.members.iter().map(|t| t.target.pid).collect();
        s.handshakes
            .kinds
            .iter()
            .filter(move |k| whole || k.pid.is_some_and(|pid| pids.contains(&pid)))
    }

    /// The kinds of completed handshake its processes made.
    fn seen<'s>(&self, s: &'s Summary, whole: bool) -> Vec<&'s KindSummary> {
        self.kinds(s, whole)
            .filter(|k| k.outcome == Outcome::Completed && k.role != Role::Partial)
            .collect()
    }

    fn abandoned_seen(&self, s: &Summary, whole: bool) -> u64 {
        self.kinds(s, whole)
            .filter(|k| k.outcome == Outcome::Abandoned)
            .map(|k| k.count)
            .sum()
    }

    /// The stages its processes spent self CPU in, with their shares of their stages' CPU, largest first
    /// (the whole recording's probed stages, or the members' own).
    fn stages(&self, s: &Summary, whole: bool) -> Vec<(Stage, f64)> {
        let mut by_stage: Vec<(Stage, f64)> = Vec::new();
        let stages = if whole {
            s.stages
                .iter()
                .filter(|st| !st.sampled)
                .map(|st| (st.name, st.self_cpu_ms))
                .collect()
        } else {
            self.members
                .iter()
                .flat_map(|t| t.stage_self_ms.iter().copied())
                .collect::<Vec<_>>()
        };
        for (stage, ms) in stages {
            match by_stage.iter_mut().find(|(st, _)| *st == stage) {
                Some((_, sum)) => *sum += ms,
                None => by_stage.push((stage, ms)),
            }
        }
        let total: f64 = by_stage.iter().map(|(_, ms)| ms).sum();
        if total <= 0.0 {
            return Vec::new();
        }
        by_stage.sort_by(|a, b| b.1.total_cmp(&a.1));
        by_stage.into_iter().map(|(stage, ms)| (stage, ms / total)).collect()
    }
}

/// How many full (or resumed) handshakes were seen, and the mean CPU in ms of those seen with their CPU (not
/// those counted from the wire alone).
fn mean_ms(seen: &[&KindSummary], resumed: bool) -> (u64, Option<f64>) {
    let kinds: Vec<&&KindSummary> = seen.iter().filter(|k| k.resumed == resumed).collect();
    let (with_cpu, sum) = kinds
        .iter()
        .filter_map(|k| k.cpu_ms.as_ref().map(|c| (k.count, c.mean)))
        .fold((0, 0.0), |(n, sum), (count, mean)| {
            (n + count, sum + count as f64 * mean)
        });
    let n = kinds.iter().map(|k| k.count).sum();
    (n, (with_cpu > 0).then(|| sum / with_cpu as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::summarize;

    #[test]
    fn each_process_name_is_a_group_with_its_own_figures() {
        let s = summarize(&crate::model::tests::two_process_recording());
        let rows = rows(&s);
        assert_eq!(rows.len(), s.targets.len());
        for (row, t) in rows.iter().zip(&s.targets) {
            assert!(!row.whole);
            assert_eq!(row.handshakes, t.handshakes);
            let rate = row.rate_per_s.unwrap();
            let [lo, hi] = row.rate_ci95.unwrap();
            assert!(lo <= rate && rate <= hi, "{lo} {rate} {hi}");
        }
        let top: Vec<_> = rows.iter().filter_map(|r| r.top_stage()).collect();
        assert!(top.iter().all(|(_, share)| *share > 0.0 && *share <= 1.0), "{top:?}");
    }

    #[test]
    fn intervals_of_several_estimates_are_not_added() {
        let exact = Some([3.0, 3.0]);
        assert_eq!(joint_ci95([exact, Some([1.0, 4.0])].into_iter()), Some([4.0, 7.0]));
        assert_eq!(joint_ci95([Some([1.0, 2.0]), Some([1.0, 4.0])].into_iter()), None);
    }
}
