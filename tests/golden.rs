// SPDX-License-Identifier: Apache-2.0
//! Golden outputs: the text report, JSON, flame graph and diff of checked-in recordings (two `make demo`
//! runs, their samples cut to the 120 heaviest stacks), compared byte for byte. No root needed.
//! Refresh after an intended change with `make golden`, and read the diff before committing it.
mod common;

use std::path::PathBuf;

use common::*;

fn golden(name: &str) -> PathBuf {
    repo().join("tests/golden").join(name)
}

/// Runs tlsprof with `args` in tests/golden and returns its standard output.
fn tlsprof_in_golden(args: &[&str]) -> Vec<u8> {
    let out = run(tlsprof().current_dir(repo().join("tests/golden")).args(args));
    assert!(
        out.status.success(),
        "tlsprof {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Compares tlsprof's standard output for `args` with tests/golden/`expected`.
fn check(expected: &str, args: &[&str]) {
    compare(expected, args, tlsprof_in_golden(args));
}

fn compare(expected: &str, args: &[&str], got: Vec<u8>) {
    let path = golden(expected);
    if std::env::var_os("TLSPROF_BLESS").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run `make golden`)", path.display()));
    if got != want {
        let got = String::from_utf8_lossy(&got);
        let want = String::from_utf8_lossy(&want);
        let first = got
            .lines()
            .zip(want.lines())
            .position(|(g, w)| g != w)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "tlsprof {args:?} differs from {} at line {}:\n  got:  {:?}\n  want: {:?}\n(an intended change: `make golden`, then review the diff)",
            path.display(),
            first + 1,
            got.lines().nth(first).unwrap_or("(end)"),
            want.lines().nth(first).unwrap_or("(end)")
        );
    }
}

#[test]
fn report_text() {
    check("report.txt", &["report", "before.tlsprof"]);
}

#[test]
fn report_json() {
    check("report.json", &["report", "--json", "before.tlsprof"]);
}

#[test]
fn flame_graph_svg() {
    check("flame.svg", &["flamegraph", "before.tlsprof"]);
}

#[test]
fn folded_stacks() {
    check("flame.folded", &["flamegraph", "--folded", "before.tlsprof"]);
}

#[test]
fn diff_text() {
    check("diff.txt", &["diff", "before.tlsprof", "after.tlsprof"]);
}

#[test]
fn diff_json() {
    check("diff.json", &["diff", "--json", "before.tlsprof", "after.tlsprof"]);
}

#[test]
fn diff_svg() {
    let scratch = Scratch::new("golden-diff-svg");
    let svg = scratch.path("diff.svg");
    let args = ["diff", "before.tlsprof", "after.tlsprof", "--output", svg.to_str().unwrap()];
    tlsprof_in_golden(&args);
    compare("diff.svg", &args[..3], std::fs::read(&svg).unwrap());
}
