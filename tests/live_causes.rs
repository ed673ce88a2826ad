// SPDX-License-Identifier: Apache-2.0
//! Live: what the handshake stage's own CPU went to (causes within a stage), on Node.js whose OpenSSL keeps
//! its symbols and on nginx with Debian's stripped OpenSSL 3, both serving an ECDSA P-256 certificate
//! (needs root).
mod common;

use std::path::Path;

use serde_json::Value;

use common::*;

/// The handshake stage's causes, after printing them.
fn handshake_causes(r: &Value, label: &str) -> Vec<Value> {
    let st = stage(r, "handshake");
    let causes = st["causes"].as_array().expect("stages[].causes").clone();
    let total: f64 = causes.iter().map(|c| f(&c["samples"])).sum();
    eprintln!(
        "{label}: handshake self {:.1} ms = {:.1}% of TLS CPU, {total} samples (+{} in probe traps)",
        f(&st["self_cpu_ms"]),
        100.0 * f(&st["self_cpu_ms"]) / f(&r["tls_cpu_ms"]),
        st["probe_samples"]
    );
    for c in &causes {
        eprintln!(
            "  {:<15}{:>6.1}%  {:>7.1} ms  {}",
            c["name"].as_str().unwrap(),
            100.0 * f(&c["share"]),
            f(&c["cpu_ms"]),
            c["top_frames"]
        );
    }
    // The causes share out the whole stage: nothing is hidden.
    let cpu: f64 = causes.iter().map(|c| f(&c["cpu_ms"])).sum();
    assert!(
        (cpu - f(&st["self_cpu_ms"])).abs() <= 1e-6 * cpu.max(1.0),
        "causes add up to {cpu} ms, the stage is {}",
        st["self_cpu_ms"]
    );
    causes
}

fn share_of(causes: &[Value], pick: impl Fn(&str) -> bool) -> f64 {
    let total: f64 = causes.iter().map(|c| f(&c["samples"])).sum();
    let picked: f64 = causes
        .iter()
        .filter(|c| pick(c["name"].as_str().unwrap()))
        .map(|c| f(&c["samples"]))
        .sum();
    picked / total.max(1.0)
}

fn named_cause(name: &str) -> bool {
    !matches!(name, "other" | "unattributed")
}

/// Samples of the recording inside the handshake stage, counted from the recording itself.
struct HandshakeSamples {
    /// In tlsprof's uprobe traps.
    traps: u64,
    /// With a named user frame below the stage frame (or none below it).
    with_name: u64,
    /// Whose user frames below the stage are all unnamed, taken in the target's own code.
    unnamed: u64,
    /// Whose user frames below the stage are all unnamed, taken in the kernel: its frames (a syscall, a page
    /// fault) may name a cause.
    unnamed_in_kernel: u64,
}

