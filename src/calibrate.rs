// SPDX-License-Identifier: Apache-2.0
//! Measuring what a probe hit costs a thread on this machine (a trap each: microseconds in a VM), so that
//! stage figures can be corrected for the probes' own cost.

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags, UprobeMultiOpts};
use serde::{Deserialize, Serialize};

use crate::bpf::types::{tree_key, tree_val};
use crate::bpf::TlsprofSkel;
use crate::catalogue::{self, Origin, Row, Stage};
use crate::targets::{self, Process};

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
}

impl ProbeCost {
    /// A call's CPU without the probes' cost: its own share and every hit nested inside it.
    pub fn correct(&self, cpu_ns: u64, calls: u64, nested_hits: u64) -> u64 {
        let cost = calls as f64 * self.inside_ns + nested_hits as f64 * self.hit_ns;
        (cpu_ns as f64 - cost).max(0.0) as u64
    }
}

const CALIBRATION_FUNC: u16 = u16::MAX;
const CALIBRATION_ROW: Row = Row {
    symbol: "tlsprof_calibration_target",
    stage: Some(Stage::Keygen),
    origin: Origin::App,
    length_query_arg: 0,
    flags: 0,
    frequent: false,
};
const CALLS_PER_ROUND: u64 = 400;
const ROUNDS: usize = 9;
const COLD_CALLS_PER_ROUND: u64 = 60;
/// Twice the L2 cache of current server cores: larger sweeps only add noise (measured: 4 MiB).
const SWEEP_BYTES: usize = 1 << 20;

// The probed function and its never-probed twin, called alternately. They open with `push %rbp` like the
// functions tlsprof probes: the kernel emulates that instruction, while other first instructions are
// single-stepped and cost a second trap, so the prologue decides what a hit costs.
std::arch::global_asm!(
    ".globl tlsprof_calibration_target",
    ".type tlsprof_calibration_target, @function",
    "tlsprof_calibration_target:",
    "push rbp",
    "mov rbp, rsp",
    "lea rax, [rdi + 1]",
    "pop rbp",
    "ret",
    ".size tlsprof_calibration_target, . - tlsprof_calibration_target",
    ".globl tlsprof_calibration_twin",
    ".type tlsprof_calibration_twin, @function",
    "tlsprof_calibration_twin:",
    "push rbp",
    "mov rbp, rsp",
    "lea rax, [rdi + 2]",
    "pop rbp",
    "ret",
    ".size tlsprof_calibration_twin, . - tlsprof_calibration_twin",
);

extern "C" {
    fn tlsprof_calibration_target(x: u64) -> u64;
    fn tlsprof_calibration_twin(x: u64) -> u64;
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn round_ns(f: unsafe extern "C" fn(u64) -> u64, calls: u64, sweep: &mut [u8]) -> f64 {
    let t0 = thread_cpu_ns();
    for i in 0..calls {
        sweep_caches(sweep);
        // SAFETY: both functions only compute x + constant (global_asm above).
        std::hint::black_box(unsafe { f(i) });
    }
    (thread_cpu_ns() - t0) as f64 / calls as f64
}

/// Writes one byte per cache line: what a target does between two TLS calls (crypto, parsing, I/O) leaves
/// the probe's kernel path and maps out of the CPU caches, and a hit then costs more than in a tight loop.
fn sweep_caches(buf: &mut [u8]) {
    for i in (0..buf.len()).step_by(64) {
        buf[i] = buf[i].wrapping_add(1);
    }
    std::hint::black_box(buf);
}

/// Median extra CPU per call of the probed function over its twin, rounds interleaved: the machine is
/// shared, and interleaving plus the median keep a neighbour's burst out of the figure.
fn probed_extra_ns(calls: u64, sweep: &mut [u8]) -> f64 {
    let mut extra: Vec<f64> = (0..ROUNDS)
        .map(|_| round_ns(tlsprof_calibration_target, calls, sweep) - round_ns(tlsprof_calibration_twin, calls, sweep))
        .collect();
    extra.sort_by(f64::total_cmp);
    extra[ROUNDS / 2].max(0.0)
}

/// Probes tlsprof's own calibration function with the loaded programs and measures the difference.
pub fn measure(skel: &TlsprofSkel) -> Result<ProbeCost> {
    let me = Process::from_pid(std::process::id()).context("read /proc/self")?;
    let maps = me.maps()?;
    let addr = tlsprof_calibration_target as *const () as usize as u64;
    let m = targets::mapping_for(&maps, addr).context("find tlsprof's own code mapping")?;
    let offset = (addr - m.start + m.offset) as usize;
    let cookie = catalogue::cookie(CALIBRATION_FUNC, &CALIBRATION_ROW);

    let mut links = Vec::new();
    for (prog, retprobe) in [(&skel.progs.stage_enter, false), (&skel.progs.stage_exit, true)] {
        let opts = UprobeMultiOpts {
            offsets: vec![offset],
            cookies: vec![cookie],
            retprobe,
            ..Default::default()
        };
        links.push(
            prog.attach_uprobe_multi_with_opts(me.pid as i32, m.open_path(me.pid), "", opts)
                .context("attach the calibration probe to tlsprof itself")?,
        );
    }
    let pair = probed_extra_ns(CALLS_PER_ROUND, &mut []);
    let mut sweep = vec![0u8; SWEEP_BYTES];
    let cold_pair = probed_extra_ns(COLD_CALLS_PER_ROUND, &mut sweep);
    drop(links);

    let mut key = tree_key {
        tgid: me.pid,
        depth: 1,
        ..Default::default()
    };
    key.funcs[0] = CALIBRATION_FUNC;
    // SAFETY: tree_key is plain old data.
    let key_bytes = unsafe { plain::as_bytes(&key) };
    let mut val = tree_val::default();
    let raw = skel
        .maps
        .tree
        .lookup(key_bytes, MapFlags::ANY)?
        .context("calibration calls were not recorded")?;
    plain::copy_from_bytes(&mut val, &raw).ok().context("tree value size")?;
    skel.maps.tree.delete(key_bytes)?;
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let _ = skel.maps.threads.delete(&tid.to_ne_bytes());

    let measured_inside = val.cpu_ns as f64 / val.calls.max(1) as f64;
    Ok(ProbeCost {
        hit_ns: pair / 2.0,
        inside_ns: measured_inside.clamp(0.0, pair),
        cold_hit_ns: cold_pair.max(pair) / 2.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn correction_removes_inside_and_nested_costs_and_never_goes_negative() {
        let cost = ProbeCost {
            hit_ns: 1000.0,
            inside_ns: 500.0,
            cold_hit_ns: 1500.0,
        };
        // 10 calls of 100 µs each, with 4 nested hits per call.
        assert_eq!(cost.correct(1_000_000, 10, 40), 1_000_000 - 5_000 - 40_000);
        assert_eq!(cost.correct(100, 1, 5), 0);
    }
}
