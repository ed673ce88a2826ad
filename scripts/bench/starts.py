# SPDX-License-Identifier: Apache-2.0
"""What following processes as they start costs a machine that starts many: a shell loop of short processes that
run no TLS (`/bin/true`), without tlsprof and with it following by name (--comm) and every process (--all), in
interleaved runs.

The loop's CPU per process started (bash and its children, from wait4), tlsprof's own CPU meanwhile, and the runs
of the programs that follow processes (task_newtask, sched_process_exec and _exit, the mmap exits: from the
kernel's BPF statistics, read from tlsprof's own program fds).
"""

import os
import subprocess
import time

from . import bpfstats
from .common import CLK_TCK, BenchError, log, med
from .fmt import fmed, fnum, fpaired, table
from .processes import Child, LineWatcher
from .procfs import cpu_ticks

CONDITIONS = {
    "none": ("no profiler", None),
    "comm": ("tlsprof --comm curl (no curl runs)", ["--comm", "curl"]),
    "all": ("tlsprof --all", ["--all"]),
}
# The programs that follow processes: the kernel keeps the first 15 characters of a name.
PROGRAMS = ("on_task_newtask", "on_process_exec", "on_process_exit", "on_mmap_exit")
# Starts per run: a full run's loop lasts a few seconds; a smoke run's, a fraction of one.
STARTS = {"full": 5000, "smoke": 500}


def _loop(starts):
    """The shell loop, to completion: (wall s, CPU ms of bash and the processes it started)."""
    child = Child(["bash", "-c", f"for ((i = 0; i < {starts}; i++)); do /bin/true; done"])
    if child.wait(600) != 0:
        child.stop()
        raise BenchError(f"the shell loop failed ({child.status})")
    return child.ended - child.started, child.cpu_ms()


def start_run(bench, rnd, condition, starts):
    """One loop under one condition; its figures go to bench.data["starts"]."""
    label, args = CONDITIONS[condition]
    tlsprof = counter = None
    if args:
        out = os.path.join(bench.scratch, f"starts-r{rnd}-{condition}.tlsprof")
        tlsprof = Child([bench.tlsprof, "record", *args, "--duration", "600", "-o", out],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        watch = LineWatcher(tlsprof.popen.stderr)
        if watch.wait_for(lambda l: "probes live" in l, timeout=60) is None:
            tlsprof.stop(grace=5)
            raise BenchError(f"{label} did not attach: {watch.text().strip()[-200:]}")
        bpfstats.enable()
        counter = bpfstats.Counter(tlsprof.pid, PROGRAMS)
    try:
        time.sleep(0.2)
        k0 = counter.read() if counter else None
        p0 = cpu_ticks(tlsprof.pid) if tlsprof else None
        wall_s, cpu_ms = _loop(starts)
        p1 = cpu_ticks(tlsprof.pid) if tlsprof else None
        k1 = counter.read() if counter else None
    finally:
        if tlsprof:
            tlsprof.stop(grace=60)
            bpfstats.restore()
    programs = bpfstats.delta(k0, k1) if counter else None
    rec = {
        "round": rnd, "condition": condition, "starts": starts, "wall_s": wall_s, "cpu_ms": cpu_ms,
        "starts_per_s": starts / wall_s, "cpu_us_per_start": cpu_ms * 1e3 / starts,
        "tlsprof_us_per_start": (p1 - p0) / CLK_TCK * 1e6 / starts if tlsprof else None,
        "programs": programs,
        "program_ns_per_start": (sum(p["run_time_ns"] for p in programs.values()) / starts) if programs else None,
    }
    bench.data.setdefault("starts", []).append(rec)
    log(f"round {rnd} starts {condition:5}: {rec['starts_per_s']:6.0f} starts/s, {rec['cpu_us_per_start']:7.1f} µs "
        f"CPU per start" + (f", tlsprof {rec['tlsprof_us_per_start']:.1f} µs, programs "
                            f"{rec['program_ns_per_start']:.0f} ns per start" if tlsprof else ""))


def run_round(bench, rnd):
    """Every condition once, in an order rotated by the round."""
    starts = STARTS["smoke" if bench.args.smoke else "full"]
    order = list(CONDITIONS)
    k = (rnd - 1) % len(order)
    for condition in order[k:] + order[:k]:
        start_run(bench, rnd, condition, starts)


def section_values(data):
    """The template's fields of the section, or none when the run measured no starts."""
    runs = data.get("starts") or []
    if not runs:
        return {"starts_measured": False, "starts_table": "", "starts_programs_table": "", "starts_n": 0,
                "starts_note": ""}
    base = {r["round"]: r for r in runs if r["condition"] == "none"}
    rows = []
    for c, (label, _) in CONDITIONS.items():
        rs = [r for r in runs if r["condition"] == c]
        paired = [r["cpu_us_per_start"] / base[r["round"]]["cpu_us_per_start"] - 1
                  for r in rs if c != "none" and r["round"] in base]
        rows.append([label, len(rs), fmed([r["starts_per_s"] for r in rs], 0),
                     fmed([r["cpu_us_per_start"] for r in rs], 1), "–" if c == "none" else fpaired(paired),
                     "–" if c == "none" else fmed([r["tlsprof_us_per_start"] for r in rs], 1),
                     "–" if c == "none" else fmed([r["program_ns_per_start"] for r in rs], 0)])
    starts_table = table(["Condition", "runs", "starts/s", "loop CPU µs per start", "paired vs no profiler",
                          "tlsprof CPU µs per start", "its programs' ns per start"], rows)
    prog_rows = []
    for c, (label, args) in CONDITIONS.items():
        if not args:
            continue
        rs = [r for r in runs if r["condition"] == c and r["programs"]]
        for name in PROGRAMS:
            per = [r["programs"][name]["run_cnt"] / r["starts"] for r in rs if name in r["programs"]]
            ns = [r["programs"][name]["run_time_ns"] / r["programs"][name]["run_cnt"]
                  for r in rs if name in r["programs"] and r["programs"][name]["run_cnt"]]
            prog_rows.append([label, f"`{name}`", fnum(med(per), 2), fnum(med(ns), 0)])
    programs_table = table(["Condition", "Program", "runs per start", "ns per run"], prog_rows)
    note = ""
    if data.get("starts_only"):
        m = data["machine"]
        note = (f" Measured apart from the rest of this file (`scripts/bench.py --starts-only`, {data['settings']['rounds']}"
                f" rounds), {data.get('started', '?')}: {m['cpu']}, kernel {m['kernel']}, {m['tlsprof']}.")
    return {"starts_measured": True, "starts_table": starts_table, "starts_programs_table": programs_table,
            "starts_n": runs[0]["starts"], "starts_note": note}


HEADING = "## Processes that start"
