// SPDX-License-Identifier: Apache-2.0
//! Steal time: on a virtual machine the hypervisor takes the CPU away from the guest at times. The stage
//! times run on through it (they are read with bpf_ktime), while the kernel's task clock, and so the
//! process's CPU clock, leave it out. The scheduler slices of the threads that ran stages are measured by
//! both clocks (target_state.slices_ns); the stage times are scaled by their ratio, so that they are CPU the
//! process used, as its CPU clock counts it. The hypervisor takes the CPU at moments that have nothing to do
//! with the code running, so the ratio of the slices holds for the stages within them.

use std::collections::BTreeMap;

use crate::model::RawNode;

/// Slices of a process's stage threads so far: their length by the wall clock and by the task clock.
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

    /// The part of the wall-clock time that was the process's CPU; 1 when no slice was measured.
    pub fn task_share(self) -> f64 {
        if self.wall_ns == 0 {
            1.0
        } else {
            (self.task_ns as f64 / self.wall_ns as f64).min(1.0)
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

/// Scales one time by its process's task share in `slices` (1 for a process not in them).
pub fn scale(ns: u64, pid: u32, slices: &BTreeMap<u32, Slices>) -> u64 {
    let share = slices.get(&pid).map_or(1.0, |s| s.task_share());
    (ns as f64 * share).round() as u64
}

/// The call tree's times as the processes' CPU, each node by its process's slices.
pub fn scale_tree(tree: Vec<RawNode>, slices: &BTreeMap<u32, Slices>) -> Vec<RawNode> {
    tree.into_iter()
        .map(|n| RawNode {
            cpu_ns: scale(n.cpu_ns, n.pid, slices),
            ..n
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Hits;

    #[test]
    fn a_process_whose_slices_lost_a_tenth_to_steal_has_its_stage_times_scaled_by_nine_tenths() {
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
        let node = |pid| RawNode {
            pid,
            path: vec![0],
            calls: 3,
            cpu_ns: 1_000_000,
            nested: Hits { all: 2, stepped: 0 },
        };
        let scaled = scale_tree(vec![node(7), node(8), node(9)], &slices);
        assert_eq!(scaled[0].cpu_ns, 900_000);
        assert_eq!((scaled[0].calls, scaled[0].nested.all), (3, 2));
        // No steal, and no slices measured: unchanged.
        assert_eq!(scaled[1].cpu_ns, 1_000_000);
        assert_eq!(scaled[2].cpu_ns, 1_000_000);
    }

    #[test]
    fn the_task_clock_never_makes_a_stage_longer_than_measured() {
        // The task clock may come out ahead: a woken task's slice starts at the run queue's clock as last
        // updated, before the switch the wall clock starts at.
        let s = Slices {
            wall_ns: 1_000,
            task_ns: 1_003,
        };
        assert_eq!(s.task_share(), 1.0);
        assert_eq!(Slices::default().task_share(), 1.0);
    }
}
