// SPDX-License-Identifier: Apache-2.0
//! The call tree the text report prints: stage functions per process name, and the causes of their self CPU.

use std::collections::BTreeMap;

use super::ms;
use crate::analyze::attribution::Attribution;
use crate::analyze::causes::{Cause, CauseCounts};
use crate::catalogue::{stage_within, Stage};
use crate::model::Recording;

/// Call-tree nodes below this share of TLS CPU are folded into a count, to keep the tree readable.
const TREE_MIN_SHARE: f64 = 0.001;

/// The call tree per process name, in print order, with nodes under TREE_MIN_SHARE of TLS CPU left out.
#[derive(Clone, Debug, Default)]
pub struct CallTree {
    pub rows: Vec<CallTreeRow>,
    /// Nodes left out.
    pub hidden: usize,
    pub min_share: f64,
}

#[derive(Clone, Debug)]
pub struct CallTreeRow {
    /// 0: a process name; 1: an outermost stage function; deeper: called from the row above.
    pub depth: usize,
    pub kind: RowKind,
    pub frame: String,
    pub stage: Option<Stage>,
    pub total_ms: f64,
    pub self_ms: Option<f64>,
    pub calls: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    Process,
    /// A probed stage function.
    Function,
    /// A cause of the self CPU of the function row above (`--group cause`), estimated from its samples.
    Cause(Cause),
    /// A frame that named the cause row above.
    CauseFrame,
}

/// Frames shown under each cause in the call tree.
const TREE_CAUSE_FRAMES: usize = 3;

#[derive(Default)]
struct Node {
    calls: u64,
    cpu_ns: u64,
    self_ns: u64,
    /// The samples whose stage path ends here.
    causes: CauseCounts,
    children: BTreeMap<u16, Node>,
}

pub(super) fn call_tree(rec: &Recording, attribution: &Attribution, tls_cpu_ns: u64) -> CallTree {
    let mut roots: BTreeMap<&str, (f64, Node)> = BTreeMap::new();
    for t in &rec.targets {
        roots.entry(&t.comm).or_default().0 += t.probed_cpu_ms;
    }
    for n in &rec.tree {
        let (_, root) = roots.entry(rec.comm_of(n.pid)).or_default();
        let mut node = root;
        for f in &n.path {
            node = node.children.entry(*f).or_default();
        }
        node.calls += n.calls;
        node.cpu_ns += n.cpu_ns;
        node.self_ns += n.self_ns;
    }
    // The samples the probes placed: their stage path leads to a node.
    for (s, place) in attribution.samples() {
        let Some(place) = place.filter(|_| !s.path.is_empty()) else {
            continue;
        };
        let Some((_, root)) = roots.get_mut(rec.comm_of(s.pid)) else {
            continue;
        };
        let mut node = Some(root);
        for f in &s.path {
            node = node.and_then(|n| n.children.get_mut(f));
        }
        if let Some(node) = node {
            node.causes.add(place.cause.clone(), s.count);
        }
    }
    let mut tree = CallTree {
        min_share: TREE_MIN_SHARE,
        ..CallTree::default()
    };
    let min_ns = (tls_cpu_ns as f64 * TREE_MIN_SHARE) as u64;
    for (comm, (cpu_ms, root)) in &roots {
        tree.rows.push(CallTreeRow {
            depth: 0,
            kind: RowKind::Process,
            frame: comm.to_string(),
            stage: None,
            total_ms: *cpu_ms,
            self_ms: None,
            calls: None,
        });
        add_children(rec, root, 1, None, min_ns, &mut tree);
    }
    tree
}

/// `enclosing`: the stage `node` counts in (None for a process).
fn add_children(
    rec: &Recording,
    node: &Node,
    depth: usize,
    enclosing: Option<Stage>,
    min_ns: u64,
    tree: &mut CallTree,
) {
    let mut kids: Vec<(&u16, &Node)> = node.children.iter().collect();
    kids.sort_by_key(|(_, n)| std::cmp::Reverse(n.cpu_ns));
    for (f, n) in kids {
        if n.cpu_ns < min_ns {
            tree.hidden += 1 + count_nodes(n);
            continue;
        }
        let func = &rec.functions[usize::from(*f)];
        let stage = func.stage.map(|s| stage_within(s, enclosing));
        tree.rows.push(CallTreeRow {
            depth,
            kind: RowKind::Function,
            frame: func.name.clone(),
            stage,
            total_ms: ms(n.cpu_ns),
            self_ms: Some(ms(n.self_ns)),
            calls: Some(n.calls),
        });
        add_causes_rows(n, depth + 1, tree);
        add_children(rec, n, depth + 1, stage.or(enclosing), min_ns, tree);
    }
}

/// The causes of a node's self CPU, each with the frames that named it: the rows `--group cause` shows.
fn add_causes_rows(n: &Node, depth: usize, tree: &mut CallTree) {
    let self_ms = ms(n.self_ns);
    let per_sample = self_ms / n.causes.samples.max(1) as f64;
    for c in n.causes.summaries(self_ms, [self_ms, self_ms]) {
        tree.rows.push(CallTreeRow {
            depth,
            kind: RowKind::Cause(c.name),
            frame: c.name.name().to_string(),
            stage: None,
            total_ms: c.cpu_ms,
            self_ms: None,
            calls: None,
        });
        for f in c.top_frames.iter().take(TREE_CAUSE_FRAMES) {
            tree.rows.push(CallTreeRow {
                depth: depth + 1,
                kind: RowKind::CauseFrame,
                frame: f.name.clone(),
                stage: None,
                total_ms: f.samples as f64 * per_sample,
                self_ms: None,
                calls: None,
            });
        }
    }
}

fn count_nodes(n: &Node) -> usize {
    n.children.values().map(|c| 1 + count_nodes(c)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::summarize;
    use crate::model::tests::sample_recording;

    #[test]
    fn call_tree_rows_by_cause_follow_their_function() {
        let s = summarize(&sample_recording());
        let rows: Vec<(usize, RowKind, &str)> = s
            .call_tree
            .rows
            .iter()
            .map(|r| (r.depth, r.kind, r.frame.as_str()))
            .collect();
        let sign = rows.iter().position(|r| r.2 == "EVP_DigestSign").unwrap();
        assert_eq!(rows[sign + 1], (3, RowKind::Cause(Cause::PublicKey), "public_key"));
        assert_eq!(rows[sign + 2], (4, RowKind::CauseFrame, "bn_mul_mont"));
        let public_key = &s.call_tree.rows[sign + 1];
        assert!((public_key.total_ms - s.call_tree.rows[sign].self_ms.unwrap()).abs() < 1e-12);
    }

    #[test]
    fn call_tree_rows_nest_under_their_process() {
        let s = summarize(&sample_recording());
        let rows: Vec<(usize, &str)> = s
            .call_tree
            .rows
            .iter()
            .filter(|r| matches!(r.kind, RowKind::Process | RowKind::Function))
            .map(|r| (r.depth, r.frame.as_str()))
            .collect();
        assert_eq!(
            rows,
            vec![
                (0, "nginx"),
                (1, "SSL_do_handshake"),
                (2, "EVP_DigestSign"),
                (3, "EVP_DigestSignFinal"),
                (2, "EVP_PKEY_derive"),
                (1, "EVP_DigestSignFinal"),
            ]
        );
    }
}
