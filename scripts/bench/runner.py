# SPDX-License-Identifier: Apache-2.0
"""The benchmark run: interleaved rounds of overhead runs on the twins, the accuracy runs, the long recording, then
continuous mode (serve.py).

Every measurement goes into `Bench.data`, the raw data that render.py turns into BENCHMARKS.md (and --raw saves).
"""

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from . import bpfstats, java, starts, top, wire
from .common import CLK_TCK, REPO, BenchError, log, med
from .figures import FIXTURE_KINDS, HANDSHAKE_FIXTURES, ops_in_windows
from .machine import facts
from .processes import Child, LineWatcher, run_text
from .procfs import busy_ticks, cpu_ticks, cpu_times, loadavg, memory_sample
from .profilers import Session
from .serve import serve_run
from .settings import runs_condition, settings_of
from .twins import (GoServer, Nginx, RustServer, build_go, build_aws_lc, build_rust_example, go_tool,
                    paired_overhead, pin_twins, twin_figures, worker_counters)
from .workloads import (AWS_LC_WORKLOADS, BORING_WORKLOADS, ECDSA_WORKLOADS, GO_WORKLOADS, RUSTLS_WORKLOADS, WORKLOADS,
                        parse_loads, run_load, start_full, wait_clients)

# `openssl speed` lines of the four operations. Per-op seconds are printed with 4-6 decimals (0.0000s for
# ECDSA): the ops/s column is exact, so that is the one read.
SPEED_LINES = {
    "rsa2048_sign": r"^rsa\s+2048 bits\s+([\d.]+)s\s+([\d.]+)s\s+([\d.]+)\s+([\d.]+)",
    "ecdsap256_sign": r"^\s*256 bits ecdsa \(nistp256\)\s+([\d.]+)s\s+([\d.]+)s\s+([\d.]+)\s+([\d.]+)",
    "p256_derive": r"^\s*256 bits ecdh \(nistp256\)\s+([\d.]+)s\s+([\d.]+)",
    "x25519_derive": r"^\s*253 bits ecdh \(X25519\)\s+([\d.]+)s\s+([\d.]+)",
}


def read_op_log(path):
    """The fixture's --op-log: (kind 'd' or 's', start in ns since the Unix epoch, thread CPU µs) per operation."""
    with open(path) as f:
        return [(kind, int(start), float(cpu)) for kind, start, cpu in (line.split() for line in f)]


def parse_speed(text):
    """µs per operation (and the printed per-op seconds) of each SPEED_LINES key; None for a line not found."""
    rec = {}
    for key, pat in SPEED_LINES.items():
        m = re.search(pat, text, re.M)
        if not m:
            return None, key
        per_s = float(m.group(3)) if key.endswith("_sign") else float(m.group(2))
        rec[key] = 1e6 / per_s
        rec[key + "_printed_s"] = float(m.group(1))
    return rec, None


