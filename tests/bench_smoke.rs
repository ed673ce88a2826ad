// SPDX-License-Identifier: Apache-2.0
//! Live: a test-sized run of the benchmark (scripts/bench.py --smoke) works end to end and writes its tables.
//! It checks the harness, not the figures: a smoke run is far too short to judge overhead (needs root). Its half
//! minute of continuous mode runs `tlsprof serve` through a few scrapes and profiles.
mod common;

use std::process::Command;

use common::*;

#[test]
fn bench_smoke_run_writes_the_tables() {
    if !require_root("bench_smoke_run_writes_the_tables") {
        return;
    }
    let scratch = Scratch::new("bench-smoke");
    let output = scratch.path("BENCHMARKS.md");
    let stats_before = bpf_stats_enabled();
    let out = run(Command::new("python3")
        .arg(repo().join("scripts/bench.py"))
        .arg("--smoke")
        .arg("--go")
        .arg("--rustls")
        .arg("--boring")
        .arg("--aws-lc")
        .arg("--java")
        .arg("--output")
        .arg(&output)
        .arg("--tlsprof")
        .arg(env!("CARGO_BIN_EXE_tlsprof")));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench.py --smoke failed ({}):\n{stderr}",
        out.status
    );
    let md = std::fs::read_to_string(&output).unwrap_or_else(|e| panic!("no {}: {e}\n{stderr}", output.display()));
    // Every pair of twins shares one CPU, away from the clients: nginx (RSA-2048 and ECDSA), Go, rustls,
    // BoringSSL and nginx on AWS-LC. The bench narrows its own CPUs when it pins the first pair; the later
    // pairs must still be pinned.
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        let pinned = stderr.lines().filter(|l| l.contains(" pinned to CPU ")).count();
        assert_eq!(pinned, 6, "twins pinned {pinned} times, not once per pair:\n{stderr}");
    }
    for heading in [
        "## Budget",
        "## Overhead: full handshakes",
        "## Overhead: keep-alive requests",
        "## Overhead: full handshakes with an ECDSA certificate",
        "## Overhead: full handshakes on a Go server",
        "## Overhead: full handshakes on a rustls server",
        "## Overhead: full handshakes on a BoringSSL server",
        "## Overhead: full handshakes on nginx built against AWS-LC",
        "## Accuracy: CPU per operation",
        "## Accuracy: the JDK's TLS by its frames",
        "## Attach and report time",
        "## Connection counter (accept/accept4/connect tracepoints)",
        "## Continuous mode (serve, 0.5 minutes)",
    ] {
        assert!(md.contains(heading), "no {heading:?} in the output:\n{md}");
    }
    // The seven workloads measured with and without tlsprof (the ECDSA twins in exact mode only), and every
    // operation compared with its ground truth, OpenSSL's, Go's, rustls', BoringSSL's and AWS-LC's.
    let overhead: Vec<&str> = md.split("\n## ").filter(|s| s.starts_with("Overhead: ")).collect();
    assert_eq!(overhead.len(), 7, "{md}");
    for section in overhead {
        let profiled = if section.contains("ECDSA certificate") {
            "| tlsprof --max-overhead 100"
        } else {
            "| tlsprof (defaults"
        };
        for row in ["| no profiler |", profiled] {
            assert!(section.contains(row), "no {row} row in:\n{section}");
        }
    }
    for op in ["RSA-2048 sign", "ECDSA P-256 sign", "X25519 derive", "P-256 derive"] {
        assert!(md.contains(&format!("| {op} |")), "no accuracy row for {op}:\n{md}");
        for library in ["Go", "rustls"] {
            let row = format!("| Accuracy: {library} {op} within ±10% of its fixture (unprobed twin)");
            assert!(md.contains(&row), "no budget row {row:?}:\n{md}");
        }
    }
    // BoringSSL's and AWS-LC's fixtures: their signatures judged, their server handshakes shown.
    for library in ["BoringSSL", "AWS-LC"] {
        for row in [
            "RSA-2048 sign within ±10% of its fixture (unprobed twin)",
            "ECDSA P-256 sign within ±10% of its fixture (unprobed twin)",
            "server handshake, X25519 + RSA-2048, CPU per handshake",
            "server handshake, P-256 + ECDSA P-256, CPU per handshake",
        ] {
            let row = format!("| Accuracy: {library} {row}");
            assert!(md.contains(&row), "no budget row {row:?}:\n{md}");
        }
    }
    // The connection counter's cost, timed by the kernel's BPF statistics: its own budget-table row with a figure,
    // and a row for each of its programs.
    let counter = md
        .lines()
        .find(|l| l.starts_with("| Connection counter (accept/accept4/connect tracepoints"))
        .unwrap_or_else(|| panic!("no connection-counter row in the budget table:\n{md}"));
    assert!(
        counter.contains(" ns per connection = ") && counter.contains(" runs per target connection"),
        "the connection-counter row has no figure: {counter}"
    );
    for prog in ["on_accept4_exit", "on_accept_exit", "on_connect_exit"] {
        assert!(
            md.contains(&format!("| `{prog}` |")),
            "no counter row for {prog}:\n{md}"
        );
    }
    // Issue 33's lines, each judged on a figure of the run: exact mode's price with its hits, and the report's
    // stated cost against the twins' at each budget.
    for (row, figure) in [
        (
            "| Exact mode (`--max-overhead 100`) adds ≤ 3% target CPU per full handshake: nginx, RSA-2048 |",
            " probe hits per handshake, ",
        ),
        (
            "| Exact mode (`--max-overhead 100`) adds ≤ 3% target CPU per full handshake: nginx, ECDSA P-256 |",
            " probe hits per handshake, ",
        ),
        (
            "| Exact mode (`--max-overhead 100`) adds ≤ 5% target CPU per full handshake: the Go server (RSA-2048) |",
            " probe hits per handshake, ",
        ),
        (
            "| Exact mode: no probe hit single-stepped, in any workload |",
            "full handshakes, Go server: ",
        ),
        (
            "| The report's stated cost within ±30% of the twins' (or of their noise floor): full handshakes |",
            "budget 2%: stated ",
        ),
        (
            "| The report's stated cost within ±30% of the twins' (or of their noise floor): keep-alive requests |",
            "budget 0.3%: stated ",
        ),
    ] {
        let line = md
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no budget row {row:?}:\n{md}"));
        assert!(line.contains(figure), "no {figure:?} in: {line}");
    }
    // Continuous mode ran (tlsprof serve scraped and asked for profiles, or the run fails): its budget lines,
    // its figures against the clients' and the twin's, its slice and memory tables.
    for row in [
        "| Continuous mode (serve, 0.5 min): overhead within the budget",
        "| Continuous mode: memory does not grow",
        "| Continuous mode: handshakes counter within its stated interval",
    ] {
        assert!(md.contains(row), "no budget row {row:?}:\n{md}");
    }
    let serve = md
        .split("\n## ")
        .find(|s| s.starts_with("Continuous mode (serve"))
        .unwrap();
    for text in [
        "`sum(tlsprof_handshakes_total)` was ",
        " scrapes of ",
        " profiles of ",
        "| slice | elapsed m:ss |",
        "| 1 | 0:00–",
        "| 6 | ",
        "| elapsed m:ss | VmRSS MB |",
    ] {
        assert!(serve.contains(text), "no {text:?} in:\n{serve}");
    }
    // The run put the statistics back as it found them.
    assert_eq!(
        bpf_stats_enabled(),
        stats_before,
        "kernel.bpf_stats_enabled was not restored"
    );
    // The stdout copy is the same document.
    assert!(String::from_utf8_lossy(&out.stdout).contains("## Accuracy: CPU per operation"));
}

fn bpf_stats_enabled() -> String {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
        .expect("kernel.bpf_stats_enabled")
        .trim()
        .to_string()
}
