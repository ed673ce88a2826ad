# SPDX-License-Identifier: Apache-2.0
"""The command line: measure and write BENCHMARKS.md, or render it from a saved raw run (--from-raw)."""

import argparse
import json
import os
import shutil
import signal
import sys

from . import bpfstats
from .common import REPO, BenchError, Interrupted, log
from .processes import ignore_stop_signals, raise_on_stop_signals, stop_all_children
from .profilers import CONDITIONS, DEFAULT_CONDITIONS
from . import java, starts, top, wire
from .render import render, render_section, splice
from .runner import Bench
from .settings import DEFAULTS, SMOKE


def parse_args(argv):
    d = DEFAULTS
    p = argparse.ArgumentParser(prog="scripts/bench.py",
                                description="tlsprof overhead and accuracy benchmark (writes BENCHMARKS.md)")
    p.add_argument("--rounds", type=int, default=d["rounds"], help=f"interleaved rounds (default {d['rounds']})")
    p.add_argument("--seconds", type=int, default=d["seconds"],
                   help=f"seconds of load per run (default {d['seconds']})")
    p.add_argument("--long-minutes", type=float, default=d["long_minutes"],
                   help="minutes of the long recording; 0 skips it")
    p.add_argument("--serve-minutes", type=float, default=d["serve_minutes"],
                   help=f"minutes of continuous mode (`tlsprof serve`, scraped as Prometheus would) after the long "
                        f"recording (default {d['serve_minutes']:g}); 0 skips it")
    p.add_argument("--full-clients", type=int, default=d["full_clients"],
                   help=f"parallel `openssl s_time -new` clients (default {d['full_clients']})")
    p.add_argument("--conditions", default=",".join(DEFAULT_CONDITIONS),
                   help=f"comma-separated, from {','.join(CONDITIONS)} (default: all; 'none' is always run)")
    p.add_argument("--speed-seconds", type=int, default=d["speed_seconds"],
                   help=f"`openssl speed -seconds` (default {d['speed_seconds']})")
    p.add_argument("--accuracy-repeats", type=int, default=d["accuracy_repeats"],
                   help=f"fixture runs and `openssl speed` runs per round, for each operation "
                        f"(default {d['accuracy_repeats']})")
    p.add_argument("--tlsprof", default=os.path.join(REPO, "target/release/tlsprof"), help="the tlsprof binary")
    p.add_argument("--output", default=os.path.join(REPO, "BENCHMARKS.md"), help="where to write the tables")
    p.add_argument("--raw", help="also write every measurement as JSON here")
    p.add_argument("--from-raw", metavar="JSON", help="render the tables from a --raw file; measure nothing")
    p.add_argument("--rss-interval", type=float, default=5.0, help="seconds between RSS samples (long recording, continuous mode)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory (recordings, logs)")
    p.add_argument("--go", action="store_true",
                   help="also measure two Go servers (examples/go, built with the machine's go) under full handshakes "
                        "from examples/go/client: the go_full workload; and Go's ground-truth fixture "
                        "(examples/go/ops) beside crypto_ops.c")
    p.add_argument("--rustls", action="store_true",
                   help="also measure two rustls servers (examples/rust/rustls-server, built with cargo) under full "
                        "handshakes from `openssl s_time -new`: the rustls_full workload; and rustls' ground-truth "
                        "fixture (examples/rust/rustls-ops) beside crypto_ops.c")
    p.add_argument("--boring", action="store_true",
                   help="also measure two BoringSSL servers (examples/rust/boring-server, the boring crate, built with "
                        "cargo) under full handshakes from `openssl s_time -new`: the boring_full workload; and "
                        "BoringSSL's ground-truth fixture (examples/rust/boring-ops)")
    p.add_argument("--aws-lc", action="store_true",
                   help="also measure two nginx built against AWS-LC (scripts/build-aws-lc.sh) under full "
                        "handshakes from `openssl s_time -new`: the aws_lc_full workload; and AWS-LC's ground-truth "
                        "fixture (tests/fixtures/bssl_handshakes.c, built against it)")
    p.add_argument("--top-only", action="store_true",
                   help="measure only what `tlsprof top` costs itself (nginx of 20 workers, --rounds rounds) and write "
                        "that section into the --output file, its other sections as they were")
    p.add_argument("--starts-only", action="store_true",
                   help="measure only what following processes that start costs (a shell loop of short processes, "
                        "--rounds rounds) and write that section into the --output file, its other sections as they "
                        "were")
    p.add_argument("--wire-only-bench", action="store_true",
                   help="measure only what counting handshakes from the wire costs (the socket programs, on one nginx "
                        "worker under keep-alive requests and full handshakes; --rounds rounds, 2 with --smoke) and "
                        "write that section into the --output file, its other sections as they were")
    p.add_argument("--java", action="store_true",
                   help="also measure the JDK's own TLS by its frames: its fixture (examples/java/JsseHandshakes.java) "
                        "per certificate key, and a JDK HttpsServer counted in default mode (needs a JDK)")
    p.add_argument("--java-only-bench", action="store_true",
                   help="measure only the JDK's TLS (as --java; --rounds rounds, 1 with --smoke) and write that section "
                        "into the --output file, its other sections as they were")
    p.add_argument("--smoke", action="store_true",
                   help=f"test-sized run: 1 round, 2 s per run, every condition on nginx full handshakes and a few "
                        f"on the other workloads, no long recording, {SMOKE['serve_minutes'] * 60:g} s of continuous "
                        f"mode; skips bpftrace/perf if absent")
    args = p.parse_args(argv)
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)
    conds = [c.strip() for c in args.conditions.split(",") if c.strip()]
    unknown = [c for c in conds if c not in CONDITIONS]
    if unknown:
        p.error(f"unknown condition {unknown[0]!r}: choose from {', '.join(CONDITIONS)}")
    args.conditions = ["none"] + [c for c in DEFAULT_CONDITIONS if c in conds and c != "none"]
    if (args.rounds < 1 or args.seconds < 2 or args.full_clients < 1 or args.long_minutes < 0
            or args.serve_minutes < 0 or args.accuracy_repeats < 1):
        p.error("--rounds, --full-clients and --accuracy-repeats must be ≥ 1, --seconds ≥ 2 (s_time counts whole "
                "seconds), --long-minutes and --serve-minutes ≥ 0")
    if 0 < args.serve_minutes < SMOKE["serve_minutes"]:
        p.error(f"--serve-minutes: 0 (skip) or at least {SMOKE['serve_minutes']:g}, time for a profile and a few "
                f"scrapes")
    # Operations per fixture run: enough for about a second of CPU each (the smoke run: a tenth of that).
    scale = 10 if args.smoke else 1
    args.fixture_ops = {("x25519", "rsa2048"): (10000 // scale, 1000 // scale),
                        ("p256", "p256"): (10000 // scale, 20000 // scale)}
    # BoringSSL's fixture: whole handshakes (server and client in one process), about a second of CPU each run.
    args.fixture_handshakes = {("x25519", "rsa2048"): 1000 // scale, ("p256", "p256"): 4000 // scale}
    return args


def write(text, path):
    with open(path, "w") as f:
        f.write(text)
    print(text, end="")


def from_raw(args):
    with open(args.from_raw) as f:
        data = json.load(f)
    if any("control" not in r for r in data["runs"]):
        print(f"bench: error: {args.from_raw} is from the sequential method (no twins): it cannot be rendered",
              file=sys.stderr)
        return 1
    write(render(data), args.output)
    return 0


def main(argv):
    args = parse_args(argv)
    if args.from_raw:
        return from_raw(args)

    raise_on_stop_signals()
    bench = None
    try:
        bench = Bench(args)
        if args.starts_only or args.top_only or args.wire_only_bench or args.java_only_bench:
            module = (starts if args.starts_only else top if args.top_only else wire if args.wire_only_bench
                      else java)
            bench.run_only(module)
            write(splice(args.output, render_section(bench.data, module), module.HEADING,
                         getattr(module, "BEFORE", "## Connection counter")), args.output)
            log(f"wrote the {module.HEADING[3:]} section of {args.output}")
            return 0
        bench.run()
        write(render(bench.data), args.output)
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
        # Nothing may be left running.
        ignore_stop_signals()
        stop_all_children()
        bpfstats.restore()
        for twin in bench.twins if bench else []:
            twin.stop()
        if bench and not args.keep:
            shutil.rmtree(bench.scratch, ignore_errors=True)
        elif bench:
            log(f"scratch kept in {bench.scratch}")
