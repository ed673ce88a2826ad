// SPDX-License-Identifier: Apache-2.0
//! Live: a hostile target, and faults under a recording (needs root). The target's name is made of terminal
//! escape sequences, and it maps a file that is not an ELF object, executable, under libssl's name beside the
//! real libssl: the recording goes on with one warning naming that file, and no output carries a raw control
//! character. SIGTERM stops a recording with its data written, SIGKILL leaves no BPF program behind, and two
//! recordings of one target run side by side.
mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// What tests/fixtures/hostile_target.c names itself, as /proc shows it (its last byte is not UTF-8).
const HOSTILE_COMM: &str = "\x1b]0;pwn\x07\x1b[2J\u{fffd}";
/// The same name as tlsprof prints it.
const HOSTILE_PRINTED: &str = "\\x1b]0;pwn\\x07\\x1b[2J\u{fffd}";

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

/// The fixture, doing handshakes until its standard input closes, and the junk file it maps.
struct Target {
    child: std::process::Child,
    stdout: BufReader<std::process::ChildStdout>,
    junk: PathBuf,
}

impl Target {
    fn start(scratch: &Scratch) -> Target {
        Target::start_with(scratch, &[])
    }

    /// With `--wait`, it makes no handshake before `go`.
    fn start_with(scratch: &Scratch, args: &[&str]) -> Target {
        let bin = build_hostile_target(scratch, "hostile_target");
        let junk = scratch.path("libssl.so.3");
        junk_file(&junk);
        let mut child = Command::new(&bin)
            .arg(&junk)
            .arg(scratch.path("cert.pem"))
            .arg(scratch.path("key.pem"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        Target { child, stdout, junk }
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn go(&mut self) {
        use std::io::Write;
        self.child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    }

    /// The handshakes it has completed on each side so far.
    fn progress(&mut self) -> u64 {
        // SAFETY: kill has no memory preconditions; the child is ours and not yet waited for.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, libc::SIGUSR1) }, 0);
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim()
            .parse()
            .unwrap_or_else(|e| panic!("its progress line {line:?}: {e}"))
    }

    /// Stops it; returns the handshakes it completed on each side.
    fn stop(mut self) -> u64 {
        drop(self.child.stdin.take());
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(self.child.wait().unwrap().success());
        line.trim().parse().unwrap()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn handshakes(report: &serde_json::Value) -> u64 {
    report["handshakes"]["total"].as_u64().unwrap()
}

#[test]
fn hostile_name_and_junk_library_are_shown_escaped_and_skipped() {
    if !require_root("hostile_name_and_junk_library_are_shown_escaped_and_skipped") {
        return;
    }
    let scratch = Scratch::new("hostile");
    let target = Target::start(&scratch);
    let junk = target.junk.clone();

    let recording = scratch.path("hostile.tlsprof");
    let rec = Recorder::start(&["--pid", &target.pid(), "-o", recording.to_str().unwrap()]);
    std::thread::sleep(Duration::from_secs(2));
    let handshakes = target.stop();
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

/// SIGTERM (as systemd or `kill` sends it) stops the recording and writes it; a second one skips the
/// `openssl speed` run that follows, so the recording is there, whole, long before that would end.
#[test]
fn sigterm_stops_with_the_recording_written() {
    if !require_root("sigterm_stops_with_the_recording_written") {
        return;
    }
    let scratch = Scratch::new("sigterm");
    let target = Target::start(&scratch);
    let recording = scratch.path("term.tlsprof");
    let rec = Recorder::start(&["--pid", &target.pid(), "-o", recording.to_str().unwrap()]);
    std::thread::sleep(Duration::from_secs(1));
    let sent = Instant::now();
    rec.signal(libc::SIGTERM);
    while !recording.exists() && sent.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let written = sent.elapsed();
    rec.signal(libc::SIGTERM);
    let (summary, log) = rec.finish_with_log();
    let exited = sent.elapsed();
    eprintln!("{log}SIGTERM: recording written after {written:?}, tlsprof exited after {exited:?}");
    assert!(recording.exists(), "no recording 30 s after SIGTERM:\n{log}");
    assert!(summary.contains("Handshakes:"), "{summary}");
    let report = report_json(&recording);
    assert!(handshakes(&report) > 0, "{report:#}");
    drop(target);
    // Nothing but the recording: no temporary file left beside it.
    let mut left: Vec<String> = std::fs::read_dir(&scratch.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("term"))
        .collect();
    left.sort();
    assert_eq!(left, ["term.tlsprof"]);
}

/// SIGTERM while `openssl speed` runs after a --duration recording (it times the alternatives advice quotes:
/// here ECDSA, for nginx's RSA certificate): tlsprof stops it and exits within a second, the recording whole
/// on disk, without the speed figures.
#[test]
fn sigterm_during_openssl_speed_stops_within_a_second() {
    if !require_root("sigterm_during_openssl_speed_stops_within_a_second") {
        return;
    }
    let scratch = Scratch::new("speed-term");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let recording = scratch.path("speed.tlsprof");
    let worker = nginx.workers()[0].to_string();
    let rec = Recorder::start(&["--pid", &worker, "--duration", "2", "-o", recording.to_str().unwrap()]);
    let connections = s_time_new_www(nginx.port, 1, "/");
    let speed_running = || {
        let out = run(Command::new("pgrep").args(["-P", &rec.pid().to_string(), "-x", "openssl"]));
        out.status.success()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !speed_running() {
        assert!(Instant::now() < deadline, "tlsprof never ran openssl speed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = Instant::now();
    rec.signal(libc::SIGTERM);
    let (summary, log) = rec.finish_with_log();
    let exited = sent.elapsed();
    eprintln!("SIGTERM during openssl speed: tlsprof exited after {exited:?} ({connections} connections recorded)");
    assert!(exited < Duration::from_secs(1), "took {exited:?} to stop\n{log}");
    assert!(summary.contains("Handshakes:"), "{summary}");
    let raw: serde_json::Value = serde_json::from_slice(&std::fs::read(&recording).unwrap()).unwrap();
    assert_eq!(
        raw["openssl_speed"],
        serde_json::json!({}),
        "speed figures of a cancelled run"
    );
    assert!(handshakes(&report_json(&recording)) > 0);
}

/// The most handshake events the handshake ring can hold: 4 MiB (bpf/tlsprof.bpf.c), over 64 bytes each
/// with the ring's header.
const HANDSHAKE_RING_EVENTS_AT_MOST: u64 = 65_536;

/// A burst of handshake events the handshake ring buffer cannot hold (tlsprof stopped while two fixtures, one
/// per CPU, make more events than it can hold): the events dropped are counted and reported, and with those
/// seen they add up to every handshake made.
#[test]
fn handshake_ring_overflow_is_counted_and_reported() {
    if !require_root("handshake_ring_overflow_is_counted_and_reported") {
        return;
    }
    let scratch = Scratch::new("hs-overflow");
    let mut targets = [
        Target::start_with(&scratch, &["--wait"]),
        Target::start_with(&scratch, &["--wait"]),
    ];
    let recording = scratch.path("hs-overflow.tlsprof");
    let (a, b) = (targets[0].pid(), targets[1].pid());
    let mut rec = Recorder::start(&["--pid", &a, "--pid", &b, "-o", recording.to_str().unwrap()]);
    for t in &mut targets {
        t.go();
    }
    std::thread::sleep(Duration::from_millis(300));
    rec.signal(libc::SIGSTOP);
    // A quarter more than the ring can hold; each handshake is two events, its server's and its client's.
    let deadline = Instant::now() + Duration::from_secs(120);
    while 2 * targets.iter_mut().map(Target::progress).sum::<u64>() < HANDSHAKE_RING_EVENTS_AT_MOST * 5 / 4
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_secs(1));
    }
    rec.signal(libc::SIGCONT);
    // Drained before the targets stop and the recording with them.
    assert!(rec.wait_for_line("no such line", Duration::from_millis(500)).is_none());
    let made: u64 = targets.into_iter().map(Target::stop).sum();
    let summary = rec.finish();
    let r = report_json(&recording);
    let (seen, dropped) = (handshakes(&r), r["lost"]["handshake_events"].as_u64().unwrap());
    eprintln!("fixtures: {made} handshakes on each side; tlsprof: {seen} seen, {dropped} events dropped");
    assert!(
        dropped > 0,
        "no handshake event dropped: the burst did not overflow\n{summary}"
    );
    assert!(summary.contains(&format!("{dropped} handshake events")), "{summary}");
    assert!(flowed(&summary).contains("(figures undercount)"), "{summary}");
    assert_eq!(seen + dropped, 2 * made, "handshakes unaccounted for\n{summary}");
}

/// A memory cgroup for one test, limited to `limit`: the v2 one where the memory controller is there, else
/// the v1 one. Removed on drop (once empty).
struct MemoryCgroup {
    dir: PathBuf,
    v2: bool,
}

impl MemoryCgroup {
    fn new(name: &str, limit: &str) -> MemoryCgroup {
        let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").is_ok_and(|c| c.contains("memory"));
        let dir = if v2 {
            PathBuf::from("/sys/fs/cgroup").join(name)
        } else {
            PathBuf::from("/sys/fs/cgroup/memory").join(name)
        };
        std::fs::create_dir_all(&dir).unwrap();
        let file = if v2 { "memory.max" } else { "memory.limit_in_bytes" };
        std::fs::write(dir.join(file), limit).unwrap();
        MemoryCgroup { dir, v2 }
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// tlsprof in a memory cgroup too small for its BPF maps (they are charged to it): one error line saying
/// so, a non-zero exit, no BPF program left behind.
#[test]
fn bpf_maps_beyond_the_cgroup_memory_limit_are_one_clear_error() {
    if !require_root("bpf_maps_beyond_the_cgroup_memory_limit_are_one_clear_error") {
        return;
    }
    let scratch = Scratch::new("memcg");
    let target = Target::start(&scratch);
    let cgroup = MemoryCgroup::new(&format!("tlsprof-test-{}", std::process::id()), "30M");
    let out = run(Command::new("sh")
        .arg("-c")
        .arg(r#"echo $$ > "$1/cgroup.procs" && exec "$2" record --pid "$3" --duration 2 -o "$4""#)
        .arg("sh")
        .arg(&cgroup.dir)
        .arg(env!("CARGO_BIN_EXE_tlsprof"))
        .arg(target.pid())
        .arg(scratch.path("memcg.tlsprof")));
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "in a {} memory cgroup of 30 MiB: {stderr}",
        if cgroup.v2 { "v2" } else { "v1" }
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("tlsprof: error: the BPF maps do not fit in the memory tlsprof's cgroup allows"),
        "{stderr}"
    );
    assert!(tlsprof_programs().is_empty(), "left behind: {:?}", tlsprof_programs());
    assert!(!scratch.path("memcg.tlsprof").exists());
}

/// tlsprof's BPF programs loaded now (the lock keeps other recordings from running meanwhile).
fn uprobe_events() -> String {
    std::fs::read_to_string("/sys/kernel/tracing/uprobe_events").unwrap_or_default()
}

/// SIGKILL gives tlsprof no chance to clean up: the kernel must drop its programs, links and uprobes with
/// its file descriptors, and the target runs on unprobed.
#[test]
fn sigkill_leaves_no_bpf_behind() {
    if !require_root("sigkill_leaves_no_bpf_behind") {
        return;
    }
    let scratch = Scratch::new("sigkill");
    let target = Target::start(&scratch);
    let before = (tlsprof_programs(), uprobe_events());
    assert!(before.0.is_empty(), "tlsprof programs already loaded: {:?}", before.0);
    let recording = scratch.path("killed.tlsprof");
    let rec = Recorder::start(&["--pid", &target.pid(), "-o", recording.to_str().unwrap()]);
    let live = tlsprof_programs();
    assert!(live.contains(&"stage_enter".to_string()), "{live:?}");
    rec.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tlsprof_programs().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(tlsprof_programs(), Vec::<String>::new(), "programs left after SIGKILL");
    assert_eq!(uprobe_events(), before.1, "uprobe events left after SIGKILL");
    assert!(!recording.exists(), "a killed recording left a file at the output path");
    // The target goes on, unharmed.
    std::thread::sleep(Duration::from_millis(200));
    assert!(target.stop() > 0);
}

/// Two recordings of one target at once (two operators, or a recording left running): both attach, both
/// count its handshakes.
#[test]
fn two_recordings_of_one_target() {
    if !require_root("two_recordings_of_one_target") {
        return;
    }
    let scratch = Scratch::new("two");
    let target = Target::start(&scratch);
    let (a, b) = (scratch.path("a.tlsprof"), scratch.path("b.tlsprof"));
    let first = Recorder::start(&["--pid", &target.pid(), "-o", a.to_str().unwrap()]);
    let second = Recorder::start(&["--pid", &target.pid(), "-o", b.to_str().unwrap()]);
    std::thread::sleep(Duration::from_secs(2));
    let made = target.stop();
    first.finish();
    second.finish();
    let (ra, rb) = (report_json(&a), report_json(&b));
    let (ha, hb) = (handshakes(&ra), handshakes(&rb));
    eprintln!("fixture: {made} handshakes on each side; recordings: {ha} and {hb} (server and client)");
    // Each recording sees both sides of the handshakes made while it was attached, no more than were made.
    assert!(ha > 0 && ha <= 2 * made, "{ha} of {made}");
    assert!(hb > 0 && hb <= 2 * made, "{hb} of {made}");
    // The second attached later and both stopped together: it saw no more than the first.
    assert!(hb <= ha, "{hb} > {ha}");
}

/// A burst the ring buffer cannot hold (tlsprof stopped while a busy target is sampled 999 times a second,
/// each sample a 64 KiB stack copy: the ring, at its 64 MiB cap, holds about a second of them): the samples
/// it drops are counted and reported, and with those kept they add up to every sample taken.
#[test]
fn ring_buffer_overflow_is_counted_and_reported() {
    if !require_root("ring_buffer_overflow_is_counted_and_reported") {
        return;
    }
    let scratch = Scratch::new("overflow");
    let target = Target::start(&scratch);
    let recording = scratch.path("overflow.tlsprof");
    let mut rec = Recorder::start(&[
        "--pid",
        &target.pid(),
        "--freq",
        "999",
        "-o",
        recording.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(500));
    rec.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(4));
    rec.signal(libc::SIGCONT);
    // Drained before the target stops and the recording with it.
    assert!(rec.wait_for_line("no such line", Duration::from_millis(500)).is_none());
    target.stop();
    let summary = rec.finish();
    let raw: serde_json::Value = serde_json::from_slice(&std::fs::read(&recording).unwrap()).unwrap();
    let lost = &raw["lost"];
    let kept: u64 = raw["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["count"].as_u64().unwrap())
        .sum();
    let (taken, dropped) = (
        lost["samples_taken"].as_u64().unwrap(),
        lost["samples"].as_u64().unwrap(),
    );
    eprintln!("samples: {taken} taken, {kept} kept, {dropped} dropped; {lost}");
    assert!(dropped > 0, "no samples dropped: the burst did not overflow\n{summary}");
    assert!(summary.contains(&format!("Lost: {dropped} samples")), "{summary}");
    assert!(flowed(&summary).contains("(figures undercount)"), "{summary}");
    assert_eq!(kept + dropped, taken, "samples unaccounted for\n{summary}");
}
