# SPDX-License-Identifier: Apache-2.0
"""The kernel's BPF run-time statistics: switched on around the tlsprof runs, read from the tlsprof process's own
program fds (/proc/PID/fdinfo), the programs named through the bpf syscall (stdlib ctypes, no bpftool).

Reading tlsprof's own fds, not every program on the machine by name, keeps another tlsprof (a test running beside
the benchmark) out of the figures.
"""

import ctypes
import os
import platform
import struct

from .common import BenchError

SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"
# The connection counter: the kernel keeps the first 15 characters of a program's name.
COUNTER_PROGRAMS = ("on_accept4_exit", "on_accept_exit", "on_connect_exit")

_BPF_SYSCALL = {"x86_64": 321, "aarch64": 280}
_BPF_PROG_GET_FD_BY_ID = 13
_BPF_OBJ_GET_INFO_BY_FD = 15
# struct bpf_prog_info up to and including name[16] (uapi/linux/bpf.h): the kernel fills what fits.
_INFO_LEN = 80
_NAME_OFFSET = 64

_saved = None
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long


def enable():
    """Switches the statistics on; the value it found is restored by restore(). Idempotent."""
    global _saved
    try:
        with open(SYSCTL) as f:
            before = f.read().strip()
        if _saved is None:
            _saved = before
        with open(SYSCTL, "w") as f:
            f.write("1")
    except OSError as e:
        raise BenchError(f"cannot switch on kernel.bpf_stats_enabled: {e}") from None


def restore():
    """Puts kernel.bpf_stats_enabled back as enable() found it; a no-op when nothing was changed."""
    global _saved
    if _saved is None:
        return
    try:
        with open(SYSCTL, "w") as f:
            f.write(_saved)
    except OSError:
        pass
    _saved = None


def _bpf(cmd, attr):
    nr = _BPF_SYSCALL.get(platform.machine())
    if nr is None:
        raise OSError(f"no bpf syscall number known for {platform.machine()}")
    buf = ctypes.create_string_buffer(attr, len(attr))
    ret = _LIBC.syscall(ctypes.c_long(nr), ctypes.c_int(cmd), buf, ctypes.c_uint(len(attr)))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


def program_name(prog_id):
    """A loaded program's name (as the kernel keeps it), or None if it is gone."""
    try:
        fd = _bpf(_BPF_PROG_GET_FD_BY_ID, struct.pack("=III", prog_id, 0, 0))
    except OSError:
        return None
    try:
        info = ctypes.create_string_buffer(_INFO_LEN)
        _bpf(_BPF_OBJ_GET_INFO_BY_FD, struct.pack("=IIQ", fd, _INFO_LEN, ctypes.addressof(info)))
        return info.raw[_NAME_OFFSET:_NAME_OFFSET + 16].split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _fdinfo(path):
    fields = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    return fields


def process_programs(pid):
    """{prog_id: (run_time_ns, run_cnt)} of the BPF programs process `pid` holds fds of."""
    progs = {}
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return progs
    for fd in fds:
        try:
            if os.readlink(os.path.join(fd_dir, fd)) != "anon_inode:bpf-prog":
                continue
            info = _fdinfo(f"/proc/{pid}/fdinfo/{fd}")
        except OSError:
            continue
        if "prog_id" in info and "run_time_ns" in info:
            progs[int(info["prog_id"])] = (int(info["run_time_ns"]), int(info["run_cnt"]))
    return progs


class Counter:
    """Some of one tlsprof process's programs (by default the connection counter's): found once, then read as often
    as needed."""

    def __init__(self, pid, names=COUNTER_PROGRAMS):
        self.pid = pid
        self.ids = {}
        for prog_id in process_programs(pid):
            name = program_name(prog_id)
            if name in names:
                self.ids.setdefault(name, []).append(prog_id)
        missing = [n for n in names if n not in self.ids]
        if missing:
            raise BenchError(f"tlsprof (pid {pid}) holds no BPF program named {', '.join(missing)}: cannot time "
                             f"them")

    def read(self):
        """{name: {"run_time_ns", "run_cnt"}} now, summed over the programs of that name."""
        progs = process_programs(self.pid)
        out = {}
        for name, ids in self.ids.items():
            got = [progs[i] for i in ids if i in progs]
            if len(got) != len(ids):
                raise BenchError(f"tlsprof (pid {self.pid}) closed its {name} program before it was read")
            out[name] = {"run_time_ns": sum(t for t, _ in got), "run_cnt": sum(c for _, c in got)}
        return out


def delta(before, after):
    """What each program ran between two reads."""
    return {name: {k: after[name][k] - before[name][k] for k in ("run_time_ns", "run_cnt")} for name in after}
