# SPDX-License-Identifier: Apache-2.0
"""Continuous mode: `tlsprof serve` (defaults) on twin A's worker for --serve-minutes while both twins get the
full-handshake load, scraped as Prometheus would and asked for profiles as a profile store would. What it cost the
target (paired with twin B, per slice and over the whole run), its memory and CPU over time, and its counters against
the clients' count."""

import gzip
import http.client
import os
import re
import signal
import subprocess
import time

from .common import CLK_TCK, BenchError, log
from .processes import Child, LineWatcher
from .procfs import cpu_ticks, memory_sample
from .twins import free_port, paired_overhead, twin_figures, worker_counters
from .workloads import parse_loads, start_full, wait_clients

# A Prometheus server at a common scrape interval; a profile store asking for the last 30 s once a minute.
SCRAPE_EVERY_S = 15.0
PROFILE_EVERY_S = 60.0
PROFILE_SECONDS = 30
# The first profile once a few of tlsprof's intervals are in (it hands one over every 5 s).
FIRST_PROFILE_S = 20.0
# The overhead is also measured per slice, a sixth of the run (5 minutes of the default 30): one run of the clients
# per twin each.
SLICES = 6
# SIGTERM must end it at least this soon.
STOP_GRACE_S = 10.0
# After the load, the wait for its last connections to reach the counters.
SETTLE_S = 60.0
HTTP_TIMEOUT_S = 10.0

# The exposition format's sample lines: `name{label="value",...} value` (tlsprof writes no timestamps).
SAMPLE_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
# What each scrape keeps: key → (metric, labels its samples must have), summed over the rest.
SCRAPED = {
    "handshakes": ("tlsprof_handshakes_total", {}),
    "handshakes_lower": ("tlsprof_handshakes_ci95_lower", {}),
    "handshakes_upper": ("tlsprof_handshakes_ci95_upper", {}),
    "connections": ("tlsprof_connections_total", {}),
    "intervals": ("tlsprof_intervals_total", {}),
    "estimated_intervals": ("tlsprof_intervals_total", {"estimated": "true"}),
    "sign_cpu_s": ("tlsprof_stage_cpu_seconds_total", {"stage": "sign"}),
    "target_cpu_s": ("tlsprof_target_cpu_seconds_total", {}),
    "probe_cpu_s": ("tlsprof_probe_cpu_seconds_total", {}),
    "lost_events": ("tlsprof_lost_events_total", {}),
}


def parse_exposition(text):
    """The samples of a Prometheus text exposition, [(name, {label: value}, value)]; comments skipped."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_LINE.match(line)
        try:
            value = float(m.group(3)) if m else None
        except ValueError:
            value = None
        if value is None:
            raise BenchError(f"/metrics line {n} is not `name{{labels}} value`: {line[:160]!r}")
        out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), value))
    return out


def metric_sum(samples, name, labels):
    """The sum of a metric's samples that carry `labels`; None when it has none."""
    xs = [v for n, ls, v in samples if n == name and all(ls.get(k) == w for k, w in labels.items())]
    return sum(xs) if xs else None


def get(port, path):
    """(body, seconds) of a GET from tlsprof serve; anything but a 200 answer is a BenchError."""
    t = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT_S)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
    except (OSError, http.client.HTTPException) as e:
        raise BenchError(f"GET {path} from tlsprof serve: {e}") from None
    finally:
        conn.close()
    if resp.status != 200:
        raise BenchError(f"GET {path} from tlsprof serve: HTTP {resp.status} "
                         f"{body[:200].decode(errors='replace').strip()!r}")
    return body, time.monotonic() - t


def scrape(port, t_s):
    """One scrape of /metrics and the sums SCRAPED names."""
    body, took = get(port, "/metrics")
    samples = parse_exposition(body.decode(errors="replace"))
    rec = {"t_s": t_s, "bytes": len(body), "fetch_s": took, "samples": len(samples),
           **{key: metric_sum(samples, name, labels) for key, (name, labels) in SCRAPED.items()}}
    if rec["intervals"] is None:
        raise BenchError(f"/metrics at {t_s:.0f} s has no tlsprof_intervals_total ({len(body)} bytes): tlsprof "
                         f"serve added no interval yet")
    return rec


