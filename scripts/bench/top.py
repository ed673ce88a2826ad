# SPDX-License-Identifier: Apache-2.0
"""What `tlsprof top` costs itself: on an nginx of 20 workers (21 processes, given by pid) under full handshakes
from `openssl s_time -new`, tlsprof's own CPU over the same seconds with `record`, with `top` on its screen (in
tmux, refreshed every second) and with `top --batch`, one run each per round, interleaved. The difference from
`record` is what merging, analysing and drawing each second costs.
"""

import os
import shutil
import subprocess
import time

from .common import CLK_TCK, BenchError, log, med
from .fmt import fmed, table
from .processes import Child, LineWatcher, run_text
from .procfs import children_of, cpu_ticks
from .twins import NGINX_TARGET, free_port

WORKERS = 20
CONDITIONS = {
    "record": "tlsprof record",
    "top": "tlsprof top (its screen, in tmux)",
    "batch": "tlsprof top --batch",
}
# Seconds measured per run, once the first figures are out.
SECONDS = {"full": 20, "smoke": 2}


class Nginx:
    """A throwaway nginx of WORKERS workers on loopback."""

    def __init__(self, scratch):
        self.dir = os.path.join(scratch, "top-nginx")
        self.port = str(free_port())

    def __enter__(self):
        out = run_text([NGINX_TARGET, "start", self.dir, self.port, "--workers", str(WORKERS)])
        if out.returncode != 0:
            raise BenchError(f"nginx-target.sh start: {out.stderr.strip()[-300:]}")
        master = int(out.stdout.strip())
        deadline = time.monotonic() + 10
        while len(children_of(master)) < WORKERS and time.monotonic() < deadline:
            time.sleep(0.1)
        self.pids = [master, *children_of(master)]
        if len(self.pids) != WORKERS + 1:
            raise BenchError(f"nginx runs {len(self.pids) - 1} workers, not {WORKERS}")
        # By pid: the other nginx instances the benchmark runs are not these.
        self.args = [a for pid in self.pids for a in ("--pid", str(pid))]
        return self

    def __exit__(self, *_):
        subprocess.run([NGINX_TARGET, "stop", self.dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)


class Tmux:
    """tlsprof top on a tmux server of its own, 150×40; its pid is the pane's (exec)."""

    def __init__(self, tlsprof, socket, args):
        self.socket = socket
        self._tmux("new-session", "-d", "-s", "top", "-x", "150", "-y", "40",
                   f"exec {tlsprof} top {' '.join(args)} --output /dev/null")
        self.pid = int(self._tmux("list-panes", "-t", "top", "-F", "#{pane_pid}").strip())

    def _tmux(self, *args):
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise BenchError(f"tmux {args[0]}: {out.stderr.strip()}")
        return out.stdout

    def wait_for(self, text, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self._tmux("capture-pane", "-p", "-t", "top"):
                return True
            time.sleep(0.2)
        return False

    def stop(self):
        try:
            self._tmux("send-keys", "-t", "top", "q")
            deadline = time.monotonic() + 30
            while os.path.exists(f"/proc/{self.pid}") and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)


def start_tlsprof(bench, nginx, rnd, condition):
    """tlsprof under `condition`, once its first figures are out (or its probes are live): (pid, stop)."""
    if condition == "top":
        t = Tmux(bench.tlsprof, f"tlsprof-bench-{os.getpid()}", nginx.args)
        if not t.wait_for("since reset", 60):
            t.stop()
            raise BenchError("tlsprof top showed no figures in 60 s")
        return t.pid, t.stop
    if condition == "batch":
        child = Child([bench.tlsprof, "top", "--batch", *nginx.args], stdout=subprocess.PIPE,
                      stderr=subprocess.DEVNULL)
        ready = LineWatcher(child.popen.stdout).wait_for(lambda l: "nginx" in l, timeout=60)
    else:
        out = os.path.join(bench.scratch, f"top-r{rnd}-record.tlsprof")
        child = Child([bench.tlsprof, "record", *nginx.args, "--duration", "600", "-o", out],
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        ready = LineWatcher(child.popen.stderr).wait_for(lambda l: "probes live" in l, timeout=60)
    if ready is None:
        child.stop(grace=5)
        raise BenchError(f"{CONDITIONS[condition]} did not start")
    return child.pid, lambda: child.stop(grace=60)


def top_run(bench, nginx, rnd, condition, seconds):
    """One run: tlsprof's CPU over `seconds` of load; its figures go to bench.data["top"]."""
    pid, stop = start_tlsprof(bench, nginx, rnd, condition)
    try:
        load = Child(["openssl", "s_time", "-connect", f"127.0.0.1:{nginx.port}", "-new", "-time",
                      str(seconds + 2)])
        time.sleep(1)
        t0, p0 = time.monotonic(), cpu_ticks(pid)
        time.sleep(seconds)
        t1, p1 = time.monotonic(), cpu_ticks(pid)
        load.wait(seconds + 30)
    finally:
        stop()
    rec = {"round": rnd, "condition": condition, "seconds": t1 - t0,
           "cpu_pct": 100.0 * (p1 - p0) / CLK_TCK / (t1 - t0)}
    bench.data.setdefault("top", []).append(rec)
    log(f"round {rnd} top {condition:6}: tlsprof {rec['cpu_pct']:.2f}% of a CPU over {rec['seconds']:.1f} s")


def run_round(bench, rnd):
    """Every condition once, in an order rotated by the round."""
    if not shutil.which("tmux"):
        raise BenchError("tmux is not installed (scripts/install-deps.sh installs it)")
    seconds = SECONDS["smoke" if bench.args.smoke else "full"]
    order = list(CONDITIONS)
    k = (rnd - 1) % len(order)
    with Nginx(bench.scratch) as nginx:
        for condition in order[k:] + order[:k]:
            top_run(bench, nginx, rnd, condition, seconds)


def section_values(data):
    """The template's fields of the section, or none when the run measured no top runs."""
    runs = data.get("top") or []
    if not runs:
        return {"top_measured": False, "top_table": "", "top_seconds": 0, "top_note": ""}
    base = {r["round"]: r["cpu_pct"] for r in runs if r["condition"] == "record"}
    rows = []
    for c, label in CONDITIONS.items():
        rs = [r for r in runs if r["condition"] == c]
        more = [r["cpu_pct"] - base[r["round"]] for r in rs if c != "record" and r["round"] in base]
        rows.append([label, len(rs), fmed([r["cpu_pct"] for r in rs], 2),
                     "–" if c == "record" else fmed(more, 2)])
    note = ""
    if data.get("top_only"):
        m = data["machine"]
        note = (f" Measured apart from the rest of this file (`scripts/bench.py --top-only`, "
                f"{data['settings']['rounds']} rounds), {data.get('started', '?')}: {m['cpu']}, kernel "
                f"{m['kernel']}, {m['tlsprof']}.")
    return {"top_measured": True, "top_seconds": round(med([r["seconds"] for r in runs])),
            "top_table": table(["Condition", "runs", "tlsprof CPU, % of one CPU", "more than record, paired"],
                               rows),
            "top_note": note}


HEADING = "## tlsprof top"
