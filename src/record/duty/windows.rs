// SPDX-License-Identifier: Apache-2.0
//! The probe windows one by one: what each saw and the targets' CPU during it, from which the summary
//! estimates the whole recording and the error of that estimate.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use super::steal::Slices;
use crate::catalogue::Stage;
use crate::model::{
    corrected_tree, Function, HandshakeCounts, Hits, OwnPrograms, ProbeCost, ProbeWindow, RawNode, WindowPart,
};
use crate::record::handshakes::events::WindowSeen;

/// The counters a window's figures are differences of, read at one moment.
#[derive(Clone)]
pub struct Reading {
    pub now: Instant,
    /// Each target's CPU while probed so far (ms).
    pub probed_cpu_ms: BTreeMap<u32, f64>,
    /// The probes' cost so far, all targets together (ms).
    pub probe_ms: f64,
    /// Each target's connections so far (target_state.connections).
    pub connections: BTreeMap<u32, u64>,
    /// Each target's stage threads' scheduler slices so far (target_state.slices_ns).
    pub slices: BTreeMap<u32, Slices>,
    /// What tlsprof's other programs have cost each target so far (target_state.own_ns).
    pub own: BTreeMap<u32, OwnPrograms>,
}

#[derive(Default)]
pub struct WindowLog {
    /// The recording's start by the monotonic clock and by the wall clock (ns since the Unix epoch), to date
    /// the windows by.
    started: Option<(Instant, u64)>,
    /// The counters when the open window opened.
    open: Option<Reading>,
    /// When the stage probes were last attached: a window cut in parts (continuous mode's intervals) is one
    /// attachment.
    attached: Option<Instant>,
    /// The kernel's call tree when the last window closed: each window's share is the difference.
    pub tree_seen: TreeSeen,
    pub closed: Vec<ProbeWindow>,
}

/// The kernel's call tree (cumulative) as last read: what was added since is the difference.
#[derive(Default)]
pub struct TreeSeen(HashMap<(u32, Vec<u16>), RawNode>);

impl TreeSeen {
    /// Forgets the nodes of a process that exited.
    pub fn forget(&mut self, pid: u32) {
        self.0.retain(|(p, _), _| *p != pid);
    }

    /// The nodes' calls and CPU since the last call, given the tree now.
    pub fn delta(&mut self, tree: Vec<RawNode>) -> Vec<RawNode> {
        let mut delta = Vec::with_capacity(tree.len());
        for node in tree {
            let key = (node.pid, node.path.clone());
            let before = self.0.get(&key);
            let d = RawNode {
                pid: node.pid,
                path: node.path.clone(),
                calls: node.calls.saturating_sub(before.map_or(0, |b| b.calls)),
                cpu_ns: node.cpu_ns.saturating_sub(before.map_or(0, |b| b.cpu_ns)),
                nested: Hits {
                    all: node.nested.all.saturating_sub(before.map_or(0, |b| b.nested.all)),
                    stepped: node
                        .nested
                        .stepped
                        .saturating_sub(before.map_or(0, |b| b.nested.stepped)),
                },
            };
            if d.calls > 0 || d.cpu_ns > 0 {
                delta.push(d);
            }
            self.0.insert(key, node);
        }
        delta
    }
}

impl WindowLog {
    /// A log whose windows are dated from the recording's start (`started`, `started_unix_ns` by the wall
    /// clock, if it could be read).
    pub fn dated_from(started: Instant, started_unix_ns: Option<u64>) -> WindowLog {
        WindowLog {
            started: started_unix_ns.map(|ns| (started, ns)),
            ..WindowLog::default()
        }
    }

    /// A window opens: the stage probes are attached and counting from `at.now`.
    pub fn open(&mut self, at: Reading) {
        self.attached = Some(at.now);
        self.open = Some(at);
    }

    /// The window just closed goes on from `at`, the probes still attached: it was cut where an interval
    /// ended.
    pub fn reopen(&mut self, at: Reading) {
        self.open = Some(at);
    }

