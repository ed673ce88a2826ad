// SPDX-License-Identifier: Apache-2.0
//! Live: a test-sized run of the benchmark (scripts/bench.py --smoke) works end to end and writes its tables.
//! It checks the harness, not the figures: a smoke run is far too short to judge overhead (needs root).
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
    let out = run(Command::new("python3")
        .arg(repo().join("scripts/bench.py"))
        .arg("--smoke")
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
    for heading in [
        "## Budget (issue 4)",
        "## Overhead: full handshakes",
        "## Overhead: keep-alive requests",
        "## Accuracy: CPU per operation",
        "## Attach and report time",
    ] {
        assert!(md.contains(heading), "no {heading:?} in the output:\n{md}");
    }
    // Both workloads measured with and without tlsprof, and every operation compared with its ground truth.
    let overhead: Vec<&str> = md.split("\n## ").filter(|s| s.starts_with("Overhead: ")).collect();
    assert_eq!(overhead.len(), 2, "{md}");
    for section in overhead {
        for row in ["| no profiler |", "| tlsprof (defaults"] {
            assert!(section.contains(row), "no {row} row in:\n{section}");
        }
    }
    for op in ["RSA-2048 sign", "ECDSA P-256 sign", "X25519 derive", "P-256 derive"] {
        assert!(md.contains(&format!("| {op} |")), "no accuracy row for {op}:\n{md}");
    }
    // The stdout copy is the same document.
    assert!(String::from_utf8_lossy(&out.stdout).contains("## Accuracy: CPU per operation"));
}
