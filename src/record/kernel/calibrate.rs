// SPDX-License-Identifier: Apache-2.0
//! Measuring what a probe hit costs a thread on this machine (a trap each: microseconds in a VM), so that
//! stage figures can be corrected for the probes' own cost.

use anyhow::{Context, Result};
use libbpf_rs::{Link, MapCore, MapFlags, ProgramMut, UprobeMultiOpts};

use super::bpf::types::{tree_key, tree_val};
use super::bpf::TlsprofSkel;
use crate::catalogue::{self, Origin, Row, Stage};
use crate::model::ProbeCost;
use crate::record::discovery::targets::{self, Process};

const CALIBRATION_FUNC: u16 = u16::MAX;
const CALIBRATION_STEPPED_FUNC: u16 = u16::MAX - 1;
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
const COLD_CALLS: u64 = 300;
/// A stepped call costs about ten hits: fewer calls give as many microseconds to measure.
const STEPPED_CALLS_PER_ROUND: u64 = 100;
const STEPPED_COLD_CALLS: u64 = 100;
/// The sweep when sysfs does not give the CPU's cache sizes.
const DEFAULT_SWEEP_BYTES: usize = 4 << 20;

// The probed function and its never-probed twin, called alternately. They open with `push %rbp`, which the
// kernel emulates; the stepped one opens with a `mov`, which it single-steps (prologue.rs): the prologue
// decides what a hit costs, and tlsprof probes functions of both kinds.
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
    ".globl tlsprof_calibration_stepped",
    ".type tlsprof_calibration_stepped, @function",
    "tlsprof_calibration_stepped:",
    "mov rax, rdi",
    "push rbp",
    "mov rbp, rsp",
    "lea rax, [rax + 3]",
    "pop rbp",
    "ret",
    ".size tlsprof_calibration_stepped, . - tlsprof_calibration_stepped",
);

