// SPDX-License-Identifier: Apache-2.0
//! What the kernel and our privileges must provide before anything loads, each failure one actionable line:
//! `preflight` stops at the first, `tlsprof check` reports them all, from the same functions.

use std::fs;
use std::io;
use std::path::Path;

use anyhow::{bail, Result};

pub const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";
pub const UPROBE_PMU: &str = "/sys/bus/event_source/devices/uprobe/type";
pub const TRACEFS: &str = "/sys/kernel/tracing";
pub const SECURITYFS: &str = "/sys/kernel/security";
pub const LOCKDOWN: &str = "/sys/kernel/security/lockdown";

pub const NO_PRIVILEGE: &str = "tlsprof needs root (or CAP_BPF, CAP_PERFMON and CAP_CHECKPOINT_RESTORE) to load BPF \
                                programs and open its targets' files: run it with sudo";
pub const NO_BTF: &str = "this kernel has no BTF (/sys/kernel/btf/vmlinux is missing), which the BPF programs are \
                          built against: tlsprof needs a kernel built with CONFIG_DEBUG_INFO_BTF";
pub const NO_UPROBES: &str = "this kernel has no uprobe support (/sys/bus/event_source/devices/uprobe/type is \
                              missing): tlsprof needs a kernel built with CONFIG_UPROBE_EVENTS";
pub const CONFIDENTIALITY: &str = "the kernel is locked down for confidentiality, which denies BPF programs \
                                   bpf_probe_read_kernel (tlsprof's read kernel structures with it) and denies \
                                   tracefs: boot it without lockdown=confidentiality";

pub fn preflight() -> Result<()> {
    if !Capabilities::current().records() {
        bail!(NO_PRIVILEGE);
    }
    if !kernel_btf() {
        bail!(NO_BTF);
    }
    if !uprobe_pmu() {
        bail!(NO_UPROBES);
    }
    if lockdown().ok() == Some(Lockdown::Confidentiality) {
        bail!(CONFIDENTIALITY);
    }
    if tracefs() == Tracefs::NotMounted {
        mount_tracefs()?;
    }
    Ok(())
}

/// The capabilities recording uses, by number (linux/capability.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cap {
    SysPtrace = 19,
    SysAdmin = 21,
    Perfmon = 38,
    Bpf = 39,
    CheckpointRestore = 40,
}

impl Cap {
    pub const ALL: [Cap; 5] = [
        Cap::SysAdmin,
        Cap::Bpf,
        Cap::Perfmon,
        Cap::CheckpointRestore,
        Cap::SysPtrace,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Cap::SysPtrace => "CAP_SYS_PTRACE",
            Cap::SysAdmin => "CAP_SYS_ADMIN",
            Cap::Perfmon => "CAP_PERFMON",
            Cap::Bpf => "CAP_BPF",
            Cap::CheckpointRestore => "CAP_CHECKPOINT_RESTORE",
        }
    }
}

/// An effective capability set (CapEff of /proc/PID/status).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities(pub u64);

impl Capabilities {
    /// This process's; none when /proc/self/status cannot be read.
    pub fn current() -> Capabilities {
        fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| Capabilities::parse(&status))
            .unwrap_or_default()
    }

    /// The CapEff line of a /proc/PID/status.
    pub fn parse(status: &str) -> Option<Capabilities> {
        status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .map(Capabilities)
    }

    pub fn has(self, cap: Cap) -> bool {
        self.0 & (1 << cap as u32) != 0
    }

    /// Loading tracing and perf-event programs, and opening perf events on every CPU.
    pub fn loads_bpf(self) -> bool {
        self.has(Cap::SysAdmin) || (self.has(Cap::Bpf) && self.has(Cap::Perfmon))
    }

    /// Opening the files a process maps through /proc/PID/map_files, as the stage probes are attached: the
    /// kernel asks it for any process, tlsprof's own included.
    pub fn opens_map_files(self) -> bool {
        self.has(Cap::SysAdmin) || self.has(Cap::CheckpointRestore)
    }

    /// What recording cannot start without.
    pub fn records(self) -> bool {
        self.loads_bpf() && self.opens_map_files()
    }

    /// Reading the maps of other users' processes, and of those that are not dumpable (a server's workers
    /// that changed user), which is ptrace's read access.
    pub fn reads_any_process(self) -> bool {
        self.has(Cap::SysPtrace)
    }

    /// The ones of `Cap::ALL` held.
    pub fn held(self) -> Vec<Cap> {
        Cap::ALL.into_iter().filter(|&c| self.has(c)).collect()
    }
}

pub fn kernel_btf() -> bool {
    Path::new(KERNEL_BTF).exists()
}

pub fn uprobe_pmu() -> bool {
    Path::new(UPROBE_PMU).exists()
}

/// Whether tracefs, where classic tracepoints are found, is mounted where libbpf looks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracefs {
    Mounted,
    NotMounted,
    /// Mounted, but not for this user to read (it is root's).
    Unreadable,
}

pub fn tracefs() -> Tracefs {
    match fs::metadata(Path::new(TRACEFS).join("events")) {
        Ok(_) => Tracefs::Mounted,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Tracefs::Unreadable,
        Err(_) => Tracefs::NotMounted,
    }
}

