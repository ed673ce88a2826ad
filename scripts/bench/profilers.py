# SPDX-License-Identifier: Apache-2.0
"""The conditions of a run: which profiler attaches to the target, how we know it is live, what it cost."""

import json
import os
import re
import signal
import subprocess
import time

from .common import REPO, BenchError
from .processes import Child, LineWatcher, run_text
from .procfs import has_perf_event_fd, mapped_library

CONDITIONS = {
    "none": "no profiler",
    "tlsprof": "tlsprof (defaults: --max-overhead 0.3)",
    "tlsprof-1": "tlsprof --max-overhead 1",
    "tlsprof-2": "tlsprof --max-overhead 2",
    "tlsprof-exact": "tlsprof --max-overhead 100 (probes throughout)",
    "tlsprof-all": "tlsprof --all-probes",
    "bpftrace": "bpftrace (bench-bpftrace.bt)",
    "perf": "perf record -F 99 -g",
}
DEFAULT_CONDITIONS = ["none", "tlsprof", "tlsprof-1", "tlsprof-2", "tlsprof-exact", "tlsprof-all", "bpftrace", "perf"]
TLSPROF_ARGS = {"tlsprof": [], "tlsprof-1": ["--max-overhead", "1"], "tlsprof-2": ["--max-overhead", "2"],
                "tlsprof-exact": ["--max-overhead", "100"], "tlsprof-all": ["--all-probes"]}
# The budget each condition asks for, in % of the targets' CPU.
TLSPROF_BUDGET = {"tlsprof": 0.3, "tlsprof-1": 1.0, "tlsprof-2": 2.0, "tlsprof-exact": 100.0, "tlsprof-all": 0.3}
BPFTRACE_SCRIPT = os.path.join(REPO, "scripts/bench-bpftrace.bt")


def report_summary(tlsprof, recording):
    """What the benchmark keeps of `tlsprof report --json`, and the seconds the report took."""
    t0 = time.monotonic()
    out = run_text([tlsprof, "report", "--json", recording], timeout=120)
    elapsed = time.monotonic() - t0
    if out.returncode != 0:
        raise BenchError(f"tlsprof report --json: {out.stderr.strip()}")
    r = json.loads(out.stdout)
    stages = {s["name"]: s for s in r.get("stages", [])}
    h = r.get("handshakes") or {}
    return {
        # calls and CPU are for the whole recording (estimated when the probes were attached part of the time);
        # `observed` is what the probe windows saw, as the function table's calls are.
        "stages": {n: {k: s.get(k) for k in ("calls", "cpu_ms", "self_cpu_ms", "cpu_us_per_call", "sampled",
                                             "observed")}
                   for n, s in stages.items()},
        "functions": [{k: f.get(k) for k in ("name", "stage", "calls")} for f in r.get("functions", [])],
        # total: the whole recording's (estimated, with its interval, or exact); observed.total: in the windows.
        "handshakes": {"estimated": h.get("estimated"), "total": h.get("total"), "total_ci95": h.get("total_ci95"),
                       "observed": (h.get("observed") or {}).get("total"),
                       "kinds": [{"role": k.get("role"), "count": k.get("count"),
                                  "cpu_ms_mean": (k.get("cpu_ms") or {}).get("mean")} for k in h.get("kinds", [])]},
        **{k: r.get(k) for k in ("probing", "probe_hits", "probe_stepped_hits", "probe_cost_us_per_hit",
                                 "probe_cost_cold_us_per_step", "probe_overhead_ms",
                                 "probe_overhead_calibrated_ms", "probe_traps", "own_programs_ms", "process_cpu_ms",
                                 "samples", "lost", "all_probes", "duration_s")},
    }, elapsed


class Session:
    """One profiler attached to one target for one run; `none` has no process."""

    def __init__(self, tlsprof, scratch, condition, tag, report_times=None):
        """report_times: a list that gets the seconds `tlsprof report --json` took, if given."""
        self.tlsprof = tlsprof
        self.scratch = scratch
        self.condition = condition
        self.tag = tag
        self.report_times = report_times
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

    def _file(self, suffix):
        return os.path.join(self.scratch, f"{self.tag}.{suffix}")

    def start(self, target, bound_s, extra=()):
        """Attaches to pid `target` for at most bound_s seconds; returns once the profiler is live."""
        if self.condition in TLSPROF_ARGS:
            self.output = self._file("tlsprof")
            self.child = Child([self.tlsprof, "record", "--pid", target, "--duration", f"{bound_s:.0f}", "-o",
                                self.output, *TLSPROF_ARGS[self.condition], *extra],
                               stdout=self._file("summary"), stderr=subprocess.PIPE)
            self.watch = LineWatcher(self.child.popen.stderr)
            line = self._wait_live(lambda l: "probes live" in l, "tlsprof")
            m = re.search(r"\((\d+(?:\.\d+)?) ms\)", line)
            self.own_ms = float(m.group(1)) if m else None
        elif self.condition == "bpftrace":
            libssl, libcrypto = mapped_library(target, "libssl"), mapped_library(target, "libcrypto")
            if not libssl or not libcrypto:
                raise BenchError(f"pid {target} maps no shared libssl/libcrypto: bpftrace has nothing to probe")
            self.child = Child(["bpftrace", "-p", target, BPFTRACE_SCRIPT, libssl, libcrypto, target],
                               stdout=subprocess.PIPE, stderr=self._file("err"))
            self.watch = LineWatcher(self.child.popen.stdout)
            # BEGIN runs once every probe is attached.
            self._wait_live(lambda l: "bench-bpftrace: live" in l, "bpftrace")
        elif self.condition == "perf":
            self.output = self._file("perf.data")
            log_file = self._file("perf.log")
            # The cpu-clock software event, as tlsprof samples: it needs no hardware PMU.
            self.child = Child(["perf", "record", "-e", "cpu-clock", "-F", "99", "-g", "-p", target, "-o",
                                self.output], stdout=log_file, stderr=subprocess.STDOUT)
            # perf prints nothing when it starts sampling: its events are live once it holds perf_event fds.
            deadline = time.monotonic() + 60
            while not has_perf_event_fd(self.child.pid):
                if self.child.poll() is not None or time.monotonic() > deadline:
                    self.child.stop(grace=5)
                    with open(log_file) as f:
                        raise BenchError(f"perf record did not start: {f.read().strip()[-300:] or 'no output'}")
                time.sleep(0.01)
            self.live_s = time.monotonic() - self.child.started
        return self

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
            res["report"], elapsed = report_summary(self.tlsprof, self.output)
            if self.report_times is not None:
                self.report_times.append(elapsed)
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
