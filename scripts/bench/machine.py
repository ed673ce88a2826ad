# SPDX-License-Identifier: Apache-2.0
"""Facts about the machine and the tools, read at the start of a run."""

import datetime
import os
import shutil

from .common import CLK_TCK, REPO
from .processes import first_line

def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def facts(tlsprof):
    debian = open("/etc/debian_version").read().strip() if os.path.exists("/etc/debian_version") else "?"
    commit = first_line(["git", "-C", REPO, "describe", "--always", "--dirty"])
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "kernel": os.uname().release,
        "os": f"Debian {debian}",
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "clk_tck": CLK_TCK,
        "openssl": first_line(["openssl", "version"]),
        "nginx": first_line(["/usr/sbin/nginx", "-v"]),
        "wrk": first_line(["wrk", "-v"]).split(" Copyright")[0],
        "bpftrace": first_line(["bpftrace", "--version"]) if shutil.which("bpftrace") else "absent",
        "perf": first_line(["perf", "--version"]) if shutil.which("perf") else "absent",
        "tlsprof": f"{first_line([tlsprof, '--version'])} (git {commit})",
    }
