// SPDX-License-Identifier: Apache-2.0
//! CPU samples of a target's threads taken in the kernel's uprobe code: what the probes cost the targets,
//! measured in the targets themselves (the trap sampler, bpf/tlsprof.bpf.c). The calibration measures a hit
//! in tlsprof's own process, whose caches and maps are not a busy server's.

use std::collections::HashMap;
use std::io::Read;

use blazesym::symbolize::{source::Kernel, source::Source, Input, Symbolizer};

use crate::catalogue::causes::is_probe_frame;

/// Names of kernel addresses kept at most this many: a long recording samples new ones now and then.
const CACHE_LIMIT: usize = 16_384;

pub struct ProbeTraps {
    symbolizer: Symbolizer,
    /// Kernel address -> whether it is in the uprobe code (catalogue::causes::PROBE_KERNEL_FRAMES).
    in_trap: HashMap<u64, bool>,
    /// The trap sampler's samples taken in the traps so far.
    pub trapped: u64,
}

impl ProbeTraps {
    /// None when the kernel hides its symbols' addresses (kallsyms reads zeros): the traps cannot be told.
    pub fn new() -> Option<ProbeTraps> {
        let mut first = [0u8; 16];
        std::fs::File::open("/proc/kallsyms")
            .and_then(|mut f| f.read_exact(&mut first))
            .ok()?;
        if first.iter().all(|&b| b == b'0') {
            return None;
        }
        Some(ProbeTraps {
            symbolizer: Symbolizer::new(),
            in_trap: HashMap::new(),
            trapped: 0,
        })
    }

    /// Whether a sample with these kernel frames (innermost first) was taken in a probe trap.
    pub fn is_trap(&mut self, kernel_ips: &[u64]) -> bool {
        if self.in_trap.len() >= CACHE_LIMIT {
            self.in_trap.clear();
        }
        kernel_ips.iter().any(|&addr| {
            *self.in_trap.entry(addr).or_insert_with(|| {
                let src = Source::Kernel(Kernel::default());
                self.symbolizer
                    .symbolize_single(&src, Input::AbsAddr(addr))
                    .ok()
                    .and_then(|s| s.into_sym())
                    .is_some_and(|sym| is_probe_frame(&sym.name))
            })
        })
    }
}
