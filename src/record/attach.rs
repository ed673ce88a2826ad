// SPDX-License-Identifier: Apache-2.0
//! Loading the BPF programs and attaching them: uprobes on catalogue functions, sched_switch, the CPU sampler.

use std::collections::HashMap;
use std::fs;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject, UprobeMultiOpts};

use super::bpf::types::{tlsprof_call_graph, tlsprof_stat};
use super::bpf::{TlsprofSkel, TlsprofSkelBuilder};
use super::calibrate;
use super::objects::{self, TlsObject};
use super::targets::{self, Mapping, Process};
use crate::catalogue;
use crate::model::{CallGraph, Flavor, Function, Library};
use crate::model::{Hits, ProbeCost};

/// From linux/perf_event.h; the libc crate does not carry it.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const UPROBE_PMU: &str = "/sys/bus/event_source/devices/uprobe/type";
const TRACEFS: &str = "/sys/kernel/tracing";

/// When the socket calls that carry ServerHellos are watched: their tracepoints run on every read and write
/// of every process while attached, so by default only in short windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelloCapture {
    /// 1 s in every 10 s: the handshake mix is sampled from the connections made in those windows.
    Sampled,
    /// All the time: every handshake's version, cipher and group, for a little CPU on every socket call.
    Always,
    /// Never: version, cipher suite and group stay unknown.
    Off,
}

pub struct AttachOptions {
    pub hello_capture: HelloCapture,
    pub freq_hz: u64,
    pub all_probes: bool,
    pub call_graph: CallGraph,
    pub stack_bytes: u32,
    pub kernel_stacks: bool,
}

impl AttachOptions {
    pub fn call_graph_id(&self) -> tlsprof_call_graph {
        match self.call_graph {
            CallGraph::Dwarf => tlsprof_call_graph::CALL_GRAPH_DWARF,
            CallGraph::Fp => tlsprof_call_graph::CALL_GRAPH_FP,
        }
    }
}

/// Everything attached; dropping it detaches.
pub struct Attached<'obj> {
    pub skel: TlsprofSkel<'obj>,
    pub targets: TargetSet,
    pub probe_cost: ProbeCost,
    /// Probe hits of the calibration, before any target was probed.
    pub calibration_hits: Hits,
    /// The sched_switch tracepoint and the CPU samplers.
    _links: Vec<Link>,
}

/// The processes probed so far, what was found in them, and their probes. Processes can join while recording.
#[derive(Default)]
pub struct TargetSet {
    pub libraries: Vec<Library>,
    pub functions: Vec<Function>,
    /// Each target's file mappings at attach time, to unwind and symbolize samples after it exits.
    pub maps: HashMap<u32, Vec<Mapping>>,
    pub probes: usize,
    /// Files already inspected, by (device, inode): nginx's master and workers share them.
    inspected: HashMap<(String, u64), Option<TlsObject>>,
    /// What to attach in each (process, file), kept to attach again after a pause (--max-overhead).
    specs: Vec<ProbeSpec>,
    /// The stage probes' links: empty while they are paused.
    links: Vec<Link>,
    paused: bool,
}

/// The uprobes of one file in one process.
struct ProbeSpec {
    process: Process,
    path: String,
    open_path: std::path::PathBuf,
    entry: Probes,
    ret: Probes,
}

/// Checks what the kernel and our privileges must provide, with one actionable line for each failure.
pub fn preflight() -> Result<()> {
    if !has_bpf_privilege() {
        bail!("tlsprof needs root (or CAP_BPF and CAP_PERFMON) to load BPF programs: run it with sudo");
    }
    if !Path::new(UPROBE_PMU).exists() {
        bail!("this kernel has no uprobe support ({UPROBE_PMU} is missing): tlsprof needs a kernel built with CONFIG_UPROBE_EVENTS");
    }
    if !Path::new(TRACEFS).join("events").exists() {
        mount_tracefs()?;
    }
    Ok(())
}

fn has_bpf_privilege() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let Ok(status) = fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let Some(eff) = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    else {
        return false;
    };
    let has = |cap: u32| eff & (1 << cap) != 0;
    has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))
}

