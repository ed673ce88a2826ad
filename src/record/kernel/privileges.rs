// SPDX-License-Identifier: Apache-2.0
//! What the kernel and our privileges must provide before anything loads, each failure one actionable line.

use std::fs;
use std::path::Path;

use anyhow::{bail, Result};

const UPROBE_PMU: &str = "/sys/bus/event_source/devices/uprobe/type";
const TRACEFS: &str = "/sys/kernel/tracing";

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