extern "C" {
    fn tlsprof_calibration_target(x: u64) -> u64;
    fn tlsprof_calibration_twin(x: u64) -> u64;
    fn tlsprof_calibration_stepped(x: u64) -> u64;
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn round_ns(f: unsafe extern "C" fn(u64) -> u64, calls: u64) -> f64 {
    let t0 = thread_cpu_ns();
    for i in 0..calls {
        // SAFETY: both functions only compute x + constant (global_asm above).
        std::hint::black_box(unsafe { f(i) });
    }
    (thread_cpu_ns() - t0) as f64 / calls as f64
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer; CLOCK_MONOTONIC is read in the vDSO, without entering the kernel.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Twice the largest cache of a core below the last level (L2 on current servers, 1–2 MiB), read from sysfs:
/// a sweep that fits in it leaves the probe's kernel path there and measures a hit as cheap as back to back.
/// Sweeping the shared last-level cache too would only add noise.
fn sweep_bytes() -> usize {
    let sizes: Vec<(u32, usize)> = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .filter_map(|e| {
            let read = |name: &str| std::fs::read_to_string(e.path().join(name)).ok();
            let level = read("level")?.trim().parse().ok()?;
            let kind = read("type")?;
            let size = read("size")?;
            let kib: usize = size.trim().strip_suffix('K')?.parse().ok()?;
            (kind.trim() != "Instruction").then_some((level, kib << 10))
        })
        .collect();
    let last_level = sizes.iter().map(|&(level, _)| level).max().unwrap_or(0);
    sizes
        .iter()
        .filter(|&&(level, _)| level < last_level)
        .map(|&(_, bytes)| 2 * bytes)
        .max()
        .unwrap_or(DEFAULT_SWEEP_BYTES)
        .clamp(1 << 20, 64 << 20)
}

/// Writes one byte per cache line: what a target does between two TLS calls (crypto, parsing, I/O) leaves
/// the probe's kernel path and maps out of the CPU caches, and a hit then costs more than in a tight loop.
fn sweep_caches(buf: &mut [u8]) {
    for i in (0..buf.len()).step_by(64) {
        buf[i] = buf[i].wrapping_add(1);
    }
    std::hint::black_box(buf);
}

/// Median extra CPU per call of a probed function over the twin, back to back, rounds interleaved: the
/// machine is shared, and interleaving plus the median keep a neighbour's burst out of the figure.
fn probed_extra_ns(probed: unsafe extern "C" fn(u64) -> u64, calls: u64) -> f64 {
    let extra: Vec<f64> = (0..ROUNDS)
        .map(|_| round_ns(probed, calls) - round_ns(tlsprof_calibration_twin, calls))
        .collect();
    median(extra).max(0.0)
}

/// The same with the caches swept before each call, the calls timed one by one (the sweep's own time,
/// which varies by more than a hit costs, stays out) and alternated with the twin's: the median time of a
/// probed call over the twin's.
fn cold_extra_ns(probed: unsafe extern "C" fn(u64) -> u64, calls: u64, sweep: &mut [u8]) -> f64 {
    let mut times = [Vec::new(), Vec::new()];
    for i in 0..calls {
        for (f, out) in [probed, tlsprof_calibration_twin].into_iter().zip(&mut times) {
            sweep_caches(sweep);
            let t0 = monotonic_ns();
            // SAFETY: both functions only compute x + constant (global_asm above).
            std::hint::black_box(unsafe { f(i) });
            out.push((monotonic_ns() - t0) as f64);
        }
    }
    let [probed, twin] = times;
    (median(probed) - median(twin)).max(0.0)
}

/// Attaches `prog` to tlsprof's own calibration functions as the targets' stage functions get it: an entry, a
/// return (`retprobe`) or a session uprobe_multi link.
pub fn probe_self(prog: &ProgramMut, retprobe: bool, session: bool) -> Result<Link> {
    let me = Process::from_pid(std::process::id()).context("read /proc/self")?;
    let maps = me.maps()?;
    let (mut offsets, mut cookies, mut file) = (Vec::new(), Vec::new(), None);
    for (f, id, stepped) in [
        (
            tlsprof_calibration_target as unsafe extern "C" fn(u64) -> u64,
            CALIBRATION_FUNC,
            false,
        ),
        (tlsprof_calibration_stepped, CALIBRATION_STEPPED_FUNC, true),
    ] {
        let addr = f as *const () as usize as u64;
        let m = targets::mapping_for(&maps, addr).context("find tlsprof's own code mapping")?;
        offsets.push(m.file_offset(addr) as usize);
        cookies.push(catalogue::cookie(
            id,
            &CALIBRATION_ROW,
            catalogue::families::Calls::Native,
            stepped,
            false,
            catalogue::Site::Entry,
        ));
        file.get_or_insert(m.open_path(me.pid));
    }
    let opts = UprobeMultiOpts {
        offsets,
        cookies,
        retprobe,
        session,
        ..Default::default()
    };
    prog.attach_uprobe_multi_with_opts(me.pid as i32, file.expect("two functions"), "", opts)
        .context("attach the calibration probes to tlsprof itself")
}

/// Probes tlsprof's own calibration functions with the loaded programs and measures the difference.
pub fn measure(skel: &TlsprofSkel) -> Result<ProbeCost> {
    // The programs the targets' stage functions get: one session program, or an entry and a return one.
    let programs = if skel.progs.stage_session.autoload() {
        vec![(&skel.progs.stage_session, false, true)]
    } else {
        vec![
            (&skel.progs.stage_enter, false, false),
            (&skel.progs.stage_exit, true, false),
        ]
    };
    let mut links = Vec::new();
    for (prog, retprobe, session) in programs {
        links.push(probe_self(prog, retprobe, session)?);
    }
    let pair = probed_extra_ns(tlsprof_calibration_target, CALLS_PER_ROUND);
    let stepped_pair = probed_extra_ns(tlsprof_calibration_stepped, STEPPED_CALLS_PER_ROUND);
    let mut sweep = vec![0u8; sweep_bytes()];
    let cold_pair = cold_extra_ns(tlsprof_calibration_target, COLD_CALLS, &mut sweep);
    let cold_stepped_pair = cold_extra_ns(tlsprof_calibration_stepped, STEPPED_COLD_CALLS, &mut sweep);
    drop(links);

    let pid = std::process::id();
    let val = take_calibration_node(skel, pid, CALIBRATION_FUNC)?;
    take_calibration_node(skel, pid, CALIBRATION_STEPPED_FUNC)?;
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let _ = skel.maps.threads.delete(&tid.to_ne_bytes());

    let measured_inside = val.cpu_ns as f64 / val.calls.max(1) as f64;
    let cold_hit_ns = cold_pair.max(pair) / 2.0;
    let step_ns = (stepped_pair - pair).max(0.0);
    Ok(ProbeCost {
        hit_ns: pair / 2.0,
        inside_ns: measured_inside.clamp(0.0, pair),
        cold_hit_ns,
        step_ns,
        cold_step_ns: (cold_stepped_pair - 2.0 * cold_hit_ns).max(step_ns),
    })
}

/// Reads and removes the call-tree node the calibration calls of one function made.
fn take_calibration_node(skel: &TlsprofSkel, tgid: u32, func: u16) -> Result<tree_val> {
    // The key as the BPF side builds it, padding bytes zero: a Rust struct literal leaves its padding
    // undefined, and the map compares every byte.
    let mut key = vec![0u8; std::mem::size_of::<tree_key>()];
    let mut put = |offset: usize, bytes: &[u8]| key[offset..offset + bytes.len()].copy_from_slice(bytes);
    put(std::mem::offset_of!(tree_key, tgid), &tgid.to_ne_bytes());
    put(std::mem::offset_of!(tree_key, depth), &1u16.to_ne_bytes());
    put(std::mem::offset_of!(tree_key, funcs), &func.to_ne_bytes());
    let mut val = tree_val::default();
    let raw = skel
        .maps
        .tree
        .lookup(&key, MapFlags::ANY)?
        .context("calibration calls were not recorded")?;
    plain::copy_from_bytes(&mut val, &raw).ok().context("tree value size")?;
    skel.maps.tree.delete(&key)?;
    Ok(val)
}