/// Classic tracepoints are found through tracefs, which some systems do not mount.
fn mount_tracefs() -> Result<()> {
    let target = std::ffi::CString::new(TRACEFS).expect("no NUL");
    let fstype = std::ffi::CString::new("tracefs").expect("no NUL");
    // SAFETY: all pointers are valid NUL-terminated strings; data may be NULL.
    let rc = unsafe { libc::mount(fstype.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        bail!(
            "tracefs is not mounted and mounting it at {TRACEFS} failed ({}): run `mount -t tracefs tracefs {TRACEFS}`",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// The stack ring buffer holds this long of samples at the highest rate (every CPU sampling a target, every
/// stack copy full size): a few polls' worth. Its pages stay resident, so it is no larger than that.
const STACK_RING_SECONDS: f64 = 0.5;

fn stack_ring_bytes(cpus: usize, freq_hz: u64, stack_bytes: u32) -> u32 {
    // Each record: an 8-byte ring-buffer header, the sample's fixed part, the stack bytes.
    let record = 8.0 + super::samples::HEADER_LEN as f64 + f64::from(stack_bytes);
    let bytes = cpus as f64 * freq_hz as f64 * record * STACK_RING_SECONDS;
    // The kernel wants a power of two, page-aligned.
    (bytes as u32).clamp(1 << 20, 64 << 20).next_power_of_two()
}

/// Loads the BPF programs, then attaches probes to every TLS function of every target.
pub fn attach<'obj>(
    open_object: &'obj mut MaybeUninit<OpenObject>,
    procs: &[Process],
    opts: &AttachOptions,
) -> Result<Attached<'obj>> {
    let mut open = TlsprofSkelBuilder::default()
        .open(open_object)
        .context("open the BPF object")?;
    let rodata = open.maps.rodata_data.as_deref_mut().context("BPF read-only data")?;
    rodata.stack_bytes = opts.stack_bytes;
    rodata.call_graph = opts.call_graph_id().0;
    rodata.kernel_stacks = u32::from(opts.kernel_stacks);
    let cpus = libbpf_rs::num_possible_cpus().context("count possible CPUs")? as u32;
    open.maps
        .sample_scratch
        .set_max_entries(cpus)
        .context("size the sample scratch map")?;
    open.maps
        .stacks
        .set_max_entries(stack_ring_bytes(online_cpus()?.len(), opts.freq_hz, opts.stack_bytes))
        .context("size the stack ring buffer")?;
    let skel = open
        .load()
        .map_err(|e| anyhow!("loading the BPF programs failed ({e}): tlsprof needs Linux 6.6 or later with BTF"))?;

    let probe_cost = calibrate::measure(&skel)?;
    let calibration_hits = Hits {
        all: stat_sum(&skel, tlsprof_stat::STAT_PROBE_HITS),
        stepped: stat_sum(&skel, tlsprof_stat::STAT_STEPPED_HITS),
    };
    let mut targets = TargetSet::default();
    let mut without_tls = Vec::new();
    for p in procs {
        if !targets.add(&skel, p, opts)? {
            without_tls.push(p);
        }
    }
    if targets.maps.is_empty() {
        let p = without_tls.first().expect("at least one target");
        bail!(
            "process {} ({}) has no OpenSSL code (no libssl/libcrypto mapped, none linked in): profile the process that terminates TLS",
            p.pid,
            p.comm
        );
    }
    for p in without_tls {
        eprintln!("tlsprof: skipping process {} ({}): no OpenSSL code", p.pid, p.comm);
    }
    let mut att = Attached {
        skel,
        targets,
        probe_cost,
        calibration_hits,
        _links: Vec::new(),
    };

    let tp = att
        .skel
        .progs
        .on_sched_switch
        .attach_tracepoint(libbpf_rs::TracepointCategory::Custom("sched".into()), "sched_switch")
        .context("attach tracepoint sched:sched_switch")?;
    att._links.push(tp);
    for cpu in online_cpus()? {
        let fd = open_cpu_clock(cpu, opts.freq_hz)?;
        let link = att
            .skel
            .progs
            .on_cpu_sample
            .attach_perf_event(fd.as_raw_fd())
            .with_context(|| format!("attach the CPU sampler on CPU {cpu}"))?;
        // The link closes the perf event when it is destroyed.
        let _ = fd.into_raw_fd();
        att._links.push(link);
    }
    Ok(att)
}

impl TargetSet {
    /// Probes every TLS function of one process. Ok(false) when it runs no OpenSSL code.
    pub fn add(&mut self, skel: &TlsprofSkel, p: &Process, opts: &AttachOptions) -> Result<bool> {
        let maps = p.maps()?;
        let exe = targets::exe_inode(p.pid);
        let mut found_any = false;
        for m in targets::candidate_objects(&maps, exe) {
            let key = (m.dev.clone(), m.inode);
            if !self.inspected.contains_key(&key) {
                let obj = objects::inspect(&m.open_path(p.pid), Some(m.inode) == exe)?;
                self.inspected.insert(key.clone(), obj);
            }
            let Some(obj) = self.inspected[&key].clone() else {
                continue;
            };
            found_any |= obj.flavor != Flavor::App;
            self.attach_object(skel, p, &m, &obj, opts)?;
        }
        if found_any {
            skel.maps
                .targets
                .update(&p.pid.to_ne_bytes(), &[1], MapFlags::ANY)
                .context("add target")?;
            self.maps.insert(p.pid, maps);
            fill_library_versions(&mut self.libraries);
        }
        Ok(found_any)
    }

    fn attach_object(
        &mut self,
        skel: &TlsprofSkel,
        p: &Process,
        m: &Mapping,
        obj: &TlsObject,
        opts: &AttachOptions,
    ) -> Result<()> {
        let path = m.display_path().to_string();
        let lib = match self.libraries.iter().position(|l| l.path == path) {
            Some(i) => i,
            None => {
                self.libraries.push(Library {
                    path: path.clone(),
                    flavor: obj.flavor,
                    version: obj.version.clone(),
                    symbols: obj.symbols,
                    functions_found: obj.functions.len(),
                    pids: Vec::new(),
                });
                self.libraries.len() - 1
            }
        };
        self.libraries[lib].pids.push(p.pid);

        let (mut entry, mut ret) = (Probes::default(), Probes::default());
        for f in obj.functions.iter().filter(|f| opts.all_probes || !f.row.frequent) {
            let id = match self
                .functions
                .iter()
                .position(|x| x.library == lib && x.name == f.row.symbol)
            {
                Some(i) => i,
                None => {
                    self.functions.push(Function {
                        name: f.row.symbol.into(),
                        library: lib,
                        stage: f.row.stage,
                    });
                    self.functions.len() - 1
                }
            };
            let id = u16::try_from(id).context("too many functions")?;
            let cookie = catalogue::cookie(id, f.row, f.stepped);
            entry.push(f.file_offset, cookie);
            if f.row.stage.is_some() {
                ret.push(f.file_offset, cookie);
            }
        }
        self.probes += entry.offsets.len() + ret.offsets.len();
        let spec = ProbeSpec {
            process: p.clone(),
            path,
            open_path: m.open_path(p.pid),
            entry,
            ret,
        };
        if !self.paused {
            self.links.extend(spec.attach(skel)?);
        }
        self.specs.push(spec);
        Ok(())
    }

    /// Detaches the stage probes (not the sampler): a pause of the --max-overhead duty cycle.
    pub fn pause(&mut self) {
        self.links.clear();
        self.paused = true;
    }

    /// Attaches the stage probes again in every process still running. The caller bumps the BPF side's
    /// probe_epoch first, so state left by the last window is dropped.
    pub fn resume(&mut self, skel: &TlsprofSkel) -> Result<()> {
        self.specs.retain(|s| s.process.alive());
        for spec in &self.specs {
            match spec.attach(skel) {
                Ok(links) => self.links.extend(links),
                // It exited since the check above.
                Err(_) if !spec.process.alive() => {}
                Err(e) => return Err(e),
            }
        }
        self.paused = false;
        Ok(())
    }
}

impl ProbeSpec {
    fn attach(&self, skel: &TlsprofSkel) -> Result<Vec<Link>> {
        let mut links = Vec::new();
        // Returns first: a call entered between the two attachments would otherwise never see its return.
        for (probes, retprobe) in [(&self.ret, true), (&self.entry, false)] {
            if probes.offsets.is_empty() {
                continue;
            }
            let prog = if retprobe {
                &skel.progs.stage_exit
            } else {
                &skel.progs.stage_enter
            };
            let link = prog
                .attach_uprobe_multi_with_opts(
                    self.process.pid as i32,
                    &self.open_path,
                    "",
                    UprobeMultiOpts {
                        offsets: probes.offsets.clone(),
                        cookies: probes.cookies.clone(),
                        retprobe,
                        ..Default::default()
                    },
                )
                .with_context(|| {
                    format!(
                        "attach {} uprobes in {} of process {}",
                        if retprobe { "return" } else { "entry" },
                        self.path,
                        self.process.pid
                    )
                })?;
            links.push(link);
        }
        Ok(links)
    }
}

#[derive(Default)]
struct Probes {
    offsets: Vec<usize>,
    cookies: Vec<u64>,
}

impl Probes {
    fn push(&mut self, offset: u64, cookie: u64) {
        self.offsets.push(offset as usize);
        self.cookies.push(cookie);
    }
}

/// libssl carries no version string of its own: it is the version of the libcrypto it ships with.
fn fill_library_versions(libs: &mut [Library]) {
    let crypto_version = libs
        .iter()
        .find(|l| l.path.contains("libcrypto"))
        .and_then(|l| l.version.clone());
    for l in libs
        .iter_mut()
        .filter(|l| l.version.is_none() && l.path.contains("libssl"))
    {
        l.version = crypto_version.clone();
    }
}

fn online_cpus() -> Result<Vec<i32>> {
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

impl Attached<'_> {
    /// A counter of enum tlsprof_stat, summed over CPUs.
    pub fn stat(&self, stat: tlsprof_stat) -> u64 {
        stat_sum(&self.skel, stat)
    }

    /// Probe hits on the targets (the calibration's own are not theirs).
    pub fn target_probe_hits(&self) -> Hits {
        Hits {
            all: self.stat(tlsprof_stat::STAT_PROBE_HITS) - self.calibration_hits.all,
            stepped: self.stat(tlsprof_stat::STAT_STEPPED_HITS) - self.calibration_hits.stepped,
        }
    }

    /// What the probes have cost the targets so far, in ms of their CPU.
    pub fn target_probe_ms(&self) -> f64 {
        self.probe_cost.overhead_ms(self.target_probe_hits())
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

/// Attaches the programs that catch ServerHellos in socket writes and reads; dropping the links detaches them.
pub fn attach_hello_capture(skel: &TlsprofSkel) -> Result<Vec<Link>> {
    let p = &skel.progs;
    [
        (&p.on_write, "sys_enter_write"),
        (&p.on_writev, "sys_enter_writev"),
        (&p.on_read_enter, "sys_enter_read"),
        (&p.on_read_exit, "sys_exit_read"),
    ]
    .into_iter()
    .map(|(prog, tp)| {
        prog.attach_tracepoint(libbpf_rs::TracepointCategory::Custom("syscalls".into()), tp)
            .with_context(|| format!("attach tracepoint syscalls:{tp}"))
    })
    .collect()
}

/// A cpu-clock software event on one CPU: works without a hardware PMU (virtual machines).
fn open_cpu_clock(cpu: i32, freq_hz: u64) -> Result<OwnedFd> {
    use libbpf_rs::libbpf_sys as sys;
    // SAFETY: perf_event_attr is a plain C struct; all-zero is its documented default.
    let mut attr: sys::perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = sys::PERF_TYPE_SOFTWARE;
    attr.size = std::mem::size_of::<sys::perf_event_attr>() as u32;
    attr.config = u64::from(sys::PERF_COUNT_SW_CPU_CLOCK);
    attr.__bindgen_anon_1.sample_freq = freq_hz;
    attr.set_freq(1);
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
