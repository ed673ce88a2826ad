// SPDX-License-Identifier: Apache-2.0
//! `tlsprof check`: what this machine and kernel let tlsprof record, item by item, and what each thing missing
//! costs a recording. Each fact comes from the code recording runs (its preflight, loading the programs,
//! attaching them as it does), so the two cannot disagree.

use std::fs;
use std::mem::MaybeUninit;

use libbpf_rs::OpenObject;

use super::bpf::TlsprofSkel;
use super::calibrate;
use super::privileges::{self, Cap, Capabilities, Lockdown, LockdownUnread, Tracefs};
use super::programs::{self, Programs};
use crate::model::ProbeCost;
use crate::record::discovery::targets::Selection;
use crate::record::AttachOptions;

/// How an item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    Ok,
    /// Recording works with less: dearer probes, fewer processes.
    Limited,
    /// Recording cannot work without it.
    Missing,
    /// Not tried: it needs something reported missing, or cannot be read.
    Unknown,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub mark: Mark,
    pub item: &'static str,
    pub found: String,
    /// For a limited or missing item: what it costs tlsprof, and the fix.
    pub cost: Option<String>,
}

pub struct Check {
    /// The kernel's release and the machine.
    pub kernel: String,
    pub findings: Vec<Finding>,
}

impl Check {
    /// The first item recording cannot work without.
    pub fn cannot_record(&self) -> Option<&Finding> {
        self.findings.iter().find(|f| f.mark == Mark::Missing)
    }

    /// The items that leave recording working with less.
    pub fn limits(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.mark == Mark::Limited)
    }
}

fn ok(item: &'static str, found: impl Into<String>) -> Finding {
    Finding {
        mark: Mark::Ok,
        item,
        found: found.into(),
        cost: None,
    }
}

fn limited(item: &'static str, found: impl Into<String>, cost: impl Into<String>) -> Finding {
    Finding {
        mark: Mark::Limited,
        item,
        found: found.into(),
        cost: Some(cost.into()),
    }
}

fn missing(item: &'static str, found: impl Into<String>, cost: impl Into<String>) -> Finding {
    Finding {
        mark: Mark::Missing,
        item,
        found: found.into(),
        cost: Some(cost.into()),
    }
}

fn unknown(item: &'static str, found: impl Into<String>) -> Finding {
    Finding {
        mark: Mark::Unknown,
        item,
        found: found.into(),
        cost: None,
    }
}

/// Checks everything recording needs, loading the programs as `opts` would have them. Call it while the
/// process has one thread: what recording would mount is mounted in a mount namespace of its own.
pub fn this_machine(opts: &AttachOptions) -> Check {
    let caps = Capabilities::current();
    let mut mounts = PrivateMounts(None);
    let btf = privileges::kernel_btf();
    let lockdown = lockdown(caps, &mut mounts);
    let mut findings = vec![
        privilege(caps),
        process_access(caps),
        if btf {
            ok(
                "BTF",
                format!("{}: CO-RE fits the programs to this kernel", privileges::KERNEL_BTF),
            )
        } else {
            missing("BTF", format!("no {}", privileges::KERNEL_BTF), privileges::NO_BTF)
        },
        if privileges::uprobe_pmu() {
            ok("uprobes", "the uprobe PMU is in /sys/bus/event_source/devices")
        } else {
            missing("uprobes", "no uprobe PMU", privileges::NO_UPROBES)
        },
        lockdown.clone(),
        tracefs(caps, &mut mounts),
    ];

    let mut object = MaybeUninit::<OpenObject>::uninit();
    let loaded = if !caps.loads_bpf() {
        Err(unknown(PROGRAMS, "not loaded: needs the privileges above"))
    } else if !btf {
        Err(unknown(PROGRAMS, "not loaded: needs BTF"))
    } else if lockdown.mark == Mark::Missing {
        Err(unknown(PROGRAMS, "not loaded: the lockdown denies them"))
    } else {
        programs::load(&mut object, opts, &Selection::default(), true)
            .map_err(|e| missing(PROGRAMS, "the kernel refuses them", format!("{e:#}")))
    };
    match loaded {
        Ok(skel) => {
            findings.push(ok(PROGRAMS, "loaded: the verifier takes every one on this kernel"));
            // tlsprof's own code is probed through /proc/self/map_files, as the targets' is.
            let probed = caps.opens_map_files().then_some(&skel);
            findings.push(uprobe_multi(probed));
            findings.push(sessions(probed));
            findings.push(uretprobes(probed));
            findings.push(uretprobe_syscall());
            // Nothing is measured here: the programs are only attached, and detached on drop.
            findings.push(tracepoints(&mut Programs::new(skel, ProbeCost::default())));
        }
        Err(not_loaded) => {
            findings.push(not_loaded);
            findings.push(uprobe_multi(None));
            findings.push(sessions(None));
            findings.push(uretprobes(None));
            findings.push(uretprobe_syscall());
            findings.push(unknown(TRACEPOINTS, NOT_ATTACHED));
        }
    }
    findings.push(paranoid(caps));
    findings.push(cpu_sampler(opts.freq_hz));
    Check {
        kernel: format!(
            "Linux {} {}",
            fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim(),
            std::env::consts::ARCH
        ),
        findings,
    }
}

