// SPDX-License-Identifier: Apache-2.0
//! Live: a hostile target (needs root). Its name is made of terminal escape sequences, and it maps a file that
//! is not an ELF object, executable, under libssl's name beside the real libssl: the recording goes on with
//! one warning naming that file, and no output carries a raw control character.
mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

/// What tests/fixtures/hostile_target.c names itself, as /proc shows it (its last byte is not UTF-8).
const HOSTILE_COMM: &str = "\x1b]0;pwn\x07\x1b[2J\u{fffd}";
/// The same name as tlsprof prints it.
const HOSTILE_PRINTED: &str = "\\x1b]0;pwn\\x07\\x1b[2J\u{fffd}";

fn build_fixture(scratch: &Scratch) -> PathBuf {
    let bin = scratch.path("hostile_target");
    let out = run(Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&bin)
        .arg(repo().join("tests/fixtures/hostile_target.c"))
        .args(["-lssl", "-lcrypto"]));
    assert!(
        out.status.success(),
        "build fixture: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ])
        .args(["-days", "1", "-subj", "/CN=localhost", "-keyout"])
        .arg(scratch.path("key.pem"))
        .arg("-out")
        .arg(scratch.path("cert.pem")));
    assert!(
        out.status.success(),
        "openssl req: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// 64 KiB of noise (xorshift), not an ELF object.
fn junk_file(path: &Path) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let bytes: Vec<u8> = (0..65536)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(path, bytes).unwrap();
}

/// No character a terminal acts on: C0 controls but the newline and tab, DEL, C1 controls.
fn assert_no_raw_controls(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| c.is_control() && c != '\n' && c != '\t')
        .collect();
    assert!(bad.is_empty(), "{what} carries raw control characters {bad:?}:\n{text}");
}

#[test]
fn hostile_name_and_junk_library_are_shown_escaped_and_skipped() {
    if !require_root("hostile_name_and_junk_library_are_shown_escaped_and_skipped") {
        return;
    }
    let scratch = Scratch::new("hostile");
    let bin = build_fixture(&scratch);
    let junk = scratch.path("libssl.so.3");
    junk_file(&junk);
    let mut target = Command::new(&bin)
        .arg(&junk)
        .arg(scratch.path("cert.pem"))
        .arg(scratch.path("key.pem"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(target.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    let recording = scratch.path("hostile.tlsprof");
    let rec = Recorder::start(&["--pid", &target.id().to_string(), "-o", recording.to_str().unwrap()]);
    std::thread::sleep(std::time::Duration::from_secs(2));
    drop(target.stdin.take());
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(target.wait().unwrap().success());
    let handshakes: u64 = line.trim().parse().unwrap();
    let (summary, log) = rec.finish_with_log();
    eprintln!("{log}{summary}");

    // One warning, naming the junk file; the real libssl still profiled.
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{log}");
    assert!(warnings[0].contains(&format!("skipping {}", junk.display())), "{log}");
    assert_no_raw_controls("tlsprof record's log", &log);
    assert_no_raw_controls("tlsprof record's summary", &summary);
    assert!(summary.contains(HOSTILE_PRINTED), "{summary}");

    let report = report_json(&recording);
    assert_eq!(report["targets"][0]["comm"], HOSTILE_COMM, "{report:#}");
    let libraries: Vec<&str> = report["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    assert!(libraries.iter().any(|p| p.contains("libssl")), "{libraries:?}");
    assert!(!libraries.contains(&junk.to_str().unwrap()), "{libraries:?}");
    // Each handshake of the fixture is a server and a client one; some fell before the probes attached.
    let (server, client) = (
        report["handshakes"]["server"].as_u64().unwrap(),
        report["handshakes"]["client"].as_u64().unwrap(),
    );
    eprintln!("fixture: {handshakes} handshakes on each side; tlsprof: {server} server, {client} client");
    assert!(server > 0 && server <= handshakes, "{server} of {handshakes}");
    assert!(client > 0 && client <= handshakes, "{client} of {handshakes}");

    let output = |args: &[&str]| {
        let out = run(tlsprof().args(args).arg(&recording));
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    };
    let text = output(&["report"]);
    assert_no_raw_controls("report", &text);
    assert!(text.contains(&format!("{HOSTILE_PRINTED} (pid ")), "{text}");
    let json = output(&["report", "--json"]);
    assert_no_raw_controls("report --json", &json);
    let folded = output(&["flamegraph", "--folded"]);
    assert_no_raw_controls("folded stacks", &folded);
    assert!(
        folded
            .lines()
            .all(|l| l.starts_with(&HOSTILE_PRINTED.replace(';', ":"))),
        "{folded}"
    );
    let svg = output(&["flamegraph"]);
    assert_no_raw_controls("flame graph", &svg);
    assert!(svg.contains("\\x1b]0:pwn\\x07"), "the escaped name in the flame graph");
}
