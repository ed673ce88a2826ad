// SPDX-License-Identifier: Apache-2.0
//! Steal time: on a virtual machine the hypervisor takes the CPU away from the guest at times, and the
//! kernel's task clock, and so the process's CPU clock, leave that out (as they leave out interrupts, on a
//! kernel that accounts interrupt time). The stage clocks in the kernel leave out what their run queue noted
//! while a frame ran (thread_cpu_now in bpf/tlsprof.bpf.c); the scheduler slices of the threads that ran
//! stages are measured with and without it (target_state.slices_ns), for the share the report states.

use std::collections::BTreeMap;

/// Slices of a process's stage threads so far: their length with what the kernel left out of its task clock
/// (steal time) and by the task clock.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Slices {
    pub wall_ns: u64,
    pub task_ns: u64,
}

impl Slices {
    /// The slices since `before`.
    pub fn since(self, before: Slices) -> Slices {
        Slices {
            wall_ns: self.wall_ns.saturating_sub(before.wall_ns),
            task_ns: self.task_ns.saturating_sub(before.task_ns),
        }
    }
}

/// Each process's slices between two readings.
pub fn between(before: &BTreeMap<u32, Slices>, after: &BTreeMap<u32, Slices>) -> BTreeMap<u32, Slices> {
    after
        .iter()
        .map(|(pid, s)| (*pid, s.since(before.get(pid).copied().unwrap_or_default())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_between_two_readings_are_per_process_and_whole_for_a_new_one() {
        let before = BTreeMap::from([(
            7,
            Slices {
                wall_ns: 1_000,
                task_ns: 1_000,
            },
        )]);
        let after = BTreeMap::from([
            (
                7,
                Slices {
                    wall_ns: 11_000,
                    task_ns: 10_000,
                },
            ),
            // A process seen first after `before`: all its slices count.
            (
                8,
                Slices {
                    wall_ns: 500,
                    task_ns: 500,
                },
            ),
        ]);
        let slices = between(&before, &after);
        assert_eq!(
            slices[&7],
            Slices {
                wall_ns: 10_000,
                task_ns: 9_000
            }
        );
        assert_eq!(slices[&8], after[&8]);
    }
}
