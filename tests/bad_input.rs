// SPDX-License-Identifier: Apache-2.0
//! Bad input gets one clear line on stderr and a non-zero exit, never a panic.
mod common;

use std::process::{Command, Output};

use common::*;

fn one_line_error(out: &Output, expected: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "exit code for {expected:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line expected: {stderr}");
    assert!(
        stderr.starts_with("tlsprof: error: ") && stderr.contains(expected),
        "{stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
}

#[test]
fn unknown_pid() {
    // Above the kernel's largest pid_max: never a live process.
    let out = run(tlsprof().args(["record", "--pid", "4194305"]));
    one_line_error(&out, "no process with pid 4194305");
}

#[test]
fn unknown_comm() {
    let out = run(tlsprof().args(["record", "--comm", "no-such-process"]));
    one_line_error(&out, "no running process is named 'no-such-process'");
}

#[test]
fn bad_options() {
    one_line_error(
        &run(tlsprof().args(["record", "--pid", "1", "--freq", "0"])),
        "--freq 0 is out of range",
    );
    one_line_error(
        &run(tlsprof().args(["record", "--pid", "1", "--duration=-3"])),
        "--duration -3",
    );
    one_line_error(&run(tlsprof().arg("record")), "no target");
}

#[test]
fn unreadable_and_corrupt_recordings() {
    let scratch = Scratch::new("bad-recordings");
    one_line_error(
        &run(tlsprof().arg("report").arg(scratch.path("missing"))),
        "cannot read recording",
    );
    one_line_error(&run(tlsprof().arg("report").arg(&scratch.0)), "cannot read recording");
    let junk = scratch.path("junk");
    std::fs::write(&junk, b"\x00\x01garbage").unwrap();
    one_line_error(&run(tlsprof().arg("report").arg(&junk)), "is not a tlsprof recording");
    one_line_error(
        &run(tlsprof().arg("flamegraph").arg(&junk)),
        "is not a tlsprof recording",
    );
    let other_json = scratch.path("other.json");
    std::fs::write(&other_json, br#"{"format":"something-else"}"#).unwrap();
    one_line_error(
        &run(tlsprof().args(["report", "--json"]).arg(&other_json)),
        "is not a tlsprof recording",
    );
    let truncated = scratch.path("truncated");
    std::fs::write(
        &truncated,
        br#"{"format":"tlsprof-recording","format_version":8,"duration_s":"#,
    )
    .unwrap();
    one_line_error(
        &run(tlsprof().arg("report").arg(&truncated)),
        "is not a tlsprof recording or is damaged",
    );
    let wrong_shape = scratch.path("wrong-shape");
    std::fs::write(
        &wrong_shape,
        br#"{"format":"tlsprof-recording","format_version":8,"duration_s":"x"}"#,
    )
    .unwrap();
    one_line_error(
        &run(tlsprof().arg("report").arg(&wrong_shape)),
        "damaged tlsprof recording",
    );
    let future = scratch.path("future");
    std::fs::write(&future, br#"{"format":"tlsprof-recording","format_version":999}"#).unwrap();
    one_line_error(&run(tlsprof().arg("report").arg(&future)), "has recording format 999");
}

/// A process that runs no OpenSSL code: a plain `sleep`.
#[test]
fn process_without_tls() {
    if !require_root("process_without_tls") {
        return;
    }
    let sleeper = Running(Command::new("sleep").arg("30").spawn().unwrap());
    let out = run(tlsprof().args(["record", "--pid", &sleeper.pid().to_string()]));
    one_line_error(&out, "has no OpenSSL code");
}

#[test]
fn missing_privilege() {
    if !require_root("missing_privilege") {
        return;
    }
    let sleeper = Running(Command::new("sleep").arg("30").spawn().unwrap());
    let out = run(Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--",
        ])
        .arg(env!("CARGO_BIN_EXE_tlsprof"))
        .args(["record", "--pid", &sleeper.pid().to_string()]));
    one_line_error(&out, "needs root (or CAP_BPF and CAP_PERFMON)");
}

/// A kernel without uprobes, made by hiding the uprobe PMU in a private mount namespace.
#[test]
fn kernel_without_uprobes() {
    if !require_root("kernel_without_uprobes") {
        return;
    }
    let sleeper = Running(Command::new("sleep").arg("30").spawn().unwrap());
    let script = format!(
        "mount -t tmpfs none /sys/bus/event_source/devices/uprobe && exec {} record --pid {}",
        env!("CARGO_BIN_EXE_tlsprof"),
        sleeper.pid()
    );
    let out = run(Command::new("unshare").args(["--mount", "sh", "-c", &script]));
    one_line_error(&out, "this kernel has no uprobe support");
}
