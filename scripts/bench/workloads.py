# SPDX-License-Identifier: Apache-2.0
"""The bounded loads, each from clients of its own per twin, and what their clients report.

full: `openssl s_time -new` (full handshakes only: no tickets, no cache); ecdsa_full: the same, on the twins with
an ECDSA P-256 certificate (cheaper handshakes, where exact mode's probes weigh more); keepalive: `wrk -t1 -c4` (GET / over
four kept-alive connections); go_full (--go, on the Go twins): examples/go/client, a new connection and a full
handshake per request, from 2 goroutines per `--full-clients`; rustls_full (--rustls, on the rustls twins), boring_full
(--boring, on the BoringSSL twins) and aws_lc_full (--aws-lc, on the twins of nginx built against AWS-LC): `openssl
s_time -new`, as full. A load's result counts only if its clients finished
cleanly: a wrk run with socket errors or non-2xx responses, or a Go client's errors, is an error, not a figure.
"""

import json
import os
import re
import signal
import subprocess
import time

from .common import BenchError
from .processes import Child

WORKLOADS = {
    "full": "full handshakes",
    "ecdsa_full": "full handshakes, ECDSA certificate",
    "keepalive": "keep-alive requests",
    "go_full": "full handshakes, Go server",
    "rustls_full": "full handshakes, rustls server",
    "boring_full": "full handshakes, BoringSSL server",
    "aws_lc_full": "full handshakes, nginx on AWS-LC",
}
# The workloads that run on the Go twins (--go), the rustls twins (--rustls), the BoringSSL twins (--boring) and
# the twins of nginx on AWS-LC (--aws-lc).
ECDSA_WORKLOADS = ("ecdsa_full",)
GO_WORKLOADS = ("go_full",)
RUSTLS_WORKLOADS = ("rustls_full",)
BORING_WORKLOADS = ("boring_full",)
AWS_LC_WORKLOADS = ("aws_lc_full",)


def start_full(scratch, port, seconds, tag, clients):
    """`clients` parallel `openssl s_time -new` processes against port; [(child, output file)]."""
    started = []
    for i in range(clients):
        out = os.path.join(scratch, f"s_time.{tag}.{i}.out")
        c = Child(["openssl", "s_time", "-connect", f"127.0.0.1:{port}", "-new", "-time", str(seconds)],
                  stdout=out, stderr=subprocess.STDOUT)
        started.append((c, out))
    return started


def parse_s_time(text):
    """Connections of one s_time run, from its total line, or None."""
    # "1102 connections in 3 real seconds, 0 bytes read per connection"
    m = re.search(r"^(\d+) connections in \d+ real seconds", text, re.M)
    return int(m.group(1)) if m else None


def parse_full(clients):
    total = 0
    for c, out in clients:
        with open(out) as f:
            text = f.read()
        n = parse_s_time(text)
        if c.status != 0 or n is None:
            raise BenchError(f"openssl s_time failed (exit {c.status}): {text.strip()[-200:]}")
        total += n
    # s_time's own "real seconds" are whole seconds: the wall time is the clients' own, from start to exit.
    wall = max(c.ended for c, _ in clients) - min(c.started for c, _ in clients)
    return {"requests": total, "wall_s": wall, "rate": total / wall,
            "client_cpu_s": sum(c.cpu_ms() for c, _ in clients) / 1e3}


def start_keepalive(scratch, port, seconds, tag, _clients=None):
    out = os.path.join(scratch, f"wrk.{tag}.out")
    return [(Child(["wrk", "-t1", "-c4", f"-d{seconds}s", f"https://127.0.0.1:{port}/"], stdout=out,
                   stderr=subprocess.STDOUT), out)]


def parse_wrk(text):
    """wrk's summary: requests, Requests/sec, its socket errors and non-2xx/3xx responses; None if unreadable."""
    m = re.search(r"(\d+) requests in ([\d.]+)(m?s)", text)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if not m or not rps:
        return None
    # wrk prints "Socket errors: connect N, read N, write N, timeout N" only when one of them is not zero.
    errors = {"connect": 0, "read": 0, "write": 0, "timeout": 0}
    line = re.search(r"Socket errors:(.*)", text)
    if line:
        counts = {k: int(v) for k, v in re.findall(r"(\w+) (\d+)", line.group(1))}
        if set(counts) != set(errors):
            return None
        errors = counts
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return {"requests": int(m.group(1)), "rate": float(rps.group(1)), "socket_errors": errors,
            "non2xx": int(non2xx.group(1)) if non2xx else 0}


def parse_keepalive(clients):
    [(c, out)] = clients
    with open(out) as f:
        text = f.read()
    res = parse_wrk(text)
    if c.status != 0 or res is None:
        raise BenchError(f"wrk failed (exit {c.status}): {text.strip()[-200:]}")
    # A connection that failed or timed out did not do the requests the twins' CPU is divided by: the run's
    # figures would compare unequal work. Such a run is an error, with wrk's own words.
    if any(res["socket_errors"].values()) or res["non2xx"]:
        errs = ", ".join(f"{k} {v}" for k, v in res["socket_errors"].items())
        raise BenchError(f"wrk reported socket errors ({errs}) and {res['non2xx']} non-2xx/3xx responses in "
                         f"{res['requests']} requests ({out}): the run cannot be compared")
    return {**res, "wall_s": c.ended - c.started, "client_cpu_s": c.cpu_ms() / 1e3}


def start_go_full(scratch, port, seconds, tag, clients):
    out = os.path.join(scratch, f"go-client.{tag}.out")
    client = os.path.join(scratch, "go-client")
    return [(Child([client, "-addr", f"127.0.0.1:{port}", "-duration", f"{seconds}s", "-workers", str(2 * clients)],
                   stdout=out, stderr=subprocess.STDOUT), out)]


def parse_go_full(clients):
    [(c, out)] = clients
    with open(out) as f:
        text = f.read()
    try:
        res = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        res = None
    if c.status != 0 or res is None:
        raise BenchError(f"the Go client failed (exit {c.status}): {text.strip()[-200:]}")
    if res["errors"] or res["wrong_answers"]:
        raise BenchError(f"the Go client saw {res['errors']} errors ({res.get('first_error')}) and "
                         f"{res['wrong_answers']} wrong answers: the run cannot be compared")
    return {"requests": res["connections"], "wall_s": c.ended - c.started, "rate": res["connections"] /
            (c.ended - c.started), "client_cpu_s": c.cpu_ms() / 1e3}


WORKLOAD_RUN = {"full": (start_full, parse_full), "ecdsa_full": (start_full, parse_full),
                "keepalive": (start_keepalive, parse_keepalive),
                "go_full": (start_go_full, parse_go_full), "rustls_full": (start_full, parse_full),
                "boring_full": (start_full, parse_full), "aws_lc_full": (start_full, parse_full)}


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


def parse_loads(workload, started):
    """One result per twin; a twin whose clients completed nothing has no CPU per request."""
    loads = [WORKLOAD_RUN[workload][1](clients) for clients in started]
    if min(load["requests"] for load in loads) <= 0:
        raise BenchError(f"{WORKLOADS[workload]}: a client completed no requests")
    return loads


def run_load(workload, twins, seconds, scratch, full_clients):
    """The same load against every twin at the same time, from clients of its own; one result per twin."""
    start = WORKLOAD_RUN[workload][0]
    started = [start(scratch, twin.port, seconds, twin.name, full_clients) for twin in twins]
    wait_clients(started, time.monotonic() + seconds + 60, workload)
    return parse_loads(workload, started)
