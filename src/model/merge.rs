// SPDX-License-Identifier: Apache-2.0
//! Parts and wholes of recordings: the part about some processes, and the intervals of a session as one.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use super::{
    CpuHistogram, HandshakeGroup, HandshakeKind, OwnPrograms, ProbeWindow, Recording, Sample, Target, TicketKey,
    TreeNode,
};

impl Recording {
    /// A copy without the lists kept per process (targets, call tree, samples, handshakes, ticket keys), which parts and
    /// wholes fill in their own way: cloning them only to replace them would copy them once per part.
    fn shell(&self) -> Recording {
        Recording {
            format: self.format.clone(),
            format_version: self.format_version,
            tlsprof_version: self.tlsprof_version.clone(),
            start_unix_ns: self.start_unix_ns,
            duration_s: self.duration_s,
            sample_freq_hz: self.sample_freq_hz,
            call_graph: self.call_graph,
            stack_bytes: self.stack_bytes,
            unnamed_jit_pids: self.unnamed_jit_pids.clone(),
            all_probes: self.all_probes,
            targets: Vec::new(),
            libraries: self.libraries.clone(),
            functions: self.functions.clone(),
            tree: Vec::new(),
            samples: Vec::new(),
            frame_files: self.frame_files.clone(),
            unnamed_files: self.unnamed_files.clone(),
            debug_files: self.debug_files.clone(),
            handshakes: Vec::new(),
            ticket_keys: Vec::new(),
            lost: self.lost.clone(),
            probe_cost: self.probe_cost,
            probe_hits: self.probe_hits,
            probe_stepped_hits: self.probe_stepped_hits,
            other_process_hits: self.other_process_hits,
            probe_scheduler_hits: self.probe_scheduler_hits,
            probe_traps: self.probe_traps,
            probing: self.probing.clone(),
            openssl_speed: self.openssl_speed.clone(),
        }
    }

    /// The part of the recording that is about some of its processes: their CPU, call tree, samples,
    /// handshakes and windows. The probes' hits are counted for all targets together: the processes' share
    /// of them is their share of the CPU while probed.
    pub fn of_processes(&self, pids: &[u32]) -> Recording {
        let mine = |pid: &u32| pids.contains(pid);
        let targets: Vec<Target> = self.targets.iter().filter(|t| mine(&t.pid)).cloned().collect();
        let probed = |ts: &[Target]| ts.iter().map(|t| t.probed_cpu_ms).sum::<f64>();
        let all_probed = probed(&self.targets);
        let share = if all_probed > 0.0 {
            probed(&targets) / all_probed
        } else {
            targets.len() as f64 / self.targets.len().max(1) as f64
        };
        let mut part = Recording {
            targets,
            tree: self.tree.iter().filter(|n| mine(&n.pid)).cloned().collect(),
            samples: self.samples.iter().filter(|s| mine(&s.pid)).cloned().collect(),
            handshakes: self
                .handshakes
                .iter()
                .filter(|g| g.pid.as_ref().is_some_and(mine))
                .cloned()
                .collect(),
            ticket_keys: self.ticket_keys.iter().filter(|k| mine(&k.pid)).cloned().collect(),
            probe_hits: (self.probe_hits as f64 * share).round() as u64,
            probe_stepped_hits: (self.probe_stepped_hits as f64 * share).round() as u64,
            probe_scheduler_hits: (self.probe_scheduler_hits as f64 * share).round() as u64,
            // The trap sampler runs while the probes are attached, as the hits come.
            probe_traps: self.probe_traps.map(|t| t.scaled(share)),
            ..self.shell()
        };
        part.unnamed_jit_pids.retain(mine);
        for w in &mut part.probing.window_figures {
            w.processes.retain(|p| mine(&p.pid));
        }
        part
    }

