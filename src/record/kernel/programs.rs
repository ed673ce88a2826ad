// SPDX-License-Identifier: Apache-2.0
//! The BPF programs: loading them sized for this machine and these options, the CPU sampler and the
//! scheduler tracepoint that run for the whole recording, the socket tracepoints of the hello capture, and
//! the kernel side's counters.

use std::collections::BTreeMap;
use std::fs;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};

use super::bpf::types::{target_state, tlsprof_call_graph, tlsprof_follow, tlsprof_stat};
use super::bpf::{TlsprofSkel, TlsprofSkelBuilder};
use crate::boundary::tlsprof_own;
use crate::model::{CallGraph, Hits, OwnPrograms, ProbeCost, ProgramRuns, TrapSamples};
use crate::record::discovery::targets::Selection;
use crate::record::duty::steal::Slices;
use crate::record::duty::traps::TrapSampling;
use crate::record::AttachOptions;

/// From linux/perf_event.h; the libc crate does not carry them (the ioctls are _IO('$', 0) and _IO('$', 1)).
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;

/// The trap sampler's rate while the stage probes are attached: with a hit costing a few µs and a handshake
/// making a dozen, a few percent of a probed target's samples fall in the traps, a few dozen in each second
/// of its CPU probed. It costs every CPU one more timer interrupt per ms while it runs.
const TRAP_SAMPLE_HZ: u64 = 1000;

/// The stack ring buffer holds this long of samples at the highest rate (every CPU sampling a target, every
/// stack copy full size): a few polls' worth. Its pages stay resident, so it is no larger than that.
const STACK_RING_SECONDS: f64 = 0.5;

/// A target's counters in the targets map (target_state), as last read.
#[derive(Clone, Copy, Debug, Default)]
pub struct TargetCounters {
    /// Connections it accepted or opened.
    pub connections: u64,
    /// Its stage threads' scheduler slices.
    pub slices: Slices,
    /// What tlsprof's programs other than the probes cost it.
    pub own: OwnPrograms,
    /// CPU of its threads that exited, in ms (their task clocks at exit).
    pub exited_cpu_ms: f64,
}

/// The loaded programs and what runs throughout; dropping it detaches everything.
pub struct Programs<'obj> {
    pub skel: TlsprofSkel<'obj>,
    /// What a probe hit costs, measured by the calibration before any target was probed.
    pub probe_cost: ProbeCost,
    /// The calibration's own probe hits: not the targets'.
    calibration_hits: Hits,
    /// The sched_switch tracepoint and the CPU samplers.
    links: Vec<Link>,
    /// The trap sampler's perf events, one per CPU, owned by their links in `links`, and when it runs.
    trap_sampler: Vec<i32>,
    trap_sampling: TrapSampling,
}

pub fn call_graph_id(call_graph: CallGraph) -> tlsprof_call_graph {
    match call_graph {
        CallGraph::Dwarf => tlsprof_call_graph::CALL_GRAPH_DWARF,
        CallGraph::Fp => tlsprof_call_graph::CALL_GRAPH_FP,
    }
}

fn stack_ring_bytes(cpus: usize, freq_hz: u64, stack_bytes: u32) -> u32 {
    // Each record: an 8-byte ring-buffer header, the sample's fixed part, the stack bytes.
    let record = 8.0 + crate::record::stacks::samples::HEADER_LEN as f64 + f64::from(stack_bytes);
    let bytes = cpus as f64 * freq_hz as f64 * record * STACK_RING_SECONDS;
    // The kernel wants a power of two, page-aligned.
    (bytes as u32).clamp(1 << 20, 64 << 20).next_power_of_two()
}

/// Which processes join the recording as they start (enum tlsprof_follow): with --all, every one that runs TLS
/// code (a target's new process too, as it does: its parent's TLS files are probed in every process); else a
/// target's new processes, and with --comm those that run a program of that name.
fn follow_flags(selection: &Selection) -> u32 {
    if selection.all {
        return tlsprof_follow::FOLLOW_ALL.0;
    }
    let mut flags = tlsprof_follow::FOLLOW_CHILDREN.0;
    if !selection.comms.is_empty() {
        flags |= tlsprof_follow::FOLLOW_COMMS.0;
    }
    flags
}

