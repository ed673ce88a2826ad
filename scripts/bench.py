#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Overhead and accuracy benchmark of tlsprof, side by side with bpftrace and perf (issue 4).

One run starts two identical throwaway nginx instances, the twins (scripts/nginx-target.sh: 1 worker, loopback,
RSA-2048, TLS 1.3), whose workers share one CPU. Round by round, it drives two bounded workloads (full handshakes
with `openssl s_time -new`, keep-alive requests with wrk) against both twins at once under each condition in turn
(no profiler, tlsprof, bpftrace, perf, ...), with the profiler on one twin: the other is the control, and the
overhead of a run is the ratio of their CPU per request. Then it profiles the ground-truth fixture
(tests/fixtures/crypto_ops.c), making its operations as libssl does and as `openssl speed` does, and runs
`openssl speed`; optionally records one twin for minutes to time the report
and watch tlsprof's memory. It writes BENCHMARKS.md and prints the same.

Everything it starts is stopped by it (try/finally, SIGINT/SIGTERM/SIGHUP); all load goes to 127.0.0.1.
Python 3 standard library only; needs root (BPF, perf, bpftrace).
"""

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Budget of issue 4.
BUDGET_FULL_OVERHEAD = 0.01
BUDGET_KEEPALIVE_OVERHEAD = 0.03
BUDGET_OWN_CPU = 0.02
BUDGET_RSS_MB = 64.0
# "Must not grow": more than allocator noise between the second and the last tenth of the long recording.
BUDGET_RSS_GROWTH_MB = 1.0
BUDGET_LIVE_S = 1.0
BUDGET_REPORT_S = 1.0
BUDGET_ACCURACY = 0.10
TARGET_HANDSHAKE_RATE = 2000.0

CONDITIONS = {
    "none": "no profiler",
    "tlsprof": "tlsprof (defaults: --max-overhead 0.3)",
    "tlsprof-exact": "tlsprof --max-overhead 100 (probes throughout)",
    "tlsprof-all": "tlsprof --all-probes",
    "bpftrace": "bpftrace (bench-bpftrace.bt)",
    "perf": "perf record -F 99 -g",
}
DEFAULT_CONDITIONS = ["none", "tlsprof", "tlsprof-exact", "tlsprof-all", "bpftrace", "perf"]
TLSPROF_ARGS = {"tlsprof": [], "tlsprof-exact": ["--max-overhead", "100"], "tlsprof-all": ["--all-probes"]}
WORKLOADS = {
    "full": "full handshakes",
    "keepalive": "keep-alive requests",
}
# (operation, fixture run, fixture field, openssl speed key)
OPERATIONS = [
    ("RSA-2048 sign", ("x25519", "rsa2048"), "sign", "rsa2048_sign"),
    ("ECDSA P-256 sign", ("p256", "p256"), "sign", "ecdsap256_sign"),
    ("X25519 derive", ("x25519", "rsa2048"), "derive", "x25519_derive"),
    ("P-256 derive", ("p256", "p256"), "derive", "p256_derive"),
]


class BenchError(Exception):
    """A failure the user can act on: printed as one line."""


class Interrupted(BaseException):
    """A signal asked us to stop: clean up, then exit."""


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


# --- Processes we start -------------------------------------------------------------------------------------

CHILDREN = []


class LineWatcher:
    """Reads a child's pipe in a thread, keeping every line with the time it arrived."""

    def __init__(self, stream):
        self.lines = []
        self.cond = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self.thread.start()

    def _run(self, stream):
        for line in stream:
            with self.cond:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def wait_for(self, pred, timeout, start=0):
        """(time, line) of the first line from index `start` satisfying pred, or None on timeout/EOF."""
        deadline = time.monotonic() + timeout
        i = start
        with self.cond:
            while True:
                while i < len(self.lines):
                    if pred(self.lines[i][1]):
                        return self.lines[i]
                    i += 1
                left = deadline - time.monotonic()
                if self.closed or left <= 0:
                    return None
                self.cond.wait(min(left, 0.5))

    def text(self):
        with self.cond:
            return "\n".join(line for _, line in self.lines)


class Child:
    """A process we started, reaped with wait4 so that its rusage (CPU, peak RSS) is ours to read."""

    def __init__(self, argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        """stdout/stderr: subprocess constants, or the path of a file to write."""
        self.argv = [str(a) for a in argv]
        files = []

        def sink(x):
            if isinstance(x, str):
                files.append(open(x, "w"))
                return files[-1]
            return x

        try:
            # A session of its own: a Ctrl-C at the terminal reaches only us, and we stop it in order.
            self.popen = subprocess.Popen(self.argv, stdin=stdin, stdout=sink(stdout), stderr=sink(stderr),
                                          text=True, errors="replace", start_new_session=True)
        except OSError as e:
            raise BenchError(f"cannot run {self.argv[0]}: {e}") from None
        finally:
            for f in files:
                f.close()
        self.started = time.monotonic()
        self.ended = None
        self.status = None
        self.rusage = None
        CHILDREN.append(self)

    @property
    def pid(self):
        return self.popen.pid

    def poll(self):
        if self.status is None:
            pid, status, rusage = os.wait4(self.popen.pid, os.WNOHANG)
            if pid:
                self.ended = time.monotonic()
                self.status = os.waitstatus_to_exitcode(status)
                self.rusage = rusage
                self.popen.returncode = self.status
        return self.status

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)
        return self.status

    def send(self, sig):
        if self.poll() is None:
            os.kill(self.popen.pid, sig)

    def stop(self, sig=signal.SIGINT, grace=60.0):
        """Asks it to stop (tlsprof, bpftrace and perf all finish their output on SIGINT), kills it if not."""
        self.send(sig)
        if self.wait(grace) is None:
            self.send(signal.SIGKILL)
            self.wait(10)
        return self.status

    def cpu_ms(self):
        return (self.rusage.ru_utime + self.rusage.ru_stime) * 1e3 if self.rusage else None

    def maxrss_mb(self):
        return self.rusage.ru_maxrss / 1024.0 if self.rusage else None


def stop_all_children():
    for child in reversed(CHILDREN):
        try:
            if child.poll() is None:
                child.stop(signal.SIGINT, grace=10)
        except (OSError, ChildProcessError):
            pass


def on_signal(signum, _frame):
    raise Interrupted(signum)


# --- /proc ------------------------------------------------------------------------------------------------


def cpu_ticks(pid):
    """utime + stime of the whole process (all its threads), in clock ticks, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def schedstat_ns(pid):
    """On-CPU ns of the process's main thread (nginx workers have one thread): finer than the 10 ms ticks."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def status_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_times():
    """The machine's cpu line of /proc/stat: (steal ticks, all ticks)."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    return vals[7], sum(vals[:8])


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def busy_ticks():
    """Non-idle ticks of the whole machine (all CPUs), from /proc/stat."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    return sum(vals[:8]) - vals[3] - vals[4]


def ctx_switches(pid):
    """(voluntary, involuntary) context switches: each one runs every sched_switch program on the machine."""
    return (status_kb(pid, "voluntary_ctxt_switches") or 0), (status_kb(pid, "nonvoluntary_ctxt_switches") or 0)


def worker_counters(pid):
    """What a run compares between the twins: the worker's CPU ticks, on-CPU ns and context switches."""
    return cpu_ticks(pid), schedstat_ns(pid), ctx_switches(pid)


def twin_figures(load, before, after):
    """One twin's load result and its worker's counters over the run, per request."""
    (t0, n0, x0), (t1, n1, x1) = before, after
    n = load["requests"]
    return {**load, "worker_ticks": t1 - t0, "worker_ns": n1 - n0,
            "cpu_us_per_req": (t1 - t0) / CLK_TCK * 1e6 / n, "cpu_us_per_req_ns": (n1 - n0) / 1e3 / n,
            "ctx_per_req": (sum(x1) - sum(x0)) / n, "vol_ctx_per_req": (x1[0] - x0[0]) / n,
            "invol_ctx_per_req": (x1[1] - x0[1]) / n}


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
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith(name + ".so"):
                return parts[5].strip()
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_text(argv, timeout=60, env=None):
    try:
        out = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BenchError(f"{argv[0]}: {e}") from None
    return out


# --- Stats and formatting --------------------------------------------------------------------------------


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def relative_error(value, truth):
    return (value / truth - 1) if value and truth else None


