# SPDX-License-Identifier: Apache-2.0
"""Overhead and accuracy benchmark of tlsprof, side by side with bpftrace and perf, judged against tlsprof's budget.

One run starts two identical throwaway nginx instances, the twins (scripts/nginx-target.sh: 1 worker, loopback,
RSA-2048, TLS 1.3), whose workers share one CPU. Round by round, it drives two bounded workloads (full handshakes
with `openssl s_time -new`, keep-alive requests with wrk) against both twins at once under each condition in turn
(no profiler, tlsprof, bpftrace, perf, ...), with the profiler on one twin: the other is the control, and the
overhead of a run is the ratio of their CPU per request. Then it profiles the ground-truth fixture
(tests/fixtures/crypto_ops.c), making its operations as libssl does and as `openssl speed` does, and runs
`openssl speed`; optionally records one twin for minutes to time the report and watch tlsprof's memory. With --go,
--rustls, --boring and --aws-lc it also drives twin servers on those stacks and profiles those libraries' fixtures
(examples/go/ops, examples/rust/rustls-ops, examples/rust/boring-ops, tests/fixtures/bssl_handshakes.c). It writes
BENCHMARKS.md and prints the same.

Everything it starts is stopped by it (try/finally, SIGINT/SIGTERM/SIGHUP); all load goes to 127.0.0.1.
Python 3 standard library only; needs root (BPF, perf, bpftrace).

Modules, in the order a run uses them:
  cli        the command line; --from-raw renders a saved run
  runner     the Bench: rounds of overhead runs, accuracy runs, the long recording; its raw data
  machine    facts about the machine and tools, read at the start
  twins      the twin targets (nginx, Go, Rust), CPU pinning, the figures a run compares between them
  workloads  the full-handshake and keep-alive loads and their clients' reports
  profilers  the conditions: tlsprof, bpftrace, perf, attached and stopped
  processes  the children we start (Child, LineWatcher) and the signals that stop them
  procfs     /proc readers
  figures    numbers derived from the raw data; budget: the budget lines and their verdicts
  render     BENCHMARKS.md from BENCHMARKS.md.in (the prose) and fmt (how figures are written)
"""