    /// The open window closes at `at`, having seen `seen`; `tree` is the kernel's call
    /// tree so far.
    pub fn close(
        &mut self,
        at: &Reading,
        seen: WindowSeen,
        tree: Vec<RawNode>,
        functions: &[Function],
        cost: &ProbeCost,
    ) {
        let Some(open) = self.open.take() else { return };
        let attached_ns = at
            .now
            .saturating_duration_since(self.attached.unwrap_or(open.now))
            .as_nanos() as f64;
        let handshakes = seen.counts;
        let delta = self.tree_seen.delta(tree);
        let mut stage_self_ns: BTreeMap<u32, BTreeMap<Stage, u64>> = BTreeMap::new();
        for n in corrected_tree(delta, cost) {
            let stage = n
                .path
                .last()
                .and_then(|&f| functions.get(usize::from(f)))
                .and_then(|f| f.stage);
            if let Some(stage) = stage {
                *stage_self_ns.entry(n.pid).or_default().entry(stage).or_default() += n.self_ns;
            }
        }
        let probed: BTreeMap<u32, f64> = at
            .probed_cpu_ms
            .iter()
            .map(|(pid, ms)| {
                (
                    *pid,
                    (ms - open.probed_cpu_ms.get(pid).copied().unwrap_or(0.0)).max(0.0),
                )
            })
            .collect();
        // The probes' cost, shared by the processes as their CPU in the window.
        let probed_all: f64 = probed.values().sum();
        let own_share = if probed_all > 0.0 {
            (1.0 - (at.probe_ms - open.probe_ms) / probed_all).max(0.0)
        } else {
            0.0
        };
        let mut pids: Vec<u32> = probed
            .keys()
            .chain(handshakes.keys())
            .chain(seen.wire.keys())
            .chain(stage_self_ns.keys())
            .copied()
            .collect();
        pids.extend(at.connections.keys());
        pids.sort_unstable();
        pids.dedup();
        let processes = pids
            .into_iter()
            .map(|pid| WindowPart {
                pid,
                own_cpu_ms: probed.get(&pid).copied().unwrap_or(0.0) * own_share,
                connections: at
                    .connections
                    .get(&pid)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(open.connections.get(&pid).copied().unwrap_or(0)),
                handshakes: handshakes.get(&pid).copied().unwrap_or_default(),
                abandoned_weighted: Some(
                    seen.abandoned_work_to_end
                        .get(&pid)
                        .map_or(0.0, |d| d.sum_over(|ns| seen_weight(ns, attached_ns))),
                ),
                wire_unseen_at_close: seen.wire_hello_to_end.get(&pid).map_or(0.0, |d| {
                    (d.sum_over(|ns| seen_weight(ns, attached_ns)) - d.count as f64).max(0.0)
                }),
                stage_self_ns: stage_self_ns.remove(&pid).unwrap_or_default(),
                hellos: seen.hellos.get(&pid).cloned().unwrap_or_default(),
                wire: seen.wire.get(&pid).copied().unwrap_or_default(),
            })
            .filter(|p| {
                p.own_cpu_ms > 0.0
                    || p.connections > 0
                    || p.handshakes != HandshakeCounts::default()
                    || !p.wire.is_zero()
                    || !p.stage_self_ns.is_empty()
            })
            .collect();
        self.closed.push(ProbeWindow {
            start_unix_ns: self
                .started
                .map(|(instant, unix_ns)| unix_ns + open.now.saturating_duration_since(instant).as_nanos() as u64),
            live_s: at.now.saturating_duration_since(open.now).as_secs_f64(),
            processes,
            stands_in: false,
        });
    }
}

