// SPDX-License-Identifier: Apache-2.0
//! A recording (or an interval of one) assembled from what the session read: the targets, handshakes,
//! named samples, and the kernel's call tree and counters.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use libbpf_rs::MapCore;

use crate::model::{
    self, corrected_tree, HandshakeGroup, Hits, Lost, Probing, RawNode, Recording, Target, TicketKey, TrapSamples,
};
use crate::record::kernel::bpf::types::{tlsprof_stat, tree_key, tree_val};
use crate::record::kernel::probes::TargetSet;
use crate::record::kernel::programs::Programs;
use crate::record::stacks::samples::NamedSamples;
use crate::record::RecordOptions;

/// What the BPF side counted as lost so far (the stacks' losses are counted as they are named).
pub(super) fn counted_losses(programs: &Programs) -> Lost {
    Lost {
        samples_taken: programs.stat(tlsprof_stat::STAT_SAMPLES),
        samples: programs.stat(tlsprof_stat::STAT_SAMPLE_DROPS),
        handshake_events: programs.stat(tlsprof_stat::STAT_HANDSHAKE_DROPS),
        tree_nodes: programs.stat(tlsprof_stat::STAT_TREE_DROPS),
        depth_overflow: programs.stat(tlsprof_stat::STAT_DEPTH_OVERFLOW),
        missed_returns: programs.stat(tlsprof_stat::STAT_MISSED_RETURNS),
        threads: programs.stat(tlsprof_stat::STAT_THREAD_DROPS),
        connections: programs.stat(tlsprof_stat::STAT_CONN_DROPS),
        unframed_work: programs.stat(tlsprof_stat::STAT_UNFRAMED_WORK),
        processes: programs.stat(tlsprof_stat::STAT_PROCESS_DROPS),
        wire_handshakes: programs.stat(tlsprof_stat::STAT_WIRE_LOST),
        ..Lost::default()
    }
}

/// What a recording (or an interval of one) is read from.
pub(super) struct Parts {
    pub(super) recorded: Vec<Target>,
    pub(super) handshakes: Vec<HandshakeGroup>,
    pub(super) ticket_keys: Vec<TicketKey>,
    pub(super) named: NamedSamples,
    /// The kernel's call tree, before the probes' cost is taken out.
    pub(super) tree: Vec<RawNode>,
    /// The BPF side's losses (counted_losses).
    pub(super) lost: Lost,
    pub(super) hits: Hits,
    pub(super) traps: Option<TrapSamples>,
    pub(super) start_unix_ns: Option<u64>,
    pub(super) duration_s: f64,
    pub(super) probing: Probing,
}

impl Parts {
    pub(super) fn into_recording(
        self,
        programs: &Programs,
        targets: &TargetSet,
        opts: &RecordOptions,
    ) -> Result<Recording> {
        let hits = self.hits;
        let tree = corrected_tree(self.tree, &programs.probe_cost);
        let named = self.named;
        let lost = Lost {
            unreadable_stacks: named.unreadable,
            cut_stacks: named.cut,
            ..self.lost
        };
        Ok(Recording {
            format: model::FORMAT.into(),
            format_version: model::FORMAT_VERSION,
            tlsprof_version: env!("CARGO_PKG_VERSION").into(),
            start_unix_ns: self.start_unix_ns,
            duration_s: self.duration_s,
            sample_freq_hz: opts.attach.freq_hz,
            call_graph: opts.attach.call_graph,
            stack_bytes: opts.attach.stack_bytes,
            unnamed_jit_pids: named.unnamed_jit_pids,
            all_probes: opts.attach.all_probes,
            targets: self.recorded,
            libraries: targets.libraries.clone(),
            functions: targets.functions.clone(),
            tree,
            samples: named.samples,
            frame_files: named.frame_files,
            unnamed_files: named.unnamed_files,
            debug_files: named.debug_files,
            handshakes: self.handshakes,
            ticket_keys: self.ticket_keys,
            lost,
            probe_cost: programs.probe_cost,
            probe_hits: hits.all,
            probe_stepped_hits: hits.stepped,
            other_process_hits: programs.stat(tlsprof_stat::STAT_OTHER_HITS),
            probe_scheduler_hits: programs.stat(tlsprof_stat::STAT_SCHEDULER_HITS),
            probe_traps: self.traps,
            probing: self.probing,
            // Measured by the caller once the recording is over (speed::measure).
            openssl_speed: BTreeMap::new(),
        })
    }
}

/// Deletes the call-tree nodes of processes that exited: the map is bounded, and its nodes would count
/// against new processes' room.
pub(super) fn forget_tree_nodes(programs: &Programs, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let map = &programs.skel.maps.tree;
    let gone: Vec<Vec<u8>> = map
        .keys()
        .filter(|key| {
            key.get(..4)
                .is_some_and(|tgid| pids.contains(&u32::from_ne_bytes(tgid.try_into().expect("4 bytes"))))
        })
        .collect();
    for key in gone {
        let _ = map.delete(&key);
    }
}

/// The call tree as the BPF side counted it so far.
pub(super) fn read_tree(programs: &Programs) -> Result<Vec<RawNode>> {
    let map = &programs.skel.maps.tree;
    let mut raw = Vec::new();
    for key in map.keys() {
        let Some(value) = map.lookup(&key, libbpf_rs::MapFlags::ANY)? else {
            continue;
        };
        let (mut k, mut v) = (tree_key::default(), tree_val::default());
        plain::copy_from_bytes(&mut k, &key).ok().context("tree key size")?;
        plain::copy_from_bytes(&mut v, &value).ok().context("tree value size")?;
        let depth = usize::from(k.depth).min(k.funcs.len());
        raw.push(RawNode {
            pid: k.tgid,
            path: k.funcs[..depth].to_vec(),
            calls: v.calls,
            cpu_ns: v.cpu_ns,
            nested: Hits {
                all: v.nested_hits,
                stepped: v.nested_stepped,
            },
        });
    }
    Ok(raw)
}
