// SPDX-License-Identifier: Apache-2.0
//! What the probes cost the targets, and the one place their cost is taken out of measured figures.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::TreeNode;

/// Measured cost of probes, in nanoseconds of the probed thread's CPU.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct ProbeCost {
    /// One probe hit (an entry or a return): what every hit inside a frame adds to that frame.
    pub hit_ns: f64,
    /// What a probed call measures of its own entry and return.
    pub inside_ns: f64,
    /// One hit when the caches hold other work, as in a server between two TLS calls: what the probes cost
    /// the targets (the overhead figure, and what --max-overhead budgets with).
    pub cold_hit_ns: f64,
    /// What a probe on an instruction the kernel single-steps adds to its hit (the second trap; prologue.rs),
    /// back to back and with cold caches.
    pub step_ns: f64,
    pub cold_step_ns: f64,
}

/// What tlsprof's programs other than the probes cost a target: their run time in its threads, by what ran
/// them (bpf/tlsprof.h, enum tlsprof_own), measured by the BPF clock in each run from its first instruction
/// to its last. The interrupt's or tracepoint's own entry and exit are not in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OwnPrograms {
    /// The CPU samplers: stacks, and the trap sampler while the probes are attached.
    pub sampler: ProgramRuns,
    /// The scheduler's switches of its threads that ran a stage.
    pub scheduler: ProgramRuns,
    /// Its accept, accept4 and connect calls (the connection counter).
    pub connections: ProgramRuns,
    /// Its socket writes and reads while ServerHellos were captured.
    pub capture: ProgramRuns,
}

/// Runs of a program in a target, and their time in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramRuns {
    pub runs: u64,
    pub ms: f64,
}

impl ProgramRuns {
    fn since(self, before: ProgramRuns) -> ProgramRuns {
        ProgramRuns {
            runs: self.runs.saturating_sub(before.runs),
            ms: (self.ms - before.ms).max(0.0),
        }
    }

    fn plus(self, other: ProgramRuns) -> ProgramRuns {
        ProgramRuns {
            runs: self.runs + other.runs,
            ms: self.ms + other.ms,
        }
    }
}

impl OwnPrograms {
    /// By kind, as user space names them.
    pub fn kinds(&self) -> [(&'static str, ProgramRuns); 4] {
        [
            ("samplers", self.sampler),
            ("scheduler switches", self.scheduler),
            ("connection counter", self.connections),
            ("hello capture", self.capture),
        ]
    }

    pub fn ms(&self) -> f64 {
        self.kinds().iter().map(|(_, r)| r.ms).sum()
    }

    /// These figures less `before`'s (continuous mode's intervals).
    pub fn since(&self, before: &OwnPrograms) -> OwnPrograms {
        OwnPrograms {
            sampler: self.sampler.since(before.sampler),
            scheduler: self.scheduler.since(before.scheduler),
            connections: self.connections.since(before.connections),
            capture: self.capture.since(before.capture),
        }
    }

    pub fn plus(&self, other: &OwnPrograms) -> OwnPrograms {
        OwnPrograms {
            sampler: self.sampler.plus(other.sampler),
            scheduler: self.scheduler.plus(other.scheduler),
            connections: self.connections.plus(other.connections),
            capture: self.capture.plus(other.capture),
        }
    }
}

/// The trap sampler's samples of the targets, and those taken in the probes' traps (the kernel's uprobe
/// code): what the probes cost, measured in the targets themselves. It runs while the probes are attached and
/// hit often enough to cost something (record/duty/traps.rs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrapSamples {
    pub trapped: u64,
    pub samples: u64,
    /// Its rate, per CPU.
    pub freq_hz: u64,
    /// The stretches it ran over. None in recordings made before it ran only part of the probed time: it ran
    /// while the probes were attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran: Option<SamplerRan>,
}

/// The targets' CPU while the trap sampler ran, and the probe hits meanwhile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplerRan {
    pub cpu_ms: f64,
    pub hits: Hits,
}

impl SamplerRan {
    pub fn minus(&self, before: &SamplerRan) -> SamplerRan {
        SamplerRan {
            cpu_ms: (self.cpu_ms - before.cpu_ms).max(0.0),
            hits: self.hits.minus(&before.hits),
        }
    }