def spread(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else (None, None)


def fnum(x, digits=1):
    return "–" if x is None else f"{x:,.{digits}f}"


def fmed(xs, digits=1):
    """'median (min–max)' of a series."""
    m, (lo, hi) = med(xs), spread(xs)
    if m is None:
        return "–"
    if len([x for x in xs if x is not None]) == 1:
        return fnum(m, digits)
    return f"{fnum(m, digits)} ({fnum(lo, digits)}–{fnum(hi, digits)})"


def fpct(x, digits=1, sign=True):
    if x is None:
        return "–"
    return f"{x * 100:+.{digits}f}%" if sign else f"{x * 100:.{digits}f}%"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


# --- nginx ------------------------------------------------------------------------------------------------


def nginx_libraries():
    """(soname, path) of the libssl and libcrypto that /usr/sbin/nginx loads, from ldd."""
    out = run_text(["ldd", "/usr/sbin/nginx"])
    libs = re.findall(r"^\s*(lib(?:ssl|crypto)\.so\S*) => (/\S+)", out.stdout, re.M)
    if len(libs) != 2:
        raise BenchError(f"cannot find nginx's libssl and libcrypto in `ldd /usr/sbin/nginx`: {out.stdout.strip()}")
    return libs


class Nginx:
    """One of the two identical targets (the twins): one worker, loopback, RSA-2048, TLS 1.3."""

    def __init__(self, scratch, name):
        self.name = name
        self.dir = os.path.join(scratch, f"nginx-{name}")
        self.port = free_port()
        self.master = None
        self.worker = None

    def start(self):
        # Each twin loads its own copy of libssl and libcrypto: uprobes belong to a file, and bpftrace 0.17 attaches
        # its uprobes to every process that maps the file (-p does not restrict them). With a copy each, a
        # profiler's uprobes trap in the profiled twin only, not in the control twin or in the load clients.
        libdir = os.path.join(self.dir, "lib")
        os.makedirs(libdir, exist_ok=True)
        for soname, path in nginx_libraries():
            shutil.copy2(path, os.path.join(libdir, soname))
        out = run_text([os.path.join(REPO, "scripts/nginx-target.sh"), "start", self.dir, self.port,
                        "--protocols", "TLSv1.3", "--cert", "rsa2048", "--workers", "1"],
                       env=dict(os.environ, LD_LIBRARY_PATH=libdir))
        if out.returncode != 0:
            raise BenchError(f"nginx-target.sh start: {out.stderr.strip().splitlines()[-1:] or out.returncode}")
        self.master = int(out.stdout.strip())
        workers = []
        for _ in range(50):
            workers = children_of(self.master)
            if workers:
                break
            time.sleep(0.1)
        if len(workers) != 1:
            raise BenchError(f"nginx master {self.master} has {len(workers)} workers, expected 1")
        self.worker = workers[0]
        for name in ("libssl", "libcrypto"):
            path = mapped_library(self.worker, name)
            if not path or os.path.dirname(path) != libdir:
                raise BenchError(f"nginx {self.name} maps {path or 'no shared ' + name}, not its copy in {libdir}")
        log(f"nginx {self.name}: master {self.master}, worker {self.worker} on 127.0.0.1:{self.port}")

    def check_worker(self):
        if self.worker not in children_of(self.master):
            raise BenchError(f"nginx worker {self.worker} is gone (see {self.dir}/error.log)")

    def stop(self):
        subprocess.run([os.path.join(REPO, "scripts/nginx-target.sh"), "stop", self.dir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


def pin_twins(twins):
    """Both workers get the last CPU, which they share; this process, and so the clients and profilers it starts,
    get the others. On one CPU the twins see the same CPU speed and the same neighbours. Pinning also keeps the
    scheduler from moving a worker onto a client's CPU, which on a small machine changed its CPU per request by
    more than any profiler does. Returns the workers' CPU, or None."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    for twin in twins:
        os.sched_setaffinity(twin.worker, {cpus[-1]})
    os.sched_setaffinity(0, set(cpus[:-1]))
    log(f"nginx workers pinned to CPU {cpus[-1]}; clients and profilers on CPU {','.join(map(str, cpus[:-1]))}")
    return cpus[-1]


# --- Profilers --------------------------------------------------------------------------------------------


class Session:
    """One profiler attached to one target for one run; `none` has no process."""

    def __init__(self, bench, condition, tag, timed_report=False):
        self.bench = bench
        self.timed_report = timed_report
        self.condition = condition
        self.tag = tag
        self.child = None
        self.live_s = None
        self.own_ms = None
        self.output = None
        self.watch = None

    @property
    def pid(self):
        return self.child.pid if self.child else None

    def _wait_live(self, pred, what):
        hit = self.watch.wait_for(pred, timeout=60)
        if hit is None:
            self.child.stop(grace=5)
            tail = self.watch.text().strip().splitlines()[-3:]
            raise BenchError(f"{what} did not attach: {' / '.join(tail) or 'no output'}")
        self.live_s = hit[0] - self.child.started
        return hit[1]

    def start(self, target, bound_s, extra=()):
        b = self.bench
        scratch = b.scratch
        if self.condition in TLSPROF_ARGS:
            self.output = os.path.join(scratch, f"{self.tag}.tlsprof")
            args = TLSPROF_ARGS[self.condition]
            self.child = Child([b.tlsprof, "record", "--pid", target, "--duration", f"{bound_s:.0f}", "-o",
                                self.output, *args, *extra],
                               stdout=os.path.join(scratch, f"{self.tag}.summary"), stderr=subprocess.PIPE)
            self.watch = LineWatcher(self.child.popen.stderr)
            line = self._wait_live(lambda l: "probes live" in l, "tlsprof")
            m = re.search(r"\((\d+(?:\.\d+)?) ms\)", line)
            self.own_ms = float(m.group(1)) if m else None
        elif self.condition == "bpftrace":
            libssl, libcrypto = mapped_library(target, "libssl"), mapped_library(target, "libcrypto")
            if not libssl or not libcrypto:
                raise BenchError(f"pid {target} maps no shared libssl/libcrypto: bpftrace has nothing to probe")
            self.child = Child(["bpftrace", "-p", target, os.path.join(REPO, "scripts/bench-bpftrace.bt"),
                                libssl, libcrypto, target],
                               stdout=subprocess.PIPE, stderr=os.path.join(scratch, f"{self.tag}.err"))
            self.watch = LineWatcher(self.child.popen.stdout)
            # BEGIN runs once every probe is attached.
            self._wait_live(lambda l: "bench-bpftrace: live" in l, "bpftrace")
        elif self.condition == "perf":
            self.output = os.path.join(scratch, f"{self.tag}.perf.data")
            log_file = os.path.join(scratch, f"{self.tag}.perf.log")
            # No hardware PMU in a VM: the cpu-clock software event, as tlsprof uses.
            self.child = Child(["perf", "record", "-e", "cpu-clock", "-F", "99", "-g", "-p", target, "-o",
                                self.output], stdout=log_file, stderr=subprocess.STDOUT)
            # perf prints nothing when it starts sampling: its events are live once it holds perf_event fds.
            deadline = time.monotonic() + 60
            while not self._perf_fds():
                if self.child.poll() is not None or time.monotonic() > deadline:
                    self.child.stop(grace=5)
                    with open(log_file) as f:
                        raise BenchError(f"perf record did not start: {f.read().strip()[-300:] or 'no output'}")
                time.sleep(0.01)
            self.live_s = time.monotonic() - self.child.started
        return self

    def _perf_fds(self):
        try:
            fds = os.listdir(f"/proc/{self.child.pid}/fd")
        except OSError:
            return False
        for fd in fds:
            try:
                if os.readlink(f"/proc/{self.child.pid}/fd/{fd}") == "anon_inode:[perf_event]":
                    return True
            except OSError:
                pass
        return False

    def stop(self):
        """Stops the profiler; returns what it cost and, for tlsprof, what it reported."""
        res = {"live_s": self.live_s, "live_own_ms": self.own_ms}
        if not self.child:
            return res
        status = self.child.stop(signal.SIGINT, grace=120)
        res["exit"] = status
        res["cpu_total_ms"] = self.child.cpu_ms()
        res["maxrss_mb"] = self.child.maxrss_mb()
        if self.condition.startswith("tlsprof"):
            if status != 0:
                tail = self.watch.text().strip().splitlines()[-2:]
                raise BenchError(f"tlsprof record exited with {status}: {' / '.join(tail)}")
            res["report"] = self.bench.report_summary(self.output, self.timed_report)
            res["file_bytes"] = os.path.getsize(self.output)
        elif self.condition == "bpftrace":
            self.watch.thread.join(timeout=30)
            calls = {}
            for line in self.watch.text().splitlines():
                m = re.match(r"@calls\[(\w+)\]: (\d+)", line)
                if m:
                    calls[m.group(1)] = int(m.group(2))
            res["bpftrace_calls"] = calls
        return res


# --- Workloads --------------------------------------------------------------------------------------------


def start_full(bench, port, seconds, tag):
    """`openssl s_time -new` from --full-clients processes: full handshakes only (no tickets, no cache)."""
    clients = []
    for i in range(bench.args.full_clients):
        out = os.path.join(bench.scratch, f"s_time.{tag}.{i}.out")
        c = Child(["openssl", "s_time", "-connect", f"127.0.0.1:{port}", "-new", "-time", str(seconds)],
                  stdout=out, stderr=subprocess.STDOUT)
        clients.append((c, out))
    return clients


def parse_full(clients):
    total = 0
    for c, out in clients:
        with open(out) as f:
            text = f.read()
        # "1102 connections in 3 real seconds, 0 bytes read per connection" (the total line).
        m = re.search(r"^(\d+) connections in \d+ real seconds", text, re.M)
        if c.status != 0 or not m:
            raise BenchError(f"openssl s_time failed (exit {c.status}): {text.strip()[-200:]}")
        total += int(m.group(1))
    wall = max(c.ended for c, _ in clients) - min(c.started for c, _ in clients)
    return {"requests": total, "wall_s": wall, "rate": total / wall,
            "client_cpu_s": sum(c.cpu_ms() for c, _ in clients) / 1e3}


def start_keepalive(bench, port, seconds, tag):
    out = os.path.join(bench.scratch, f"wrk.{tag}.out")
    return [(Child(["wrk", "-t1", "-c4", f"-d{seconds}s", f"https://127.0.0.1:{port}/"], stdout=out,
                   stderr=subprocess.STDOUT), out)]


def parse_keepalive(clients):
    [(c, out)] = clients
    with open(out) as f:
        text = f.read()
    m = re.search(r"(\d+) requests in ([\d.]+)(m?s)", text)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if c.status != 0 or not m or not rps:
        raise BenchError(f"wrk failed (exit {c.status}): {text.strip()[-200:]}")
    errors = re.search(r"Socket errors: (.*)", text)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return {"requests": int(m.group(1)), "wall_s": c.ended - c.started, "rate": float(rps.group(1)),
            "client_cpu_s": c.cpu_ms() / 1e3, "errors": (errors.group(1) if errors else None),
            "non2xx": int(non2xx.group(1)) if non2xx else 0}


WORKLOAD_RUN = {"full": (start_full, parse_full), "keepalive": (start_keepalive, parse_keepalive)}


def wait_clients(started, deadline, workload):
    """Waits for the clients of every twin; kills them all if any is still running at `deadline`."""
    children = [c for clients in started for c, _ in clients]
    # All polled together: a client's end time (its wall time) is taken when it exits, not when we look.
    while None in [c.poll() for c in children]:
        if time.monotonic() > deadline:
            for c in children:
                c.stop(signal.SIGKILL)
            raise BenchError(f"the {WORKLOADS[workload]} clients did not finish")
        time.sleep(0.02)


def run_load(bench, workload, twins, seconds):
    """The same load against every twin at the same time, from clients of its own; one result per twin."""
    start, parse = WORKLOAD_RUN[workload]
    started = [start(bench, twin.port, seconds, twin.name) for twin in twins]
    wait_clients(started, time.monotonic() + seconds + 60, workload)
    return [parse(clients) for clients in started]


# --- The benchmark ----------------------------------------------------------------------------------------


class Bench:
    def __init__(self, args):
        self.args = args
        self.tlsprof = args.tlsprof
        self.scratch = tempfile.mkdtemp(prefix="tlsprof-bench.")
        self.twins = []
        self.fixture = None
        self.data = {"settings": settings_of(args), "runs": [], "accuracy": [], "speed": [],
                     "report_times_short": [], "long": None, "skipped": []}

    # -- helpers
    def report_summary(self, recording, timed):
        t0 = time.monotonic()
        out = run_text([self.tlsprof, "report", "--json", recording], timeout=120)
        elapsed = time.monotonic() - t0
        if out.returncode != 0:
            raise BenchError(f"tlsprof report --json: {out.stderr.strip()}")
        if timed:
            self.data["report_times_short"].append(elapsed)
        r = json.loads(out.stdout)
        stages = {s["name"]: s for s in r.get("stages", [])}
        return {
            "stages": {n: {k: s.get(k) for k in ("calls", "cpu_ms", "self_cpu_ms", "cpu_us_per_call", "sampled")}
                       for n, s in stages.items()},
            "functions": [{k: f.get(k) for k in ("name", "stage", "calls")} for f in r.get("functions", [])],
            "handshakes": (r.get("handshakes") or {}).get("total"),
            "probing": r.get("probing"),
            "probe_hits": r.get("probe_hits"),
            "probe_cost_us_per_hit": r.get("probe_cost_us_per_hit"),
            "probe_overhead_ms": r.get("probe_overhead_ms"),
            "process_cpu_ms": r.get("process_cpu_ms"),
            "samples": r.get("samples"),
            "lost_samples": r.get("lost_samples"),
            "all_probes": r.get("all_probes"),
            "duration_s": r.get("duration_s"),
        }

    def machine(self):
        model = "unknown"
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break

        def first_line(argv):
            try:
                out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
                return (out.stdout + out.stderr).strip().splitlines()[0]
            except (OSError, IndexError, subprocess.TimeoutExpired):
                return "unknown"

        debian = open("/etc/debian_version").read().strip() if os.path.exists("/etc/debian_version") else "?"
        commit = first_line(["git", "-C", REPO, "describe", "--always", "--dirty"])
        return {
            "nproc": os.cpu_count(),
            "cpu": model,
            "kernel": os.uname().release,
            "os": f"Debian {debian}",
            "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
            "clk_tck": CLK_TCK,
            "openssl": first_line(["openssl", "version"]),
            "nginx": first_line(["/usr/sbin/nginx", "-v"]),
            "wrk": first_line(["wrk", "-v"]).split(" Copyright")[0],
            "bpftrace": first_line(["bpftrace", "--version"]) if shutil.which("bpftrace") else "absent",
            "perf": first_line(["perf", "--version"]) if shutil.which("perf") else "absent",
            "tlsprof": f"{first_line([self.tlsprof, '--version'])} (git {commit})",
        }

    def check_tools(self):
        if os.geteuid() != 0:
            raise BenchError("needs root (BPF programs, perf, bpftrace): run it with sudo")
        if not os.access(self.tlsprof, os.X_OK):
            raise BenchError(f"{self.tlsprof} is missing: run 'cargo build --release' first or pass --tlsprof")
        # A private copy: a rebuild during the run must not swap the binary (or its file format) under us.
        copy = os.path.join(self.scratch, "tlsprof")
        shutil.copy2(self.tlsprof, copy)
        self.tlsprof = copy
        for tool in ("openssl", "wrk", "cc", "/usr/sbin/nginx"):
            if not shutil.which(tool):
                raise BenchError(f"{tool} is not installed (scripts/install-deps.sh installs it)")
        conds = []
        for c in self.args.conditions:
            if c in ("bpftrace", "perf") and not shutil.which(c):
                if self.args.smoke:
                    self.data["skipped"].append(f"{c}: not installed")
                    continue
                raise BenchError(f"{c} is not installed (or leave it out: --conditions)")
            conds.append(c)
        self.conditions = conds
        self.data["settings"]["conditions"] = conds

    def build_fixture(self):
        self.fixture = os.path.join(self.scratch, "crypto_ops")
        out = run_text(["cc", "-O2", "-Wall", "-o", self.fixture, os.path.join(REPO, "tests/fixtures/crypto_ops.c"),
                        "-lcrypto"], timeout=120)
        if out.returncode != 0:
            raise BenchError(f"building the fixture failed: {out.stderr.strip()[-300:]}")

    # -- one overhead run
    def overhead_run(self, rnd, workload, condition, profiled):
        """The profiler on twin `profiled`, the same load on both twins at once; the other twin is the control."""
        a = self.args
        for twin in self.twins:
            twin.check_worker()
        target = self.twins[profiled]
        tag = f"r{rnd}-{workload}-{condition}"
        sess = Session(self, condition, tag, timed_report=True)
        try:
            if condition != "none":
                sess.start(target.worker, bound_s=a.seconds + 120)
            time.sleep(0.2)
            # Always A, then B: the profiled twin's clients do not always start first.
            c0, b0 = [worker_counters(t.worker) for t in self.twins], busy_ticks()
            p0 = cpu_ticks(sess.pid) if sess.pid else None
            loads = run_load(self, workload, self.twins, a.seconds)
            c1, b1 = [worker_counters(t.worker) for t in self.twins], busy_ticks()
            p1 = cpu_ticks(sess.pid) if sess.pid else None
        except BaseException:
            if sess.child:
                sess.child.stop(grace=10)
            raise
        prof = sess.stop()
        if sess.child and sess.child.poll() is None:
            raise BenchError(f"{condition} did not stop")
        if min(load["requests"] for load in loads) <= 0:
            raise BenchError(f"{workload}: a client completed no requests")
        figures = [twin_figures(load, x0, x1) for load, x0, x1 in zip(loads, c0, c1)]
        mine, other = figures[profiled], figures[1 - profiled]
        wall = max(load["wall_s"] for load in loads)
        rec = {
            "round": rnd, "workload": workload, "condition": condition, "profiled_twin": target.name, **mine,
            "control": other,
            # The overhead of this run: both twins ran the same load on the same CPU at the same time.
            "paired_overhead": mine["cpu_us_per_req_ns"] / other["cpu_us_per_req_ns"] - 1,
            "paired_overhead_ticks": (mine["cpu_us_per_req"] / other["cpu_us_per_req"] - 1
                                      if other["worker_ticks"] else None),
            "paired_rate": mine["rate"] / other["rate"] - 1,
            # Everything else the machine ran meanwhile (other users, the kernel), in cores: the noise.
            "background_cores": max(0.0, (b1 - b0 - mine["worker_ticks"] - other["worker_ticks"]
                                          - ((p1 - p0) if p0 is not None else 0)) / CLK_TCK
                                    - sum(load["client_cpu_s"] for load in loads)) / wall,
            "prof_cpu_load_frac": ((p1 - p0) / CLK_TCK / mine["wall_s"]) if p0 is not None else None,
            **{f"prof_{k}": v for k, v in prof.items()},
        }
        self.data["runs"].append(rec)
        extra = f", {condition} {rec['prof_cpu_load_frac'] * 100:.1f}% CPU" if p0 is not None else ""
        log(f"round {rnd} {workload:9} {condition:13} on {target.name}: {mine['rate']:7.0f} vs {other['rate']:7.0f} "
            f"req/s, {mine['cpu_us_per_req_ns']:7.1f} vs {other['cpu_us_per_req_ns']:7.1f} µs CPU/req: "
            f"{rec['paired_overhead'] * 100:+.2f}%{extra}")

    # -- accuracy
    def fixture_run(self, rnd, derive_alg, sign_alg, as_speed):
        a = self.args
        n, m = a.fixture_ops[(derive_alg, sign_alg)]
        fx = Child([self.fixture, "--derive", derive_alg, "--sign", sign_alg, *(["--as-speed"] if as_speed else []),
                    n, m], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = LineWatcher(fx.popen.stdout)
        err = LineWatcher(fx.popen.stderr)
        if out.wait_for(lambda l: l == "ready", timeout=300) is None:
            fx.stop(signal.SIGKILL)
            raise BenchError(f"fixture did not get ready: {err.text().strip()[-200:]}")
        sess = Session(self, "tlsprof", f"r{rnd}-fixture-{derive_alg}-{sign_alg}{'-as-speed' if as_speed else ''}")
        try:
            sess.start(fx.pid, bound_s=600)
            fx.popen.stdin.write("go\n")
            fx.popen.stdin.flush()
            hit = out.wait_for(lambda l: l.startswith("{"), timeout=600)
            if hit is None or fx.wait(60) != 0:
                raise BenchError(f"fixture failed: {err.text().strip()[-200:]}")
            truth = json.loads(hit[1])
            # tlsprof stops by itself once its only target has exited.
            sess.child.wait(60)
        except BaseException:
            fx.stop(signal.SIGKILL, grace=5)
            if sess.child:
                sess.child.stop(grace=10)
            raise
        prof = sess.stop()
        rep = prof["report"]
        rec = {"round": rnd, "derive_alg": derive_alg, "sign_alg": sign_alg, "as_speed": as_speed, "truth": truth,
               "live_s": prof["live_s"], "live_own_ms": prof["live_own_ms"],
               "probe_cost_us_per_hit": rep["probe_cost_us_per_hit"]}
        for stage in ("derive", "sign"):
            s = rep["stages"].get(stage) or {}
            rec[f"tlsprof_{stage}_us"] = s.get("cpu_us_per_call")
            rec[f"tlsprof_{stage}_calls"] = s.get("calls")
            # Probed functions entered per operation (EVP_DigestSign → RSA_sign is two): each adds an entry and
            # a return hit inside the fixture's clock window.
            fn_calls = sum(f["calls"] or 0 for f in rep.get("functions", []) if f.get("stage") == stage)
            rec[f"{stage}_functions_per_op"] = fn_calls / s["calls"] if s.get("calls") else None
        self.data["accuracy"].append(rec)
        mode = " as speed" if as_speed else ""
        log(f"round {rnd} fixture {derive_alg}/{sign_alg}{mode}: derive tlsprof {fnum(rec['tlsprof_derive_us'])} "
            f"vs {truth['unprobed_derive_cpu_us']:.1f} µs, sign tlsprof {fnum(rec['tlsprof_sign_us'])} "
            f"vs {truth['unprobed_sign_cpu_us']:.1f} µs (unprobed)")

    def speed_run(self, rnd):
        argv = ["openssl", "speed", "-seconds", str(self.args.speed_seconds), "rsa2048", "ecdsap256", "ecdhx25519",
                "ecdhp256"]
        out = run_text(argv, timeout=30 * self.args.speed_seconds + 60)
        text = out.stdout
        rec = {"round": rnd}
        # Per-op seconds are printed with 4-6 decimals (0.0000s for ECDSA): the ops/s column is exact, use it.
        pats = {
            "rsa2048_sign": r"^rsa\s+2048 bits\s+([\d.]+)s\s+([\d.]+)s\s+([\d.]+)\s+([\d.]+)",
            "ecdsap256_sign": r"^\s*256 bits ecdsa \(nistp256\)\s+([\d.]+)s\s+([\d.]+)s\s+([\d.]+)\s+([\d.]+)",
            "p256_derive": r"^\s*256 bits ecdh \(nistp256\)\s+([\d.]+)s\s+([\d.]+)",
            "x25519_derive": r"^\s*253 bits ecdh \(X25519\)\s+([\d.]+)s\s+([\d.]+)",
        }
        for key, pat in pats.items():
            m = re.search(pat, text, re.M)
            if not m:
                raise BenchError(f"cannot parse `{' '.join(argv)}` for {key}: {(out.stdout + out.stderr)[-200:]}")
            per_s = float(m.group(3)) if key.endswith("_sign") else float(m.group(2))
            rec[key] = 1e6 / per_s
            rec[key + "_printed_s"] = float(m.group(1))
        self.data["speed"].append(rec)
        log(f"round {rnd} openssl speed: " + ", ".join(f"{k} {rec[k]:.1f} µs" for k in pats))

    # -- long recording
    def long_run(self):
        a = self.args
        secs = a.long_minutes * 60
        # tlsprof on twin A; twin B gets the same load, as the control of a paired overhead over the whole
        # recording: the governor's steady state, which the 10 s runs, one or two probe windows each, only sample.
        # The load is the full-handshake runs' (clients that keep the workers busy): at a modest fixed rate the
        # twins idle between handshakes, and with no profiler at all their CPU per handshake differed by ±5%.
        twin = self.twins[0]
        log(f"long recording: {a.long_minutes:g} min of tlsprof defaults on nginx {twin.name}'s worker, "
            f"full handshakes on both twins")
        for t in self.twins:
            t.check_worker()
        sess = Session(self, "tlsprof", "long")
        sess.start(twin.worker, bound_s=secs)
        if not sess.pid:
            raise BenchError("tlsprof did not start")
        samples = []
        clients = []
        try:
            w0 = [worker_counters(t.worker) for t in self.twins]
            t0 = time.monotonic()
            clients = [start_full(self, t.port, round(secs), f"long-{t.name}") for t in self.twins]
            p0 = cpu_ticks(sess.pid)
            # Sampled while recording; after the duration tlsprof finishes (symbolizes, writes): timed apart.
            while sess.child.poll() is None and time.monotonic() < t0 + secs:
                rss = status_kb(sess.pid, "VmRSS")
                if rss is not None:
                    samples.append({"t_s": time.monotonic() - t0, "rss_mb": rss / 1024.0,
                                    "hwm_mb": (status_kb(sess.pid, "VmHWM") or 0) / 1024.0,
                                    "cpu_ticks": cpu_ticks(sess.pid) - p0})
                time.sleep(min(a.rss_interval, max(0.0, t0 + secs - time.monotonic())))
            wait_clients(clients, time.monotonic() + 60, "full")
            w1 = [worker_counters(t.worker) for t in self.twins]
            loads = [parse_full(cs) for cs in clients]
            if sess.child.wait(600) is None:
                raise BenchError("tlsprof record did not stop after its --duration")
        except BaseException:
            for c, _ in (x for cs in clients for x in cs):
                c.stop(signal.SIGKILL)
            sess.child.stop(grace=10)
            raise
        finish_s = sess.child.ended - (t0 + secs)
        prof = sess.stop()
        reports = []
        for _ in range(3):
            t = time.monotonic()
            out = run_text([self.tlsprof, "report", sess.output], timeout=300)
            reports.append(time.monotonic() - t)
            if out.returncode != 0:
                raise BenchError(f"tlsprof report on the long recording: {out.stderr.strip()}")
        rep = prof["report"]
        last = samples[-1] if samples else None
        cpu_s = last["cpu_ticks"] / CLK_TCK if last else None
        mine, other = [twin_figures(load, x0, x1) for load, x0, x1 in zip(loads, w0, w1)]
        self.data["long"] = {
            "minutes": a.long_minutes, "twin": mine, "control": other,
            "paired_overhead": mine["cpu_us_per_req_ns"] / other["cpu_us_per_req_ns"] - 1,
            "samples": samples, "maxrss_mb": prof["maxrss_mb"],
            "cpu_total_ms": prof["cpu_total_ms"], "cpu_attach_ms": p0 * 1e3 / CLK_TCK, "cpu_during_s": cpu_s,
            "cpu_frac": cpu_s / last["t_s"] if last and last["t_s"] > 0 else None,
            "cpu_finish_ms": (prof["cpu_total_ms"] - (p0 + last["cpu_ticks"]) * 1e3 / CLK_TCK) if last else None,
            "finish_s": finish_s, "report_times_s": reports, "file_bytes": prof["file_bytes"], "report": rep,
            "live_s": prof["live_s"],
        }
        log(f"long recording: {mine['requests']} handshakes ({other['requests']} on the control twin), paired "
            f"overhead {self.data['long']['paired_overhead'] * 100:+.2f}%, peak RSS {prof['maxrss_mb']:.1f} MB, "
            f"report {med(reports):.2f} s")

    # -- the whole run
    def run(self):
        a = self.args
        self.check_tools()
        self.data["machine"] = self.machine()
        self.data["started"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        self.data["loadavg_start"] = loadavg()
        steal0, all0 = cpu_times()
        self.build_fixture()
        self.twins = [Nginx(self.scratch, "A"), Nginx(self.scratch, "B")]
        try:
            for twin in self.twins:
                twin.start()
            self.data["worker_cpu"] = pin_twins(self.twins)
            for rnd in range(1, a.rounds + 1):
                # Each round starts one condition later: no condition always runs first or after the same one.
                shift = (rnd - 1) % len(self.conditions)
                order = self.conditions[shift:] + self.conditions[:shift]
                for w, workload in enumerate(WORKLOADS):
                    for cond in order:
                        # The profiled twin alternates from round to round (and between neighbouring runs), so that
                        # every condition runs about as often on each twin and a difference between them cancels.
                        self.overhead_run(rnd, workload, cond, (rnd + w + self.conditions.index(cond)) % 2)
                        time.sleep(0.5)
                # Per-operation figures of a few seconds each move by ±10% with the neighbours here: more of them.
                for _ in range(a.accuracy_repeats):
                    for derive_alg, sign_alg in a.fixture_ops:
                        for as_speed in (False, True):
                            self.fixture_run(rnd, derive_alg, sign_alg, as_speed)
                    self.speed_run(rnd)
                self.save_raw()
            if a.long_minutes > 0:
                self.long_run()
        finally:
            for twin in self.twins:
                twin.stop()
        self.data["finished"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        self.data["loadavg_end"] = loadavg()
        steal1, all1 = cpu_times()
        self.data["steal_frac"] = (steal1 - steal0) / (all1 - all0) if all1 > all0 else None
        self.save_raw()

    def save_raw(self):
        if self.args.raw:
            with open(self.args.raw, "w") as f:
                json.dump(self.data, f, indent=1)


# --- Settings -----------------------------------------------------------------------------------------------


def settings_of(args):
    return {
        "rounds": args.rounds, "seconds": args.seconds, "long_minutes": args.long_minutes,
        "full_clients": args.full_clients, "conditions": list(args.conditions),
        "speed_seconds": args.speed_seconds, "accuracy_repeats": args.accuracy_repeats, "smoke": args.smoke,
        "fixture_ops": {f"{d}/{s}": list(v) for (d, s), v in args.fixture_ops.items()},
    }


def reproduce_command(s):
    """The command that repeats this run: `python3 scripts/bench.py` plus whatever differs from the defaults."""
    if s["smoke"]:
        return "sudo python3 scripts/bench.py --smoke"
    parts = ["sudo python3 scripts/bench.py"]
    defaults = {"rounds": 5, "seconds": 10, "long_minutes": 10, "full_clients": 2,
                "speed_seconds": 2, "accuracy_repeats": 3}
    for key, default in defaults.items():
        if s.get(key, default) != default:
            parts.append(f"--{key.replace('_', '-')} {s[key]}")
    if s["conditions"] != DEFAULT_CONDITIONS:
        parts.append(f"--conditions {','.join(s['conditions'])}")
    return " ".join(parts)


# --- Rendering ------------------------------------------------------------------------------------------------


def runs_of(data, workload, condition):
    return [r for r in data["runs"] if r["workload"] == workload and r["condition"] == condition]


def paired(data, workload, condition, key="paired_overhead"):
    """The per-run paired figures of a condition: profiled twin / control twin − 1."""
    return [r[key] for r in runs_of(data, workload, condition) if r.get(key) is not None]


def fpaired(xs, digits=2):
    """'median (min…max)' of paired figures, in %."""
    if not xs:
        return "–"
    if len(xs) == 1:
        return fpct(xs[0], digits)
    lo, hi = spread(xs)
    return f"{fpct(med(xs), digits)} ({fpct(lo, digits)}…{fpct(hi, digits)})"


def noise_floor(data, workload):
    """The largest paired figure, either way, with no profiler on either twin: what the method resolves."""
    xs = paired(data, workload, "none")
    return max(abs(x) for x in xs) if xs else None


def paired_budget(data, workload, what):
    """The budget figure of a workload: the median paired overhead of tlsprof (defaults), and how it reads."""
    po = paired(data, workload, "tlsprof") if "tlsprof" in data["settings"]["conditions"] else []
    if not po:
        return None, "–"
    lo, hi = spread(po)
    runs = "1 paired run" if len(po) == 1 else f"median of {len(po)} paired runs, {fpct(lo, 2)}…{fpct(hi, 2)}"
    floor = noise_floor(data, workload)
    return med(po), f"{fpct(med(po), 2)} ({runs}; pairs with no profiler: ±{fpct(floor, 2, False)}){what}"


def own_cpu_projection(data):
    """tlsprof's own CPU at 2,000 handshakes/s, from its CPU under the two workloads (see the notes)."""
    full = runs_of(data, "full", "tlsprof")
    keep = runs_of(data, "keepalive", "tlsprof")
    frac_full, rate = med([r["prof_cpu_load_frac"] for r in full]), med([r["rate"] for r in full])
    frac_keep = med([r["prof_cpu_load_frac"] for r in keep])
    if frac_full is None or not rate:
        return None, None
    linear = frac_full * TARGET_HANDSHAKE_RATE / rate
    if frac_keep is None:
        return linear, None
    fixed = min(frac_keep, frac_full)
    return linear, fixed + (frac_full - fixed) * TARGET_HANDSHAKE_RATE / rate


def probing_note(rep):
    p = rep.get("probing") or {}
    return (f"attached {100 * (p.get('fraction') or 0):.0f}% of the time ({100 * (p.get('cpu_share') or 0):.0f}% of "
            f"the worker's CPU) in {p.get('windows')} windows, "
            f"≈ {p.get('handshakes_estimated') or 0:.0f} handshakes estimated over the recording")


def accuracy_rows(data):
    """Per operation: tlsprof against the fixture making it as libssl does, and against `openssl speed` with the
    fixture making it as speed does (the same operation on both sides)."""
    rows = []
    for name, (d, s), stage, speed_key in OPERATIONS:
        runs = [r for r in data["accuracy"] if (r["derive_alg"], r["sign_alg"]) == (d, s)]
        recs = [r for r in runs if not r.get("as_speed")]
        speed_recs = [r for r in runs if r.get("as_speed")]
        ours = [r[f"tlsprof_{stage}_us"] for r in recs]
        unprobed = [r["truth"][f"unprobed_{stage}_cpu_us"] for r in recs]
        probed = [r["truth"][f"{stage}_cpu_us"] for r in recs]
        # What the fixture's clock saw minus the probe hits inside its window, at tlsprof's calibrated cost.
        hits = [2 * (r.get(f"{stage}_functions_per_op") or 1) for r in recs]
        probed_corr = [p - h * (r["probe_cost_us_per_hit"] or 0) for r, p, h in zip(recs, probed, hits)]
        speed = [r[speed_key] for r in data["speed"]]
        ours_as_speed = [r[f"tlsprof_{stage}_us"] for r in speed_recs]
        fixture_as_speed = [r["truth"][f"unprobed_{stage}_cpu_us"] for r in speed_recs]
        calls = [r[f"tlsprof_{stage}_calls"] for r in runs]
        expected = [r["truth"]["derives" if stage == "derive" else "signs"] for r in runs]
        m_ours, m_unp, m_speed, m_ours_sp = med(ours), med(unprobed), med(speed), med(ours_as_speed)
        rows.append({
            "name": name, "ours": ours, "unprobed": unprobed, "probed": probed, "probed_corr": probed_corr,
            "hits": med(hits), "speed": speed, "ours_as_speed": ours_as_speed, "fixture_as_speed": fixture_as_speed,
            "calls_ok": all(c == e for c, e in zip(calls, expected)) and bool(recs),
            "err_fixture": relative_error(m_ours, m_unp),
            "err_probed": relative_error(m_ours, med(probed_corr)),
            "err_speed": relative_error(m_ours_sp, m_speed),
            "err_fixture_as_speed": relative_error(m_ours_sp, med(fixture_as_speed)),
            "libssl_vs_speed": relative_error(m_unp, m_speed),
        })
    return rows


def rss_growth(long):
    """RSS change from the second tenth of the recording to the last tenth (medians), and the trend."""
    s = [x for x in long["samples"] if x["rss_mb"]]
    if len(s) < 10:
        return None, None, None
    n = len(s)
    early = med([x["rss_mb"] for x in s[n // 10: 2 * n // 10]])
    late = med([x["rss_mb"] for x in s[-max(1, n // 10):]])
    pts = [x for x in s if x["t_s"] >= 60] or s
    if len(pts) >= 2:
        mt = statistics.mean(x["t_s"] for x in pts)
        mr = statistics.mean(x["rss_mb"] for x in pts)
        den = sum((x["t_s"] - mt) ** 2 for x in pts)
        slope = sum((x["t_s"] - mt) * (x["rss_mb"] - mr) for x in pts) / den * 60 if den else 0.0
    else:
        slope = None
    return early, late, slope


def verdict(ok):
    return "SKIP" if ok is None else ("PASS" if ok else "**FAIL**")


def budget_lines(data):
    lines = []
    s = data["settings"]

    rate = med([r["rate"] for r in runs_of(data, "full", "tlsprof")])
    ov, text = paired_budget(data, "full", f" at {fnum(rate, 0)} handshakes/s")
    # The 10 s runs hold one or two probe windows each; the long recording shows the governor's steady state.
    long = data.get("long") or {}
    steady = long.get("paired_overhead")
    if steady is not None:
        text += f"; over the {long['minutes']:g}-minute recording: {fpct(steady, 2)}"
    lines.append(("Full-handshake load: tlsprof (defaults) adds ≤ 1% target CPU per handshake", text,
                  verdict(None if ov is None else ov <= BUDGET_FULL_OVERHEAD
                          and (steady is None or steady <= BUDGET_FULL_OVERHEAD))))

    ov, text = paired_budget(data, "keepalive", "")
    lines.append(("Keep-alive load: tlsprof (defaults) adds ≤ 3% target CPU per request", text,
                  verdict(None if ov is None else ov <= BUDGET_KEEPALIVE_OVERHEAD)))
    keep = runs_of(data, "keepalive", "tlsprof")
    rw_stages = [[((r.get("prof_report") or {}).get("stages", {}).get(st) or {}) for st in ("read", "write")]
                 for r in keep]
    rw = [all(st.get("calls") or st.get("cpu_ms") for st in pair) for pair in rw_stages]
    sampled = any(st.get("sampled") or not st.get("calls") for pair in rw_stages for st in pair)
    how = " (estimated from CPU samples: CPU, no call counts)" if sampled and any(rw) else ""
    lines.append(("Keep-alive load: … with the `read`/`write` stages still reported (defaults)",
                  (f"reported in {sum(rw)} of {len(rw)} runs{how}" if rw else "–"),
                  verdict(None if not rw else all(rw))))

    frac = med([r["prof_cpu_load_frac"] for r in runs_of(data, "full", "tlsprof")])
    linear, proj = own_cpu_projection(data)
    lines.append(("tlsprof's own CPU ≤ 2% of one core at 99 Hz and 2,000 handshakes/s",
                  f"{fpct(frac, 2, False)} at {fnum(rate, 0)} handshakes/s, the most a twin reaches on its half "
                  f"of a core "
                  f"(projected to 2,000/s: {fpct(proj, 2, False)}; linear upper bound {fpct(linear, 2, False)})",
                  verdict(None if frac is None else frac <= BUDGET_OWN_CPU)))

    long = data.get("long")
    if long:
        early, late, slope = rss_growth(long)
        peak = long["maxrss_mb"]
        lines.append((f"Peak RSS ≤ 64 MB over a {long['minutes']:g}-minute recording",
                      f"{fnum(peak)} MB (ru_maxrss)", verdict(peak <= BUDGET_RSS_MB)))
        grew = None if early is None else (late - early) > BUDGET_RSS_GROWTH_MB
        reach = ""
        if slope and slope > 0 and late < BUDGET_RSS_MB:
            reach = f" (if it kept that pace: 64 MB after {long['minutes'] + (BUDGET_RSS_MB - late) / slope:.0f} min)"
        lines.append(("Memory does not grow with duration (≤ 1 MB from the second tenth of the recording to the "
                      "last)",
                      f"RSS {fnum(early)} MB at {long['minutes'] * 0.1:g}–{long['minutes'] * 0.2:g} min → "
                      f"{fnum(late)} MB in the last tenth; trend {fnum(slope, 2)} MB/min{reach}",
                      verdict(None if grew is None else not grew)))
    else:
        peak = max([r["prof_maxrss_mb"] for r in data["runs"] if r["condition"] == "tlsprof"
                    and r.get("prof_maxrss_mb")] or [0]) or None
        lines.append(("Peak RSS ≤ 64 MB over a 10-minute recording",
                      f"{fnum(peak)} MB over {s['seconds']} s runs only (no long recording)",
                      verdict(None if peak is None else peak <= BUDGET_RSS_MB)))
        lines.append(("Memory does not grow with duration", "no long recording (--long-minutes 0)", "SKIP"))

    live = [r["prof_live_s"] for r in data["runs"] if r["condition"] == "tlsprof"]
    m = med(live)
    lines.append(("Probes live ≤ 1 s after `tlsprof record` starts",
                  f"{fnum(m, 3)} s median, {fnum(spread(live)[1], 3)} s max (nginx worker)",
                  verdict(None if m is None else m <= BUDGET_LIVE_S)))
    if long:
        rt = med(long["report_times_s"])
        lines.append((f"`tlsprof report` of a {long['minutes']:g}-minute recording ≤ 1 s",
                      f"{fnum(rt, 3)} s median of {len(long['report_times_s'])}", verdict(rt <= BUDGET_REPORT_S)))
    else:
        rt = med(data["report_times_short"])
        lines.append(("`tlsprof report` of a 10-minute recording ≤ 1 s",
                      f"no long recording; {fnum(rt, 3)} s for {s['seconds']} s recordings", "SKIP"))

    for row in accuracy_rows(data):
        for ref, err, ours, theirs in (
                ("the fixture (unprobed), made as libssl makes it", row["err_fixture"], row["ours"], row["unprobed"]),
                ("`openssl speed`, the fixture making it as speed does", row["err_speed"], row["ours_as_speed"],
                 row["speed"])):
            lines.append((f"Accuracy: {row['name']} within ±10% of {ref}",
                          f"{fpct(err)} (tlsprof {fnum(med(ours))} µs vs {fnum(med(theirs))} µs)",
                          verdict(None if err is None else abs(err) <= BUDGET_ACCURACY)))
    return lines


def render(data):
    s, mach = data["settings"], data["machine"]
    out = []
    w = out.append
    w("# tlsprof benchmark: overhead and accuracy")
    w("")
    kind = "smoke run: checks the harness, not the figures" if s["smoke"] else "full run"
    w(f"Generated by `scripts/bench.py` ({kind}), {data.get('started', '?')} to {data.get('finished', '?')}.")
    w("")
    w("## Machine")
    w("")
    w(f"- {mach['nproc']} CPUs: {mach['cpu']}; kernel {mach['kernel']}; {mach['os']}; a shared VM (noisy "
      f"neighbours), no hardware PMU")
    w(f"- {mach['openssl']}; {mach['nginx']}; {mach['wrk']}; {mach['bpftrace']}; {mach['perf']}")
    w(f"- tlsprof: {mach['tlsprof']}")
    w(f"- Date: {mach['date']}; CLK_TCK = {mach['clk_tck']} (a /proc/PID/stat tick is {1000 / mach['clk_tck']:g} ms)")
    if data.get("loadavg_start"):
        w(f"- Load average {data['loadavg_start']} at the start, {data.get('loadavg_end', '?')} at the end; CPU time "
          f"stolen by the hypervisor during the run: {fpct(data.get('steal_frac'), 1, False)}")
    w("")
    w("## Reproduce")
    w("")
    w("```")
    w("cargo build --release")
    w(reproduce_command(s))
    w("```")
    w("")
    pinned = (f" Both workers are pinned to CPU {data['worker_cpu']}, which they share; the clients, the profilers "
              f"and the benchmark share the others." if data.get("worker_cpu") is not None else "")
    w(f"Settings: {s['rounds']} round(s), interleaved (each round runs every condition once per workload, "
      f"in the order {', '.join(s['conditions'])}, rotated by one each round); {s['seconds']} s of load per run; "
      f"full handshakes from {s['full_clients']} `openssl s_time -new` client(s) per twin; keep-alive from one "
      f"`wrk -t1 -c4` per twin; long recording {s['long_minutes']:g} min of the full-handshake load on both "
      f"twins, tlsprof on twin A. Targets: two identical nginx instances, twins A and B: 1 worker each, "
      f"127.0.0.1, RSA-2048 "
      f"certificate, TLS 1.3 only, no session cache or tickets (every handshake is full), each with its own copy "
      f"of libssl and libcrypto.{pinned}")
    w("")
    w("How overhead is measured: the two twins' workers share one CPU and get the same load at the same time. "
      "The profiler attaches to one twin; the other twin is the control. A run's overhead is the profiled twin's "
      "CPU per request / the control twin's − 1. Both twins see the same machine speed, neighbours and clients, "
      "so the noise that moves back-to-back runs of one target by ±10–25% on this machine cancels. The profiled "
      "twin alternates from run to run, so a difference between the twins cancels too. The *no profiler* row is "
      "the same ratio with no profiler on either twin: its spread is the resolution of the method. Here its "
      f"median (min…max) is {fpaired(paired(data, 'full', 'none'))} for full handshakes and "
      f"{fpaired(paired(data, 'keepalive', 'none'))} for keep-alive requests.")
    w("")
    w("What the paired figure leaves out: hooks that run for the whole system also run in the control twin when "
      "it is on the CPU. These are tlsprof's sched_switch tracepoint, its syscall tracepoints during ServerHello "
      "capture windows and its per-CPU sampler, and bpftrace's 99 Hz profile probe. For the control twin each one "
      "returns early, so that cost is small; it lands on both twins and is not in the paired figure. Uprobes do not "
      "leak this way: each twin maps its own copy of the libraries, and a uprobe belongs to one file.")
    if data.get("skipped"):
        w("")
        w("Skipped: " + "; ".join(data["skipped"]) + ".")
    w("")
    w("## Budget (issue 4)")
    w("")
    w(table(["Budget line", "Measured (medians)", "Result"], budget_lines(data)))
    w("")

    for workload, title in (("full", "full handshakes (`openssl s_time -new`)"),
                            ("keepalive", "keep-alive requests (`wrk -t1 -c4`, `GET /` → 3 bytes)")):
        unit = "handshake" if workload == "full" else "request"
        w(f"## Overhead: {title}")
        w("")
        w(f"*paired overhead*: per run, the profiled twin's CPU per {unit} / the control twin's − 1 (schedstat); "
          f"*Δ throughput*: the same ratio of their {unit}s/s. For *no profiler* the \"profiled\" twin is the one a "
          f"profiler would have had in that run.")
        w("")
        rows = []
        for c in s["conditions"]:
            rs = runs_of(data, workload, c)
            if not rs:
                continue
            rows.append([
                CONDITIONS[c],
                " / ".join(str(sum(r["profiled_twin"] == t for r in rs)) for t in ("A", "B")),
                fmed([r["cpu_us_per_req_ns"] for r in rs], 1),
                fmed([r["control"]["cpu_us_per_req_ns"] for r in rs], 1),
                fpaired(paired(data, workload, c)),
                fmed([r["rate"] for r in rs], 0),
                fpaired(paired(data, workload, c, "paired_rate"), 1),
                "–" if c == "none" else fmed([r["prof_cpu_load_frac"] * 100 for r in rs], 2),
                "–" if c == "none" else fmed([r.get("prof_cpu_total_ms") for r in rs], 0),
                "–" if c == "none" else fmed([r.get("prof_maxrss_mb") for r in rs], 1),
                "–" if c == "none" else fmed([r.get("prof_live_s") for r in rs], 3),
            ])
        w(table(["Condition", "runs on twin A / B", f"profiled twin CPU µs/{unit}", f"control twin CPU µs/{unit}",
                 "paired overhead: median (min…max)", f"profiled twin {unit}s/s",
                 "Δ throughput vs the control twin", "profiler CPU % of a core (during load)",
                 "profiler CPU ms (whole run)", "profiler peak RSS MB", "live after s"], rows))
        w("")

    w("### What the probes hit")
    w("")
    w("Probe hits per request (an entry and a return each count as a hit) against the CPU each profiler added per "
      "request (per run, the control twin's CPU/request × the paired overhead; the median over runs): *implied "
      "µs/hit* divides one by the other, so it also carries whatever else the profiler costs the target "
      "(sched_switch programs, sampling). The *no profiler* rows show the same figure between two unprofiled "
      "twins: the noise. *ctx sw/req*: the profiled worker's context switches per request (each one runs every "
      "sched_switch program).")
    w("")
    rows = []
    for workload in WORKLOADS:
        for c in s["conditions"]:
            rs = runs_of(data, workload, c)
            if not rs:
                continue
            added = med([r["control"]["cpu_us_per_req_ns"] * r["paired_overhead"] for r in rs])
            ctx = med([r.get("ctx_per_req") for r in rs])
            hits, cost, est, notes = None, None, None, ""
            if c.startswith("tlsprof"):
                hits = med([(r["prof_report"]["probe_hits"] or 0) / r["requests"] for r in rs])
                cost = med([r["prof_report"]["probe_cost_us_per_hit"] for r in rs])
                est = med([(r["prof_report"]["probe_overhead_ms"] or 0) * 1e3 / r["requests"] for r in rs])
                stages = sorted({n + ("~" if st.get("sampled") else "")
                                 for r in rs for n, st in r["prof_report"]["stages"].items()
                                 if st.get("calls") or st.get("cpu_ms")})
                samples = med([r["prof_report"]["samples"] for r in rs])
                live = med([100 * ((r["prof_report"].get("probing") or {}).get("fraction") or 0) for r in rs])
                notes = (f"probes attached {fnum(live, 0)}% of the time; {fnum(samples, 0)} samples/run; "
                         f"stages seen: {', '.join(stages) or '–'} (~: from samples)")
            elif c == "bpftrace":
                calls = {}
                for r in rs:
                    for fn, n in (r.get("prof_bpftrace_calls") or {}).items():
                        calls.setdefault(fn, []).append(n / r["requests"])
                per = {fn: med(v) for fn, v in calls.items()}
                hits = 2 * sum(per.values())
                notes = "calls/request: " + ", ".join(f"{fn} {v:.2f}" for fn, v in
                                                      sorted(per.items(), key=lambda kv: -kv[1]) if v >= 0.005)
            elif c == "perf":
                notes = "no probes: a 99 Hz cpu-clock event on the worker"
            implied = added / hits if hits and added is not None and c != "none" else None
            rows.append([WORKLOADS[workload], CONDITIONS[c], fnum(ctx, 2), fnum(hits, 2),
                         fnum(added, 1), fnum(implied, 2), fnum(cost, 2), fnum(est, 2),
                         notes])
    w(table(["Workload", "Condition", "ctx sw/req", "probe hits/req", "added target CPU µs/req",
             "implied µs/hit", "tlsprof's calibrated µs/hit", "tlsprof's probe-cost estimate µs/req", "notes"],
            rows))
    w("")

    w("## Accuracy: CPU per operation (µs)")
    w("")
    w(f"tlsprof profiles the ground-truth fixture (`tests/fixtures/crypto_ops.c`, {s.get('accuracy_repeats', 1)} "
      "run(s) per round for X25519 + RSA-2048 and as many for P-256 + ECDSA P-256 in each mode); the fixture "
      "times each call with its thread CPU clock, once "
      "before tlsprof attaches (*unprobed*: the ground truth) and once under the probes (*probed*: the same pass "
      "tlsprof measures; *− hits*: minus the entry and return hits of every probed function the operation enters "
      "(from tlsprof's function table), at tlsprof's calibrated cost per hit). The unprobed pass runs first, "
      "seconds before the probed one: on a shared machine the two can differ by more than the probes do. "
      "*calls exact*: tlsprof counted every operation of the fixture in both modes; at the default budget it "
      "probes in windows, so this says no unless the probes stayed attached.")
    w("")
    w("### Made as libssl makes them, against the fixture")
    w("")
    w("Signatures with a fresh EVP_DigestSign context each (SHA-256 of 32 bytes, then the signature), "
      "derivations with EVP_PKEY_derive after a length query, one of each in turn.")
    w("")
    rows = []
    for row in accuracy_rows(data):
        rows.append([row["name"], fmed(row["ours"]), fmed(row["unprobed"]), fmed(row["probed"]), fnum(row["hits"], 0),
                     fmed(row["probed_corr"]), fpct(row["err_fixture"]), fpct(row["err_probed"]),
                     "yes" if row["calls_ok"] else "no"])
    w(table(["Operation", "tlsprof", "fixture unprobed", "fixture probed", "hits in its window",
             "fixture probed − hits", "tlsprof vs unprobed", "vs probed − hits", "calls exact"], rows))
    w("")
    w("### Made as `openssl speed` makes them, against `openssl speed`")
    w("")
    w("`openssl speed` (3.0) signs a ready digest (20 bytes for ECDSA, 36 for RSA) with EVP_PKEY_sign on one "
      "reused context, and runs each operation in a loop of its own. The fixture does the same with `--as-speed` "
      "(in runs of 8 of a kind) and tlsprof profiles it, in the same rounds as speed runs: the same operation "
      "on both sides. The last column is the difference the two ways of making the operation make: the "
      "fixture's own clock, libssl's way against speed.")
    w("")
    rows = []
    for row in accuracy_rows(data):
        rows.append([row["name"], fmed(row["ours_as_speed"]), fmed(row["fixture_as_speed"]), fmed(row["speed"]),
                     fpct(row["err_speed"]), fpct(row["err_fixture_as_speed"]), fpct(row["libssl_vs_speed"])])
    w(table(["Operation", "tlsprof (fixture --as-speed)", "fixture --as-speed unprobed", "openssl speed",
             "tlsprof vs speed", "tlsprof vs fixture --as-speed", "libssl's way vs speed (fixture unprobed)"], rows))
    w("")

    w("## Attach and report time")
    w("")
    live = [r["prof_live_s"] for r in data["runs"] if r["condition"] == "tlsprof"]
    live_all = [r["prof_live_s"] for r in data["runs"] if r["condition"] == "tlsprof-all"]
    own = [r["prof_live_own_ms"] for r in data["runs"] if r["condition"].startswith("tlsprof")]
    fx_live = [r["live_s"] for r in data["accuracy"]]
    rows = [
        ["`tlsprof record` start → \"probes live\" (nginx worker, defaults), s", fmed(live, 3), len(live)],
        ["… with --all-probes, s", fmed(live_all, 3), len(live_all)],
        ["… its own figure in that line (attach + calibration), ms", fmed(own, 0), len(own)],
        ["… fixture target, s", fmed(fx_live, 3), len(fx_live)],
        [f"`tlsprof report --json` of a {s['seconds']} s recording, s", fmed(data["report_times_short"], 3),
         len(data["report_times_short"])],
    ]
    long = data.get("long")
    if long:
        rows.append([f"`tlsprof report` of the {long['minutes']:g}-minute recording, s",
                     fmed(long["report_times_s"], 3), len(long["report_times_s"])])
    for c in ("bpftrace", "perf"):
        v = [r["prof_live_s"] for r in data["runs"] if r["condition"] == c]
        if v:
            rows.append([f"{c} start → live, s", fmed(v, 3), len(v)])
    w(table(["What", "median (min–max)", "n"], rows))
    w("")

    if long:
        w(f"## Long recording ({long['minutes']:g} minutes)")
        w("")
        early, late, slope = rss_growth(long)
        rep = long["report"]
        mine, other = long["twin"], long["control"]
        w(f"tlsprof defaults on twin A's worker while {s['full_clients']} `openssl s_time -new` clients per twin "
          f"kept both workers busy: {mine['requests']} handshakes on twin A ({fnum(mine['rate'], 0)}/s), "
          f"{rep['handshakes']} seen by tlsprof in its probe windows ({probing_note(rep)}); recording "
          f"{long['file_bytes'] / 1024:.0f} KiB. Over the whole recording twin A's worker used "
          f"{fnum(mine['cpu_us_per_req_ns'], 1)} µs of CPU per handshake and the unprofiled twin B's "
          f"{fnum(other['cpu_us_per_req_ns'], 1)} µs ({other['requests']} handshakes), a paired overhead of "
          f"{fpct(long['paired_overhead'], 2)}: tlsprof's cost at the governor's steady state. tlsprof's CPU: "
          f"{fnum(long.get('cpu_attach_ms'), 0)} ms to attach, {fpct(long['cpu_frac'], 2, False)} of a core while "
          f"recording, {fnum(long.get('cpu_finish_ms'), 0)} ms to finish after the duration "
          f"({fnum(long.get('finish_s'), 1)} s wall); {fnum(long['cpu_total_ms'], 0)} ms in all. Peak RSS "
          f"{fnum(long['maxrss_mb'])} MB (ru_maxrss, finishing included); RSS while recording: "
          f"{fnum(early)} MB in the second tenth, {fnum(late)} MB in the last tenth, trend after the first minute "
          f"{fnum(slope, 3)} MB/min.")
        w("")
        rows = []
        samples = long["samples"]
        step = max(1, len(samples) // 12)
        picked = samples[::step]
        if samples and picked[-1] is not samples[-1]:
            picked.append(samples[-1])
        for x in picked:
            rows.append([f"{int(x['t_s'] // 60)}:{int(x['t_s'] % 60):02d}", fnum(x["rss_mb"]), fnum(x["hwm_mb"]),
                         fnum(x["cpu_ticks"] * 1e3 / CLK_TCK, 0)])
        w(table(["elapsed m:ss", "VmRSS MB", "VmHWM MB", "tlsprof CPU ms since live"], rows))
        w("")

    w("## How the figures are made")
    w("")
    w("- **Target CPU per request**: a worker's on-CPU time from `/proc/PID/schedstat` (ns) read just before the "
      "clients start and just after the last one exits, divided by the requests its own clients report "
      "(s_time's connection count; wrk's request count). Probe traps and BPF programs run in the worker's "
      "context, so this is where uprobe cost lands. The every-run table also gives the same from the utime + "
      f"stime of `/proc/PID/stat`, which counts in {1000 / mach['clk_tck']:g} ms ticks, as a cross-check.")
    w("- **Paired overhead** = the profiled twin's CPU per request / the control twin's − 1, per run, over the "
      "same seconds of the same load on the same CPU; the tables give its median and range over the runs. The "
      "profiled twin alternates between A and B. The budget lines use the median of tlsprof (defaults); the "
      "*no profiler* runs, with nothing on either twin, give the noise floor of the method.")
    w("- **Throughput**: full handshakes = s_time connections / wall time of the clients (s_time's own "
      "'real seconds' is rounded to whole seconds); keep-alive = wrk's Requests/sec.")
    w("- **Profiler CPU during load**: the profiler's utime + stime from /proc over the load window, as a share of "
      "one core; *whole run* adds attach, calibration and the work after SIGINT (symbolizing, writing), from "
      "wait4's rusage, as does *peak RSS* (ru_maxrss).")
    w("- **bpftrace** durations are wall time between entry and return (it has no per-thread on-CPU clock); its "
      "script is `scripts/bench-bpftrace.bt` (libraries from the worker's /proc/PID/maps). **perf**: "
      "`perf record -e cpu-clock -F 99 -g -p WORKER` (no hardware PMU here). bpftrace 0.17's `-p` does not "
      "restrict uprobes to the process: every process that maps the probed file traps. The profiled twin's copy "
      "of libssl and libcrypto is mapped by no other process, so neither the control twin nor the load clients "
      "(which use the system's libraries) trap; the script's `/pid == WORKER/` filters keep its counts to the "
      "worker.")
    w("- **tlsprof's own CPU projected to 2,000 handshakes/s**: its CPU under keep-alive load (sampling a busy "
      "worker, no handshakes) is taken as the fixed part and the rest of its CPU under full-handshake load is "
      "scaled with the handshake rate; the linear upper bound scales all of it.")
    w("- **openssl speed**: per-operation µs = 1e6 / the ops/s column (the printed per-op seconds have too few "
      "digits: 0.0000s for ECDSA P-256).")
    w("- **Attach**: wall time from spawning `tlsprof record` to its \"probes live\" line on stderr.")
    w("- **Long recording**: tlsprof's VmRSS sampled from /proc every few seconds while it records (its finishing "
      "work after the duration is timed apart); *growth* compares the medians of the second and the last tenth of "
      "the samples (the first tenth is start-up), *trend* is a least-squares slope after the first minute.")
    w("- **Background load** (every-run table): the machine's busy CPU time during the run minus both workers', "
      "the profiler's and the load clients' own, in cores: what others ran meanwhile. The paired figure cancels "
      "most of it; it is there to spot the runs where it did not.")
    w("")

    w("<details><summary>Every run</summary>")
    w("")
    w("Pairs are *profiled twin / control twin*.")
    w("")

    def pair(r, key, digits):
        return f"{fnum(r[key], digits)} / {fnum(r['control'][key], digits)}"

    rows = []
    for r in data["runs"]:
        rows.append([r["round"], r["workload"], r["condition"], r["profiled_twin"], pair(r, "requests", 0),
                     pair(r, "rate", 0), pair(r, "cpu_us_per_req_ns", 2), pair(r, "cpu_us_per_req", 2),
                     fpct(r["paired_overhead"], 2), fpct(r["paired_overhead_ticks"], 2),
                     "–" if r["prof_cpu_load_frac"] is None else fnum(r["prof_cpu_load_frac"] * 100, 2),
                     fnum(r.get("prof_maxrss_mb"), 1), fnum(r.get("prof_live_s"), 3),
                     pair(r, "vol_ctx_per_req", 3), pair(r, "invol_ctx_per_req", 3),
                     fnum(r.get("background_cores"), 2)])
    w(table(["round", "workload", "condition", "profiled twin", "requests", "req/s", "µs/req (schedstat)",
             "µs/req (stat ticks)", "paired overhead", "paired overhead (ticks)", "profiler CPU %",
             "profiler RSS MB", "live s", "voluntary ctx sw/req", "involuntary ctx sw/req",
             "background load, cores"], rows))
    w("")
    w("</details>")
    return "\n".join(out) + "\n"


# --- Main -------------------------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(description="tlsprof overhead and accuracy benchmark (writes BENCHMARKS.md)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--seconds", type=int, default=10, help="seconds of load per run (default 10)")
    p.add_argument("--long-minutes", type=float, default=10, help="minutes of the long recording; 0 skips it")
    p.add_argument("--full-clients", type=int, default=2, help="parallel `openssl s_time -new` clients (default 2)")
    p.add_argument("--conditions", default=",".join(DEFAULT_CONDITIONS),
                   help=f"comma-separated, from {','.join(CONDITIONS)} (default: all; 'none' is always run)")
    p.add_argument("--speed-seconds", type=int, default=2, help="`openssl speed -seconds` (default 2)")
    p.add_argument("--accuracy-repeats", type=int, default=3,
                   help="fixture runs and `openssl speed` runs per round, for each operation (default 3)")
    p.add_argument("--tlsprof", default=os.path.join(REPO, "target/release/tlsprof"), help="the tlsprof binary")
    p.add_argument("--output", default=os.path.join(REPO, "BENCHMARKS.md"), help="where to write the tables")
    p.add_argument("--raw", help="also write every measurement as JSON here")
    p.add_argument("--from-raw", metavar="JSON", help="render the tables from a --raw file; measure nothing")
    p.add_argument("--rss-interval", type=float, default=5.0, help="seconds between RSS samples (long recording)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory (recordings, logs)")
    p.add_argument("--smoke", action="store_true",
                   help="test-sized run: 1 round, 2 s per run, no long recording; skips bpftrace/perf if absent")
    args = p.parse_args(argv)
    if args.smoke:
        args.rounds, args.seconds, args.long_minutes, args.speed_seconds, args.accuracy_repeats = 1, 2, 0, 1, 1
    conds = [c.strip() for c in args.conditions.split(",") if c.strip()]
    unknown = [c for c in conds if c not in CONDITIONS]
    if unknown:
        p.error(f"unknown condition {unknown[0]!r}: choose from {', '.join(CONDITIONS)}")
    args.conditions = ["none"] + [c for c in DEFAULT_CONDITIONS if c in conds and c != "none"]
    if (args.rounds < 1 or args.seconds < 2 or args.full_clients < 1 or args.long_minutes < 0
            or args.accuracy_repeats < 1):
        p.error("--rounds, --full-clients and --accuracy-repeats must be ≥ 1, --seconds ≥ 2 (s_time counts whole "
                "seconds), --long-minutes ≥ 0")
    # Operations per fixture run: enough for about a second of CPU each (the smoke run: a tenth of that).
    scale = 10 if args.smoke else 1
    args.fixture_ops = {("x25519", "rsa2048"): (10000 // scale, 1000 // scale),
                        ("p256", "p256"): (10000 // scale, 20000 // scale)}
    return args


def main(argv):
    args = parse_args(argv)
    if args.from_raw:
        with open(args.from_raw) as f:
            data = json.load(f)
        if any("control" not in r for r in data["runs"]):
            print(f"bench: error: {args.from_raw} is from the sequential method (no twins): it cannot be rendered",
                  file=sys.stderr)
            return 1
        text = render(data)
        with open(args.output, "w") as f:
            f.write(text)
        print(text, end="")
        return 0

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    bench = None
    try:
        bench = Bench(args)
        bench.run()
        text = render(bench.data)
        with open(args.output, "w") as f:
            f.write(text)
        print(text, end="")
        log(f"wrote {args.output}")
        return 0
    except BenchError as e:
        print(f"bench: error: {e}", file=sys.stderr)
        return 1
    except Interrupted as e:
        signum = e.args[0]
        print(f"bench: error: interrupted by {signal.Signals(signum).name}", file=sys.stderr)
        return 128 + signum
    finally:
        # Nothing may be left running: ignore further signals while we stop what we started.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        stop_all_children()
        for twin in bench.twins if bench else []:
            twin.stop()
        if bench and not args.keep:
            shutil.rmtree(bench.scratch, ignore_errors=True)
        elif bench:
            log(f"scratch kept in {bench.scratch}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
