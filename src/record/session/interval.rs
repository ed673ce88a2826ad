// SPDX-License-Identifier: Apache-2.0
//! Continuous mode's intervals: what the counters were when the current interval started, so that each
//! interval handed over is a recording of its own (the differences), and the targets that exited are
//! forgotten once their last figures are out.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::assemble::{counted_losses, read_tree, Parts};
use super::{slice_ms, Session};
use crate::model::{Hits, Lost, OwnPrograms, ProbeWindow, Probing, Recording, Target, TrapSamples};
use crate::record::duty::steal::{self, Slices};
use crate::record::duty::windows::TreeSeen;
use crate::record::stacks::jvm;

pub struct Interval {
    start: Instant,
    probed: Duration,
    hits: Hits,
    traps: Option<TrapSamples>,
    lost: Lost,
    /// Per target: CPU, CPU while probed, and connections.
    cpu: HashMap<u32, (f64, f64, u64)>,
    tree: TreeSeen,
    /// Each target's stage threads' slices when the interval started.
    slices: BTreeMap<u32, Slices>,
    /// What tlsprof's other programs had cost each target when the interval started.
    own: BTreeMap<u32, OwnPrograms>,
    /// The last probe window that saw connections.
    last_seen: Option<ProbeWindow>,
}

impl Interval {
    /// The first interval, from the session's start.
    pub fn start(session: &Session) -> Interval {
        Interval {
            start: session.started,
            probed: Duration::ZERO,
            hits: session.programs.target_probe_hits(),
            traps: session.trap_samples(),
            lost: counted_losses(&session.programs),
            cpu: HashMap::new(),
            tree: TreeSeen::default(),
            slices: BTreeMap::new(),
            own: BTreeMap::new(),
            last_seen: None,
        }
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// The interval since the last one, as a recording; the next starts now. A live probe window is cut
    /// here: its two parts go with the intervals they fall in.
    pub fn take(&mut self, session: &mut Session) -> Result<Recording> {
        session.drain()?;
        session.poll_cpu();
        session.step_trap_sampler(session.governor.live())?;
        let at = session.reading(Instant::now());
        let tree = read_tree(&session.programs)?;
        if session.governor.live() {
            session.close_window(&at, tree.clone());
            session.windows.reopen(at.clone());
        }
        let slices = steal::between(&std::mem::replace(&mut self.slices, at.slices.clone()), &at.slices);
        let handshakes = session.handshakes.take_groups();
        let tree = self.tree.delta(tree);
        // A process that exited after its last CPU reading still has what the probes saw of it here.
        let seen: BTreeSet<u32> = handshakes
            .iter()
            .filter_map(|g| g.pid)
            .chain(tree.iter().map(|n| n.pid))
            .collect();
        let own_before = std::mem::replace(&mut self.own, at.own.clone());
        let own: BTreeMap<u32, OwnPrograms> = at
            .own
            .iter()
            .map(|(&pid, now)| (pid, now.since(&own_before.get(&pid).copied().unwrap_or_default())))
            .collect();
        let recorded = self.targets(session, &at.connections, &slices, &own, &seen);
        let connections: u64 = recorded.iter().map(|t| t.connections).sum();
        let window_figures = self.window_figures(std::mem::take(&mut session.windows.closed), connections);
        let parts = Parts {
            recorded,
            handshakes,
            ticket_keys: session.handshakes.take_ticket_keys(),
            traps: self.traps(session.trap_samples()),
            named: session.samples.take_named(&session.targets.functions),
            tree,
            lost: self.lost(counted_losses(&session.programs)),
            hits: self.hits(session.programs.target_probe_hits()),
            start_unix_ns: session
                .started_unix_ns
                .map(|ns| ns + (self.start - session.started).as_nanos() as u64),
            duration_s: (at.now - self.start).as_secs_f64(),
            probing: Probing {
                max_overhead_pct: session.opts.max_overhead_pct,
                live_s: self.probed(session.governor.probed(at.now)).as_secs_f64(),
                windows: window_figures.iter().filter(|w| !w.stands_in).count() as u32,
                peak_overhead: session.governor.peak_overhead,
                window_figures,
            },
        };
        let recording = parts.into_recording(&session.programs, &session.targets, session.opts)?;
        self.start = at.now;
        for pid in session.forget_exited() {
            self.cpu.remove(&pid);
            self.tree.forget(pid);
        }
        Ok(recording)
    }

    /// The interval's probe windows. When the probes were detached while this interval's connections came
    /// (the duty cycle paused through it, or a burst came and went between windows), the last window that
    /// saw connections stands for it, as handshakes per connection and stage CPU per CPU ms hold.
    fn window_figures(&mut self, mut windows: Vec<ProbeWindow>, connections: u64) -> Vec<ProbeWindow> {
        match windows.iter().rfind(|w| w.saw_connections()) {
            Some(w) => {
                self.last_seen = Some(ProbeWindow {
                    stands_in: true,
                    ..w.clone()
                })
            }
            None if connections > 0 || windows.is_empty() => windows.extend(self.last_seen.clone()),
            None => {}
        }
        windows
    }

    fn probed(&mut self, now: Duration) -> Duration {
        now.saturating_sub(std::mem::replace(&mut self.probed, now))
    }

    fn hits(&mut self, now: Hits) -> Hits {
        now.minus(&std::mem::replace(&mut self.hits, now))
    }

    fn traps(&mut self, now: Option<TrapSamples>) -> Option<TrapSamples> {
        let before = std::mem::replace(&mut self.traps, now)?;
        now.map(|n| n.since(&before))
    }

    fn lost(&mut self, now: Lost) -> Lost {
        now.since(&std::mem::replace(&mut self.lost, now.clone()))
    }

    /// The targets with their CPU and connections over the interval; those that exited before it are left
    /// out, unless the probes saw something of them in it (`seen`).
    fn targets(
        &mut self,
        session: &Session,
        connections: &BTreeMap<u32, u64>,
        slices: &BTreeMap<u32, Slices>,
        own: &BTreeMap<u32, OwnPrograms>,
        seen: &BTreeSet<u32>,
    ) -> Vec<Target> {
        let mut out = Vec::new();
        for (&pid, t) in &session.tracked {
            let p = &t.process;
            let (total, probed) = session.cpu.of(pid);
            let conns = connections.get(&pid).copied().unwrap_or(0);
            let (t0, p0, c0) = self.cpu.insert(pid, (total, probed, conns)).unwrap_or_default();
            let (stage_slices_ms, stage_slices_cpu_ms) = slice_ms(slices.get(&pid));
            if !p.alive() && total == t0 && conns == c0 && !seen.contains(&pid) {
                continue;
            }
            out.push(Target {
                pid,
                comm: p.comm.clone(),
                process_cpu_ms: (total - t0).max(0.0),
                probed_cpu_ms: (probed - p0).max(0.0),
                io_driven_from_s: t.io_driven_from_s,
                container: t.placement.display(),
                placement: t.placement.clone(),
                connections: conns.saturating_sub(c0),
                execs_at_s: Vec::new(),
                stage_slices_ms,
                stage_slices_cpu_ms,
                own_programs: own.get(&pid).copied().unwrap_or_default(),
                // Joined in this interval: dated from its start.
                joined_at_s: t
                    .joined_at_s
                    .map(|s| s - (self.start - session.started).as_secs_f64())
                    .filter(|&s| s >= 0.0),
                parent: t.parent,
                exited: !p.alive(),
                wire_only: session.targets.wire_only.contains(&pid),
                jit_stacks_cut: session
                    .targets
                    .maps
                    .get(&pid)
                    .is_some_and(|maps| jvm::jit_stacks_cut(pid, maps)),
                processes: 1,
            });
        }
        out
    }
}