/// The weight of an abandoned handshake that ended `work_to_end_ns` (D) after its work began, seen in an
/// attachment of `attached_ns` (S): the inverse of its chance to be seen, (S - D) / S for work falling
/// anywhere in it. Bounded, as one that takes nearly the whole attachment is rare and would weigh without
/// limit.
fn seen_weight(work_to_end_ns: f64, attached_ns: f64) -> f64 {
    const MAX_WEIGHT: f64 = 10.0;
    let left = attached_ns - work_to_end_ns.max(0.0);
    if left <= attached_ns / MAX_WEIGHT {
        MAX_WEIGHT
    } else {
        attached_ns / left
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;

    #[test]
    fn a_window_is_dated_and_split_by_process_and_the_probes_cost_shared_by_cpu() {
        let t0 = Instant::now();
        let at = |ms: f64, probed: [f64; 2], conns: [u64; 2], probe_ms: f64| Reading {
            now: t0 + std::time::Duration::from_secs_f64(ms / 1e3),
            probed_cpu_ms: BTreeMap::from([(10, probed[0]), (20, probed[1])]),
            probe_ms,
            connections: BTreeMap::from([(10, conns[0]), (20, conns[1])]),
            slices: BTreeMap::new(),
            own: BTreeMap::new(),
        };
        // The recording started 2 s before the window, at 1,000 s past the epoch by the wall clock.
        let mut log = WindowLog::dated_from(t0 - std::time::Duration::from_secs(2), Some(1_000_000_000_000));
        log.open(at(0.0, [100.0, 50.0], [7, 3], 1.0));
        let kind = crate::model::HandshakeKind {
            role: Role::Server,
            resumed: false,
            certificate_key: None,
            key_exchange: None,
            version: None,
            cipher: None,
            resumption: None,
            outcome: Default::default(),
            offer: None,
            refusal: None,
            quic: false,
        };
        let mut seen = WindowSeen::default();
        seen.counts
            .entry(20)
            .or_insert_with(HandshakeCounts::default)
            .add(&kind, 4);
        let functions = vec![Function {
            name: "EVP_DigestSign".into(),
            library: 0,
            stage: Some(Stage::Sign),
        }];
        let tree = vec![RawNode {
            pid: 20,
            path: vec![0],
            calls: 4,
            cpu_ns: 4_000_000,
            nested: Hits::default(),
        }];
        // 30 ms of CPU while probed (10 + 20), 3 ms of it the probes'.
        log.close(
            &at(250.0, [110.0, 70.0], [9, 8], 4.0),
            seen,
            tree,
            &functions,
            &ProbeCost::default(),
        );
        let w = &log.closed[0];
        assert_eq!(w.start_unix_ns, Some(1_002_000_000_000));
        assert!((w.live_s - 0.25).abs() < 1e-9);
        let part = |pid| w.processes.iter().find(|p| p.pid == pid).unwrap();
        assert!((part(10).own_cpu_ms - 9.0).abs() < 1e-9 && (part(20).own_cpu_ms - 18.0).abs() < 1e-9);
        assert_eq!((part(10).connections, part(20).connections), (2, 5));
        assert_eq!((part(10).handshakes.total, part(20).handshakes.total), (0, 4));
        assert_eq!(part(20).stage_self_ns[&Stage::Sign], 4_000_000);
        assert!(part(10).stage_self_ns.is_empty());
    }

    #[test]
    fn abandoned_and_wire_followed_handshakes_weigh_by_their_chance_to_be_seen_whole() {
        let at = |ms: f64| Reading {
            now: Instant::now() + std::time::Duration::from_secs_f64(ms / 1e3),
            probed_cpu_ms: BTreeMap::from([(10, ms)]),
            probe_ms: 0.0,
            connections: BTreeMap::from([(10, 0)]),
            slices: BTreeMap::new(),
            own: BTreeMap::new(),
        };
        let seen = |ms: &[f64]| {
            let mut s = WindowSeen::default();
            for d in ms {
                s.abandoned_work_to_end.entry(10).or_default().add((d * 1e6) as u64);
            }
            s
        };
        let start = at(0.0);
        let weighted = |log: &WindowLog, i: usize| log.closed[i].processes[0].abandoned_weighted.unwrap();
        let close_to = |a: f64, b: f64| (a - b).abs() <= 0.02 * b;
        // 100 ms attached: one that ends 20 ms after its work is seen with chance 80/100; one that takes 95 ms
        // weighs at most 10.
        let mut log = WindowLog::default();
        log.open(start.clone());
        log.close(
            &at(100.0),
            seen(&[20.0, 20.0, 20.0, 20.0, 95.0]),
            vec![],
            &[],
            &ProbeCost::default(),
        );
        assert!(close_to(weighted(&log, 0), 4.0 * 1.25 + 10.0), "{}", weighted(&log, 0));
        // Followed on the wire from their ClientHello, 20 ms to their end: 4 seen stand for 5, one of them
        // under way at the close.
        let mut wire = WindowSeen::default();
        for _ in 0..4 {
            wire.wire_hello_to_end.entry(10).or_default().add(20_000_000);
        }
        let mut log = WindowLog::default();
        log.open(at(0.0));
        log.close(&at(100.0), wire, vec![], &[], &ProbeCost::default());
        let unseen = log.closed[0].processes[0].wire_unseen_at_close;
        assert!(close_to(unseen, 1.0), "{unseen}");
        // Cut at 60 ms: each part weighs by the attachment so far, not by the part.
        let mut log = WindowLog::default();
        log.open(start);
        log.close(&at(60.0), seen(&[30.0]), vec![], &[], &ProbeCost::default());
        log.reopen(at(60.0));
        log.close(&at(100.0), seen(&[30.0]), vec![], &[], &ProbeCost::default());
        assert!(close_to(weighted(&log, 0), 2.0), "{}", weighted(&log, 0));
        assert!(close_to(weighted(&log, 1), 100.0 / 70.0), "{}", weighted(&log, 1));
    }
}