    /// The recording with the processes of one program that started and ended during it (each joined as it
    /// started: a curl per request, a backend per connection) folded into one target under the lowest of their
    /// pids, with their figures summed: a hundred one-handshake processes read as their program's. Its
    /// `processes` says how many. Processes there from the start, or still running at its end, stay apart, as do
    /// those of one name forked by different parents (two PostgreSQL servers' backends).
    pub fn fold_started(&self) -> Recording {
        let short = |t: &&Target| t.joined_at_s.is_some() && t.exited;
        let key = |t: &Target| (t.comm.clone(), t.container.clone(), t.parent);
        let mut first: BTreeMap<(String, Option<String>, Option<u32>), u32> = BTreeMap::new();
        for t in self.targets.iter().filter(short) {
            let pid = first.entry(key(t)).or_insert(t.pid);
            *pid = (*pid).min(t.pid);
        }
        let to: BTreeMap<u32, u32> = self
            .targets
            .iter()
            .filter(short)
            .map(|t| (t.pid, first[&key(t)]))
            .filter(|&(pid, into)| pid != into)
            .collect();
        if to.is_empty() {
            return self.clone();
        }
        let fold = |pid: &mut u32| {
            if let Some(&into) = to.get(pid) {
                *pid = into;
            }
        };
        let mut r = self.clone();
        for t in &mut r.targets {
            fold(&mut t.pid);
        }
        r.tree.iter_mut().for_each(|n| fold(&mut n.pid));
        r.samples.iter_mut().for_each(|s| fold(&mut s.pid));
        r.handshakes.iter_mut().filter_map(|g| g.pid.as_mut()).for_each(fold);
        r.ticket_keys.iter_mut().for_each(|k| fold(&mut k.pid));
        r.unnamed_jit_pids.iter_mut().for_each(fold);
        for l in &mut r.libraries {
            l.pids.iter_mut().for_each(fold);
            l.pids.sort_unstable();
            l.pids.dedup();
        }
        for w in &mut r.probing.window_figures {
            let mut parts: Vec<super::WindowPart> = Vec::new();
            for mut p in std::mem::take(&mut w.processes) {
                fold(&mut p.pid);
                match parts.iter_mut().find(|q| q.pid == p.pid) {
                    Some(q) => q.add(&p),
                    None => parts.push(p),
                }
            }
            w.processes = parts;
        }
        let mut folded = Recording::merge(&[r]);
        // The processes each target stands for.
        for t in &mut folded.targets {
            t.processes = self
                .targets
                .iter()
                .filter(|s| s.pid == t.pid || to.get(&s.pid) == Some(&t.pid))
                .count() as u32;
        }
        folded
    }

    /// Intervals of one session as one recording. Function and library ids are the session's, which only
    /// adds to its lists: the latest interval's lists hold every earlier one's.
    pub fn merge<R: Borrow<Recording>>(recs: &[R]) -> Recording {
        let mut recs: Vec<&Recording> = recs.iter().map(Borrow::borrow).collect();
        let mut out = Recording::merged_shell(&recs);
        // In time order: ticket keys' figures depend on which part came later.
        recs.sort_by_key(|r| r.start_unix_ns);
        let mut per_process = PerProcess::default();
        for r in &recs {
            per_process.add(r, out.duration_s);
            out.add_interval(r);
        }
        drop_redundant_stand_ins(&mut out.probing.window_figures);
        per_process.fill(&mut out);
        out
    }

    /// The shell of the interval with the most functions (the latest), its figures that the intervals add up
    /// to at zero.
    fn merged_shell(recs: &[&Recording]) -> Recording {
        let latest = recs
            .iter()
            .max_by_key(|r| r.functions.len())
            .expect("at least one interval");
        let mut out = latest.shell();
        out.duration_s = 0.0;
        out.start_unix_ns = recs.iter().filter_map(|r| r.start_unix_ns).min();
        out.probe_hits = 0;
        out.probe_stepped_hits = 0;
        out.other_process_hits = 0;
        out.probe_scheduler_hits = 0;
        // Measured only if every interval measured them.
        out.probe_traps = recs
            .iter()
            .map(|r| r.probe_traps)
            .reduce(|sum, t| Some(sum?.plus(&t?)))
            .flatten();
        out.lost = Default::default();
        out.probing.live_s = 0.0;
        out.probing.windows = 0;
        out.probing.window_figures.clear();
        out
    }

    /// Adds what an interval holds for the whole recording: its time, probe hits, losses and windows, and
    /// the files and processes its frames were named from.
    fn add_interval(&mut self, r: &Recording) {
        self.duration_s += r.duration_s;
        self.probe_hits += r.probe_hits;
        self.probe_stepped_hits += r.probe_stepped_hits;
        self.other_process_hits += r.other_process_hits;
        self.probe_scheduler_hits += r.probe_scheduler_hits;
        self.lost.add(&r.lost);
        let p = &mut self.probing;
        p.live_s += r.probing.live_s;
        p.windows += r.probing.windows;
        p.peak_overhead = p.peak_overhead.max(r.probing.peak_overhead);
        p.window_figures.extend(r.probing.window_figures.iter().cloned());
        self.frame_files
            .extend(r.frame_files.iter().map(|(k, v)| (k.clone(), v.clone())));
        self.debug_files
            .extend(r.debug_files.iter().map(|(k, v)| (k.clone(), v.clone())));
        for f in &r.unnamed_files {
            if !self.unnamed_files.iter().any(|u| u.path == f.path) {
                self.unnamed_files.push(f.clone());
            }
        }
        for &pid in &r.unnamed_jit_pids {
            if !self.unnamed_jit_pids.contains(&pid) {
                self.unnamed_jit_pids.push(pid);
            }
        }
    }
}