/// Opens the BPF object, sets its options and map sizes, and loads it; the Go programs only with `go` (the
/// verifier checks each program loaded, and Go's take a good part of the time before the probes are live).
pub fn load<'obj>(
    open_object: &'obj mut MaybeUninit<OpenObject>,
    opts: &AttachOptions,
    selection: &Selection,
    go: bool,
) -> Result<TlsprofSkel<'obj>> {
    let mut open = TlsprofSkelBuilder::default()
        .open(open_object)
        .context("open the BPF object")?;
    let rodata = open.maps.rodata_data.as_deref_mut().context("BPF read-only data")?;
    rodata.stack_bytes = opts.stack_bytes;
    rodata.call_graph = call_graph_id(opts.call_graph).0;
    rodata.follow = follow_flags(selection);
    rodata.self_tgid = std::process::id();
    let cpus = libbpf_rs::num_possible_cpus().context("count possible CPUs")? as u32;
    open.maps
        .sample_scratch
        .set_max_entries(cpus)
        .context("size the sample scratch map")?;
    open.progs.go_probe.set_autoload(go);
    // One of the two for stage functions' returns: the other is not checked by the verifier for nothing.
    if uprobe_sessions() {
        open.progs.stage_exit.set_autoload(false);
    } else {
        open.progs.stage_session.set_autoload(false);
    }
    let ring_bytes = stack_ring_bytes(online_cpus()?.len(), opts.freq_hz, opts.stack_bytes);
    open.maps
        .stacks
        .set_max_entries(ring_bytes)
        .context("size the stack ring buffer")?;
    // libbpf's messages are held while loading: printed only when the failure is not one explained here.
    let print = libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, hold_libbpf_message)));
    let loaded = open.load();
    libbpf_rs::set_print(print);
    let loaded = loaded.and_then(|skel| {
        for comm in &selection.comms {
            skel.maps.followed_comms.update(&comm_key(comm), &[1], MapFlags::ANY)?;
        }
        Ok(skel)
    });
    let held = std::mem::take(&mut *LIBBPF_MESSAGES.lock().unwrap_or_else(|e| e.into_inner()));
    loaded.map_err(|e| {
        if e.kind() == libbpf_rs::ErrorKind::OutOfMemory {
            // BPF maps are charged to the memory cgroup of the process that creates them.
            return anyhow!(
                "the BPF maps do not fit in the memory tlsprof's cgroup allows ({}): raise its memory limit, or lower --freq or --stack-bytes (the stack ring buffer takes {} MiB of it)",
                memory_cgroup(),
                ring_bytes >> 20
            );
        }
        for m in held {
            eprint!("{m}");
        }
        anyhow!("loading the BPF programs failed ({e}): tlsprof needs Linux 6.6 or later with BTF")
    })
}

/// A program name as the kernel keeps it (comm): its first 15 bytes, NUL-padded to 16.
fn comm_key(name: &str) -> [u8; 16] {
    let mut key = [0u8; 16];
    let bytes = name.as_bytes();
    let n = bytes.len().min(15);
    key[..n].copy_from_slice(&bytes[..n]);
    key
}

/// Set to 0, asks for an entry and a return probe on stage functions where the kernel has uprobe sessions.
pub(super) const SESSIONS_ENV: &str = "TLSPROF_UPROBE_SESSIONS";

/// Whether stage functions get one session uprobe each (Linux 6.13+, whose BTF names the attach type) instead
/// of an entry and a return probe; TLSPROF_UPROBE_SESSIONS=0 asks for the two.
pub(super) fn uprobe_sessions() -> bool {
    !sessions_declined() && kernel_has_attach_type("BPF_TRACE_UPROBE_SESSION")
}

pub(super) fn sessions_declined() -> bool {
    std::env::var_os(SESSIONS_ENV).is_some_and(|v| v == "0")
}

/// Whether this kernel's BTF names a BPF attach type (enum bpf_attach_type): it has it from the release that
/// added it. False without BTF.
pub(super) fn kernel_has_attach_type(name: &str) -> bool {
    let Ok(btf) = libbpf_rs::btf::Btf::from_vmlinux() else {
        return false;
    };
    btf.type_by_name::<libbpf_rs::btf::types::Enum>("bpf_attach_type")
        .is_some_and(|e| e.iter().any(|m| m.name.is_some_and(|n| n == name)))
}

static LIBBPF_MESSAGES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn hold_libbpf_message(_: libbpf_rs::PrintLevel, message: String) {
    LIBBPF_MESSAGES.lock().unwrap_or_else(|e| e.into_inner()).push(message);
}