/// Some systems do not mount tracefs: recording mounts it.
pub fn mount_tracefs() -> Result<()> {
    if let Err(e) = mount("tracefs", TRACEFS) {
        bail!("tracefs is not mounted and mounting it at {TRACEFS} failed ({e}): run `mount -t tracefs tracefs {TRACEFS}`");
    }
    Ok(())
}

/// securityfs, where the lockdown mode is read.
pub fn mount_securityfs() -> io::Result<()> {
    mount("securityfs", SECURITYFS)
}

fn mount(fstype: &str, target: &str) -> io::Result<()> {
    let target = std::ffi::CString::new(target).expect("no NUL");
    let fstype = std::ffi::CString::new(fstype).expect("no NUL");
    // SAFETY: all pointers are valid NUL-terminated strings; data may be NULL.
    let rc = unsafe { libc::mount(fstype.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Gives this process a mount namespace of its own whose mounts do not reach the machine's: what `check`
/// mounts there (as recording would) goes away with it. The kernel grants it only while the process has one
/// thread.
pub fn private_mounts() -> io::Result<()> {
    // SAFETY: unshare and mount take no pointers but NUL-terminated strings and NULLs.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(io::Error::last_os_error());
        }
        // A namespace's copies of shared mounts stay peers of the originals until made private.
        let root = c"/";
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The kernel's lockdown mode (kernel_lockdown(7)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lockdown {
    None,
    /// Denies what could change the running kernel: of what BPF programs do, bpf_probe_write_user, which
    /// tlsprof does not use.
    Integrity,
    /// Also denies what could read kernel memory: bpf_probe_read_kernel, tracefs.
    Confidentiality,
}

/// Why the lockdown mode is not known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockdownUnread {
    /// securityfs is mounted without a lockdown file: the kernel has no lockdown LSM.
    NoLsm,
    /// securityfs is not mounted.
    NoSecurityfs,
    /// The file does not read as kernel_lockdown(7) says.
    Unparsed,
}

pub fn lockdown() -> Result<Lockdown, LockdownUnread> {
    match fs::read_to_string(LOCKDOWN) {
        Ok(text) => parse_lockdown(&text).ok_or(LockdownUnread::Unparsed),
        Err(_) if securityfs_mounted() => Err(LockdownUnread::NoLsm),
        Err(_) => Err(LockdownUnread::NoSecurityfs),
    }
}

/// The mode in brackets: "none [integrity] confidentiality".
pub fn parse_lockdown(text: &str) -> Option<Lockdown> {
    let (_, rest) = text.split_once('[')?;
    let (mode, _) = rest.split_once(']')?;
    match mode {
        "none" => Some(Lockdown::None),
        "integrity" => Some(Lockdown::Integrity),
        "confidentiality" => Some(Lockdown::Confidentiality),
        _ => None,
    }
}

fn securityfs_mounted() -> bool {
    fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(SECURITYFS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_eff_of_root_nobody_and_a_service() {
        let status = |eff: &str| {
            format!("Name:\ttlsprof\nCapInh:\t0000000000000000\nCapEff:\t{eff}\nCapBnd:\t000001ffffffffff\n")
        };
        let root = Capabilities::parse(&status("000001ffffffffff")).unwrap();
        assert!(root.records() && root.reads_any_process());
        assert_eq!(root.held(), Cap::ALL.to_vec());

        let nobody = Capabilities::parse(&status("0000000000000000")).unwrap();
        assert!(!nobody.loads_bpf() && !nobody.opens_map_files() && nobody.held().is_empty());

        // CAP_BPF and CAP_PERFMON load the programs; the targets' files need CAP_CHECKPOINT_RESTORE too.
        let service = Capabilities::parse(&status("000000c000000000")).unwrap();
        assert!(service.loads_bpf() && !service.opens_map_files() && !service.records());
        let with_files = Capabilities::parse(&status("000001c000000000")).unwrap();
        assert!(with_files.records() && !with_files.reads_any_process());
        assert_eq!(with_files.held(), [Cap::Bpf, Cap::Perfmon, Cap::CheckpointRestore]);
    }

    #[test]
    fn cap_eff_missing_or_garbled() {
        assert_eq!(Capabilities::parse("Name:\tx\nCapPrm:\t1\n"), None);
        assert_eq!(Capabilities::parse("CapEff:\tnot-hex\n"), None);
    }

    #[test]
    fn lockdown_modes() {
        assert_eq!(
            parse_lockdown("[none] integrity confidentiality\n"),
            Some(Lockdown::None)
        );
        assert_eq!(
            parse_lockdown("none [integrity] confidentiality\n"),
            Some(Lockdown::Integrity)
        );
        assert_eq!(
            parse_lockdown("none integrity [confidentiality]\n"),
            Some(Lockdown::Confidentiality)
        );
        assert_eq!(parse_lockdown("none integrity confidentiality\n"), None);
        assert_eq!(parse_lockdown("[paranoid]"), None);
        assert_eq!(parse_lockdown(""), None);
    }
}
