# SPDX-License-Identifier: Apache-2.0
"""Facts about the machine and the tools, read at the start of a run: BENCHMARKS.md states none it did not read."""

import datetime
import os
import shutil

from .common import CLK_TCK, REPO
from .processes import first_line, run_text

EVENT_SOURCES = "/sys/bus/event_source/devices"


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def virtualization():
    """What runs us: systemd-detect-virt --vm's answer, or the hypervisor flag of /proc/cpuinfo."""
    if shutil.which("systemd-detect-virt"):
        out = run_text(["systemd-detect-virt", "--vm"], timeout=30)
        name = out.stdout.strip()
        if name:
            return "none (bare metal)" if name == "none" else f"a {name} virtual machine"
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    return "a virtual machine (cpuinfo: hypervisor)" if "hypervisor" in flags else "none found"


def hardware_pmu():
    """The perf event sources in sysfs that count CPU cycles: the hardware PMUs a profiler could sample on."""
    found = []
    try:
        sources = sorted(os.listdir(EVENT_SOURCES))
    except OSError:
        return "unknown: no /sys/bus/event_source"
    for name in sources:
        try:
            events = os.listdir(os.path.join(EVENT_SOURCES, name, "events"))
        except OSError:
            continue
        if {"cpu-cycles", "cycles", "cpu_cycles"} & set(events):
            found.append(name)
    return ", ".join(found) if found else "none found among the perf event sources"


def facts(tlsprof):
    debian = open("/etc/debian_version").read().strip() if os.path.exists("/etc/debian_version") else "?"
    commit = first_line(["git", "-C", REPO, "describe", "--always", "--dirty"])
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "kernel": os.uname().release,
        "os": f"Debian {debian}",
        "virtualization": virtualization(),
        "pmu": hardware_pmu(),
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "clk_tck": CLK_TCK,
        "openssl": first_line(["openssl", "version"]),
        "nginx": first_line(["/usr/sbin/nginx", "-v"]),
        "wrk": first_line(["wrk", "-v"]).split(" Copyright")[0],
        "bpftrace": first_line(["bpftrace", "--version"]) if shutil.which("bpftrace") else "absent",
        "perf": first_line(["perf", "--version"]) if shutil.which("perf") else "absent",
        "tlsprof": f"{first_line([tlsprof, '--version'])} (git {commit})",
    }