fn handshake_samples(recording: &Path) -> HandshakeSamples {
    let rec: Value = serde_json::from_slice(&std::fs::read(recording).unwrap()).unwrap();
    let named = |f: &str| !(f.starts_with('[') || f.contains("+0x") || f.starts_with("0x"));
    let mut counts = HandshakeSamples {
        traps: 0,
        with_name: 0,
        unnamed: 0,
        unnamed_in_kernel: 0,
    };
    for s in rec["samples"].as_array().unwrap() {
        let frames: Vec<&str> = s["frames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        let Some(i) = frames.iter().rposition(|f| f.ends_with(" [handshake]")) else {
            continue;
        };
        // Only samples whose innermost stage frame is the handshake's.
        if frames[i + 1..]
            .iter()
            .any(|f| f.ends_with(']') && f.contains(" [") && !f.starts_with('['))
        {
            continue;
        }
        let n = s["count"].as_u64().unwrap();
        let kernel: Vec<&str> = s["kernel"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        if kernel
            .iter()
            .any(|k| k.contains("exc_debug") || k.contains("exc_int3") || k.starts_with("uprobe_"))
        {
            counts.traps += n;
        } else if frames[i + 1..].iter().any(|f| named(f)) || i + 1 == frames.len() {
            counts.with_name += n;
        } else if kernel.is_empty() {
            counts.unnamed += n;
        } else {
            counts.unnamed_in_kernel += n;
        }
    }
    counts
}

fn record(pid: u32, recording: &Path, port: u16, secs: u32, exact: bool) -> String {
    let pid = pid.to_string();
    let mut args = vec![
        "--pid",
        &pid,
        "--kernel",
        "--freq",
        "499",
        "-o",
        recording.to_str().unwrap(),
    ];
    if !exact {
        args.extend(["--max-overhead", "0.3"]);
    }
    let rec = Recorder::start(&args);
    let connections = s_time_new(port, secs);
    let summary = rec.interrupt();
    assert!(connections > 100, "only {connections} connections\n{summary}");
    summary
}

#[test]
fn node_handshake_own_cpu_is_named_by_causes() {
    if !require_root("node_handshake_own_cpu_is_named_by_causes") {
        return;
    }
    let scratch = Scratch::new("causes-node");
    let certs = Nginx::start(&scratch.path("certs"), &["--cert", "ecdsa-p256"]);
    let (node, port) = start_node_server(&certs.dir);
    for (exact, label) in [(true, "Node.js exact"), (false, "Node.js default mode")] {
        let recording = scratch.path(&format!("node-{exact}.tlsprof"));
        let summary = record(node.pid(), &recording, port, 5, exact);
        let r = report_json(&recording);
        let causes = handshake_causes(&r, label);
        let named = share_of(&causes, named_cause);
        eprintln!(
            "{label}: {:.1}% of the handshake's samples named by causes",
            100.0 * named
        );
        // Node.js's OpenSSL keeps its symbols: the catalogue names what the handshake's own code does.
        assert!(named >= 0.90, "{label}: {:.1}% named\n{summary}", 100.0 * named);
        // s_time -new only handshakes: Node.js drives them from SSL_read, and they are the handshake's,
        // not the record layer's, whether the probes saw them or not.
        let handshake: f64 = causes.iter().map(|c| f(&c["samples"])).sum();
        let read: f64 = stage(&r, "read")["causes"]
            .as_array()
            .map_or(0.0, |cs| cs.iter().map(|c| f(&c["samples"])).sum());
        assert!(
            read < handshake,
            "{label}: read {read} samples, handshake {handshake}\n{summary}"
        );
        assert!(summary.contains("Causes within stages"), "{summary}");
    }
}

#[test]
fn nginx_stripped_openssl_names_every_sample_it_can_and_shows_the_rest() {
    if !require_root("nginx_stripped_openssl_names_every_sample_it_can_and_shows_the_rest") {
        return;
    }
    let scratch = Scratch::new("causes-nginx");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--cert", "ecdsa-p256"]);
    let recording = scratch.path("nginx.tlsprof");
    let summary = record(nginx.workers()[0], &recording, nginx.port, 5, true);
    let r = report_json(&recording);
    let causes = handshake_causes(&r, "nginx ECDSA P-256");
    let HandshakeSamples {
        traps,
        with_name,
        unnamed,
        unnamed_in_kernel,
    } = handshake_samples(&recording);
    eprintln!(
        "nginx: {with_name} handshake samples with a named frame below the stage, {unnamed} without \
         (+{unnamed_in_kernel} taken in the kernel), {traps} probe traps"
    );
    let samples = |name: &str| {
        causes
            .iter()
            .filter(|c| c["name"] == name)
            .map(|c| c["samples"].as_u64().unwrap())
            .sum::<u64>()
    };
    let all: u64 = causes.iter().map(|c| c["samples"].as_u64().unwrap()).sum();
    assert_eq!(
        all,
        with_name + unnamed + unnamed_in_kernel,
        "every sample of the stage is in a cause"
    );
    assert_eq!(stage(&r, "handshake")["probe_samples"], traps);
    // Every sample with a named frame is attributed; only those without one are unattributed, less those
    // whose kernel frames name a cause.
    let unattributed = samples("unattributed");
    assert!(
        (unnamed..=unnamed + unnamed_in_kernel).contains(&unattributed),
        "{unattributed} unattributed, {unnamed} unnamed (+{unnamed_in_kernel} in the kernel)\n{summary}"
    );
    assert!(with_name > 0 && samples("lookups") > 0, "{summary}");
    let named = share_of(&causes, named_cause);
    eprintln!(
        "nginx: {:.1}% named by causes, {:.1}% other, {:.1}% unattributed",
        100.0 * named,
        100.0 * share_of(&causes, |n| n == "other"),
        100.0 * share_of(&causes, |n| n == "unattributed")
    );
    // The unnamed rest is shown with its share and how to name it.
    if unattributed > 0 {
        assert!(
            summary.lines().any(|l| l.trim_start().starts_with("unattributed")) && summary.contains("to name them"),
            "{summary}"
        );
    }
    // Grouped by cause, the flame graph reads handshake → cause → functions.
    let out = run(tlsprof()
        .args(["flamegraph", "--folded", "--group", "cause"])
        .arg(&recording));
    assert!(out.status.success());
    let folded = String::from_utf8(out.stdout).unwrap();
    assert!(
        folded.contains("SSL_do_handshake [handshake];[cause: lookups];"),
        "{folded}"
    );
}
