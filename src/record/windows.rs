// SPDX-License-Identifier: Apache-2.0
//! The probe windows one by one: what each saw and the targets' CPU during it, from which the summary
//! estimates the whole recording and the error of that estimate.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use crate::catalogue::Stage;
use crate::model::{corrected_tree, Function, HandshakeCounts, Hits, ProbeCost, ProbeWindow, RawNode};

/// The counters a window's figures are differences of, read at one moment.
#[derive(Clone, Copy)]
pub struct Reading {
    pub now: Instant,
    /// The targets' CPU while probed, and the probes' cost so far (ms).
    pub probed_cpu_ms: f64,
    pub probe_ms: f64,
    /// The connection counter (STAT_CONNECTIONS).
    pub connections: u64,
}

#[derive(Default)]
pub struct WindowLog {
    /// The counters when the open window opened.
    open: Option<Reading>,
    /// The kernel's call tree when the last window closed: each window's share is the difference.
    tree_seen: TreeSeen,
    pub closed: Vec<ProbeWindow>,
}

/// The kernel's call tree (cumulative) as last read: what was added since is the difference.
#[derive(Default)]
pub struct TreeSeen(HashMap<(u32, Vec<u16>), RawNode>);

impl TreeSeen {
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
    /// A window opens: the stage probes are attached and counting from `at.now`.
    pub fn open(&mut self, at: Reading) {
        self.open = Some(at);
    }

    /// The open window closes at `at`, having seen `handshakes`; `tree` is the kernel's call tree so far.
    pub fn close(
        &mut self,
        at: Reading,
        handshakes: HandshakeCounts,
        tree: Vec<RawNode>,
        functions: &[Function],
        cost: &ProbeCost,
    ) {
        let Reading {
            now,
            probed_cpu_ms,
            probe_ms,
            connections,
        } = at;
        let Some(open) = self.open.take() else { return };
        let delta = self.tree_seen.delta(tree);
        let mut stage_self_ns: BTreeMap<Stage, u64> = BTreeMap::new();
        for n in corrected_tree(delta, cost) {
            let stage = n
                .path
                .last()
                .and_then(|&f| functions.get(usize::from(f)))
                .and_then(|f| f.stage);
            if let Some(stage) = stage {
                *stage_self_ns.entry(stage).or_default() += n.self_ns;
            }
        }
        self.closed.push(ProbeWindow {
            live_s: now.saturating_duration_since(open.now).as_secs_f64(),
            own_cpu_ms: ((probed_cpu_ms - open.probed_cpu_ms) - (probe_ms - open.probe_ms)).max(0.0),
            connections: connections.saturating_sub(open.connections),
            handshakes,
            stage_self_ns,
        });
    }
}
