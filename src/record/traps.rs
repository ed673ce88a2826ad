// SPDX-License-Identifier: Apache-2.0
//! CPU samples of a target's threads taken in the kernel's uprobe code: what the probes cost the targets,
//! measured in the targets themselves (the trap sampler, bpf/tlsprof.bpf.c). The calibration measures a hit
//! in tlsprof's own process, whose caches and maps are not a busy server's.

use crate::catalogue::causes::{base_name, is_probe_frame};

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
        ProbeTraps::from_kallsyms(&std::fs::read_to_string("/proc/kallsyms").ok()?)
    }

    fn from_kallsyms(text: &str) -> Option<ProbeTraps> {
        // Code symbols: address, whether the uprobe code. Aliases share an address; one that matches marks it.
        let mut symbols: Vec<(u64, bool)> = text
            .lines()
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
        let traps = ProbeTraps::from_kallsyms(text).unwrap();
        assert!(traps.is_trap(&[0xffffffff81001000]));
        assert!(traps.is_trap(&[0xffffffff81000500, 0xffffffff810010ff]));
        assert!(!traps.is_trap(&[0xffffffff81001100, 0xffffffff81000fff]));
        assert!(
            traps.is_trap(&[0xffffffff81002300]),
            "uprobe_notify_resume, then handle_swbp"
        );
        assert!(!traps.is_trap(&[0xffffffff81002400, 0xffffffffc0000010]));
        let hidden = "0000000000000000 T _text\n0000000000000000 t asm_exc_int3\n";
        assert!(ProbeTraps::from_kallsyms(hidden).is_none());
    }
}
