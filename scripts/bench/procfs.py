# SPDX-License-Identifier: Apache-2.0
"""Readers of /proc: the CPU, memory and context switches of a process, and of the whole machine."""

import os


def cpu_ticks(pid):
    """utime + stime of the whole process (all its threads), in clock ticks, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def tasks(pid):
    """The process's threads (an nginx worker has one, a Go server several)."""
    return [int(t) for t in os.listdir(f"/proc/{pid}/task")]


def schedstat_ns(pid):
    """On-CPU ns of the process's live threads, summed: finer than the ticks of stat. A thread that exits takes
    its share with it (Go keeps its threads)."""
    total = 0
    for tid in tasks(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass
    return total


def status_kb(pid, key):
    """A field of /proc/PID/status (VmRSS, VmHWM, ... in kB; or a count), None if the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def memory_sample(pid, t_s, ticks0):
    """A process's VmRSS and VmHWM (MB) and its CPU ticks since `ticks0`, at `t_s`; None if it is gone."""
    rss, hwm = status_kb(pid, "VmRSS"), status_kb(pid, "VmHWM")
    try:
        ticks = cpu_ticks(pid)
    except OSError:
        return None
    if rss is None:
        return None
    return {"t_s": t_s, "rss_mb": rss / 1024.0, "hwm_mb": (hwm or 0) / 1024.0, "cpu_ticks": ticks - ticks0}


def ctx_switches(pid):
    """(voluntary, involuntary) context switches of the process's live threads: each one runs every sched_switch
    program on the machine."""
    vol = invol = 0
    for tid in tasks(pid):
        vol += status_kb(f"{pid}/task/{tid}", "voluntary_ctxt_switches") or 0
        invol += status_kb(f"{pid}/task/{tid}", "nonvoluntary_ctxt_switches") or 0
    return vol, invol


def _cpu_line():
    with open("/proc/stat") as f:
        return [int(v) for v in f.readline().split()[1:]]


def cpu_times():
    """The machine's cpu line of /proc/stat: (steal ticks, all ticks)."""
    vals = _cpu_line()
    return vals[7], sum(vals[:8])


def busy_ticks():
    """Non-idle ticks of the whole machine (all CPUs), from /proc/stat."""
    vals = _cpu_line()
    return sum(vals[:8]) - vals[3] - vals[4]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def children_of(pid):
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        kids.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def mapped_library(pid, name):
    """The path of the first file mapped by pid whose name starts with name + '.so', or None."""
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith(name + ".so"):
                return parts[5].strip()
    return None


def has_perf_event_fd(pid):
    """Whether pid holds a perf_event file descriptor (perf record's events are then open)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[perf_event]":
                return True
        except OSError:
            pass
    return False
