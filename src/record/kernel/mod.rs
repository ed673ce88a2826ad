// SPDX-License-Identifier: Apache-2.0
//! The kernel side: what it must provide (and `tlsprof check`'s report of it), the BPF programs and their maps,
//! the stage probes attached to the targets, and what a probe hit costs.

pub(super) mod bpf;
pub(super) mod calibrate;
pub mod check;
pub(super) mod privileges;
pub(super) mod probes;
pub(super) mod programs;

use libbpf_rs::Link;

/// Drops links on several threads at once: the kernel waits for an RCU grace period as it removes each (a
/// uprobe_multi link, a program on a perf event or a tracepoint), one link after the other; concurrent
/// waiters share them.
pub(super) fn detach(mut links: Vec<Link>) {
    const THREADS: usize = 32;
    if links.len() < 2 {
        return;
    }
    let per_thread = links.len().div_ceil(THREADS);
    std::thread::scope(|s| {
        while !links.is_empty() {
            let chunk: Vec<Link> = links.drain(..per_thread.min(links.len())).collect();
            s.spawn(move || drop(chunk));
        }
    });
}
