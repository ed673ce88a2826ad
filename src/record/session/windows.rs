// SPDX-License-Identifier: Apache-2.0
//! The probe windows as the session closes and opens them (the duty cycle's pauses and resumes, a hello
//! window's cut), and the readings they are dated with: the targets' CPU, the probes' cost, their counters.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Result;

use super::assemble::read_tree;
use super::{Session, Tracked};
use crate::model::{RawNode, TrapSamples};
use crate::record::duty::cpu::CpuMeters;
use crate::record::duty::windows::Reading;
use crate::record::kernel::programs::Programs;
use crate::record::stacks::samples::SampleAggregator;

impl Session<'_, '_> {
    /// The duty cycle pauses: the window closes here (the epoch flips first), then the probes detach.
    pub(super) fn pause(&mut self) -> Result<()> {
        // The window ends as the epoch flips: it is dated from there, as it is at resume. (Dated earlier, the
        // operations the probes counted while tlsprof waited for the CPU would fall outside it.)
        self.targets.end_window(&mut self.programs.skel)?;
        let ended = Instant::now();
        // The trap sampler stops with the targets' CPU counted as probed, at this reading.
        self.step_trap_sampler(false)?;
        let at = self.reading(ended);
        // Detaching takes time, during which the stage probes and the hello capture still run: their
        // events are drained before the window's figures are read.
        self.targets.detach_all();
        self.drain()?;
        self.close_window(&at, read_tree(&self.programs)?);
        self.handshakes.forget_pending_hellos();
        self.hello.pause();
        Ok(())
    }

    /// The duty cycle resumes: the probes attach again and a window opens as the epoch flips.
    pub(super) fn resume(&mut self) -> Result<()> {
        self.targets.resume(&mut self.programs.skel)?;
        // The window starts as the epoch flips, at the end of resume: it is dated from there.
        let flipped = Instant::now();
        self.cpu.poll(self.tracked.values().map(|t| &t.process), false);
        self.step_trap_sampler(true)?;
        let at = self.reading(flipped);
        let budgeted = self.budgeted_ms(at.probe_ms);
        self.governor.resumed(at.now, budgeted, self.cpu.total_ms());
        self.windows.open(at);
        Ok(())
    }

    /// The open window closes at `at` with what the handshakes saw in it; `tree`: the kernel's call tree so
    /// far.
    pub(super) fn close_window(&mut self, at: &Reading, tree: Vec<RawNode>) {
        let seen = self.handshakes.take_window();
        self.windows
            .close(at, seen, tree, &self.targets.functions, &self.programs.probe_cost);
    }

    pub(super) fn poll_cpu(&mut self) {
        self.cpu
            .poll(self.tracked.values().map(|t| &t.process), self.governor.live());
    }

    pub(super) fn trap_samples(&self) -> Option<TrapSamples> {
        trap_samples(&self.programs, &self.samples)
    }

    pub(super) fn probe_ms(&self) -> f64 {
        probe_ms(&self.programs, &self.samples, &self.cpu)
    }

    /// What the governor holds to --max-overhead, given the probes' cost: the probes, their hits in other
    /// processes, and the socket programs of the targets counted from the wire alone (the probes' stand-in
    /// there; they run with them and pause with them).
    pub(super) fn budgeted_ms(&self, probe_ms: f64) -> f64 {
        let wire_ms: f64 = match self.targets.wire_only.is_empty() {
            true => 0.0,
            false => self
                .programs
                .target_counters()
                .iter()
                .filter(|(pid, _)| self.targets.wire_only.contains(pid))
                .map(|(_, c)| c.own.capture.ms)
                .sum(),
        };
        probe_ms + self.programs.other_process_ms() + wire_ms
    }

    pub(super) fn step_trap_sampler(&mut self, live: bool) -> Result<()> {
        self.programs.step_trap_sampler(live, probed_ms(&self.cpu))
    }

    pub(super) fn reading(&mut self, now: Instant) -> Reading {
        reading(now, &self.programs, &self.samples, &self.cpu, &mut self.tracked)
    }
}

/// The trap sampler's counts so far: it runs while the probes are attached, over the targets' CPU then.
fn trap_samples(programs: &Programs, samples: &SampleAggregator) -> Option<TrapSamples> {
    samples.traps.as_ref().map(|t| programs.trap_samples(t.trapped))
}

/// The targets' CPU while probed so far, all together.
pub(super) fn probed_ms(cpu: &CpuMeters) -> f64 {
    cpu.probed_ms().values().sum()
}

/// What the probes have cost the targets so far.
pub(super) fn probe_ms(programs: &Programs, samples: &SampleAggregator, cpu: &CpuMeters) -> f64 {
    programs.target_probe_ms(trap_samples(programs, samples), probed_ms(cpu))
}

/// The counters a window's or an interval's figures are differences of, read now: the targets' connections
/// and slices are kept in `tracked` as last read.
pub(super) fn reading(
    now: Instant,
    programs: &Programs,
    samples: &SampleAggregator,
    cpu: &CpuMeters,
    tracked: &mut BTreeMap<u32, Tracked>,
) -> Reading {
    for (pid, counters) in programs.target_counters() {
        if let Some(t) = tracked.get_mut(&pid) {
            t.counters = counters;
        }
    }
    Reading {
        now,
        probed_cpu_ms: cpu.probed_ms(),
        probe_ms: probe_ms(programs, samples, cpu),
        connections: tracked.iter().map(|(&pid, t)| (pid, t.counters.connections)).collect(),
        slices: tracked.iter().map(|(&pid, t)| (pid, t.counters.slices)).collect(),
        own: tracked.iter().map(|(&pid, t)| (pid, t.counters.own)).collect(),
    }
}
