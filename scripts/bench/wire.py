# SPDX-License-Identifier: Apache-2.0
"""What counting handshakes from the wire costs: the socket programs (tracepoints on write, sendto, writev,
sendmsg, sendmmsg, read, recvfrom, readv, recvmsg, recvmmsg and their exits, close) on one nginx worker, under
keep-alive requests and under full handshakes, without tlsprof, with `--wire-only` (no stage probes, the worker
counted from its sockets), with `--hello-capture always` (the probes and the socket programs throughout) and with
the probes alone and their default sampled hello capture (the reference the always-on socket programs add to),
all in exact mode, one run each per load and round, interleaved.

The worker's CPU per request or handshake (schedstat), its paired ratio against the run without a profiler of the
same load and round, the socket programs' runs and run time (the kernel's BPF statistics, read from tlsprof's own
program fds) and what tlsprof's report says they cost (`own_programs.capture`).
"""

import json
import os
import subprocess
import time

from . import bpfstats
from .common import CLK_TCK, BenchError, log, med
from .fmt import fmed, fnum, fpaired, fpct, table
from .processes import Child, LineWatcher, run_text
from .procfs import busy_ticks, cpu_ticks
from .twins import BENCH_CPUS, Nginx, twin_figures, worker_counters
from .workloads import run_load

# The conditions, in the order of the first round: (label, tlsprof record's options, or None for no profiler).
CONDITIONS = {
    "none": ("no profiler", None),
    "wire": ("tlsprof --wire-only --max-overhead 100", ["--wire-only", "--max-overhead", "100"]),
    "always": ("tlsprof --hello-capture always --max-overhead 100", ["--hello-capture", "always",
                                                                      "--max-overhead", "100"]),
    "probes": ("tlsprof --max-overhead 100 (hello capture sampled)", ["--max-overhead", "100"]),
}
# The loads: (name in the tables, what its CPU is divided by).
LOADS = {"keepalive": ("keep-alive requests", "request"), "full": ("full handshakes", "handshake")}
# The socket programs as the kernel names them (their first 15 characters), each with its full name and the
# tracepoints it is attached to (src/record/kernel/programs.rs, attach_hello_capture).
PROGRAMS = {
    "on_write": ("on_write", "sys_enter_write, sys_enter_sendto"),
    "on_writev": ("on_writev", "sys_enter_writev"),
    "on_sendmsg": ("on_sendmsg", "sys_enter_sendmsg"),
    "on_sendmmsg": ("on_sendmmsg", "sys_enter_sendmmsg"),
    "on_read_enter": ("on_read_enter", "sys_enter_read"),
    "on_recvfrom_ent": ("on_recvfrom_enter", "sys_enter_recvfrom"),
    "on_readv_enter": ("on_readv_enter", "sys_enter_readv"),
    "on_recvmsg_ente": ("on_recvmsg_enter", "sys_enter_recvmsg"),
    "on_recvmmsg_ent": ("on_recvmmsg_enter", "sys_enter_recvmmsg"),
    "on_read_exit": ("on_read_exit", "sys_exit_read, _recvfrom, _readv, _recvmsg, _recvmmsg"),
    "on_close": ("on_close", "sys_enter_close"),
}
# Rounds of a --wire-only-bench run: --rounds, or 2 with --smoke (a pairing needs two to show its spread).
SMOKE_ROUNDS = 2
# What a partial run inserts its section before, when the file has none yet: after the connection counter's.
BEFORE = "## Accuracy"


def rounds(args):
    """The rounds a --wire-only-bench run makes."""
    return SMOKE_ROUNDS if args.smoke else args.rounds


class Target:
    """One throwaway nginx (the twins' configuration: 1 worker, loopback, RSA-2048, TLS 1.3 only, no session cache
    or tickets), its worker on the last CPU the benchmark may use and the benchmark, its clients and tlsprof on the
    others."""

    def __init__(self, scratch):
        self.nginx = Nginx(scratch, "wire")
        self.cpu = None

    def __enter__(self):
        self.nginx.start()
        try:
            if len(BENCH_CPUS) >= 2:
                os.sched_setaffinity(self.nginx.worker, {BENCH_CPUS[-1]})
                os.sched_setaffinity(0, set(BENCH_CPUS[:-1]))
                self.cpu = BENCH_CPUS[-1]
                log(f"nginx wire's worker on CPU {self.cpu}; clients and tlsprof on CPU "
                    f"{','.join(map(str, BENCH_CPUS[:-1]))}")
        except BaseException:
            self.nginx.stop()
            raise
        return self

    def __exit__(self, *_):
        self.nginx.stop()


