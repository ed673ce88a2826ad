// SPDX-License-Identifier: Apache-2.0
//! Live: the ground-truth fixture counts its own operations and thread CPU; tlsprof must agree (needs root).
mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::*;

const DERIVES: u64 = 3000;
const SIGNS: u64 = 300;

fn build_fixture(scratch: &Scratch) -> std::path::PathBuf {
    let bin = scratch.path("crypto_ops");
    let out = run(Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&bin)
        .arg(repo().join("tests/fixtures/crypto_ops.c"))
        .arg("-lcrypto"));
    assert!(
        out.status.success(),
        "build fixture: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// Runs the fixture with `fixture_args` under tlsprof (optionally pinned to CPU 0; `budget`: --max-overhead,
/// exact if None); returns (fixture's JSON, tlsprof's report, its summary).
fn profile_fixture(
    scratch: &Scratch,
    pin: Option<&str>,
    fixture_args: &[&str],
    budget: Option<&str>,
) -> (serde_json::Value, serde_json::Value, String) {
    let bin = build_fixture(scratch);
    let mut cmd = match pin {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", cpu]).arg(&bin);
            c
        }
        None => Command::new(&bin),
    };
    let mut fixture = cmd
        .args(fixture_args)
        .args([DERIVES.to_string(), SIGNS.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(fixture.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    let recording = scratch.path("fixture.tlsprof");
    let pid = fixture.id().to_string();
    let mut args = vec!["--pid", &pid, "-o", recording.to_str().unwrap()];
    if let Some(budget) = budget {
        args.extend(["--max-overhead", budget]);
    }
    let rec = Recorder::start(&args);
    fixture.stdin.take().unwrap().write_all(b"go\n").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(fixture.wait().unwrap().success());
    // tlsprof stops by itself once its only target has exited.
    let summary = rec.finish();
    assert!(summary.contains("crypto_ops"), "{summary}");
    (serde_json::from_str(&line).unwrap(), report_json(&recording), summary)
}

/// `signer`: the probed function each signature enters.
fn check_against_fixture(truth: &serde_json::Value, r: &serde_json::Value, summary: &str, signer: &str) {
    let derive = stage(r, "derive");
    let sign = stage(r, "sign");
    // Exactly the operations: the length queries (NULL output buffer) are not counted.
    assert_eq!(derive["calls"], DERIVES, "{summary}");
    assert_eq!(sign["calls"], SIGNS, "{summary}");
    assert_eq!(function(r, "EVP_PKEY_derive").unwrap()["calls"], DERIVES);
    assert_eq!(function(r, signer).unwrap()["calls"], SIGNS, "{summary}");
    // The fixture times each operation with the probe hits on its own entry and return inside its clock
    // window; tlsprof removes those (measured: probe_cost_us_per_hit), so compare like with like.
    let hits_in_window = 2.0 * f(&r["probe_cost_us_per_hit"]);
    for (name, stage) in [("derive", derive), ("sign", sign)] {
        let ours = f(&stage["cpu_us_per_call"]);
        let theirs = f(&truth[format!("{name}_cpu_us").as_str()]) - hits_in_window;
        let unprobed = &truth[format!("unprobed_{name}_cpu_us").as_str()];
        assert!(
            within(ours, theirs, 0.10),
            "{name}: tlsprof {ours:.1} µs vs fixture {theirs:.1} µs per call ({unprobed} µs in its unprobed twin at the same time)\n{summary}"
        );
    }
}

#[test]
fn fixture_operations_counted_exactly_with_fixture_cpu() {
    if !require_root("fixture_operations_counted_exactly_with_fixture_cpu") {
        return;
    }
    let scratch = Scratch::new("fixture");
    let (truth, r, summary) = profile_fixture(&scratch, None, &[], None);
    check_against_fixture(&truth, &r, &summary, "EVP_DigestSign");
}

/// The operations `openssl speed` times (a ready digest signed on a reused context): what the benchmark
/// compares with speed's own figures.
#[test]
fn fixture_signing_as_openssl_speed_does() {
    if !require_root("fixture_signing_as_openssl_speed_does") {
        return;
    }
    let scratch = Scratch::new("fixture-speed");
    let (truth, r, summary) = profile_fixture(
        &scratch,
        None,
        &["--derive", "p256", "--sign", "p256", "--as-speed"],
        None,
    );
    assert_eq!(truth["as_speed"], true);
    check_against_fixture(&truth, &r, &summary, "EVP_PKEY_sign");
}

#[test]
fn fixture_cpu_excludes_time_waiting_for_a_shared_cpu() {
    if !require_root("fixture_cpu_excludes_time_waiting_for_a_shared_cpu") {
        return;
    }
    let scratch = Scratch::new("fixture-busy");
    let busy = Running(
        Command::new("taskset")
            .args(["-c", "0", "sh", "-c", "while :; do :; done"])
            .spawn()
            .unwrap(),
    );
    // Back to back: waiting for a twin's turn, the fixture would get the CPU back as it wakes each time.
    let (truth, r, summary) = profile_fixture(&scratch, Some("0"), &["--no-twin"], None);
    drop(busy);
    // A precondition, not the property under test: the signatures waited for the CPU a good part of the
    // time (1.55–1.76 measured with derivations interleaved; 2 would be an even share).
    let ratio = f(&truth["sign_wall_us"]) / f(&truth["sign_cpu_us"]);
    assert!(ratio > 1.3, "the busy loop did not share the CPU (wall/CPU {ratio:.2})");
    check_against_fixture(&truth, &r, &summary, "EVP_DigestSign");
}

/// One line of the fixture's --op-log: (kind, start in ns since the Unix epoch, thread CPU µs).
fn op_log(path: &std::path::Path) -> Vec<(String, u64, f64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[0].to_string(), f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect()
}

/// At the default budget the probes are attached in windows, and the report dates them: the fixture's own
/// operations that began in them are the ones tlsprof counted, and its per-call figures are those operations'
/// CPU by the fixture's clock, less the probe hits inside it (as in exact mode). The whole run's mean is not
/// their ground truth: the machine's speed drifts from one second to the next.
#[test]
fn default_mode_windows_are_dated_and_their_figures_match_the_operations_made_in_them() {
    if !require_root("default_mode_windows_are_dated_and_their_figures_match_the_operations_made_in_them") {
        return;
    }
    let scratch = Scratch::new("fixture-windows");
    let log = scratch.path("ops");
    let (_truth, r, summary) = profile_fixture(&scratch, None, &["--op-log", log.to_str().unwrap()], Some("0.3"));
    let spans: Vec<(u64, u64)> = r["probing"]["window_spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let start = w["start_unix_ns"].as_u64().unwrap();
            (start, start + (f(&w["live_s"]) * 1e9) as u64)
        })
        .collect();
    assert!(!spans.is_empty(), "{summary}");
    assert_eq!(
        spans.len() as u64,
        r["probing"]["windows"].as_u64().unwrap(),
        "{summary}"
    );
    let (probed, twin) = (op_log(&log), op_log(&log.with_extension("twin")));
    let hits_in_window = 2.0 * f(&r["probe_cost_us_per_hit"]);
    for (kind, name) in [("d", "derive"), ("s", "sign")] {
        let mine: Vec<_> = probed.iter().filter(|o| o.0 == kind).collect();
        let theirs: Vec<_> = twin.iter().filter(|o| o.0 == kind).collect();
        let picked: Vec<usize> = (0..mine.len())
            .filter(|&i| spans.iter().any(|&(a, b)| (a..b).contains(&mine[i].1)))
            .collect();
        let seen = stage(&r, name)["observed"]["calls"].as_u64().unwrap();
        // An operation running as a window opens or closes is not counted, and a window is dated within tens of
        // µs of the moment its probes start or stop counting: an operation or two per window edge.
        let edges = 2 * 2 * spans.len() as u64;
        assert!(
            picked.len() as u64 <= seen + edges && seen <= picked.len() as u64 + edges,
            "{name}: tlsprof counted {seen}, the fixture made {} in the windows\n{summary}",
            picked.len()
        );
        if picked.is_empty() {
            continue;
        }
        let mean = |ops: &[&(String, u64, f64)]| picked.iter().map(|&i| ops[i].2).sum::<f64>() / picked.len() as f64;
        let (own, unprobed) = (mean(&mine) - hits_in_window, mean(&theirs));
        let ours = f(&stage(&r, name)["cpu_us_per_call"]);
        assert!(
            within(ours, own, 0.10),
            "{name}: tlsprof {ours:.1} µs vs fixture {own:.1} µs per call over the {} operations made in the windows \
             ({unprobed:.1} µs in its unprobed twin)\n{summary}",
            picked.len()
        );
    }
}
