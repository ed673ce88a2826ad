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
    one_line_error(&run(tlsprof().args(["serve", "--listen", "127.0.0.1:0"])), "no target");
    one_line_error(
        &run(tlsprof().args(["serve", "--pid", "1", "--listen", "127.0.0.1:0", "--max-overhead", "0"])),
        "--max-overhead 0 is out of range",
    );
    for (bad, said) in [("0", "0"), ("nan", "NaN"), ("-1", "-1")] {
        one_line_error(
            &run(tlsprof().args(["top", "--pid", "1", &format!("--interval={bad}")])),
            &format!("--interval {said} is out of range"),
        );
    }
    one_line_error(
        &run(tlsprof().args(["top", "--batch", "--pid", "4194305"])),
        "no process with pid 4194305",
    );
}

#[test]
fn serve_where_it_cannot_listen() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    one_line_error(
        &run(tlsprof().args(["serve", "--pid", "1", "--listen", &addr])),
        &format!("cannot listen on {addr}"),
    );
    one_line_error(
        &run(tlsprof().args(["serve", "--pid", "1", "--listen", "no-such-address"])),
        "cannot listen on no-such-address",
    );
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
        br#"{"format":"tlsprof-recording","format_version":11,"duration_s":"#,
    )
    .unwrap();
    one_line_error(
        &run(tlsprof().arg("report").arg(&truncated)),
        "is not a tlsprof recording or is damaged",
    );
    let wrong_shape = scratch.path("wrong-shape");
    std::fs::write(
        &wrong_shape,
        br#"{"format":"tlsprof-recording","format_version":11,"duration_s":"x"}"#,
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

/// The HTML report and diff: a damaged recording or a page that cannot be written is one line.
#[test]
fn html_from_a_damaged_recording_or_to_an_unwritable_place() {
    let scratch = Scratch::new("bad-html");
    let golden = repo().join("tests/golden/before.tlsprof");
    let damaged = scratch.path("damaged");
    let bytes = std::fs::read(&golden).unwrap();
    std::fs::write(&damaged, &bytes[..bytes.len() / 2]).unwrap();
    let page = scratch.path("page.html");
    one_line_error(
        &run(tlsprof().arg("report").arg(&damaged).args(["--html", "-o"]).arg(&page)),
        "is not a tlsprof recording or is damaged",
    );
    one_line_error(
        &run(tlsprof()
            .arg("diff")
            .arg(&golden)
            .arg(&damaged)
            .args(["--html", "-o"])
            .arg(&page)),
        "is not a tlsprof recording or is damaged",
    );
    let nowhere = scratch.path("missing-dir/page.html");
    one_line_error(
        &run(tlsprof()
            .arg("report")
            .arg(&golden)
            .args(["--html", "-o"])
            .arg(&nowhere)),
        "cannot write",
    );
    assert!(!page.exists() && !nowhere.exists());
}

/// A process on a TLS library tlsprof cannot profile is told so by name, not "no TLS code": rustls stripped
/// of its symbols, which name its functions.
#[test]
fn process_on_stripped_rustls_is_named_not_profiled() {
    if !require_root("process_on_stripped_rustls_is_named_not_profiled") {
        return;
    }
    assert_stripped_server_named("rustls-server", "runs rustls 0.23.");
}

/// examples/rust/`server` stripped of its symbols, its sockets left unread: one line naming what it runs
/// (`runs`), and why it is not profiled.
fn assert_stripped_server_named(server: &str, runs: &str) {
    let scratch = Scratch::new(&format!("bad_input_stripped_{server}"));
    let (cert, key) = self_signed_cert(&scratch);
    let stripped = stripped_copy(&build_rust_example(server), &scratch);
    let mut server = Command::new(&stripped)
        .arg(cert)
        .arg(key)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(server.stdout.take().unwrap()), &mut port).unwrap();
    let server = Running(server);
    let out = run(tlsprof().args(["record", "--pid", &server.pid().to_string(), "--hello-capture", "off"]));
    one_line_error(&out, runs);
    one_line_error(
        &out,
        "without the function names tlsprof finds it by (a stripped build): not supported yet (tlsprof profiles Go \
         crypto/tls, rustls, AWS-LC, BoringSSL or OpenSSL by their functions' names",
    );
}