const PROGRAMS: &str = "BPF programs";
const TRACEPOINTS: &str = "tracepoints";
const NOT_ATTACHED: &str = "not attached: needs what is missing above";

fn privilege(caps: Capabilities) -> Finding {
    let held: Vec<&str> = caps
        .held()
        .into_iter()
        .filter(|&c| c != Cap::SysPtrace)
        .map(Cap::name)
        .collect();
    let found = if held.is_empty() {
        format!("none (CapEff {:016x})", caps.0)
    } else {
        held.join(", ")
    };
    if caps.records() {
        ok("privileges", found)
    } else {
        missing("privileges", found, privileges::NO_PRIVILEGE)
    }
}

fn process_access(caps: Capabilities) -> Finding {
    const ITEM: &str = "other processes";
    if caps.reads_any_process() {
        return ok(ITEM, "CAP_SYS_PTRACE: any process's mappings can be read");
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    limited(
        ITEM,
        "no CAP_SYS_PTRACE",
        format!(
            "only dumpable processes of uid {uid} can be profiled (not a server's workers that changed user): \
             run it with sudo"
        ),
    )
}

/// A mount namespace of this process's own, made on first need (privileges::private_mounts).
struct PrivateMounts(Option<Result<(), String>>);

impl PrivateMounts {
    fn enter(&mut self) -> Result<(), String> {
        self.0
            .get_or_insert_with(|| {
                privileges::private_mounts().map_err(|e| format!("no mount namespace of its own: {e}"))
            })
            .clone()
    }
}

fn lockdown(caps: Capabilities, mounts: &mut PrivateMounts) -> Finding {
    const ITEM: &str = "lockdown";
    let mut mode = privileges::lockdown();
    if mode == Err(LockdownUnread::NoSecurityfs) && caps.has(Cap::SysAdmin) && mounts.enter().is_ok() {
        let _ = privileges::mount_securityfs();
        mode = privileges::lockdown();
    }
    match mode {
        Ok(Lockdown::None) => ok(ITEM, "none"),
        Ok(Lockdown::Integrity) => ok(
            ITEM,
            "integrity: denies BPF only bpf_probe_write_user, unused by tlsprof",
        ),
        Ok(Lockdown::Confidentiality) => missing(ITEM, "confidentiality", privileges::CONFIDENTIALITY),
        Err(LockdownUnread::NoLsm) => ok(ITEM, "none: the kernel has no lockdown LSM"),
        Err(LockdownUnread::NoSecurityfs) => unknown(ITEM, "securityfs, where it is read, is not mounted"),
        Err(LockdownUnread::Unparsed) => unknown(ITEM, format!("{} does not parse", privileges::LOCKDOWN)),
    }
}

fn tracefs(caps: Capabilities, mounts: &mut PrivateMounts) -> Finding {
    const ITEM: &str = "tracefs";
    match privileges::tracefs() {
        Tracefs::Mounted => ok(ITEM, format!("mounted at {}", privileges::TRACEFS)),
        Tracefs::Unreadable => missing(
            ITEM,
            format!("mounted at {}, not readable by this user", privileges::TRACEFS),
            "libbpf finds the tracepoints there: run it with sudo",
        ),
        Tracefs::NotMounted if !caps.has(Cap::SysAdmin) => missing(
            ITEM,
            "not mounted",
            "recording mounts it, which needs CAP_SYS_ADMIN: run it with sudo",
        ),
        Tracefs::NotMounted => match mounts
            .enter()
            .and_then(|()| privileges::mount_tracefs().map_err(|e| e.to_string()))
        {
            Ok(()) => ok(
                ITEM,
                format!("not mounted; mountable: recording mounts it at {}", privileges::TRACEFS),
            ),
            Err(e) => missing(ITEM, "not mounted, and it does not mount", e),
        },
    }
}

fn uprobe_multi(skel: Option<&TlsprofSkel>) -> Finding {
    const ITEM: &str = "uprobe_multi links";
    const COST: &str = "every stage probe is a uprobe_multi link: tlsprof needs Linux 6.6 or later";
    match skel {
        Some(skel) => match calibrate::probe_self(&skel.progs.stage_enter, false, false) {
            Ok(_) => ok(ITEM, "one attached to tlsprof's own code, and detached"),
            Err(e) => missing(ITEM, "one does not attach", format!("{e:#}: {COST}")),
        },
        None if programs::kernel_has_attach_type("BPF_TRACE_UPROBE_MULTI") => ok(
            ITEM,
            "named in the kernel's BTF; not attached: needs what is missing above",
        ),
        None => unknown(ITEM, "not attached, and not named in the kernel's BTF"),
    }
}

fn sessions(skel: Option<&TlsprofSkel>) -> Finding {
    const ITEM: &str = "uprobe sessions";
    const COST: &str = "a stage function gets an entry and a return probe, so a call that opens no stage (a length \
                        query) costs two hits, not one";
    if !programs::kernel_has_attach_type("BPF_TRACE_UPROBE_SESSION") {
        return limited(
            ITEM,
            "not in this kernel (not named in its BTF)",
            format!("{COST}: Linux 6.13 has them"),
        );
    }
    if programs::sessions_declined() {
        return limited(
            ITEM,
            format!("declined ({}=0)", programs::SESSIONS_ENV),
            format!("{COST}: unset {}", programs::SESSIONS_ENV),
        );
    }
    match skel {
        Some(skel) => match calibrate::probe_self(&skel.progs.stage_session, false, true) {
            Ok(_) => ok(ITEM, "one attached: a single probe on each stage function"),
            Err(e) => missing(
                ITEM,
                "one does not attach",
                format!(
                    "{e:#}: recording probes stage functions so here: set {}=0",
                    programs::SESSIONS_ENV
                ),
            ),
        },
        None => ok(
            ITEM,
            "named in the kernel's BTF; not attached: needs what is missing above",
        ),
    }
}

fn uretprobes(skel: Option<&TlsprofSkel>) -> Finding {
    const ITEM: &str = "uretprobes";
    match skel {
        Some(skel) => match calibrate::probe_self(&skel.progs.connection_return, true, false) {
            Ok(_) => ok(ITEM, "a return link attached to tlsprof's own code, and detached"),
            Err(e) => missing(
                ITEM,
                "a return link does not attach",
                format!("{e:#}: recording probes the returns of the functions that make connections"),
            ),
        },
        None => unknown(ITEM, NOT_ATTACHED),
    }
}

/// Found by its symbol: calling it outside the return trampoline kills the caller (SIGILL).
fn uretprobe_syscall() -> Finding {
    const ITEM: &str = "uretprobe syscall";
    match fs::read_to_string("/proc/kallsyms") {
        Ok(symbols) if symbols.lines().any(|l| l.ends_with(" __x64_sys_uretprobe")) => {
            ok(ITEM, "in /proc/kallsyms: a return probe's hit is a syscall, not a trap")
        }
        Ok(_) => limited(
            ITEM,
            "not in this kernel",
            "each return probe's hit is a trap (int3), dearer, so --max-overhead keeps the probes attached less \
             of the time: Linux 6.11 on x86-64 has it",
        ),
        Err(e) => unknown(ITEM, format!("/proc/kallsyms does not read: {e}")),
    }
}

/// The tracepoints record attaches, attached the same way.
fn tracepoints(programs: &mut Programs) -> Finding {
    let attached = programs
        .follow_processes()
        .and_then(|()| programs.meter_cpu_and_connections())
        .and_then(|()| programs.attach_hello_capture());
    match attached {
        Ok(hello) => {
            super::detach(hello);
            ok(TRACEPOINTS, "all that recording uses (task, sched, syscalls) attach")
        }
        Err(e) => missing(
            TRACEPOINTS,
            "one does not attach",
            format!("{e:#}: recording needs them all (syscalls' need CONFIG_FTRACE_SYSCALLS)"),
        ),
    }
}

fn paranoid(caps: Capabilities) -> Finding {
    const ITEM: &str = "perf_event_paranoid";
    let Some(level) = fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
    else {
        return unknown(ITEM, "/proc/sys/kernel/perf_event_paranoid does not read");
    };
    if caps.has(Cap::Perfmon) || caps.has(Cap::SysAdmin) {
        ok(ITEM, format!("{level}: CAP_PERFMON overrides it"))
    } else if level <= 0 {
        ok(ITEM, format!("{level}: any user may sample every CPU"))
    } else {
        missing(
            ITEM,
            format!("{level}, without CAP_PERFMON"),
            "sampling every CPU needs CAP_PERFMON, or perf_event_paranoid 0 or less: run it with sudo",
        )
    }
}

/// The sampler's clock opened on every online CPU, as recording opens it.
fn cpu_sampler(freq_hz: u64) -> Finding {
    const ITEM: &str = "CPU sampler";
    let opened = programs::online_cpus().and_then(|cpus| {
        for &cpu in &cpus {
            programs::open_cpu_clock(cpu, freq_hz, false)?;
        }
        Ok(cpus.len())
    });
    match opened {
        Ok(n) => ok(
            ITEM,
            format!("cpu-clock opens on the {n} online CPUs: software, no hardware PMU needed"),
        ),
        Err(e) => missing(ITEM, "does not open", format!("{e:#}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_missing_item_stops_recording_and_limits_do_not() {
        let check = |findings| Check {
            kernel: "Linux 6.6.0 x86_64".into(),
            findings,
        };
        let works = check(vec![
            ok("privileges", "CAP_SYS_ADMIN"),
            limited("uprobe sessions", "not in this kernel", "two hits"),
            unknown("lockdown", "not known"),
        ]);
        assert_eq!(works.cannot_record(), None);
        assert_eq!(works.limits().map(|f| f.item).collect::<Vec<_>>(), ["uprobe sessions"]);

        let stopped = check(vec![
            ok("BTF", "present"),
            missing("privileges", "none", "run it with sudo"),
            unknown(PROGRAMS, "not loaded"),
            missing("CPU sampler", "does not open", "run it with sudo"),
        ]);
        assert_eq!(stopped.cannot_record().map(|f| f.item), Some("privileges"));
    }
}
