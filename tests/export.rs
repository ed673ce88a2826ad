// SPDX-License-Identifier: Apache-2.0
//! `tlsprof export` of a checked-in recording, read back by the tools it is for: go tool pprof reads the
//! pprof profile (stacks, per-stage CPU through -tagfocus, labels), folded and JSON are the flame graph's and
//! the report's. No root needed; go tool pprof must be installed (scripts/install-deps.sh).
mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

fn golden(name: &str) -> PathBuf {
    repo().join("tests/golden").join(name)
}

fn stdout_of(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn export(format: &str, to: &Path) {
    stdout_of(
        tlsprof()
            .args(["export", "--format", format, "--output"])
            .arg(to)
            .arg(golden("before.tlsprof")),
    );
}

fn pprof(go: &Path, profile: &Path, args: &[&str]) -> String {
    let scratch = profile.parent().unwrap();
    stdout_of(
        Command::new(go)
            .args(["tool", "pprof"])
            .args(args)
            .arg(profile)
            .env("PPROF_TMPDIR", scratch),
    )
}

/// `go tool pprof -top` with nothing left out: the CPU of the samples its filters keep, in ms.
fn top_total_ms(go: &Path, profile: &Path, filters: &[&str]) -> f64 {
    let mut args = vec![
        "-top",
        "-unit=ms",
        "-nodefraction=0",
        "-edgefraction=0",
        "-nodecount=1000000",
    ];
    args.extend(filters);
    let out = pprof(go, profile, &args);
    let line = out
        .lines()
        .find(|l| l.starts_with("Showing nodes accounting for "))
        .unwrap_or_else(|| panic!("no total in go tool pprof {args:?}:\n{out}"));
    let value = line["Showing nodes accounting for ".len()..]
        .split(['m', ','])
        .next()
        .unwrap();
    value.parse().unwrap_or_else(|_| panic!("{line}"))
}

#[test]
fn pprof_export_reads_in_go_tool_pprof_with_the_reports_figures() {
    let Some(go) = go() else { return };
    let scratch = Scratch::new("export-pprof");
    let profile = scratch.path("before.pb.gz");
    export("pprof", &profile);
    let report = report_json(&golden("before.tlsprof"));

    // Each stage's CPU, filtered by its label, is the report's; the samples outside the stages have the rest
    // of the targets' own CPU, if the stages' estimates leave any.
    let mut staged_ms = 0.0;
    for stage in report["stages"].as_array().unwrap() {
        let name = stage["name"].as_str().unwrap();
        let got = top_total_ms(&go, &profile, &[&format!("-tagfocus=stage={name}")]);
        let want = f(&stage["self_cpu_ms"]);
        assert!(
            (got - want).abs() < 0.01,
            "stage {name}: pprof {got} ms, report {want} ms"
        );
        staged_ms += want;
    }
    let own_ms = f(&report["process_cpu_ms"]) - f(&report["probe_overhead_ms"]);
    let all = top_total_ms(&go, &profile, &[]);
    let want = staged_ms.max(own_ms);
    assert!((all - want).abs() < 0.02, "pprof {all} ms, report {want} ms");

    // The labels a user filters by, with the values the report names.
    let tags = pprof(&go, &profile, &["-tags"]);
    for want in [
        " stage: ",
        " process: ",
        " library: ",
        " role: ",
        ": sign",
        ": nginx",
        ": server",
        ": /usr/lib/x86_64-linux-gnu/libssl.so.3",
    ] {
        assert!(tags.contains(want), "no {want:?} in go tool pprof -tags:\n{tags}");
    }

    // The stacks Go reads are the flame graph's, with their sample counts.
    let raw = pprof(&go, &profile, &["-raw"]);
    let files: HashMap<String, &str> = raw
        .lines()
        .skip_while(|l| *l != "Mappings")
        .skip(1)
        .filter_map(|l| {
            // "1: 0x0/0x0/0x0 /usr/bin/node  [FN]"
            let (id, rest) = l.trim().split_once(": 0x0/0x0/0x0 ")?;
            Some((format!("M={id} "), rest.strip_suffix("  [FN]")?))
        })
        .collect();
    let names: HashMap<&str, &str> = raw
        .lines()
        .skip_while(|l| *l != "Locations")
        .skip(1)
        .take_while(|l| *l != "Mappings")
        .filter_map(|l| {
            // "     7: 0x0 M=2 EVP_DigestSign [sign] /usr/lib/x86_64-linux-gnu/libcrypto.so.3:0:0 s=0", or with the
            // full name after a simplified C++ one: "    46: 0x0 M=1 node::Start /usr/bin/node:0:0 s=0(node::Start(int, char**))"
            let (id, mut rest) = l.trim().split_once(": 0x0 ")?;
            let mut file = "";
            if let Some((m, f)) = files.iter().find(|(m, _)| rest.starts_with(m.as_str())) {
                rest = &rest[m.len()..];
                file = f;
            }
            let (short, full) = rest.split_once(":0:0 s=0")?;
            let short = short.strip_suffix(file).unwrap_or(short).trim_end();
            let full = full.strip_prefix('(').and_then(|f| f.strip_suffix(')'));
            Some((id, full.unwrap_or(short)))
        })
        .collect();
    let mut stacks: Vec<String> = raw
        .lines()
        .skip_while(|l| !l.starts_with("samples/count"))
        .skip(1)
        .take_while(|l| *l != "Locations")
        .filter_map(|l| {
            let (values, ids) = l.split_once(": ")?;
            let count: u64 = values.split_whitespace().next()?.parse().ok()?;
            let mut frames: Vec<&str> = ids.split_whitespace().map(|id| names[id]).collect();
            frames.reverse();
            (count > 0).then(|| format!("{} {count}", frames.join(";")))
        })
        .collect();
    stacks.sort();
    let folded = std::fs::read_to_string(golden("flame.folded")).unwrap();
    assert_eq!(stacks, folded.lines().collect::<Vec<_>>());
}

#[test]
fn pprof_export_gives_the_recordings_wall_clock_start_and_length() {
    let Some(go) = go() else { return };
    let scratch = Scratch::new("export-time");
    // The checked-in recording predates the start's keeping: give it one.
    let mut rec: serde_json::Value = serde_json::from_slice(&std::fs::read(golden("before.tlsprof")).unwrap()).unwrap();
    rec["start_unix_ns"] = 1_795_000_000_123_456_789u64.into();
    let started = scratch.path("started.tlsprof");
    std::fs::write(&started, serde_json::to_vec(&rec).unwrap()).unwrap();
    let profile = scratch.path("started.pb.gz");
    stdout_of(
        tlsprof()
            .args(["export", "--format", "pprof", "--output"])
            .arg(&profile)
            .arg(&started),
    );
    let raw = pprof(&go, &profile, &["-raw"]);
    assert!(
        raw.lines()
            .any(|l| l == "Time: 2026-11-18 11:06:40.123456789 +0000 UTC"),
        "{raw}"
    );
    // go tool pprof prints three significant digits of the seconds.
    let duration: f64 = raw
        .lines()
        .find_map(|l| l.strip_prefix("Duration: "))
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("no duration in go tool pprof -raw:\n{raw}"));
    assert!((duration - f(&rec["duration_s"])).abs() < 0.1, "{duration}");
}

#[test]
fn folded_and_json_exports_are_the_flame_graphs_and_the_reports() {
    let scratch = Scratch::new("export-text");
    let folded = scratch.path("before.folded");
    export("folded", &folded);
    let flame = stdout_of(tlsprof().args(["flamegraph", "--folded"]).arg(golden("before.tlsprof")));
    assert_eq!(std::fs::read_to_string(&folded).unwrap(), flame);
    let json = scratch.path("before.json");
    export("json", &json);
    let report = stdout_of(tlsprof().args(["report", "--json"]).arg(golden("before.tlsprof")));
    assert_eq!(std::fs::read_to_string(&json).unwrap(), report);
}

#[test]
fn pprof_to_a_terminal_or_of_a_bad_recording_is_one_clear_error() {
    let scratch = Scratch::new("export-bad");
    let junk = scratch.path("junk.tlsprof");
    std::fs::write(&junk, "not a recording").unwrap();
    let out = run(tlsprof()
        .args(["export", "--format", "pprof", "--output"])
        .arg(scratch.path("out.pb.gz"))
        .arg(&junk));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("is not a tlsprof recording"), "{err}");
}