def fetch_profile(port, t_s):
    """One /profile?seconds=N: it must be a gzipped profile."""
    body, took = get(port, f"/profile?seconds={PROFILE_SECONDS}")
    try:
        proto = gzip.decompress(body) if body[:2] == b"\x1f\x8b" else None
    except (OSError, EOFError):
        proto = None
    if not proto:
        raise BenchError(f"/profile?seconds={PROFILE_SECONDS} at {t_s:.0f} s is not a gzipped profile "
                         f"({len(body)} bytes, starting {body[:8]!r})")
    return {"t_s": t_s, "bytes": len(body), "proto_bytes": len(proto), "fetch_s": took}


class Watcher:
    """What happens while the load runs, each when it falls due: tlsprof's memory and CPU sampled, /metrics
    scraped, a profile fetched."""

    def __init__(self, pid, port, t0, ticks0, sample_every):
        self.pid, self.port, self.t0, self.ticks0 = pid, port, t0, ticks0
        self.every = {"sample": sample_every, "scrape": SCRAPE_EVERY_S, "profile": PROFILE_EVERY_S}
        self.next = {"sample": 0.0, "scrape": SCRAPE_EVERY_S, "profile": FIRST_PROFILE_S}
        self.samples, self.scrapes, self.profiles = [], [], []

    def now(self):
        return time.monotonic() - self.t0

    def tick(self):
        for what, every in self.every.items():
            if self.now() < self.next[what]:
                continue
            t = self.now()
            if what == "sample":
                sample = memory_sample(self.pid, t, self.ticks0)
                if sample:
                    self.samples.append(sample)
            elif what == "scrape":
                self.scrapes.append(scrape(self.port, t))
            else:
                self.profiles.append(fetch_profile(self.port, t))
            # A late step does not make up for the steps it missed.
            while self.next[what] <= self.now():
                self.next[what] += every

    def settled(self):
        """The scrape once the load's last connections are in the counters: two more intervals added with no new
        connection counted (the counters move an interval at a time)."""
        deadline = time.monotonic() + SETTLE_S
        since, last = None, None
        while True:
            rec = scrape(self.port, self.now())
            if rec["connections"] != last:
                since, last = rec["intervals"], rec["connections"]
            if rec["intervals"] >= since + 2:
                return rec
            if time.monotonic() > deadline:
                raise BenchError(f"tlsprof serve's counters did not settle in {SETTLE_S:g} s after the load")
            time.sleep(1.0)


def whole(figures):
    """One twin's figures over every slice: its handshakes and its worker's CPU added up."""
    n, ns, wall = (sum(f[k] for f in figures) for k in ("requests", "worker_ns", "wall_s"))
    return {"requests": n, "worker_ns": ns, "wall_s": wall, "rate": n / wall, "cpu_us_per_req_ns": ns / 1e3 / n}


