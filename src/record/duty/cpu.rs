// SPDX-License-Identifier: Apache-2.0
//! CPU meters: each target's CPU from its CPU-time clock, over the recording and while probed.

use std::collections::{BTreeMap, HashMap};

use crate::record::discovery::targets::{self, Process};

/// Per target: process CPU at attach time and at the last successful read, and the part of it used while
/// the stage probes were attached.
struct Meter {
    start_ms: f64,
    last_ms: f64,
    probed_ms: f64,
}

#[derive(Default)]
pub struct CpuMeters(HashMap<u32, Meter>);

impl CpuMeters {
    pub fn start(&mut self, pid: u32) {
        if let Some(ms) = targets::cpu_ms(pid) {
            self.0.insert(
                pid,
                Meter {
                    start_ms: ms,
                    last_ms: ms,
                    probed_ms: 0.0,
                },
            );
        }
    }

    /// A process that started during the recording (it joined as it did): all its CPU is the recording's, what
    /// it ran before being looked at too.
    pub fn join(&mut self, pid: u32) {
        let ms = targets::cpu_ms(pid).unwrap_or(0.0);
        self.0.insert(
            pid,
            Meter {
                start_ms: 0.0,
                last_ms: ms,
                probed_ms: 0.0,
            },
        );
    }

    /// A target that exited ran `exited_ms` of CPU by its threads' clocks at exit (the kernel's count): where
    /// that is more than its last reading (it ended between two), the rest is its CPU too, while probed if
    /// `probing`.
    pub fn exited(&mut self, pid: u32, exited_ms: f64, probing: bool) {
        if let Some(m) = self.0.get_mut(&pid) {
            if exited_ms > m.last_ms {
                if probing {
                    m.probed_ms += exited_ms - m.last_ms;
                }
                m.last_ms = exited_ms;
            }
        }
    }

    /// Reads every live target's clock; `probing`: the stage probes were attached since the last reading.
    /// A target that exits keeps its last reading.
    pub fn poll<'a>(&mut self, live: impl IntoIterator<Item = &'a Process>, probing: bool) {
        for p in live {
            if let (Some(m), true) = (self.0.get_mut(&p.pid), p.alive()) {
                if let Some(ms) = targets::cpu_ms(p.pid) {
                    if probing {
                        m.probed_ms += ms - m.last_ms;
                    }
                    m.last_ms = ms;
                }
            }
        }
    }

    /// The targets' CPU clocks summed at the last reading: what the governor accounts against.
    pub fn total_ms(&self) -> f64 {
        self.0.values().map(|m| m.last_ms).sum()
    }

    /// Each target's CPU while the stage probes were attached, so far.
    pub fn probed_ms(&self) -> BTreeMap<u32, f64> {
        self.0.iter().map(|(&pid, m)| (pid, m.probed_ms)).collect()
    }

    /// Forgets a target that exited.
    pub fn forget(&mut self, pid: u32) {
        self.0.remove(&pid);
    }

    /// A target's CPU over the recording and while probed, in ms.
    pub fn of(&self, pid: u32) -> (f64, f64) {
        self.0
            .get(&pid)
            .map_or((0.0, 0.0), |m| (m.last_ms - m.start_ms, m.probed_ms))
    }
}