/// A process that runs no TLS library code (a plain `sleep`) with its sockets left unread: nothing to count
/// its handshakes with (tests/live_wire.rs counts it from the wire otherwise). --wire-only with what it needs
/// turned off, or with --all: one line each.
#[test]
fn process_without_tls() {
    if !require_root("process_without_tls") {
        return;
    }
    let sleeper = Running(Command::new("sleep").arg("30").spawn().unwrap());
    let pid = sleeper.pid().to_string();
    let out = run(tlsprof().args(["record", "--pid", &pid, "--hello-capture", "off"]));
    one_line_error(&out, "has no Go crypto/tls, rustls, AWS-LC, BoringSSL or OpenSSL code");
    let out = run(tlsprof().args(["record", "--pid", &pid, "--hello-capture", "off", "--wire-only"]));
    one_line_error(&out, "--wire-only counts handshakes from the sockets");
    let out = run(tlsprof().args(["record", "--all", "--wire-only"]));
    one_line_error(&out, "--wire-only counts the processes --pid and --comm name");
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
    one_line_error(&out, "needs root (or CAP_BPF, CAP_PERFMON and CAP_CHECKPOINT_RESTORE)");
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

/// Recordings that are not what they claim: each gets one line, quickly, whatever its size or shape.
#[test]
fn hostile_recordings() {
    let scratch = Scratch::new("hostile-recordings");
    let report = |path: &std::path::Path| run(tlsprof().arg("report").arg(path));

    // Not regular files: neither a FIFO with no writer nor an endless device is waited on or read.
    let fifo = scratch.path("fifo");
    assert!(run(Command::new("mkfifo").arg(&fifo)).status.success());
    one_line_error(&report(&fifo), "not a regular file");
    one_line_error(&report(std::path::Path::new("/dev/zero")), "not a regular file");

    // Larger than any recording: refused before it is read (sparse, so it costs no disk).
    let huge = scratch.path("huge");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(tlsprof::model::MAX_RECORDING_BYTES + 1)
        .unwrap();
    one_line_error(&report(&huge), "more than a recording may be");

    let header = r#"{"format":"tlsprof-recording","format_version":11"#;
    let write = |name: &str, body: String| {
        let path = scratch.path(name);
        std::fs::write(&path, body).unwrap();
        path
    };
    let deep = write("deep", format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000)));
    one_line_error(&report(&deep), "is not a tlsprof recording or is damaged");
    let deep_field = write(
        "deep-field",
        format!(r#"{header},"targets":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000)),
    );
    one_line_error(&report(&deep_field), "damaged tlsprof recording");

    // A whole recording with one figure made absurd.
    let golden = std::fs::read_to_string(repo().join("tests/golden/before.tlsprof")).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&golden).unwrap();
    value["duration_s"] = serde_json::json!(1e308);
    let absurd = write("absurd", value.to_string());
    one_line_error(&report(&absurd), "(duration out of range)");
    let mut value: serde_json::Value = serde_json::from_str(&golden).unwrap();
    value["lost"]["unframed_work"] = serde_json::json!(u64::MAX);
    let absurd = write("absurd-lost", value.to_string());
    one_line_error(&report(&absurd), "(lost counts out of range)");

    // A hostile string quoted by the error: escaped, still one line.
    let quoted = write(
        "quoted",
        format!(r#"{header},"duration_s":"\u001b]0;x\u0007\n\u009b2J"}}"#),
    );
    let out = report(&quoted);
    one_line_error(&out, "damaged tlsprof recording");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.trim_end().chars().any(char::is_control),
        "raw control characters: {stderr:?}"
    );
    assert!(stderr.contains("]0;x"), "{stderr}");
}

/// Outputs are written whole or not at all: a disk that fills up half way leaves the file that was there.
#[test]
fn full_disk_leaves_the_previous_output() {
    if !require_root("full_disk_leaves_the_previous_output") {
        return;
    }
    let scratch = Scratch::new("full-disk");
    let dir = scratch.path("small");
    std::fs::create_dir_all(&dir).unwrap();
    // A 64 KiB tmpfs in a private mount namespace: the flame graph (over 100 KiB) does not fit.
    let script = format!(
        "mount -t tmpfs -o size=64k none {dir} && echo previous > {dir}/flame.svg && \
         {bin} flamegraph {rec} -o {dir}/flame.svg; echo \"exit $?\"; cat {dir}/flame.svg; ls -A {dir}",
        dir = dir.display(),
        bin = env!("CARGO_BIN_EXE_tlsprof"),
        rec = repo().join("tests/golden/before.tlsprof").display()
    );
    let out = run(Command::new("unshare").args(["--mount", "sh", "-c", &script]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout, "exit 1\nprevious\nflame.svg\n", "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("tlsprof: error: cannot write") && stderr.contains("No space left on device"),
        "{stderr}"
    );
}