/// A sample's process, stage path, user and kernel frames, and whether its stack was whole: samples alike
/// are counted together.
type SampleKey = (u32, Vec<u16>, Vec<String>, Vec<String>, bool);

/// The lists kept per process (targets, call tree, samples, handshakes, ticket keys) of the intervals merged
/// so far, each summed by what it is kept by.
#[derive(Default)]
struct PerProcess {
    targets: BTreeMap<u32, Target>,
    tree: BTreeMap<(u32, Vec<u16>), TreeNode>,
    samples: BTreeMap<SampleKey, u64>,
    handshakes: BTreeMap<(Option<u32>, HandshakeKind, bool), CpuHistogram>,
    ticket_keys: BTreeMap<(u32, Option<String>), TicketKey>,
}

impl PerProcess {
    /// Adds the next interval in time order; `offset_s`: seconds into the whole at which it starts.
    fn add(&mut self, r: &Recording, offset_s: f64) {
        self.add_ticket_keys(r, offset_s);
        self.add_targets(r, offset_s);
        for n in &r.tree {
            let m = self.tree.entry((n.pid, n.path.clone())).or_insert_with(|| TreeNode {
                calls: 0,
                cpu_ns: 0,
                self_ns: 0,
                ..n.clone()
            });
            m.calls += n.calls;
            m.cpu_ns += n.cpu_ns;
            m.self_ns += n.self_ns;
        }
        for s in &r.samples {
            let key = (s.pid, s.path.clone(), s.frames.clone(), s.kernel.clone(), s.complete);
            *self.samples.entry(key).or_insert(0) += s.count;
        }
        for g in &r.handshakes {
            self.handshakes
                .entry((g.pid, g.kind.clone(), g.from_wire))
                .or_default()
                .merge(&g.cpu);
        }
    }

    /// Ticket keys' times count from each part's start.
    fn add_ticket_keys(&mut self, r: &Recording, offset_s: f64) {
        for k in &r.ticket_keys {
            let later = TicketKey {
                first_offered_s: k.first_offered_s + offset_s,
                last_accepted_s: k.last_accepted_s.map(|s| s + offset_s),
                ..k.clone()
            };
            match self.ticket_keys.entry((k.pid, k.name.clone())) {
                std::collections::btree_map::Entry::Occupied(mut e) => e.get_mut().merge_later(&later),
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(later);
                }
            }
        }
    }

    fn add_targets(&mut self, r: &Recording, offset_s: f64) {
        for t in &r.targets {
            let m = self.targets.entry(t.pid).or_insert_with(|| Target {
                process_cpu_ms: 0.0,
                probed_cpu_ms: 0.0,
                connections: 0,
                stage_slices_ms: 0.0,
                stage_slices_cpu_ms: 0.0,
                own_programs: OwnPrograms::default(),
                // Seconds into its part: into the whole from here.
                joined_at_s: t.joined_at_s.map(|s| s + offset_s),
                ..t.clone()
            });
            // A process that exited in a later part has exited.
            m.exited |= t.exited;
            m.process_cpu_ms += t.process_cpu_ms;
            m.probed_cpu_ms += t.probed_cpu_ms;
            m.connections += t.connections;
            m.stage_slices_ms += t.stage_slices_ms;
            m.stage_slices_cpu_ms += t.stage_slices_cpu_ms;
            m.own_programs = m.own_programs.plus(&t.own_programs);
        }
    }

    /// The sums as the whole recording's lists, its samples heaviest first.
    fn fill(self, out: &mut Recording) {
        out.targets = self.targets.into_values().collect();
        out.tree = self.tree.into_values().collect();
        out.samples = self
            .samples
            .into_iter()
            .map(|((pid, path, frames, kernel, complete), count)| Sample {
                pid,
                path,
                frames,
                kernel,
                complete,
                count,
            })
            .collect();
        out.samples.sort_by_key(|s| std::cmp::Reverse(s.count));
        out.handshakes = self
            .handshakes
            .into_iter()
            .map(|((pid, kind, from_wire), cpu)| HandshakeGroup {
                pid,
                kind,
                cpu,
                from_wire,
            })
            .collect();
        out.ticket_keys = self.ticket_keys.into_values().collect();
    }
}

