// SPDX-License-Identifier: Apache-2.0
//! CPU samples of a target's threads taken in the kernel's uprobe code: what the probes cost the targets,
//! measured in the targets themselves (the trap sampler, bpf/tlsprof.bpf.c). The calibration measures a hit
//! in tlsprof's own process, whose caches and maps are not a busy server's.

use std::io::{BufRead, BufReader};

use crate::catalogue::causes::{base_name, is_probe_frame};
use crate::model::{Hits, ProbeCost, SamplerRan};

/// The kernel's uprobe code (catalogue::causes::PROBE_KERNEL_FRAMES), as address ranges read once from
/// /proc/kallsyms: each matching function up to the next symbol.
pub struct ProbeTraps {
    ranges: Vec<(u64, u64)>,
    /// The trap sampler's samples taken in the traps so far.
    pub trapped: u64,
}

impl ProbeTraps {
    /// None when the kernel hides its symbols' addresses (kallsyms reads zeros): the traps cannot be told.
    pub fn new() -> Option<ProbeTraps> {
        ProbeTraps::from_kallsyms(BufReader::new(std::fs::File::open("/proc/kallsyms").ok()?))
    }

    /// Read line by line: the whole table is megabytes, and tlsprof may run in a tight memory cgroup.
    fn from_kallsyms(kallsyms: impl BufRead) -> Option<ProbeTraps> {
        // Code symbols: address, whether the uprobe code. Aliases share an address; one that matches marks it.
        let mut symbols: Vec<(u64, bool)> = kallsyms
            .lines()
            .map_while(Result::ok)
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                let addr = u64::from_str_radix(fields.next()?, 16).ok()?;
                let kind = fields.next()?;
                let name = fields.next()?;
                matches!(kind, "t" | "T").then(|| (addr, is_probe_frame(base_name(name))))
            })
            .collect();
        if symbols.iter().all(|&(addr, _)| addr == 0) {
            return None;
        }
        symbols.sort_unstable();
        symbols.dedup_by(|later, first| {
            let same = later.0 == first.0;
            first.1 |= same && later.1;
            same
        });
        let ranges = symbols
            .windows(2)
            .filter(|w| w[0].1)
            .map(|w| (w[0].0, w[1].0))
            .collect();
        Some(ProbeTraps { ranges, trapped: 0 })
    }

    /// Whether a sample with these kernel frames was taken in a probe trap.
    pub fn is_trap(&self, kernel_ips: &[u64]) -> bool {
        kernel_ips.iter().any(|&ip| {
            let i = self.ranges.partition_point(|&(start, _)| start <= ip);
            i > 0 && ip < self.ranges[i - 1].1
        })
    }
}

/// Below this share of the targets' CPU at their calibrated cost, the probes' hits are not worth sampling:
/// the trap sampler's own interrupts would cost a target more than such hits do (a server answering requests
/// on kept-alive connections hits the probes a few times a second), while a server taking new connections
/// makes them cost it a percent or more.
const MIN_PROBE_SHARE: f64 = 0.002;

/// When the trap sampler runs: while the probes are attached and their hits over the last poll cost the
/// targets at least MIN_PROBE_SHARE of their CPU. Its samples then measure the hits made while it ran: their
/// CPU and those hits are counted here.
pub struct TrapSampling {
    on: bool,
    /// What the last stretch of attached probes said.
    wanted: bool,
    /// The targets' CPU while probed, and the hits, at the last step.
    last: SamplerRan,
    pub ran: SamplerRan,
}

impl TrapSampling {
    /// Before the probes attach: no CPU probed, no hit yet.
    pub fn new() -> TrapSampling {
        TrapSampling {
            on: false,
            wanted: true,
            last: SamplerRan::default(),
            ran: SamplerRan::default(),
        }
    }

    /// Whether the sampler runs, as the last step said.
    pub fn on(&self) -> bool {
        self.on
    }

    /// At each poll, once the trap sampler's ring buffer is drained, and as the probes detach or attach:
    /// counts the stretch since the last step if the sampler ran through it, and says whether it runs through
    /// the next (`live`: the probes are attached).
    pub fn step(&mut self, live: bool, probed_cpu_ms: f64, hits: Hits, cost: &ProbeCost) -> bool {
        let now = SamplerRan {
            cpu_ms: probed_cpu_ms,
            hits,
        };
        let stretch = now.minus(&std::mem::replace(&mut self.last, now));
        if self.on {
            self.ran = self.ran.plus(&stretch);
        }
        // Only a stretch with the probes attached says what they cost.
        if stretch.cpu_ms > 0.0 {
            self.wanted = cost.calibrated_ms(stretch.hits) >= MIN_PROBE_SHARE * stretch.cpu_ms;
        }
        self.on = live && self.wanted;
        self.on
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_give_the_uprobe_code_up_to_the_next_symbol() {
        let text = "ffffffff81000000 T _text\n\
                    ffffffff81001000 t asm_exc_int3\n\
                    ffffffff81001000 t alias_of_it\n\
                    ffffffff81001100 T asm_exc_nmi\n\
                    ffffffff81002000 T uprobe_notify_resume\n\
                    ffffffff81002000 D some_data\n\
                    ffffffff81002200 T handle_swbp.isra.0\n\
                    ffffffff81002400 T schedule\n\
                    ffffffffc0000000 t bpf_prog_1234_stage_enter\t[bpf]\n";
        let traps = ProbeTraps::from_kallsyms(text.as_bytes()).unwrap();
        assert!(traps.is_trap(&[0xffffffff81001000]));
        assert!(traps.is_trap(&[0xffffffff81000500, 0xffffffff810010ff]));
        assert!(!traps.is_trap(&[0xffffffff81001100, 0xffffffff81000fff]));
        assert!(
            traps.is_trap(&[0xffffffff81002300]),
            "uprobe_notify_resume, then handle_swbp"
        );
        assert!(!traps.is_trap(&[0xffffffff81002400, 0xffffffffc0000010]));
        let hidden = "0000000000000000 T _text\n0000000000000000 t asm_exc_int3\n";
        assert!(ProbeTraps::from_kallsyms(hidden.as_bytes()).is_none());
    }

    fn hits(all: u64) -> Hits {
        Hits { all, stepped: 0 }
    }

    fn ran(cpu_ms: f64, all: u64) -> SamplerRan {
        SamplerRan {
            cpu_ms,
            hits: hits(all),
        }
    }

    #[test]
    fn the_sampler_runs_while_the_probes_are_attached_and_hit_and_counts_those_stretches() {
        // 2 µs a hit: 10 hits over 10 ms of CPU cost 0.2%.
        let cost = ProbeCost {
            cold_hit_ns: 2000.0,
            ..ProbeCost::default()
        };
        let mut s = TrapSampling::new();
        assert!(s.step(true, 0.0, hits(0), &cost), "runs until the probes say otherwise");
        assert!(s.step(true, 10.0, hits(12), &cost));
        // Detached: the stretch up to now is counted, the sampler stops.
        assert!(!s.step(false, 20.0, hits(24), &cost));
        assert_eq!(s.ran, ran(20.0, 24));
        // Attached again, the last verdict holds; a stretch of few hits stops it and is counted.
        assert!(s.step(true, 20.0, hits(25), &cost));
        assert!(!s.step(true, 30.0, hits(26), &cost));
        assert_eq!(s.ran, ran(30.0, 25));
        // Not counted while stopped; busy again, it runs.
        assert!(s.step(true, 40.0, hits(46), &cost));
        assert_eq!(s.ran, ran(30.0, 25));
    }
}