class Bench:
    def __init__(self, args):
        self.args = args
        self.tlsprof = args.tlsprof
        self.scratch = tempfile.mkdtemp(prefix="tlsprof-bench.")
        self.twins = []
        # nginx with an ECDSA P-256 certificate: the ecdsa_full workload's twins.
        self.ecdsa_twins = []
        # --go: two Go servers, the twins of the Go workloads.
        self.go_twins = []
        self.rustls_twins = []
        self.boring_twins = []
        self.aws_lc_twins = []
        # The ground-truth fixture of each library measured: tests/fixtures/crypto_ops.c, with --go examples/go/ops,
        # with --rustls rustls-ops, with --boring boring-ops, with --aws-lc tests/fixtures/bssl_handshakes.c built
        # against AWS-LC.
        self.fixtures = {}
        self.conditions = list(args.conditions)
        self.data = {"settings": settings_of(args), "runs": [], "accuracy": [], "speed": [],
                     "report_times_short": [], "long": None, "serve": None, "skipped": [], "starts": [], "top": [],
                     "wire": []}

    def session(self, condition, tag, timed_report=False):
        return Session(self.tlsprof, self.scratch, condition, tag,
                       self.data["report_times_short"] if timed_report else None)

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
        for flag in ("rustls", "boring", "aws_lc"):
            if getattr(self.args, flag) and not shutil.which("cargo"):
                raise BenchError(f"cargo is not installed (scripts/install-deps.sh installs it), and "
                                 f"--{flag.replace('_', '-')} needs it")
        if self.args.go and not go_tool():
            raise BenchError("go is not installed (scripts/install-deps.sh installs it), and --go needs it")
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

    def build_fixtures(self):
        self.fixtures["openssl"] = os.path.join(self.scratch, "crypto_ops")
        out = run_text(["cc", "-O2", "-Wall", "-o", self.fixtures["openssl"],
                        os.path.join(REPO, "tests/fixtures/crypto_ops.c"), "-lcrypto"], timeout=120)
        if out.returncode != 0:
            raise BenchError(f"building the fixture failed: {out.stderr.strip()[-300:]}")
        if self.args.go:
            self.fixtures["go"] = build_go(self.scratch, ("ops",))[0]
        if self.args.rustls:
            self.fixtures["rustls"] = build_rust_example("rustls-ops")
        if self.args.boring:
            self.fixtures["boringssl"] = build_rust_example("boring-ops")
        if self.args.aws_lc:
            self.fixtures["aws-lc"] = build_aws_lc()[1]

    # -- one overhead run
    def overhead_run(self, rnd, workload, condition, profiled):
        """The profiler on twin `profiled`, the same load on both twins at once; the other twin is the control."""
        a = self.args
        twins = (self.ecdsa_twins if workload in ECDSA_WORKLOADS else
                 self.go_twins if workload in GO_WORKLOADS else
                 self.rustls_twins if workload in RUSTLS_WORKLOADS else
                 self.boring_twins if workload in BORING_WORKLOADS else
                 self.aws_lc_twins if workload in AWS_LC_WORKLOADS else self.twins)
        for twin in twins:
            twin.check_worker()
        target = twins[profiled]
        sess = self.session(condition, f"r{rnd}-{workload}-{condition}", timed_report=True)
        # The connection counter's programs run in every tlsprof mode: timed by the kernel's BPF statistics,
        # switched on once the probes are live (attach and calibration as usual) and off again as tlsprof stops.
        timed = condition.startswith("tlsprof")
        try:
            try:
                if condition != "none":
                    sess.start(target.worker, bound_s=a.seconds + 120)
                counter = None
                if timed:
                    bpfstats.enable()
                    counter = bpfstats.Counter(sess.pid)
                time.sleep(0.2)
                # Always A, then B: the profiled twin's clients do not always start first.
                k0 = counter.read() if counter else None
                c0, b0 = [worker_counters(t.worker) for t in twins], busy_ticks()
                p0 = cpu_ticks(sess.pid) if sess.pid else None
                loads = run_load(workload, twins, a.seconds, self.scratch, a.full_clients)
                c1, b1 = [worker_counters(t.worker) for t in twins], busy_ticks()
                p1 = cpu_ticks(sess.pid) if sess.pid else None
                # Right before tlsprof stops: its programs go when it exits.
                k1 = counter.read() if counter else None
            except BaseException:
                if sess.child:
                    sess.child.stop(grace=10)
                raise
            prof = sess.stop()
        finally:
            if timed:
                bpfstats.restore()
        if sess.child and sess.child.poll() is None:
            raise BenchError(f"{condition} did not stop")
        figures = [twin_figures(load, x0, x1) for load, x0, x1 in zip(loads, c0, c1)]
        mine, other = figures[profiled], figures[1 - profiled]
        wall = max(load["wall_s"] for load in loads)
        rec = {
            "round": rnd, "workload": workload, "condition": condition, "profiled_twin": target.name, **mine,
            "control": other,
            "paired_overhead": paired_overhead(mine, other),
            "paired_overhead_ticks": (mine["cpu_us_per_req"] / other["cpu_us_per_req"] - 1
                                      if other["worker_ticks"] else None),
            "paired_rate": mine["rate"] / other["rate"] - 1,
            # Everything else the machine ran meanwhile (other users, the kernel), in cores: the noise.
            "background_cores": max(0.0, (b1 - b0 - mine["worker_ticks"] - other["worker_ticks"]
                                          - ((p1 - p0) if p0 is not None else 0)) / CLK_TCK
                                    - sum(load["client_cpu_s"] for load in loads)) / wall,
            "prof_cpu_load_frac": ((p1 - p0) / CLK_TCK / mine["wall_s"]) if p0 is not None else None,
            # Every run of the counter's programs over the load window, for any process on the machine.
            "counter": bpfstats.delta(k0, k1) if k1 else None,
            **{f"prof_{k}": v for k, v in prof.items()},
        }
        self.data["runs"].append(rec)
        extra = f", {condition} {rec['prof_cpu_load_frac'] * 100:.1f}% CPU" if p0 is not None else ""
        if rec["counter"]:
            runs = sum(p["run_cnt"] for p in rec["counter"].values())
            ns = sum(p["run_time_ns"] for p in rec["counter"].values())
            extra += f", counter {runs} runs, {ns / runs if runs else 0:.0f} ns/run"
        log(f"round {rnd} {workload:9} {condition:13} on {target.name}: {mine['rate']:7.0f} vs {other['rate']:7.0f} "
            f"req/s, {mine['cpu_us_per_req_ns']:7.1f} vs {other['cpu_us_per_req_ns']:7.1f} µs CPU/req: "
            f"{rec['paired_overhead'] * 100:+.2f}%{extra}")

    # -- accuracy
    def fixture_run(self, rnd, library, derive_alg, sign_alg, as_speed):
        """tlsprof on the ground-truth fixture of `library`; it times each operation itself, probed and in its
        unprobed twin in turn."""
        # BoringSSL's and AWS-LC's fixtures make whole handshakes (one signature each); the others, operations.
        counts = ([self.args.fixture_handshakes[(derive_alg, sign_alg)]] if library in HANDSHAKE_FIXTURES else
                  self.args.fixture_ops[(derive_alg, sign_alg)])
        kinds = FIXTURE_KINDS[library]
        tag = f"{library}-{derive_alg}-{sign_alg}{'-as-speed' if as_speed else ''}"
        op_log = os.path.join(self.scratch, f"ops-r{rnd}-{tag}")
        fx = Child([self.fixtures[library], "--derive", derive_alg, "--sign", sign_alg, *(["--as-speed"] if as_speed else []),
                    "--op-log", op_log, *counts], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = LineWatcher(fx.popen.stdout)
        err = LineWatcher(fx.popen.stderr)
        if out.wait_for(lambda l: l == "ready", timeout=300) is None:
            fx.stop(signal.SIGKILL)
            raise BenchError(f"fixture did not get ready: {err.text().strip()[-200:]}")
        sess = self.session("tlsprof", f"r{rnd}-fixture-{tag}")
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
        spans = [(w["start_unix_ns"], w["start_unix_ns"] + w["live_s"] * 1e9)
                 for w in (rep.get("probing") or {}).get("window_spans", [])]
        rec = {"round": rnd, "derive_alg": derive_alg, "sign_alg": sign_alg, "as_speed": as_speed, "truth": truth,
               "live_s": prof["live_s"], "live_own_ms": prof["live_own_ms"],
               "probe_cost_us_per_hit": rep["probe_cost_us_per_hit"],
               "probe_cost_us_per_step": rep["probe_cost_cold_us_per_step"],
               # Single-stepped hits per probed call (Go's, on kernels that step them): a call's hits are alike.
               "steps_per_call": (rep["probe_stepped_hits"] or 0) / max(1, sum(f["calls"] or 0
                                                                              for f in rep["functions"])),
               "in_windows": ops_in_windows(read_op_log(op_log), read_op_log(op_log + ".twin"), spans, kinds)}
        for stage in kinds:
            if stage == "handshake":
                # The server's handshakes (the client's are the fixture's own doing, in the same process).
                server = [k for k in rep["handshakes"]["kinds"] if k["role"] == "server"]
                n = sum(k["count"] for k in server)
                rec["tlsprof_handshake_us"] = sum(k["count"] * k["cpu_ms_mean"] for k in server) * 1e3 / n if n else None
                rec["tlsprof_handshake_calls"] = rec["tlsprof_handshake_observed_calls"] = n
                continue
            s = rep["stages"].get(stage) or {}
            seen = (s.get("observed") or {}).get("calls")
            rec[f"tlsprof_{stage}_us"] = s.get("cpu_us_per_call")
            rec[f"tlsprof_{stage}_calls"] = s.get("calls")
            rec[f"tlsprof_{stage}_observed_calls"] = seen
            # Probed functions entered per operation (EVP_DigestSign → RSA_sign is two): each adds an entry and
            # a return hit inside the fixture's clock window. The function table counts what the windows saw.
            fn_calls = sum(f["calls"] or 0 for f in rep.get("functions", []) if f.get("stage") == stage)
            rec[f"{stage}_functions_per_op"] = fn_calls / seen if seen else None
        self.data["accuracy"].append(rec)
        mode = " as speed" if as_speed else ""
        figures = []
        for stage in kinds:
            ours, window = rec[f"tlsprof_{stage}_us"], rec["in_windows"][stage]
            truth_in_windows = window["unprobed_cpu_us"]
            figures.append(f"{stage} tlsprof {'–' if ours is None else f'{ours:.1f}'} vs "
                           f"{'–' if truth_in_windows is None else f'{truth_in_windows:.1f}'} µs "
                           f"({window['ops']} ops in the windows; {truth[f'unprobed_{stage}_cpu_us']:.1f} over the run)")
        log(f"round {rnd} fixture {library} {derive_alg}/{sign_alg}{mode}: {', '.join(figures)} (unprobed)")

    def speed_run(self, rnd):
        argv = ["openssl", "speed", "-seconds", str(self.args.speed_seconds), "rsa2048", "ecdsap256", "ecdhx25519",
                "ecdhp256"]
        out = run_text(argv, timeout=30 * self.args.speed_seconds + 60)
        rec, missing = parse_speed(out.stdout)
        if rec is None:
            raise BenchError(f"cannot parse `{' '.join(argv)}` for {missing}: {(out.stdout + out.stderr)[-200:]}")
        self.data["speed"].append({"round": rnd, **rec})
        log(f"round {rnd} openssl speed: " + ", ".join(f"{k} {rec[k]:.1f} µs" for k in SPEED_LINES))

    # -- long recording
    def long_run(self):
        a = self.args
        secs = a.long_minutes * 60
        # tlsprof on twin A; twin B gets the same load, as the control of a paired overhead over the whole
        # recording: the governor's steady state, which the short runs, one or two probe windows each, only sample.
        # The load is the full-handshake runs' (clients that keep the workers busy): at a modest fixed rate the
        # twins idle between handshakes, and their CPU per handshake no longer moves together.
        twin = self.twins[0]
        log(f"long recording: {a.long_minutes:g} min of tlsprof defaults on nginx {twin.name}'s worker, "
            f"full handshakes on both twins")
        for t in self.twins:
            t.check_worker()
        sess = self.session("tlsprof", "long")
        sess.start(twin.worker, bound_s=secs)
        if not sess.pid:
            raise BenchError("tlsprof did not start")
        samples = []
        clients = []
        try:
            w0 = [worker_counters(t.worker) for t in self.twins]
            t0 = time.monotonic()
            clients = [start_full(self.scratch, t.port, round(secs), f"long-{t.name}", a.full_clients)
                       for t in self.twins]
            p0 = cpu_ticks(sess.pid)
            # Sampled while recording; after the duration tlsprof finishes (symbolizes, writes): timed apart.
            while sess.child.poll() is None and time.monotonic() < t0 + secs:
                sample = memory_sample(sess.pid, time.monotonic() - t0, p0)
                if sample:
                    samples.append(sample)
                time.sleep(min(a.rss_interval, max(0.0, t0 + secs - time.monotonic())))
            wait_clients(clients, time.monotonic() + 60, "full")
            w1 = [worker_counters(t.worker) for t in self.twins]
            loads = parse_loads("full", clients)
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
        last = samples[-1] if samples else None
        cpu_s = last["cpu_ticks"] / CLK_TCK if last else None
        mine, other = [twin_figures(load, x0, x1) for load, x0, x1 in zip(loads, w0, w1)]
        self.data["long"] = {
            "minutes": a.long_minutes, "twin": mine, "control": other,
            "paired_overhead": paired_overhead(mine, other),
            "samples": samples, "maxrss_mb": prof["maxrss_mb"],
            "cpu_total_ms": prof["cpu_total_ms"], "cpu_attach_ms": p0 * 1e3 / CLK_TCK, "cpu_during_s": cpu_s,
            "cpu_frac": cpu_s / last["t_s"] if last and last["t_s"] > 0 else None,
            "cpu_finish_ms": (prof["cpu_total_ms"] - (p0 + last["cpu_ticks"]) * 1e3 / CLK_TCK) if last else None,
            "finish_s": finish_s, "report_times_s": reports, "file_bytes": prof["file_bytes"],
            "report": prof["report"], "live_s": prof["live_s"],
        }
        log(f"long recording: {mine['requests']} handshakes ({other['requests']} on the control twin), paired "
            f"overhead {self.data['long']['paired_overhead'] * 100:+.2f}%, peak RSS {prof['maxrss_mb']:.1f} MB, "
            f"report {med(reports):.2f} s")

    # -- the whole run
    def run(self):
        a = self.args
        self.check_tools()
        self.data["machine"] = facts(self.tlsprof)
        self.data["started"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        self.data["loadavg_start"] = loadavg()
        steal0, all0 = cpu_times()
        self.build_fixtures()
        self.twins = [Nginx(self.scratch, "A"), Nginx(self.scratch, "B")]
        try:
            for twin in self.twins:
                twin.start()
            self.data["worker_cpu"] = pin_twins(self.twins)
            self.ecdsa_twins = [Nginx(self.scratch, name, cert="ecdsa-p256") for name in ("A", "B")]
            for twin in self.ecdsa_twins:
                twin.start()
            pin_twins(self.ecdsa_twins)
            if a.go:
                server, _client = build_go(self.scratch)
                self.go_twins = [GoServer(self.scratch, "A", server), GoServer(self.scratch, "B", server)]
                for twin in self.go_twins:
                    twin.start()
                pin_twins(self.go_twins)
            for flag, example in (("rustls", "rustls-server"), ("boring", "boring-server")):
                if getattr(a, flag):
                    server = build_rust_example(example)
                    twins = [RustServer(self.scratch, "A", server), RustServer(self.scratch, "B", server)]
                    setattr(self, f"{flag}_twins", twins)
                    for twin in twins:
                        twin.start()
                    pin_twins(twins)
            if a.aws_lc:
                executable = build_aws_lc()[0]
                self.aws_lc_twins = [Nginx(self.scratch, "A", executable), Nginx(self.scratch, "B", executable)]
                for twin in self.aws_lc_twins:
                    twin.start()
                pin_twins(self.aws_lc_twins)
            workloads = [w for w in WORKLOADS
                         if (a.go or w not in GO_WORKLOADS) and (a.rustls or w not in RUSTLS_WORKLOADS)
                         and (a.boring or w not in BORING_WORKLOADS) and (a.aws_lc or w not in AWS_LC_WORKLOADS)]
            for rnd in range(1, a.rounds + 1):
                # Each round starts one condition later: no condition always runs first or after the same one.
                shift = (rnd - 1) % len(self.conditions)
                order = self.conditions[shift:] + self.conditions[:shift]
                for w, workload in enumerate(workloads):
                    for cond in order:
                        # bench-bpftrace.bt probes libssl: a Go, rustls, boring or AWS-LC nginx server has none.
                        if (workload in GO_WORKLOADS + RUSTLS_WORKLOADS + BORING_WORKLOADS + AWS_LC_WORKLOADS
                                and cond == "bpftrace") or not runs_condition(self.data["settings"], workload, cond):
                            continue
                        # The profiled twin alternates from round to round (and between neighbouring runs), so that
                        # every condition runs about as often on each twin and a difference between them cancels.
                        self.overhead_run(rnd, workload, cond, (rnd + w + self.conditions.index(cond)) % 2)
                        time.sleep(0.5)
                # Per-operation figures of a few seconds each move with the neighbours: several runs a round, and
                # the medians decide.
                for _ in range(a.accuracy_repeats):
                    for derive_alg, sign_alg in a.fixture_ops:
                        for as_speed in (False, True):
                            self.fixture_run(rnd, "openssl", derive_alg, sign_alg, as_speed)
                        for library in ("go", "rustls", "boringssl", "aws-lc"):
                            if library in self.fixtures:
                                self.fixture_run(rnd, library, derive_alg, sign_alg, False)
                    self.speed_run(rnd)
                starts.run_round(self, rnd)
                top.run_round(self, rnd)
                wire.run_round(self, rnd)
                if a.java:
                    java.run_round(self, rnd)
                self.save_raw()
            if a.long_minutes > 0:
                self.long_run()
                self.save_raw()
            if a.serve_minutes > 0:
                serve_run(self)
        finally:
            for twin in (self.twins + self.ecdsa_twins + self.go_twins + self.rustls_twins + self.boring_twins
                         + self.aws_lc_twins):
                twin.stop()
        self.data["finished"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        self.data["loadavg_end"] = loadavg()
        steal1, all1 = cpu_times()
        self.data["steal_frac"] = (steal1 - steal0) / (all1 - all0) if all1 > all0 else None
        self.save_raw()

    def run_only(self, module):
        """--starts-only, --top-only, --wire-only-bench, --java-only-bench: that module's runs alone (its own count of rounds, where it
        has one)."""
        self.check_tools()
        self.data["machine"] = facts(self.tlsprof)
        self.data["started"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        self.data[{starts: "starts_only", top: "top_only", wire: "wire_only_bench",
                   java: "java_only_bench"}[module]] = True
        rounds = module.rounds(self.args) if hasattr(module, "rounds") else self.args.rounds
        for rnd in range(1, rounds + 1):
            module.run_round(self, rnd)
            self.save_raw()

    def save_raw(self):
        if self.args.raw:
            with open(self.args.raw, "w") as f:
                json.dump(self.data, f, indent=1)