/// tlsprof's memory cgroup as /proc/self/cgroup names it: the v1 memory controller's, else the v2 one.
fn memory_cgroup() -> String {
    let text = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let v1 = text.lines().find_map(|l| {
        let (_, rest) = l.split_once(':')?;
        let (controllers, path) = rest.split_once(':')?;
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then(|| format!("cgroup v1 {path}, memory.limit_in_bytes"))
    });
    v1.or_else(|| {
        text.lines()
            .find_map(|l| l.strip_prefix("0::"))
            .map(|path| format!("cgroup {path}, memory.max"))
    })
    .unwrap_or_else(|| "its memory cgroup".into())
}

impl<'obj> Programs<'obj> {
    /// Takes the loaded programs after the calibration measured `probe_cost` with them.
    pub fn new(skel: TlsprofSkel<'obj>, probe_cost: ProbeCost) -> Programs<'obj> {
        let calibration_hits = Hits {
            all: stat_sum(&skel, tlsprof_stat::STAT_PROBE_HITS),
            stepped: stat_sum(&skel, tlsprof_stat::STAT_STEPPED_HITS),
        };
        Programs {
            skel,
            probe_cost,
            calibration_hits,
            links: Vec::new(),
            trap_sampler: Vec::new(),
            trap_sampling: TrapSampling::new(),
        }
    }

    /// Starts following the processes that start (fork, exec) and the CPU of the targets' threads that exit:
    /// before the targets are looked at, so that none of their new processes is missed.
    pub fn follow_processes(&mut self) -> Result<()> {
        let p = &self.skel.progs;
        attach_tracepoints(
            &mut self.links,
            [
                (&p.on_task_newtask, "task", "task_newtask"),
                (&p.on_process_exec, "sched", "sched_process_exec"),
                (&p.on_process_exit, "sched", "sched_process_exit"),
                (&p.on_mmap_exit, "syscalls", "sys_exit_mmap"),
            ],
        )
    }

    /// Starts what runs for the whole recording: the on-CPU clocks (sched_switch), the connection counter
    /// (accept and connect), and the CPU sampler on every online CPU.
    pub fn start_sampling(&mut self, freq_hz: u64) -> Result<()> {
        self.meter_cpu_and_connections()?;
        for cpu in online_cpus()? {
            let samplers = [
                (&self.skel.progs.on_cpu_sample, freq_hz, false, "CPU sampler"),
                (&self.skel.progs.on_trap_sample, TRAP_SAMPLE_HZ, true, "trap sampler"),
            ];
            for (prog, freq, trap_sampler, name) in samplers {
                let fd = open_cpu_clock(cpu, freq, !trap_sampler)?;
                let link = prog
                    .attach_perf_event(fd.as_raw_fd())
                    .with_context(|| format!("attach the {name} on CPU {cpu}"))?;
                // The link closes the perf event when it is destroyed.
                let fd = fd.into_raw_fd();
                if trap_sampler {
                    self.trap_sampler.push(fd);
                }
                self.links.push(link);
            }
        }
        Ok(())
    }

    /// The on-CPU clocks (sched_switch) and the connection counter (accept and connect).
    pub fn meter_cpu_and_connections(&mut self) -> Result<()> {
        let p = &self.skel.progs;
        attach_tracepoints(
            &mut self.links,
            [
                (&p.on_sched_switch, "sched", "sched_switch"),
                (&p.on_accept4_exit, "syscalls", "sys_exit_accept4"),
                (&p.on_accept_exit, "syscalls", "sys_exit_accept"),
                (&p.on_connect_enter, "syscalls", "sys_enter_connect"),
                (&p.on_connect_exit, "syscalls", "sys_exit_connect"),
            ],
        )
    }

    /// At each poll once the ring buffers are drained, and as the stage probes detach (`live` false) or
    /// attach: runs the trap sampler or stops it, as record/duty/traps.rs says. `probed_cpu_ms`: the targets' CPU
    /// while probed so far.
    pub fn step_trap_sampler(&mut self, live: bool, probed_cpu_ms: f64) -> Result<()> {
        let (was_on, hits) = (self.trap_sampling.on(), self.target_probe_hits());
        let on = self.trap_sampling.step(live, probed_cpu_ms, hits, &self.probe_cost);
        if on == was_on {
            return Ok(());
        }
        let request = if on {
            PERF_EVENT_IOC_ENABLE
        } else {
            PERF_EVENT_IOC_DISABLE
        };
        for &fd in &self.trap_sampler {
            // SAFETY: fd is a perf event that its link keeps open for as long as self lives.
            if unsafe { libc::ioctl(fd, request, 0) } != 0 {
                bail!("switch the trap sampler: {}", std::io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// The targets' samples the trap sampler took (those its ring buffer dropped left out), those `trapped`
    /// of them in the probes' traps, and what it ran over.
    pub fn trap_samples(&self, trapped: u64) -> TrapSamples {
        TrapSamples {
            trapped,
            samples: self
                .stat(tlsprof_stat::STAT_TRAP_SAMPLES)
                .saturating_sub(self.stat(tlsprof_stat::STAT_TRAP_SAMPLE_DROPS)),
            freq_hz: TRAP_SAMPLE_HZ,
            ran: Some(self.trap_sampling.ran),
        }
    }

    /// Whether process pid is a target in the kernel (the targets map), as the programs see it.
    pub fn is_target(&self, pid: u32) -> bool {
        matches!(
            self.skel.maps.targets.lookup(&pid.to_ne_bytes(), MapFlags::ANY),
            Ok(Some(_))
        )
    }

    /// A counter of enum tlsprof_stat, summed over CPUs.
    pub fn stat(&self, stat: tlsprof_stat) -> u64 {
        stat_sum(&self.skel, stat)
    }

    /// Each target's counters so far (target_state).
    pub fn target_counters(&self) -> BTreeMap<u32, TargetCounters> {
        let map = &self.skel.maps.targets;
        map.keys()
            .filter_map(|key| {
                let pid = u32::from_ne_bytes(key.as_slice().try_into().ok()?);
                let value = map.lookup(&key, MapFlags::ANY).ok()??;
                let mut state = target_state::default();
                plain::copy_from_bytes(&mut state, &value).ok()?;
                let runs = |kind: u64| ProgramRuns {
                    runs: state.own_runs[kind as usize],
                    ms: state.own_ns[kind as usize] as f64 / 1e6,
                };
                Some((
                    pid,
                    TargetCounters {
                        connections: state.connections,
                        slices: Slices {
                            wall_ns: state.slices_ns,
                            task_ns: state.slices_task_ns,
                        },
                        own: OwnPrograms {
                            sampler: runs(tlsprof_own::OWN_SAMPLER),
                            scheduler: runs(tlsprof_own::OWN_SCHEDULER),
                            connections: runs(tlsprof_own::OWN_CONNECTIONS),
                            capture: runs(tlsprof_own::OWN_CAPTURE),
                        },
                        exited_cpu_ms: state.exited_cpu_ns as f64 / 1e6,
                    },
                ))
            })
            .collect()
    }

    /// Probe hits on the targets (the calibration's own are not theirs).
    pub fn target_probe_hits(&self) -> Hits {
        Hits {
            all: self.stat(tlsprof_stat::STAT_PROBE_HITS) - self.calibration_hits.all,
            stepped: self.stat(tlsprof_stat::STAT_STEPPED_HITS) - self.calibration_hits.stepped,
        }
    }

    /// What the probes have cost processes that are not targets so far (their hits of probes placed in every
    /// process, at the calibrated cost of a hit): the --max-overhead budget counts it with the targets'.
    pub fn other_process_ms(&self) -> f64 {
        self.probe_cost.calibrated_ms(Hits {
            all: self.stat(tlsprof_stat::STAT_OTHER_HITS),
            stepped: 0,
        })
    }

    /// What the probes have cost the targets so far, in ms of their CPU (`probed_cpu_ms` of it while probed).
    pub fn target_probe_ms(&self, traps: Option<TrapSamples>, probed_cpu_ms: f64) -> f64 {
        self.probe_cost
            .overhead_ms(self.target_probe_hits(), traps, probed_cpu_ms)
    }

    /// Attaches the programs that read hellos and follow handshakes on the wire in socket writes and reads;
    /// dropping the links detaches them. send and recv (sendto, recvfrom: Rust's sockets use them) take the
    /// buffer where write and read do; writev, readv, sendmsg and recvmsg an iovec array (Java NIO, Envoy);
    /// sendmmsg and recvmmsg a batch of datagrams (QUIC servers).
    pub fn attach_hello_capture(&mut self) -> Result<Vec<Link>> {
        // Reads begun while the programs were detached are stale at their exit.
        let bss = self.skel.maps.bss_data.as_deref_mut().context("BPF .bss")?;
        // SAFETY: an aligned u32 in the BPF map's shared mapping, which only user space writes.
        unsafe { std::ptr::write_volatile(&mut bss.capture_gen, bss.capture_gen.wrapping_add(1)) };
        let p = &self.skel.progs;
        [
            (&p.on_write, "sys_enter_write"),
            (&p.on_write, "sys_enter_sendto"),
            (&p.on_writev, "sys_enter_writev"),
            (&p.on_sendmsg, "sys_enter_sendmsg"),
            (&p.on_read_enter, "sys_enter_read"),
            (&p.on_recvfrom_enter, "sys_enter_recvfrom"),
            (&p.on_readv_enter, "sys_enter_readv"),
            (&p.on_recvmsg_enter, "sys_enter_recvmsg"),
            (&p.on_read_exit, "sys_exit_read"),
            (&p.on_read_exit, "sys_exit_recvfrom"),
            (&p.on_read_exit, "sys_exit_readv"),
            (&p.on_read_exit, "sys_exit_recvmsg"),
            (&p.on_recvmmsg_enter, "sys_enter_recvmmsg"),
            (&p.on_read_exit, "sys_exit_recvmmsg"),
            (&p.on_sendmmsg, "sys_enter_sendmmsg"),
            (&p.on_close, "sys_enter_close"),
        ]
        .into_iter()
        .map(|(prog, tp)| {
            prog.attach_tracepoint(libbpf_rs::TracepointCategory::Custom("syscalls".into()), tp)
                .with_context(|| format!("attach tracepoint syscalls:{tp}"))
        })
        .collect()
    }
}

impl Drop for Programs<'_> {
    fn drop(&mut self) {
        super::detach(std::mem::take(&mut self.links));
    }
}

fn stat_sum(skel: &TlsprofSkel, stat: tlsprof_stat) -> u64 {
    let key = stat.0.to_ne_bytes();
    match skel.maps.stats.lookup_percpu(&key, MapFlags::ANY) {
        Ok(Some(per_cpu)) => per_cpu
            .iter()
            .map(|v| v.get(..8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_ne_bytes))
            .sum(),
        _ => 0,
    }
}

/// Attaches each program to its tracepoint (category, name), keeping the links.
fn attach_tracepoints<const N: usize>(
    links: &mut Vec<libbpf_rs::Link>,
    programs: [(&libbpf_rs::ProgramMut<'_>, &str, &str); N],
) -> Result<()> {
    for (prog, category, tp) in programs {
        let link = prog
            .attach_tracepoint(libbpf_rs::TracepointCategory::Custom(category.into()), tp)
            .with_context(|| format!("attach tracepoint {category}:{tp}"))?;
        links.push(link);
    }
    Ok(())
}

pub(super) fn online_cpus() -> Result<Vec<i32>> {
    let text = fs::read_to_string("/sys/devices/system/cpu/online").context("read online CPUs")?;
    parse_cpu_list(&text).context("parse /sys/devices/system/cpu/online")
}

fn parse_cpu_list(text: &str) -> Option<Vec<i32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<i32>().ok()?..=b.parse::<i32>().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// A cpu-clock software event on one CPU: works without a hardware PMU (virtual machines).
pub(super) fn open_cpu_clock(cpu: i32, freq_hz: u64, enabled: bool) -> Result<OwnedFd> {
    use libbpf_rs::libbpf_sys as sys;
    // SAFETY: perf_event_attr is a plain C struct; all-zero is its documented default.
    let mut attr: sys::perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = sys::PERF_TYPE_SOFTWARE;
    attr.size = std::mem::size_of::<sys::perf_event_attr>() as u32;
    attr.config = u64::from(sys::PERF_COUNT_SW_CPU_CLOCK);
    attr.__bindgen_anon_1.sample_freq = freq_hz;
    attr.set_freq(1);
    attr.set_disabled(u64::from(!enabled));
    // SAFETY: attr is valid for the duration of the call; pid -1 with a cpu means all processes on it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const _,
            -1,
            cpu,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        bail!(
            "opening the cpu-clock sampler on CPU {cpu} failed ({}): check kernel.perf_event_paranoid and run as root",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: fd is a freshly opened descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("0,2-4,7"), Some(vec![0, 2, 3, 4, 7]));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn stack_ring_holds_half_a_second_of_full_samples() {
        // 2 CPUs × 99 Hz × ~66 KiB × 0.5 s ≈ 6.5 MiB.
        assert_eq!(stack_ring_bytes(2, 99, 65536), 8 << 20);
        assert_eq!(stack_ring_bytes(1, 1, 4096), 1 << 20);
        assert_eq!(stack_ring_bytes(512, 999, 65536), 64 << 20);
    }
}