/// A window standing in for one interval is an earlier interval's: among windows of the merged intervals
/// that saw connections it adds nothing (they stand for every interval alike), and once is enough otherwise.
fn drop_redundant_stand_ins(windows: &mut Vec<ProbeWindow>) {
    if windows.iter().any(|w| !w.stands_in && w.saw_connections()) {
        windows.retain(|w| !w.stands_in);
        return;
    }
    let mut kept: Vec<(Option<u64>, u64)> = Vec::new();
    windows.retain(|w| {
        let key = (w.start_unix_ns, w.live_s.to_bits());
        let first = !kept.contains(&key);
        if w.stands_in && first {
            kept.push(key);
        }
        !w.stands_in || first
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::tests::{sample_recording, two_process_recording};
    use crate::model::WindowPart;

    #[test]
    fn intervals_merge_into_one_recording_with_their_sums() {
        let one = Arc::new(sample_recording());
        let mut next = sample_recording();
        next.start_unix_ns = one.start_unix_ns.map(|ns| ns + 2_000_000_000);
        (next.lost.samples_taken, next.lost.unframed_work) = (7, 3);
        let merged = Recording::merge(&[Arc::new(next), one.clone()]);
        assert_eq!(merged.duration_s, 2.0 * one.duration_s);
        assert_eq!(merged.start_unix_ns, one.start_unix_ns, "the earliest interval's start");
        assert_eq!(merged.targets.len(), 1);
        assert_eq!(merged.targets[0].process_cpu_ms, 2.0 * one.targets[0].process_cpu_ms);
        assert_eq!(merged.tree.len(), one.tree.len());
        let calls = |r: &Recording| r.tree.iter().map(|n| n.calls).sum::<u64>();
        assert_eq!(calls(&merged), 2 * calls(&one));
        let count = |r: &Recording| r.samples.iter().map(|s| s.count).sum::<u64>();
        assert_eq!(count(&merged), 2 * count(&one));
        assert_eq!(merged.samples.len(), one.samples.len());
        assert_eq!(merged.handshakes[0].cpu.count, 2 * one.handshakes[0].cpu.count);
        assert_eq!(merged.probe_hits, 2 * one.probe_hits);
        assert_eq!((merged.lost.samples_taken, merged.lost.unframed_work), (7, 3));
        // What a merged recording holds loads as any other.
        Recording::from_bytes(&serde_json::to_vec(&merged).unwrap()).unwrap();
    }

    /// curl run three times during the recording beside an nginx there from the start.
    fn three_curls_beside_nginx() -> Recording {
        let mut rec = sample_recording();
        let nginx = rec.targets[0].clone();
        let (tree, handshakes) = (rec.tree.clone(), rec.handshakes.clone());
        for pid in [33, 31, 32] {
            rec.targets.push(Target {
                pid,
                comm: "curl".into(),
                joined_at_s: Some(f64::from(pid - 30)),
                parent: Some(7),
                exited: true,
                process_cpu_ms: 5.0,
                connections: 1,
                ..nginx.clone()
            });
            rec.tree.extend(tree.iter().map(|n| TreeNode { pid, ..n.clone() }));
            rec.handshakes.extend(handshakes.iter().map(|g| HandshakeGroup {
                pid: Some(pid),
                ..g.clone()
            }));
            rec.libraries[0].pids.push(pid);
            for w in &mut rec.probing.window_figures {
                let mut part = w.processes[0].clone();
                (part.pid, part.connections) = (pid, 1);
                w.processes.push(part);
            }
        }
        rec
    }

    #[test]
    fn processes_of_one_program_that_started_fold_into_one() {
        let rec = three_curls_beside_nginx();
        let folded = rec.fold_started();
        let pids: Vec<(u32, u32)> = folded.targets.iter().map(|t| (t.pid, t.processes)).collect();
        assert_eq!(
            pids,
            vec![(10, 1), (31, 3)],
            "nginx apart, the curls under the lowest pid"
        );
        let curl = &folded.targets[1];
        assert_eq!((curl.process_cpu_ms, curl.connections), (15.0, 3));
        assert_eq!(curl.parent, Some(7));
        let calls = |r: &Recording, pid| r.tree.iter().filter(|n| n.pid == pid).map(|n| n.calls).sum::<u64>();
        assert_eq!(calls(&folded, 31), 3 * calls(&rec, 10));
        let count = |r: &Recording, pid| {
            r.handshakes
                .iter()
                .filter(|g| g.pid == Some(pid))
                .map(|g| g.cpu.count)
                .sum::<u64>()
        };
        assert_eq!(count(&folded, 31), 3 * count(&rec, 10));
        assert_eq!(folded.libraries[0].pids, vec![10, 31]);
        for w in &folded.probing.window_figures {
            let curl: Vec<&WindowPart> = w.processes.iter().filter(|p| p.pid == 31).collect();
            assert_eq!(curl.len(), 1);
            assert_eq!(curl[0].connections, 3);
        }
        // One still running at the end stays apart, as does one another parent forked.
        let mut running = rec.clone();
        running.targets[1].exited = false;
        let mut forked_elsewhere = rec.clone();
        forked_elsewhere.targets[1].parent = Some(8);
        for r in [running, forked_elsewhere] {
            let pids: Vec<(u32, u32)> = r.fold_started().targets.iter().map(|t| (t.pid, t.processes)).collect();
            assert_eq!(pids, vec![(10, 1), (31, 2), (33, 1)]);
        }
        // A recording with nothing to fold is itself.
        let plain = sample_recording();
        assert_eq!(
            serde_json::to_value(plain.fold_started()).unwrap(),
            serde_json::to_value(&plain).unwrap()
        );
    }

    #[test]
    fn a_window_standing_in_is_dropped_beside_windows_that_saw_connections() {
        let mut seen = two_process_recording();
        seen.probing.window_figures.truncate(1);
        let stand_in = ProbeWindow {
            stands_in: true,
            ..seen.probing.window_figures[0].clone()
        };
        let mut unseen = two_process_recording();
        unseen.probing.window_figures = vec![stand_in];
        let merged = Recording::merge(&[seen.clone(), unseen.clone()]);
        assert_eq!(merged.probing.window_figures.len(), 1);
        assert!(!merged.probing.window_figures[0].stands_in);
        // Two intervals that the same window stood in for keep it once.
        let merged = Recording::merge(&[unseen.clone(), unseen]);
        assert_eq!(merged.probing.window_figures.len(), 1);
        assert!(merged.probing.window_figures[0].stands_in);
    }

    #[test]
    fn a_process_that_exits_or_joins_in_a_later_part_is_dated_in_the_whole() {
        let first = sample_recording();
        let mut second = sample_recording();
        second.start_unix_ns = first.start_unix_ns.map(|ns| ns + (first.duration_s * 1e9) as u64);
        second.targets[0].exited = true;
        let mut joined = second.targets[0].clone();
        joined.pid += 1000;
        joined.exited = false;
        joined.joined_at_s = Some(0.25);
        second.targets.push(joined);
        let merged = Recording::merge(&[first.clone(), second]);
        let t = |pid| merged.targets.iter().find(|t| t.pid == pid).unwrap();
        assert!(t(first.targets[0].pid).exited);
        let at = t(first.targets[0].pid + 1000).joined_at_s.unwrap();
        assert!((at - (first.duration_s + 0.25)).abs() < 1e-9, "{at}");
    }

    #[test]
    fn a_process_part_holds_its_own_figures_and_its_share_of_the_probe_hits() {
        let rec = two_process_recording();
        let node = rec.of_processes(&[20]);
        assert_eq!(node.targets.len(), 1);
        assert!(node.tree.iter().all(|n| n.pid == 20) && node.tree.len() == 5);
        assert!(node.handshakes.iter().all(|g| g.pid == Some(20)) && node.handshakes.len() == 1);
        assert_eq!(node.connections(), 100);
        assert!(node
            .probing
            .window_figures
            .iter()
            .all(|w| w.processes.len() == 1 && w.processes[0].pid == 20));
        // 10 of the 15 ms while probed.
        assert_eq!(node.probe_hits, 67);
        let whole = rec.probing.window_figures[0].whole();
        assert_eq!(
            (whole.connections, whole.handshakes.total, whole.own_cpu_ms),
            (7, 7, 7.5)
        );
    }
}