    pub fn plus(&self, other: &SamplerRan) -> SamplerRan {
        SamplerRan {
            cpu_ms: self.cpu_ms + other.cpu_ms,
            hits: self.hits.plus(&other.hits),
        }
    }
}

impl TrapSamples {
    /// What the sampler ran over: as recorded, or, in recordings from before it was kept, all the probed
    /// CPU and all the hits.
    pub fn ran_or(&self, probed_cpu_ms: f64, hits: Hits) -> SamplerRan {
        self.ran.unwrap_or(SamplerRan {
            cpu_ms: probed_cpu_ms,
            hits,
        })
    }

    /// These counts less `before`'s (continuous mode's intervals).
    pub fn since(&self, before: &TrapSamples) -> TrapSamples {
        TrapSamples {
            trapped: self.trapped.saturating_sub(before.trapped),
            samples: self.samples.saturating_sub(before.samples),
            freq_hz: self.freq_hz,
            ran: self.ran.map(|r| r.minus(&before.ran.unwrap_or_default())),
        }
    }

    /// Both intervals' counts together; None unless both measured them.
    pub fn plus(&self, other: &TrapSamples) -> TrapSamples {
        TrapSamples {
            trapped: self.trapped + other.trapped,
            samples: self.samples + other.samples,
            freq_hz: other.freq_hz,
            ran: self.ran.zip(other.ran).map(|(a, b)| a.plus(&b)),
        }
    }

    /// A process's part of them, by its `share` of the recording's probed CPU.
    pub fn scaled(&self, share: f64) -> TrapSamples {
        let part = |n: u64| (n as f64 * share).round() as u64;
        TrapSamples {
            trapped: part(self.trapped),
            samples: part(self.samples),
            freq_hz: self.freq_hz,
            ran: self.ran.map(|r| SamplerRan {
                cpu_ms: r.cpu_ms * share,
                hits: Hits {
                    all: part(r.hits.all),
                    stepped: part(r.hits.stepped),
                },
            }),
        }
    }
}

/// Until the samples in the traps say more, the calibration weighs as this many of them: a few samples say
/// little, and a figure that swung with each would make the governor's windows swing too.
pub const CALIBRATION_AS_SAMPLES: f64 = 10.0;

/// Probe hits (entries, returns and Go's exit sites), and the single-stepped ones among them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hits {
    pub all: u64,
    pub stepped: u64,
}

impl Hits {
    pub fn minus(&self, before: &Hits) -> Hits {
        Hits {
            all: self.all.saturating_sub(before.all),
            stepped: self.stepped.saturating_sub(before.stepped),
        }
    }

    pub fn plus(&self, other: &Hits) -> Hits {
        Hits {
            all: self.all + other.all,
            stepped: self.stepped + other.stepped,
        }
    }
}

impl ProbeCost {
    /// A call's CPU without the probes' cost: its own entry and return, and every hit and second trap
    /// within it.
    pub fn correct(&self, cpu_ns: u64, calls: u64, nested: Hits) -> u64 {
        let cost =
            calls as f64 * self.inside_ns + nested.all as f64 * self.hit_ns + nested.stepped as f64 * self.step_ns;
        (cpu_ns as f64 - cost).max(0.0) as u64
    }

    /// What these hits cost the targets at the calibrated cold-cache costs, in ms of their CPU.
    pub fn calibrated_ms(&self, hits: Hits) -> f64 {
        (hits.all as f64 * self.cold_hit_ns + hits.stepped as f64 * self.cold_step_ns) / 1e6
    }

    /// What these hits cost the targets, in ms of their CPU: their calibrated cost, times what the trap
    /// sampler measured of the hits made while it ran over their calibrated cost, when that is more.
    /// `probed_cpu_ms`: the targets' CPU while the probes were attached. The calibration misses cost (a busy
    /// server's caches and maps are colder than tlsprof's own), and the sampler misses a trap's last steps,
    /// with interrupts off: the larger of the two is the nearer.
    pub fn overhead_ms(&self, hits: Hits, traps: Option<TrapSamples>, probed_cpu_ms: f64) -> f64 {
        let calibrated = self.calibrated_ms(hits);
        let Some(t) = traps.filter(|t| t.samples > 0) else {
            return calibrated;
        };
        let ran = t.ran_or(probed_cpu_ms, hits);
        if ran.cpu_ms <= 0.0 {
            return calibrated;
        }
        let ms_per_sample = ran.cpu_ms / t.samples as f64;
        let measured = (t.trapped as f64 + CALIBRATION_AS_SAMPLES) * ms_per_sample;
        let expected = self.calibrated_ms(ran.hits) + CALIBRATION_AS_SAMPLES * ms_per_sample;
        calibrated * (measured / expected).max(1.0)
    }
}

