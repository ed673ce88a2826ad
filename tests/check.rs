// SPDX-License-Identifier: Apache-2.0
//! `tlsprof check`: as root on a machine that records (this one), every item is named and it exits 0;
//! unprivileged it still reports every item, says the fix, and exits 1.
mod common;

use std::process::Command;

use common::*;

const ITEMS: [&str; 14] = [
    "privileges",
    "other processes",
    "BTF",
    "uprobes",
    "lockdown",
    "tracefs",
    "BPF programs",
    "uprobe_multi links",
    "uprobe sessions",
    "uretprobes",
    "uretprobe syscall",
    "tracepoints",
    "perf_event_paranoid",
    "CPU sampler",
];

/// One screen: at most 30 lines of at most 100 columns, a line per item after its mark, no panic.
fn screen(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.len() <= 30, "more than a screen:\n{stdout}");
    assert!(
        lines.iter().all(|l| l.chars().count() <= 100),
        "wider than 100:\n{stdout}"
    );
    for item in ITEMS {
        let named = lines.iter().any(|l| {
            ["ok ", "limited ", "missing ", "unknown "].iter().any(|mark| {
                l.strip_prefix(mark)
                    .is_some_and(|rest| rest.trim_start().starts_with(item))
            })
        });
        assert!(named, "no line for {item}:\n{stdout}");
    }
    stdout
}

#[test]
fn as_root_recording_works_here_and_every_item_is_named() {
    if !require_root(&this_test()) {
        return;
    }
    let out = run(tlsprof().arg("check"));
    let stdout = screen(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(!stdout.lines().any(|l| l.starts_with("missing ")), "{stdout}");
    assert!(
        stdout.lines().last().is_some_and(|l| l.starts_with("recording works")),
        "{stdout}"
    );
}

#[test]
fn unprivileged_it_reports_every_item_and_exits_1() {
    if !require_root(&this_test()) {
        return;
    }
    let nobody = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_tlsprof"))
        .arg("check")
        .output();
    let out = match nobody {
        Ok(out) => out,
        Err(e) => return skip(&this_test(), &format!("setpriv (util-linux) does not run: {e}")),
    };
    let stdout = screen(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let privileges = stdout
        .lines()
        .find(|l| l.starts_with("missing  privileges"))
        .unwrap_or_else(|| panic!("no missing privileges line:\n{stdout}"));
    assert!(privileges.contains("none (CapEff 0000000000000000)"), "{stdout}");
    // Its fix, where the line wraps.
    assert!(flowed(&stdout).contains("run it with sudo"), "{stdout}");
    assert!(
        flowed(&stdout).contains("recording cannot work: tlsprof needs root"),
        "{stdout}"
    );
}

#[test]
fn an_extra_argument_is_clap_s_usage_error() {
    let out = run(tlsprof().args(["check", "extra-arg"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.lines().next(),
        Some("error: unexpected argument 'extra-arg' found"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().filter(|l| l.starts_with("error")).count(), 1, "{stderr}");
    assert!(out.stdout.is_empty());
}
