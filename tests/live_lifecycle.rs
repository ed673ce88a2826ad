// SPDX-License-Identifier: Apache-2.0
//! Live: targets that change under a recording (needs root). A target that runs a new program (exec, same
//! pid) is probed anew, its samples named against the program they ran in; a libssl replaced on disk while
//! mapped (a package upgrade) is profiled in the processes that keep the deleted file and in those that map
//! the new one. Each counts every handshake its fixture made, and the report says what happened in one line.
//! Continuous mode picks up targets that come and go and forgets each one that exits.
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// The fixture running, its standard input and output held.
struct Fixture {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Fixture {
    fn start(scratch: &Scratch, bin: &Path, mode: &[&str], env: &[(&str, &Path)]) -> Fixture {
        let mut child = Command::new(bin)
            .arg(scratch.path("cert.pem"))
            .arg(scratch.path("cert.pem"))
            .arg(scratch.path("key.pem"))
            .args(mode)
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let stdin = child.stdin.take();
        let mut f = Fixture { child, stdin, stdout };
        assert_eq!(f.line(), "ready");
        f
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim().to_string()
    }

    fn say(&mut self, text: &str) {
        self.stdin.as_mut().unwrap().write_all(text.as_bytes()).unwrap();
    }

    /// Closes its standard input: it stops and says how many handshakes it made on each side.
    fn stop(mut self) -> u64 {
        drop(self.stdin.take());
        let made = self.line().parse().unwrap();
        assert!(self.child.wait().unwrap().success());
        made
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn target(raw: &serde_json::Value, pid: u32) -> &serde_json::Value {
    raw["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["pid"] == pid)
        .unwrap_or_else(|| panic!("process {pid} is not among the targets"))
}

/// A target runs another program file (a copy of itself: same code, mapped elsewhere) halfway through: it is
/// seen to, probed anew (no handshake lost to the old probes, none counted twice) and its samples from both
/// programs are named.
#[test]
fn exec_is_probed_anew_and_named_against_the_program_it_ran() {
    if !require_root("exec_is_probed_anew_and_named_against_the_program_it_ran") {
        return;
    }
    let scratch = Scratch::new("exec");
    let first = build_hostile_target(&scratch, "first");
    let second = scratch.path("second");
    std::fs::copy(&first, &second).unwrap();
    let mut fixture = Fixture::start(&scratch, &first, &["--wait", "--exec", second.to_str().unwrap()], &[]);
    let pid = fixture.pid();
    let recording = scratch.path("exec.tlsprof");
    let mut rec = Recorder::start(&["--pid", &pid.to_string(), "-o", recording.to_str().unwrap()]);
    fixture.say("go\n");
    std::thread::sleep(Duration::from_millis(1500));
    fixture.say("exec\n");
    let before: u64 = fixture.line().parse().unwrap();
    assert_eq!(fixture.line(), "ready", "the second program did not start");
    let line = rec.wait_for_line(&format!("process {pid} "), Duration::from_secs(10));
    assert!(
        line.as_ref()
            .is_some_and(|l| l.contains("ran a new program: probes moved to it")),
        "{line:?}\n{}",
        rec.stderr
    );
    fixture.say("go\n");
    std::thread::sleep(Duration::from_millis(1500));
    let after = fixture.stop();
    // The target exited: the recording ends by itself.
    let (summary, log) = rec.finish_with_log();

    let raw: serde_json::Value = serde_json::from_slice(&std::fs::read(&recording).unwrap()).unwrap();
    let t = target(&raw, pid);
    let seen = completed_in(&raw, pid);
    eprintln!("fixture: {before} + {after} handshakes on each side, before and after exec; tlsprof saw {seen}");
    assert_eq!(seen, 2 * (before + after), "{summary}\n{log}");
    assert_eq!(t["execs_at_s"].as_array().unwrap().len(), 1, "{t}");
    assert!(
        summary.contains(&format!("(pid {pid}): {seen} handshakes,"))
            && flowed(&summary).contains("ran a new program (exec), probed anew from"),
        "{summary}"
    );
    // Each sample named against the program it ran in: a stack unwound or named against the other one's
    // mappings (each maps its files at addresses of its own) has frames outside any file.
    let (mut in_stages, mut outside_files) = (0, 0);
    for s in raw["samples"].as_array().unwrap().iter().filter(|s| s["pid"] == pid) {
        if s["path"].as_array().unwrap().is_empty() {
            continue;
        }
        let count = s["count"].as_u64().unwrap();
        in_stages += count;
        let frames = s["frames"].as_array().unwrap();
        if frames.iter().any(|f| f == "[anon]" || f == "[unknown]") {
            outside_files += count;
        }
    }
    eprintln!("samples in stages: {in_stages}, {outside_files} with frames outside any file");
    assert!(in_stages >= 20, "too few samples to tell: {in_stages}\n{summary}");
    assert!(
        outside_files * 20 <= in_stages,
        "{outside_files} of {in_stages} samples have frames outside any file\n{summary}"
    );
}

/// The directory holding the libssl and libcrypto `bin` links.
fn system_libraries(bin: &Path) -> Vec<PathBuf> {
    let out = run(Command::new("ldd").arg(bin));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("libssl") || l.contains("libcrypto"))
        .filter_map(|l| l.split("=>").nth(1)?.split_whitespace().next().map(PathBuf::from))
        .collect()
}

/// A private libssl and libcrypto (LD_LIBRARY_PATH) replaced by rename, as a package upgrade does, while a
/// process maps them: that process keeps the deleted files, one started after maps the new ones, both are
/// profiled to the last handshake, and the report says the library was replaced.
#[test]
fn libssl_replaced_on_disk_is_profiled_in_old_and_new_processes() {
    if !require_root("libssl_replaced_on_disk_is_profiled_in_old_and_new_processes") {
        return;
    }
    let scratch = Scratch::new("libssl-upgrade");
    let bin = build_hostile_target(&scratch, "tls_server");
    let libdir = scratch.path("lib");
    std::fs::create_dir(&libdir).unwrap();
    let libs = system_libraries(&bin);
    assert_eq!(libs.len(), 2, "{libs:?}");
    for lib in &libs {
        std::fs::copy(lib, libdir.join(lib.file_name().unwrap())).unwrap();
    }
    let env = [("LD_LIBRARY_PATH", libdir.as_path())];
    let mut old = Fixture::start(&scratch, &bin, &["--wait"], &env);
    let recording = scratch.path("upgrade.tlsprof");
    let mut rec = Recorder::start(&["--all", "-o", recording.to_str().unwrap()]);
    old.say("go\n");

    // The upgrade: new files written beside, renamed over the old ones.
    for lib in &libs {
        let name = lib.file_name().unwrap();
        let staged = libdir.join(format!("{}.new", name.to_str().unwrap()));
        std::fs::copy(lib, &staged).unwrap();
        std::fs::rename(&staged, libdir.join(name)).unwrap();
    }
    let mut new = Fixture::start(&scratch, &bin, &["--wait"], &env);
    let line = rec.wait_for_line(
        &format!("attached to new process {} ", new.pid()),
        Duration::from_secs(10),
    );
    assert!(line.is_some(), "--all did not attach to {}:\n{}", new.pid(), rec.stderr);
    new.say("go\n");
    std::thread::sleep(Duration::from_millis(1500));
    let (old_pid, new_pid) = (old.pid(), new.pid());
    let (old_made, new_made) = (old.stop(), new.stop());
    let (summary, _) = rec.interrupt_with_log();

    let raw: serde_json::Value = serde_json::from_slice(&std::fs::read(&recording).unwrap()).unwrap();
    let (old_seen, new_seen) = (completed_in(&raw, old_pid), completed_in(&raw, new_pid));
    eprintln!(
        "before the upgrade: {old_made} handshakes on each side, {old_seen} seen; after: {new_made}, {new_seen} seen"
    );
    assert_eq!(old_seen, 2 * old_made, "{summary}");
    assert_eq!(new_seen, 2 * new_made, "{summary}");
    let libssl = libdir.join("libssl.so.3");
    let entries: Vec<&serde_json::Value> = raw["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["path"] == libssl.to_str().unwrap())
        .collect();
    assert_eq!(entries.len(), 2, "old and new libssl: {entries:?}");
    let replaced: Vec<bool> = entries.iter().map(|l| l["replaced"].as_bool().unwrap()).collect();
    assert_eq!(replaced.iter().filter(|r| **r).count(), 1, "{entries:?}");
    // The library's line (wrapped at 100 columns: read as one) ends saying so.
    let said = format!("replaced on disk while mapped: pid {old_pid} ran the old file");
    let lines = flowed(&summary);
    let named = format!("{} (", libssl.to_str().unwrap());
    assert!(
        lines
            .match_indices(&named)
            .any(|(at, _)| lines[at..].split(" OpenSSL ").next().is_some_and(|l| l.contains(&said))),
        "{summary}"
    );
}

/// Watches a process's peak resident memory (VmHWM) until it exits; the last value read, in KiB.
fn watch_peak_rss_kib(pid: u32) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut peak = 0;
        while let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            let hwm = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok());
            match hwm {
                Some(kib) => peak = kib,
                None => break,
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        peak
    })
}

/// 200 target processes: tlsprof attaches to all of them (the time and its memory are printed), and counts
/// every handshake each one makes.
#[test]
fn two_hundred_targets_attached_and_counted() {
    if !require_root("two_hundred_targets_attached_and_counted") {
        return;
    }
    const TARGETS: usize = 200;
    let scratch = Scratch::new("many");
    let bin = build_hostile_target(&scratch, "tls_server");
    let mut fixtures: Vec<Fixture> = (0..TARGETS)
        .map(|_| Fixture::start(&scratch, &bin, &["--wait"], &[]))
        .collect();
    let pids: Vec<String> = fixtures.iter().map(|f| f.pid().to_string()).collect();
    let mut args: Vec<&str> = pids.iter().flat_map(|p| ["--pid", p.as_str()]).collect();
    let recording = scratch.path("many.tlsprof");
    args.extend(["-o", recording.to_str().unwrap()]);
    let started = std::time::Instant::now();
    let rec = Recorder::start(&args);
    let attach = started.elapsed();
    let peak = watch_peak_rss_kib(rec.pid());
    for f in &mut fixtures {
        f.say("go\n");
    }
    std::thread::sleep(Duration::from_secs(2));
    // All told at once: 200 busy processes on a few CPUs take a while each to notice.
    for f in &mut fixtures {
        drop(f.stdin.take());
    }
    let made: Vec<u64> = fixtures.into_iter().map(Fixture::stop).collect();
    let stopping = std::time::Instant::now();
    // Every target exited: the recording ends by itself.
    let (summary, log) = rec.finish_with_log();
    let peak_kib = peak.join().unwrap();
    let stopped = stopping.elapsed();
    let probes_live = log.lines().find(|l| l.contains("probes live")).unwrap_or_default();
    let raw: serde_json::Value = serde_json::from_slice(&std::fs::read(&recording).unwrap()).unwrap();
    let mut short = Vec::new();
    for (pid, made) in pids.iter().zip(&made) {
        let seen = completed_in(&raw, pid.parse().unwrap());
        if seen != 2 * made {
            short.push(format!("{pid}: {seen} of {}", 2 * made));
        }
    }
    let total: u64 = made.iter().sum();
    eprintln!(
        "{TARGETS} targets: tlsprof started and attached in {attach:?} ({probes_live}); stopped, wrote the recording and exited {stopped:?} after the targets; its peak RSS {:.1} MiB; {total} handshakes on each side",
        peak_kib as f64 / 1024.0
    );
    assert_eq!(raw["targets"].as_array().unwrap().len(), TARGETS);
    assert!(short.is_empty(), "handshakes missed: {short:?}\n{summary}");
}

/// `serve --comm`: targets that come and go one after another are each picked up, counted whole, and
/// forgotten once they exit (the targets gauge falls back to 0), so continuous mode keeps nothing of
/// processes gone.
#[test]
fn serve_counts_targets_that_come_and_go_and_forgets_them() {
    if !require_root("serve_counts_targets_that_come_and_go_and_forgets_them") {
        return;
    }
    let scratch = Scratch::new("churn");
    let bin = build_hostile_target(&scratch, "churn");
    let listen = free_port();
    let mut first = Fixture::start(&scratch, &bin, &["--wait", "--name", "churn"], &[]);
    let mut child = tlsprof()
        .args(["serve", "--comm", "churn", "--max-overhead", "100", "--listen"])
        .arg(format!("127.0.0.1:{listen}"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(child.stderr.take().unwrap(), |_| true);
    let _serve = Running(child);
    let mut log = String::new();
    let wait_log = |text: &str, log: &mut String| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !log.contains(text) {
            if let Ok(l) = lines.recv_timeout(Duration::from_millis(200)) {
                log.push_str(&(l + "\n"));
            }
            assert!(Instant::now() < deadline, "tlsprof serve never said {text:?}:\n{log}");
        }
    };
    wait_log("probes live", &mut log);
    first.say("go\n");
    std::thread::sleep(Duration::from_millis(1000));
    let mut made = first.stop();
    for _ in 0..3 {
        let mut next = Fixture::start(&scratch, &bin, &["--wait", "--name", "churn"], &[]);
        wait_log(&format!("attached to new process {} ", next.pid()), &mut log);
        next.say("go\n");
        std::thread::sleep(Duration::from_millis(1000));
        made += next.stop();
    }
    // Each process, client and server, made `made` handshakes on each side; all were counted (the probes
    // were attached throughout) once the last one's interval is in, and no target is left.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = get_text(listen, "/metrics");
        let (counted, targets) = (scraped(&m, "tlsprof_handshakes_total"), scraped(&m, "tlsprof_targets"));
        if counted == (2 * made) as f64 && targets == 0.0 {
            eprintln!("4 processes one after another: {made} handshakes on each side, all counted; 0 targets left");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after 30 s: {counted} handshakes counted of {}, {targets} targets left\n{m}\n{log}",
            2 * made
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