/// A call-tree node as the BPF side counted it, the probes' cost still in it.
#[derive(Clone, Debug, Default)]
pub struct RawNode {
    pub pid: u32,
    pub path: Vec<u16>,
    pub calls: u64,
    pub cpu_ns: u64,
    /// Probe hits and single-stepped hits inside these calls (not their own entry and return).
    pub nested: Hits,
}

/// Removes the probes' own cost from every node, deepest first, then derives self time from the corrected
/// totals. A node never ends below its children: the correction uses an average cost per hit.
pub fn corrected_tree(raw: Vec<RawNode>, cost: &ProbeCost) -> Vec<TreeNode> {
    let mut raw = raw;
    raw.sort_by_key(|n| std::cmp::Reverse(n.path.len()));
    let mut children_ns: HashMap<(u32, Vec<u16>), u64> = HashMap::new();
    let mut tree = Vec::with_capacity(raw.len());
    for n in raw {
        let children = children_ns.get(&(n.pid, n.path.clone())).copied().unwrap_or(0);
        let cpu_ns = cost.correct(n.cpu_ns, n.calls, n.nested).max(children);
        if let Some((_, parent)) = n.path.split_last() {
            *children_ns.entry((n.pid, parent.to_vec())).or_default() += cpu_ns;
        }
        tree.push(TreeNode {
            pid: n.pid,
            path: n.path,
            calls: n.calls,
            cpu_ns,
            self_ns: cpu_ns - children,
        });
    }
    tree.sort_by(|a, b| (a.pid, &a.path).cmp(&(b.pid, &b.path)));
    tree
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_programs_add_up_and_intervals_are_differences() {
        let runs = |runs, ms| ProgramRuns { runs, ms };
        let before = OwnPrograms {
            sampler: runs(10, 0.1),
            scheduler: runs(100, 0.05),
            ..OwnPrograms::default()
        };
        let now = OwnPrograms {
            sampler: runs(30, 0.3),
            scheduler: runs(150, 0.08),
            connections: runs(7, 0.002),
            capture: runs(0, 0.0),
        };
        let interval = now.since(&before);
        assert_eq!(interval.sampler, runs(20, 0.3 - 0.1));
        assert_eq!(interval.connections, runs(7, 0.002));
        assert!((before.plus(&interval).ms() - now.ms()).abs() < 1e-12);
        assert!((now.ms() - (0.3 + 0.08 + 0.002)).abs() < 1e-12);
        // A counter read as less than before (a target's state made anew) never goes negative.
        assert_eq!(before.since(&now).sampler, runs(0, 0.0));
    }

    #[test]
    fn correction_removes_inside_and_nested_costs_and_never_goes_negative() {
        let cost = ProbeCost {
            hit_ns: 1000.0,
            inside_ns: 500.0,
            cold_hit_ns: 1500.0,
            step_ns: 10_000.0,
            cold_step_ns: 15_000.0,
        };
        // 10 calls of 100 µs each, with 4 nested hits per call, one of them a stepped entry.
        let nested = Hits { all: 40, stepped: 10 };
        assert_eq!(
            cost.correct(1_000_000, 10, nested),
            1_000_000 - 5_000 - 40_000 - 100_000
        );
        assert_eq!(cost.correct(100, 1, Hits { all: 5, stepped: 0 }), 0);
        assert_eq!(cost.calibrated_ms(nested), (40.0 * 1500.0 + 10.0 * 15_000.0) / 1e6);
    }

    #[test]
    fn overhead_is_the_calibrated_cost_or_more_when_the_traps_measured_more() {
        let cost = ProbeCost {
            cold_hit_ns: 2000.0,
            ..ProbeCost::default()
        };
        let hits = Hits {
            all: 100_000,
            stepped: 0,
        };
        // 200 ms calibrated, against 10,000 samples of 1 ms each.
        let traps = |trapped| {
            Some(TrapSamples {
                trapped,
                samples: 10_000,
                freq_hz: 1000,
                ran: None,
            })
        };
        assert_eq!(cost.overhead_ms(hits, None, 10_000.0), 200.0);
        assert_eq!(cost.overhead_ms(hits, traps(100), 10_000.0), 200.0);
        // Twice the calibration in 400 samples: nearly twice, the calibration weighing as 10 samples.
        assert_eq!(cost.overhead_ms(hits, traps(400), 10_000.0), 200.0 * 410.0 / 210.0);
        // A few samples move it little.
        assert_eq!(cost.overhead_ms(hits, traps(0), 10_000.0), 200.0);
        let few = cost.overhead_ms(Hits { all: 1_000, stepped: 0 }, traps(4), 10_000.0);
        assert!((few - 2.0 * 14.0 / 12.0).abs() < 1e-9, "{few}");
        // The sampler ran over half the hits (100 ms calibrated), its 10,000 samples over 10 s of CPU: twice
        // their calibration in 200 samples scales the cost of all hits.
        let ran = |trapped| {
            Some(TrapSamples {
                ran: Some(SamplerRan {
                    cpu_ms: 10_000.0,
                    hits: Hits {
                        all: 50_000,
                        stepped: 0,
                    },
                }),
                ..traps(trapped).unwrap()
            })
        };
        assert_eq!(cost.overhead_ms(hits, ran(200), 20_000.0), 200.0 * 210.0 / 110.0);
        assert_eq!(cost.overhead_ms(hits, ran(50), 20_000.0), 200.0);
    }

    #[test]
    fn trap_samples_subtract_add_and_share_out() {
        let ran = |cpu_ms, all| SamplerRan {
            cpu_ms,
            hits: Hits { all, stepped: all / 10 },
        };
        let t = |trapped, samples, r: Option<SamplerRan>| TrapSamples {
            trapped,
            samples,
            freq_hz: 1000,
            ran: r,
        };
        let (a, b) = (t(10, 1000, Some(ran(900.0, 500))), t(4, 300, Some(ran(250.0, 100))));
        assert_eq!(a.since(&b), t(6, 700, Some(ran(650.0, 400))));
        assert_eq!(a.plus(&b), t(14, 1300, Some(ran(1150.0, 600))));
        assert_eq!(a.plus(&t(4, 300, None)).ran, None, "measured only if both were");
        assert_eq!(a.scaled(0.5), t(5, 500, Some(ran(450.0, 250))));
        assert_eq!(t(1, 10, None).ran_or(5.0, Hits::default()), ran(5.0, 0));
    }

    fn raw(path: Vec<u16>, calls: u64, cpu_ns: u64, all: u64, stepped: u64) -> RawNode {
        RawNode {
            pid: 1,
            path,
            calls,
            cpu_ns,
            nested: Hits { all, stepped },
        }
    }

    #[test]
    fn corrected_tree_subtracts_probe_cost_and_keeps_parents_above_children() {
        let cost = ProbeCost {
            hit_ns: 1000.0,
            inside_ns: 800.0,
            cold_hit_ns: 1500.0,
            step_ns: 10_000.0,
            cold_step_ns: 12_000.0,
        };
        // Function 2 is single-stepped: its entries' second traps count in it and in every caller.
        let tree = corrected_tree(
            vec![
                raw(vec![0], 10, 1_000_000, 40, 10),
                raw(vec![0, 1], 10, 600_000, 20, 10),
                raw(vec![0, 1, 2], 10, 500_000, 0, 10),
                raw(vec![5], 1, 10_000, 30, 0),
                raw(vec![5, 6], 1, 9_000, 0, 0),
            ],
            &cost,
        );
        let node = |p: &[u16]| tree.iter().find(|n| n.path == p).unwrap();
        assert_eq!(node(&[0]).cpu_ns, 1_000_000 - 8_000 - 40_000 - 100_000);
        assert_eq!(node(&[0, 1]).cpu_ns, 600_000 - 8_000 - 20_000 - 100_000);
        assert_eq!(node(&[0, 1, 2]).cpu_ns, 500_000 - 8_000 - 100_000);
        assert_eq!(node(&[0]).self_ns, node(&[0]).cpu_ns - node(&[0, 1]).cpu_ns);
        // Over-correction is capped: a parent keeps at least its children's CPU.
        assert_eq!(node(&[5]).cpu_ns, node(&[5, 6]).cpu_ns);
        assert_eq!(node(&[5]).self_ns, 0);
    }
}