def _report(tlsprof, recording):
    """What the run keeps of `tlsprof report --json`: the capture programs' statement and the handshakes counted."""
    out = run_text([tlsprof, "report", "--json", recording], timeout=120)
    if out.returncode != 0:
        raise BenchError(f"tlsprof report --json: {out.stderr.strip()[-300:]}")
    r = json.loads(out.stdout)
    h = r.get("handshakes") or {}
    own = r.get("own_programs") or {}
    return {
        "capture": own.get("capture"), "own_programs": own, "own_programs_ms": r.get("own_programs_ms"),
        "handshakes": h.get("total"), "wire_handshakes": (h.get("wire") or {}).get("total"),
        "connections": sum(t.get("connections") or 0 for t in r.get("targets") or []),
        "wire_only_targets": sum(bool(t.get("wire_only")) for t in r.get("targets") or []),
        "probe_hits": r.get("probe_hits"), "process_cpu_ms": r.get("process_cpu_ms"),
        "duration_s": r.get("duration_s"),
    }


def wire_run(bench, target, rnd, load, condition, seconds):
    """One run of `load` under `condition`; its figures go to bench.data["wire"]."""
    label, args = CONDITIONS[condition]
    nginx = target.nginx
    nginx.check_worker()
    tlsprof = counter = out = None
    # On in every run, the one without a profiler too: it adds two clock reads to every BPF program's run.
    bpfstats.enable()
    try:
        if args is not None:
            out = os.path.join(bench.scratch, f"wire-r{rnd}-{load}-{condition}.tlsprof")
            tlsprof = Child([bench.tlsprof, "record", "--pid", nginx.worker, "--pid", nginx.master, *args,
                             "--duration", str(seconds + 120), "-o", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            watch = LineWatcher(tlsprof.popen.stderr)
            if watch.wait_for(lambda l: "probes live" in l, timeout=60) is None:
                tlsprof.stop(grace=5)
                raise BenchError(f"{label} did not attach: {watch.text().strip()[-300:]}")
            counter = bpfstats.Counter(tlsprof.pid, tuple(PROGRAMS))
        try:
            time.sleep(0.2)
            k0 = counter.read() if counter else None
            w0, b0 = worker_counters(nginx.worker), busy_ticks()
            p0 = cpu_ticks(tlsprof.pid) if tlsprof else None
            [result] = run_load(load, [nginx], seconds, bench.scratch, bench.args.full_clients)
            w1, b1 = worker_counters(nginx.worker), busy_ticks()
            p1 = cpu_ticks(tlsprof.pid) if tlsprof else None
            # Right before tlsprof stops: its programs go when it exits.
            k1 = counter.read() if counter else None
        except BenchError as e:
            if tlsprof and tlsprof.poll() is not None:
                raise BenchError(f"{e}: {label} exited with {tlsprof.status} during the run: "
                                 f"{watch.text().strip()[-300:]}") from None
            raise
        finally:
            status = tlsprof.stop(grace=120) if tlsprof else 0
    finally:
        bpfstats.restore()
    if status != 0:
        raise BenchError(f"{label} exited with {status}: {watch.text().strip()[-300:]}")
    figures = twin_figures(result, w0, w1)
    programs = bpfstats.delta(k0, k1) if counter else None
    n = figures["requests"]
    rec = {
        "round": rnd, "load": load, "condition": condition, "seconds": seconds,
        **{k: figures[k] for k in ("requests", "rate", "wall_s", "worker_ns", "worker_ticks", "cpu_us_per_req_ns",
                                   "cpu_us_per_req", "ctx_per_req")},
        "tlsprof_cpu_pct": 100.0 * (p1 - p0) / CLK_TCK / result["wall_s"] if tlsprof else None,
        # Everything else the machine ran meanwhile (other users, the kernel), in cores: the neighbours' noise.
        "background_cores": max(0.0, (b1 - b0 - figures["worker_ticks"] - ((p1 - p0) if tlsprof else 0)) / CLK_TCK
                                - result["client_cpu_s"]) / result["wall_s"],
        "programs": programs,
        "program_runs": sum(p["run_cnt"] for p in programs.values()) if programs else None,
        "program_ns": sum(p["run_time_ns"] for p in programs.values()) if programs else None,
        "report": _report(bench.tlsprof, out) if tlsprof else None,
    }
    bench.data.setdefault("wire", []).append(rec)
    extra = ""
    if programs:
        runs, ns = rec["program_runs"], rec["program_ns"]
        cap = (rec["report"]["capture"] or {})
        extra = (f", socket programs {runs / n:.2f} runs and {ns / n:,.0f} ns per {LOADS[load][1]}"
                 f" ({ns / runs if runs else 0:.0f} ns/run); stated {cap.get('runs')} runs, {cap.get('ms')} ms")
    log(f"round {rnd} wire {load:9} {condition:6}: {rec['rate']:7.0f}/s, {rec['cpu_us_per_req_ns']:7.2f} µs worker "
        f"CPU per {LOADS[load][1]}{extra}; background {rec['background_cores']:.2f} cores")


def run_round(bench, rnd):
    """Both loads, each under every condition once, in an order rotated by the round."""
    seconds = bench.args.seconds
    order = list(CONDITIONS)
    k = (rnd - 1) % len(order)
    with Target(bench.scratch) as target:
        bench.data["wire_cpu"] = target.cpu
        for load in LOADS:
            for condition in order[k:] + order[:k]:
                wire_run(bench, target, rnd, load, condition, seconds)
                time.sleep(0.5)


# -- the section


def _runs(data, load, condition):
    return [r for r in data.get("wire") or [] if r["load"] == load and r["condition"] == condition]


def _base(data, load):
    """The run without a profiler of each round, for this load."""
    return {r["round"]: r for r in _runs(data, load, "none")}


def _per_req(r, key):
    return r[key] / r["requests"] if r.get(key) is not None and r["requests"] else None


def _ns_per_run(r):
    return r["program_ns"] / r["program_runs"] if r.get("program_runs") else None


def _share(r, base):
    """The socket programs' ns per request against the worker's CPU per request without a profiler, same round."""
    b = base.get(r["round"])
    ns = _per_req(r, "program_ns")
    return ns / (b["cpu_us_per_req_ns"] * 1e3) if b and ns is not None and b["cpu_us_per_req_ns"] else None


def _paired(runs, base):
    return [r["cpu_us_per_req_ns"] / base[r["round"]]["cpu_us_per_req_ns"] - 1 for r in runs if r["round"] in base]


def _stated(r, key):
    cap = (r.get("report") or {}).get("capture") or {}
    return cap.get(key)


def figures(data):
    """Per load and condition, the medians the section states; {} without runs."""
    out = {}
    for load in LOADS:
        base = _base(data, load)
        for c in CONDITIONS:
            rs = _runs(data, load, c)
            if not rs:
                continue
            out[(load, c)] = {
                "runs": len(rs), "rate": [r["rate"] for r in rs], "cpu_us": [r["cpu_us_per_req_ns"] for r in rs],
                "paired": [] if c == "none" else _paired(rs, base),
                "tlsprof_cpu_pct": [r["tlsprof_cpu_pct"] for r in rs],
                "runs_per_req": med([_per_req(r, "program_runs") for r in rs]),
                "ns_per_run": med([_ns_per_run(r) for r in rs]),
                "ns_per_req": med([_per_req(r, "program_ns") for r in rs]),
                "share": med([_share(r, base) for r in rs]),
                "base_cpu_us": med([base[r["round"]]["cpu_us_per_req_ns"] for r in rs if r["round"] in base]),
                # The targets' own runs, as tlsprof's report states them (over its whole recording).
                "stated_ns_per_req": med([_stated(r, "ms") * 1e6 / r["requests"] for r in rs
                                          if _stated(r, "ms") is not None]),
            }
        # --hello-capture always against the probes with their sampled capture, in the same round.
        probes = {r["round"]: r for r in _runs(data, load, "probes")}
        if (load, "always") in out:
            out[(load, "always")]["paired_vs_probes"] = _paired(_runs(data, load, "always"), probes)
    return out


def _headline(f, load):
    """One sentence per load: what the socket programs cost with --hello-capture always and with --wire-only."""
    name, unit = LOADS[load]
    parts = []
    for c in ("always", "wire"):
        x = f.get((load, c))
        if not x or x["ns_per_req"] is None:
            continue
        flag = "`--hello-capture always`" if c == "always" else "`--wire-only`"
        parts.append(f"{flag} {fnum(x['ns_per_req'], 0)} ns per {unit} = {fnum(x['ns_per_run'], 0)} ns per run × "
                     f"{fnum(x['runs_per_req'], 2)} runs per {unit} (the targets' own runs, the worker's and the "
                     f"master's, as tlsprof states them: "
                     f"{fnum(x['stated_ns_per_req'], 0)} ns), {fpct(x['share'], 2, False)} of the worker's CPU per "
                     f"{unit} without a profiler ({fnum(x['base_cpu_us'], 1)} µs); worker CPU {fpaired(x['paired'])} "
                     f"paired")
    extra = _always_over_probes(f, load)
    if extra:
        parts.append(extra)
    return f"- {name[0].upper()}{name[1:]}: " + "; ".join(parts) if parts else ""


def _always_over_probes(f, load):
    """What --hello-capture always adds to the probes with their sampled capture, per request."""
    a, p = f.get((load, "always")), f.get((load, "probes"))
    if not a or not p or a["ns_per_req"] is None:
        return ""
    added = a["ns_per_req"] - (p["ns_per_req"] or 0)
    return (f"over the probes with their sampled capture, `always` adds {fnum(added, 0)} ns of socket programs per "
            f"{LOADS[load][1]}, worker CPU {fpaired(a.get('paired_vs_probes') or [])} paired with that run")


def _summary_table(data, f):
    rows = []
    for load, (name, unit) in LOADS.items():
        for c, (label, _) in CONDITIONS.items():
            x = f.get((load, c))
            if not x:
                continue
            none = c == "none"
            rows.append([name, label, x["runs"], fmed(x["rate"], 0), fmed(x["cpu_us"], 2),
                         "–" if none else fpaired(x["paired"]),
                         "–" if none else fmed(x["tlsprof_cpu_pct"], 2),
                         "–" if none else fnum(x["runs_per_req"], 2), "–" if none else fnum(x["ns_per_run"], 0),
                         "–" if none else fnum(x["ns_per_req"], 0), "–" if none else fpct(x["share"], 2, False)])
    return table(["Load", "Condition", "runs", "requests or handshakes/s", "worker CPU µs per request or handshake",
                  "paired vs no profiler: median (min…max)", "tlsprof CPU, % of one CPU",
                  "socket program runs per request or handshake", "ns per run",
                  "ns per request or handshake", "share of its CPU without a profiler"], rows)


def _programs_table(data):
    rows = []
    for c in ("wire", "always"):
        label = CONDITIONS[c][0]
        cells = {}
        for load in LOADS:
            rs = [r for r in _runs(data, load, c) if r["programs"]]
            for name in PROGRAMS:
                per = [r["programs"][name]["run_cnt"] / r["requests"] for r in rs if name in r["programs"]]
                ns = [r["programs"][name]["run_time_ns"] / r["programs"][name]["run_cnt"]
                      for r in rs if name in r["programs"] and r["programs"][name]["run_cnt"]]
                cells.setdefault(name, []).extend([fnum(med(per), 2), fnum(med(ns), 0)])
        for name, (full, tracepoints) in PROGRAMS.items():
            rows.append([label, f"`{full}`", tracepoints, *cells[name]])
    return table(["Condition", "Program", "Tracepoints (syscalls:)", "runs per keep-alive request", "ns per run",
                  "runs per full handshake", "ns per run"], rows)


def _ratio(xs):
    """'×median (×min–×max)' of ratios."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    if len(xs) == 1:
        return f"×{xs[0]:.2f}"
    return f"×{med(xs):.2f} (×{min(xs):.2f}–×{max(xs):.2f})"


def _stated_table(data):
    rows = []
    for load, (name, unit) in LOADS.items():
        for c in ("wire", "always", "probes"):
            rs = [r for r in _runs(data, load, c) if r["programs"] and r.get("report")]
            if not rs:
                continue
            meas_ms = [r["program_ns"] / 1e6 for r in rs]
            stated_ms = [_stated(r, "ms") for r in rs]
            stated_runs = [_stated(r, "runs") for r in rs]
            rows.append([name, CONDITIONS[c][0],
                         fmed([r["program_runs"] for r in rs], 0), fmed(stated_runs, 0),
                         _ratio([s / r["program_runs"] if s is not None and r["program_runs"] else None
                                 for s, r in zip(stated_runs, rs)]),
                         fmed(meas_ms, 2), fmed(stated_ms, 2),
                         _ratio([s / m if s is not None and m else None for s, m in zip(stated_ms, meas_ms)]),
                         fmed([s * 1e6 / r["requests"] if s is not None else None for s, r in zip(stated_ms, rs)], 0),
                         fmed([s * 1e6 / n if s is not None and n else None
                               for s, n in zip(stated_ms, stated_runs)], 0),
                         fmed([(r["program_ns"] - s * 1e6) / (r["program_runs"] - n)
                               if s is not None and n is not None and r["program_runs"] > n else None
                               for s, n, r in zip(stated_ms, stated_runs, rs)], 0),
                         fmed([r["requests"] for r in rs], 0),
                         fmed([r["report"]["handshakes"] for r in rs], 0)])
    return table(["Load", "Condition", "measured runs (bpf_stats, every process)", "stated runs (the targets')",
                  "stated / measured runs", "measured ms", "stated ms", "stated / measured ms",
                  "stated ns per request or handshake", "stated ns per run (the targets')",
                  "the others' ns per run (measured − stated)",
                  "clients' requests or handshakes", "handshakes in tlsprof's report"], rows)


def _runs_table(data):
    rows = []
    for r in data.get("wire") or []:
        cap = (r.get("report") or {}).get("capture") or {}
        rows.append([r["round"], r["load"], r["condition"], fnum(r["requests"], 0), fnum(r["rate"], 0),
                     fnum(r["cpu_us_per_req_ns"], 2), fnum(r["cpu_us_per_req"], 2),
                     fnum(r["program_runs"], 0), fnum(_ns_per_run(r), 0),
                     fnum(_per_req(r, "program_ns"), 0), fnum(cap.get("runs"), 0), fnum(cap.get("ms"), 2),
                     fnum((r.get("report") or {}).get("handshakes"), 0), fnum(r["tlsprof_cpu_pct"], 2),
                     fnum(r.get("background_cores"), 2)])
    return table(["round", "load", "condition", "requests or handshakes", "per s", "worker CPU µs each (schedstat)",
                  "(stat ticks)", "socket program runs", "ns per run", "ns per request or handshake",
                  "stated runs", "stated ms", "handshakes in the report", "tlsprof CPU %",
                  "background load, cores"], rows)


def _noise(data):
    """The runs without a profiler: their worker CPU per request or handshake around its median, per load."""
    parts = []
    for load, (name, _) in LOADS.items():
        cpu = [r["cpu_us_per_req_ns"] for r in _runs(data, load, "none")]
        if len(cpu) >= 2:
            m = med(cpu)
            parts.append(f"{fpct(min(cpu) / m - 1, 1)}…{fpct(max(cpu) / m - 1, 1)} under {name} ({len(cpu)} runs)")
    return "; ".join(parts) or "– (it takes two rounds or more)"


def section_values(data):
    """The template's fields of the section, or none when the run measured no wire runs."""
    runs = data.get("wire") or []
    if not runs:
        return {"wire_measured": False, "wire_headline": "", "wire_table": "", "wire_programs_table": "",
                "wire_stated_table": "", "wire_runs_table": "", "wire_seconds": 0, "wire_full_clients": 0,
                "wire_cpu": "", "wire_note": "", "wire_noise": ""}
    f = figures(data)
    note = ""
    if data.get("wire_only_bench"):
        m = data["machine"]
        n = max(r["round"] for r in runs)
        note = (f" Measured apart from the rest of this file (`scripts/bench.py --wire-only-bench`, {n} rounds), "
                f"{data.get('started', '?')}: {m['cpu']}, kernel {m['kernel']}, {m['tlsprof']}.")
    cpu = data.get("wire_cpu")
    return {
        "wire_measured": True,
        "wire_headline": "\n".join(line for line in (_headline(f, load) for load in LOADS) if line),
        "wire_table": _summary_table(data, f), "wire_programs_table": _programs_table(data),
        "wire_stated_table": _stated_table(data), "wire_runs_table": _runs_table(data),
        "wire_seconds": runs[0]["seconds"], "wire_full_clients": data["settings"]["full_clients"],
        "wire_cpu": (f"its worker pinned to CPU {cpu}, the clients and tlsprof on the others" if cpu is not None
                     else "unpinned (one CPU)"),
        "wire_note": note, "wire_noise": _noise(data),
    }


HEADING = "## Counting from the wire"