def serve_run(bench):
    """The stage; its raw data go to bench.data["serve"]."""
    a = bench.args
    twin = bench.twins[0]
    # s_time counts whole seconds.
    slices_n, slice_s = SLICES, max(2, round(a.serve_minutes * 60 / SLICES))
    log(f"continuous mode: {a.serve_minutes:g} min of tlsprof serve (defaults) on nginx {twin.name}'s worker, full "
        f"handshakes on both twins in {slices_n} slices of {slice_s} s, /metrics every {SCRAPE_EVERY_S:g} s, "
        f"/profile?seconds={PROFILE_SECONDS} every {PROFILE_EVERY_S:g} s")
    for t in bench.twins:
        t.check_worker()
    port = free_port()
    child = Child([bench.tlsprof, "serve", "--pid", twin.worker, "--listen", f"127.0.0.1:{port}"],
                  stdout=os.path.join(bench.scratch, "serve.out"), stderr=subprocess.PIPE)
    err = LineWatcher(child.popen.stderr)

    def tail():
        return " / ".join(err.text().strip().splitlines()[-3:]) or "no output"

    clients = []
    try:
        hit = err.wait_for(lambda l: "probes live" in l, timeout=60)
        if hit is None:
            raise BenchError(f"tlsprof serve did not attach: {tail()}")
        t0, ticks0 = time.monotonic(), cpu_ticks(child.pid)
        watch = Watcher(child.pid, port, t0, ticks0, a.rss_interval)
        slices = []
        for i in range(slices_n):
            w0 = [worker_counters(t.worker) for t in bench.twins]
            clients = [start_full(bench.scratch, t.port, slice_s, f"serve{i}-{t.name}", a.full_clients)
                       for t in bench.twins]
            deadline = time.monotonic() + slice_s + 60
            # Polled often: a client's end time (its wall time) is taken when it is seen to exit.
            while None in [c.poll() for cs in clients for c, _ in cs] and time.monotonic() < deadline:
                if child.poll() is not None:
                    raise BenchError(f"tlsprof serve exited with {child.status} during the load: {tail()}")
                watch.tick()
                time.sleep(0.05)
            wait_clients(clients, deadline, "full")
            w1 = [worker_counters(t.worker) for t in bench.twins]
            mine, other = [twin_figures(load, x0, x1)
                           for load, x0, x1 in zip(parse_loads("full", clients), w0, w1)]
            slices.append({"end_s": watch.now(), "twin": mine, "control": other,
                           "paired_overhead": paired_overhead(mine, other)})
            log(f"continuous mode, slice {i + 1}/{slices_n}: {mine['requests']} handshakes "
                f"({other['requests']} on the control twin), paired overhead "
                f"{slices[-1]['paired_overhead'] * 100:+.2f}%")
            for t in bench.twins:
                t.check_worker()
        final = watch.settled()
        missing = [k for k in ("handshakes", "handshakes_lower", "handshakes_upper") if final[k] is None]
        if missing:
            raise BenchError(f"/metrics after the load has no {SCRAPED[missing[0]][0]}")
        watch.profiles.append(fetch_profile(port, watch.now()))
        cpu_s, wall_s = (cpu_ticks(child.pid) - ticks0) / CLK_TCK, watch.now()
        stopping = time.monotonic()
        child.send(signal.SIGTERM)
        status = child.wait(STOP_GRACE_S)
        if status is None:
            raise BenchError(f"tlsprof serve did not exit within {STOP_GRACE_S:g} s of SIGTERM")
        if status != 0:
            raise BenchError(f"tlsprof serve exited with {status} on SIGTERM: {tail()}")
    except BaseException:
        for c, _ in (x for cs in clients for x in cs):
            c.stop(signal.SIGKILL)
        child.stop(grace=10)
        raise
    mine, other = whole([s["twin"] for s in slices]), whole([s["control"] for s in slices])
    bench.data["serve"] = {
        "minutes": a.serve_minutes, "slice_s": slice_s,
        "schedule": {"scrape_every_s": SCRAPE_EVERY_S, "profile_seconds": PROFILE_SECONDS,
                     "first_profile_s": FIRST_PROFILE_S, "profile_every_s": PROFILE_EVERY_S},
        "slices": slices, "twin": mine, "control": other,
        "paired_overhead": paired_overhead(mine, other), "clients": mine["requests"],
        "samples": watch.samples, "scrapes": watch.scrapes, "profiles": watch.profiles, "final": final,
        "live_s": hit[0] - child.started, "cpu_attach_ms": ticks0 * 1e3 / CLK_TCK, "cpu_frac": cpu_s / wall_s,
        "cpu_total_ms": child.cpu_ms(), "maxrss_mb": child.maxrss_mb(), "stop_s": child.ended - stopping,
        "exit": status,
    }
    s = bench.data["serve"]
    log(f"continuous mode: {mine['requests']} handshakes by twin A's clients, tlsprof_handshakes_total "
        f"{final['handshakes']:.0f} [{final['handshakes_lower']:.0f}, {final['handshakes_upper']:.0f}]; paired "
        f"overhead {s['paired_overhead'] * 100:+.2f}%, peak RSS {s['maxrss_mb']:.1f} MB, "
        f"{len(watch.scrapes) + 1} scrapes, {len(watch.profiles)} profiles; exit 0 {s['stop_s']:.2f} s after SIGTERM")
