// SPDX-License-Identifier: Apache-2.0
//! The profiler under test: running tlsprof and reading what it reports.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::lines_of;

pub fn tlsprof() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tlsprof"))
}

/// A `tlsprof record` run; `start` returns once its probes are attached. Unless the test sets
/// --max-overhead, the probes stay attached throughout, so counts can be compared with the clients' own
/// (tests/live_governor.rs covers the default duty cycle).
pub struct Recorder {
    child: Child,
    stderr_lines: mpsc::Receiver<String>,
    /// Read as it comes: a summary longer than the pipe's buffer would otherwise block tlsprof at exit.
    stdout: std::thread::JoinHandle<String>,
    pub stderr: String,
}

impl Recorder {
    pub fn start(args: &[&str]) -> Recorder {
        Recorder::start_from(tlsprof(), args)
    }

    /// As `start`, running tlsprof as `cmd` sets it up (its environment).
    pub fn start_from(mut cmd: Command, args: &[&str]) -> Recorder {
        let exact: &[&str] = if args.contains(&"--max-overhead") {
            &[]
        } else {
            &["--max-overhead", "100"]
        };
        let mut child = cmd
            .arg("record")
            .args(args)
            .args(exact)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr_lines = lines_of(child.stderr.take().unwrap(), |_| true);
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = out.read_to_string(&mut text);
            text
        });
        let mut rec = Recorder {
            child,
            stderr_lines,
            stdout,
            stderr: String::new(),
        };
        rec.wait_for("probes live");
        rec
    }

    /// Waits up to 30 s for tlsprof to print a line containing `text` on stderr.
    pub fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            match self.stderr_lines.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => {
                    self.stderr.push_str(&line);
                    self.stderr.push('\n');
                    if line.contains(text) {
                        return;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        let _ = self.child.kill();
        panic!("tlsprof did not print {text:?}:\n{}", self.stderr);
    }

    /// Stops the recording as Ctrl-C would, and returns the printed summary.
    pub fn interrupt(self) -> String {
        self.interrupt_with_log().0
    }

    /// Like `interrupt`, also returning what tlsprof wrote on stderr.
    pub fn interrupt_with_log(self) -> (String, String) {
        // SAFETY: plain signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        self.wait_output()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `timeout` for tlsprof to write a line containing `text` on stderr; the line, if it came.
    pub fn wait_for_line(&mut self, text: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(line) = self.stderr_lines.recv_timeout(Duration::from_millis(100)) {
                self.stderr.push_str(&line);
                self.stderr.push('\n');
                if line.contains(text) {
                    return Some(line);
                }
            }
        }
        None
    }

    /// Sends `signal` and returns at once.
    pub fn signal(&self, signal: i32) {
        // SAFETY: plain signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Kills tlsprof with SIGKILL, as an OOM killer or `kill -9` would, and reaps it.
    pub fn kill(mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// Waits for tlsprof to stop by itself (duration or every target exited).
    pub fn finish(self) -> String {
        self.wait_output().0
    }

    /// Like `finish`, also returning what tlsprof wrote on stderr.
    pub fn finish_with_log(self) -> (String, String) {
        self.wait_output()
    }

    fn wait_output(mut self) -> (String, String) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                while let Ok(line) = self.stderr_lines.recv_timeout(Duration::from_millis(100)) {
                    self.stderr.push_str(&line);
                    self.stderr.push('\n');
                }
                let out = self.stdout.join().unwrap();
                assert!(status.success(), "tlsprof record failed: {}\n{out}", self.stderr);
                return (out, self.stderr);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("tlsprof record did not stop:\n{}", self.stderr);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Report text with every run of whitespace one space: a phrase is found wherever the report wrapped it.
pub fn flowed(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn report_json(recording: &Path) -> Value {
    let out = tlsprof().args(["report", "--json"]).arg(recording).output().unwrap();
    assert!(
        out.status.success(),
        "report --json: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Handshakes a recording (its raw JSON) saw complete in one process, in the probe windows.
pub fn completed_in(raw: &Value, pid: u32) -> u64 {
    raw["handshakes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["pid"] == pid && g["outcome"] != "abandoned")
        .map(|g| g["cpu"]["count"].as_u64().unwrap())
        .sum()
}

pub fn stage<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no stage {name} in {report:#}"))
}

pub fn function<'a>(report: &'a Value, name: &str) -> Option<&'a Value> {
    report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
}

/// Calls of a probed function, from the JSON report.
pub fn calls_of(r: &Value, name: &str) -> u64 {
    function(r, name)
        .and_then(|f| f["calls"].as_u64())
        .unwrap_or_else(|| panic!("{name} not probed"))
}

/// One of the report's handshake counts (total, full, resumed, abandoned, server, ...).
pub fn handshakes_of(r: &Value, field: &str) -> u64 {
    r["handshakes"][field]
        .as_u64()
        .unwrap_or_else(|| panic!("handshakes.{field}"))
}

/// A server's recording against its clients' counts (`connections`, and `reused` or `resumed`): every
/// connection once, full and resumed as the clients saw them, none abandoned, each as `role`. Returns
/// (connections, resumed).
pub fn assert_counts_as_clients_saw(client: &Value, r: &Value, role: &str, summary: &str) -> (u64, u64) {
    let n = |k: &str| client[k].as_u64().unwrap_or_else(|| panic!("{k} in {client}"));
    let connections = n("connections");
    let resumed = client.get("reused").map_or_else(|| n("resumed"), |_| n("reused"));
    assert!(resumed > 0 && resumed < connections, "{client}");
    assert_eq!(handshakes_of(r, "total"), connections, "{summary}");
    assert_eq!(handshakes_of(r, "resumed"), resumed, "{summary}");
    assert_eq!(handshakes_of(r, "full"), connections - resumed, "{summary}");
    assert_eq!(handshakes_of(r, "abandoned"), 0, "{summary}");
    assert_eq!(handshakes_of(r, role), connections, "{summary}");
    (connections, resumed)
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

pub fn within(value: f64, truth: f64, tolerance: f64) -> bool {
    (value - truth).abs() <= tolerance * truth
}

/// The uprobe links tlsprof holds, from its file descriptors: (program id, probed path, cookies).
pub fn uprobe_links(pid: u32) -> Vec<(u64, String, Vec<u64>)> {
    let mut links = Vec::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fdinfo")).unwrap().flatten() {
        let Ok(text) = std::fs::read_to_string(fd.path()) else {
            continue;
        };
        if !text.contains("link_type:\tuprobe_multi") {
            continue;
        }
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };
        let cookies = text
            .lines()
            .skip_while(|l| !l.starts_with("cookie"))
            .skip(1)
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect();
        links.push((field("prog_id:").parse().unwrap(), field("path:"), cookies));
    }
    links
}

/// tlsprof's BPF programs loaded on this machine, by name: none once every tlsprof has exited (a link
/// holds its program).
pub fn tlsprof_programs() -> Vec<String> {
    libbpf_rs::query::ProgInfoIter::default()
        .map(|p| p.name.to_string_lossy().into_owned())
        .filter(|n| ["stage_enter", "stage_exit", "stage_session", "on_cpu_sample"].contains(&n.as_str()))
        .collect()
}

/// The BPF program names by id, from the kernel's program list.
pub fn program_name(id: u64) -> String {
    libbpf_rs::query::ProgInfoIter::default()
        .find(|p| u64::from(p.id) == id)
        .map(|p| p.name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// An estimate of `what` is right: within `tolerance` of the clients' `truth`, and its 95% interval
/// [`lo`, `hi`] contains it.
pub fn assert_estimate(what: &str, estimate: f64, [lo, hi]: [f64; 2], truth: u64, tolerance: f64, context: &str) {
    assert!(
        within(estimate, truth as f64, tolerance),
        "estimated {estimate} {what} for {truth} by the clients (±{:.0}% allowed)\n{context}",
        tolerance * 100.0
    );
    assert!(
        lo <= truth as f64 && truth as f64 <= hi,
        "the 95% interval [{lo}, {hi}] of {what} misses the clients' {truth}\n{context}"
    );
}

/// The estimate of `handshakes.{field}` is right: within `tolerance` of the clients' `truth`, and its interval
/// contains it.
pub fn check_estimate(r: &Value, field: &str, truth: u64, tolerance: f64, summary: &str) {
    let h = &r["handshakes"];
    assert_eq!(
        h["estimated"], true,
        "the probes were attached throughout: nothing was estimated\n{summary}"
    );
    let estimate = f(&h[field]);
    let ci = &h[format!("{field}_ci95").as_str()];
    let (lo, hi) = (f(&ci[0]), f(&ci[1]));
    eprintln!(
        "{field}: {truth} by the clients; estimated {estimate} [{lo}, {hi}] ({:+.1}%), {} seen in {} windows",
        100.0 * (estimate / truth as f64 - 1.0),
        h["observed"][field],
        r["probing"]["windows"]
    );
    assert_estimate(
        &format!("{field} handshakes"),
        estimate,
        [lo, hi],
        truth,
        tolerance,
        summary,
    );
}

/// A sample's value summed over its label sets, from a scrape of tlsprof itself.
pub fn scraped(metrics: &str, name: &str) -> f64 {
    scraped_where(metrics, name, "")
}

/// The same over the label sets that hold `label` (`stage="sign"`).
pub fn scraped_where(metrics: &str, name: &str, label: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']) && l.contains(label))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum()
}

/// Records process `pid` into `recording` in exact mode, every hello read.
pub fn record_with_hellos(pid: u32, recording: &Path) -> Recorder {
    Recorder::start(&[
        "--pid",
        &pid.to_string(),
        "--hello-capture",
        "always",
        "-o",
        recording.to_str().unwrap(),
    ])
}

/// Clients that leave after the server's flight (examples/abandon_client.py, 80 connections) against the
/// server `pid` on `port`: each handshake did its work, signing once with `sign`, and is counted once,
/// abandoned.
pub fn assert_abandoned_counted(pid: u32, port: u16, scratch: &super::Scratch, sign: &str) {
    let recording = scratch.path("abandoned.tlsprof");
    let (client, summary, r) = record_while(pid, &recording, || {
        super::python_client("abandon_client.py", &["--port", &port.to_string(), "--count", "80"])
    });
    let left = client["abandoned"].as_u64().unwrap();
    assert_eq!(handshakes_of(&r, "abandoned"), left, "{summary}");
    assert_eq!(handshakes_of(&r, "total"), 0, "{summary}");
    assert_eq!(calls_of(&r, sign), left, "{summary}");
}

/// The report's advice `id`.
pub fn advice<'a>(r: &'a Value, id: &str) -> &'a Value {
    r["advice"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no {id} advice: {:#}", r["advice"]))
}

/// Node.js 24 (OpenSSL 3.5, X25519MLKEM768 first) against the server `pid` on `port`, which prefers the hybrid
/// group: every handshake counted as the client saw it, the hybrid group read off the wire, and the server's
/// side of the exchange (`derive`) called once per handshake. Returns the summary and the JSON report.
pub fn assert_node24_hybrid_handshakes(pid: u32, port: u16, scratch: &super::Scratch, derive: &str) -> (String, Value) {
    let node = super::node_release(super::NODE_24);
    let recording = scratch.path("hybrid.tlsprof");
    let (client, summary, r) = record_while(pid, &recording, || {
        super::node_https_client(&node, &scratch.0, port, 40)
    });
    let (connections, _) = assert_counts_as_clients_saw(&client, &r, "server", &summary);
    let kinds = r["handshakes"]["kinds"].as_array().unwrap();
    assert!(
        kinds
            .iter()
            .all(|k| k["key_exchange"] == "X25519MLKEM768" && k["version"] == "TLSv1.3"),
        "{summary}"
    );
    assert_eq!(calls_of(&r, derive), connections, "{summary}");
    (summary, r)
}

/// Records the server `pid` in exact mode, every hello read, while `client` runs to its end (its counts); the
/// summary and the JSON report.
pub fn record_while(pid: u32, recording: &Path, client: impl FnOnce() -> Value) -> (Value, String, Value) {
    let rec = record_with_hellos(pid, recording);
    let counts = client();
    // A server drops each connection after its response: give the last one time to go.
    std::thread::sleep(Duration::from_millis(300));
    let summary = rec.interrupt();
    (counts, summary, report_json(recording))
}

/// The report's kinds of full handshakes, each checked by `check`: false where there are none.
pub fn every_full_kind(r: &Value, check: impl Fn(&Value) -> bool) -> bool {
    let kinds = r["handshakes"]["kinds"].as_array().unwrap();
    let mut full = kinds.iter().filter(|k| k["resumed"] == false).peekable();
    full.peek().is_some() && full.all(check)
}

/// A server on BoringSSL's code (`family` "boringssl" or "aws-lc", its version starting with `version`) with an
/// ECDSA P-256 certificate, under clients resuming their sessions over TLS 1.3 and then 1.2: every handshake
/// counted as the clients saw it, as a server (told by work only servers do); one signature per full
/// handshake; an X25519 key pair and `exchange(tls)` for every handshake that exchanges keys (every TLS 1.3
/// one, PSK with ECDHE; the full TLS 1.2 ones); every offered session accepted; none single-stepped.
pub fn assert_bssl_server_handshakes(
    pid: u32,
    port: u16,
    scratch: &super::Scratch,
    family: &str,
    version: &str,
    exchange: impl Fn(&str) -> &'static str,
) {
    for tls in ["1.3", "1.2"] {
        let recording = scratch.path(&format!("tls{tls}.tlsprof"));
        let (client, summary, r) = record_while(pid, &recording, || super::resume_clients(port, 100, tls));
        eprintln!("TLS {tls}: client {client}\n{summary}");
        let (connections, reused) = assert_counts_as_clients_saw(&client, &r, "server", &summary);
        let full = connections - reused;
        assert!(full > 0 && reused > 0, "{summary}");
        assert_eq!(calls_of(&r, "bssl::ssl_private_key_sign"), full, "{summary}");
        let exchanges = if tls == "1.3" { connections } else { full };
        assert_eq!(calls_of(&r, "X25519_keypair"), exchanges, "{summary}");
        assert_eq!(calls_of(&r, exchange(tls)), exchanges, "{summary}");
        let kinds = r["handshakes"]["kinds"].as_array().unwrap();
        let tls_version = format!("TLSv{tls}");
        assert!(kinds.iter().all(|k| k["version"] == tls_version.as_str()), "{summary}");
        assert!(
            every_full_kind(&r, |k| k["certificate_key"] == "ECDSA P-256"
                && k["key_exchange"] == "x25519"),
            "{summary}"
        );
        // Reads inside SSL_do_handshake: every ClientHello read whole, every offer seen.
        let resumption = &r["resumption"][0];
        assert_eq!(resumption["accepted"], reused, "{summary}");
        assert_eq!(resumption["refused"], 0, "{summary}");
        let lib = &r["libraries"][0];
        assert_eq!(lib["family"], family, "{summary}");
        assert!(lib["version"].as_str().unwrap().starts_with(version), "{summary}");
        assert!(summary.contains(version), "{summary}");
        assert_eq!(r["probe_stepped_hits"], 0, "{summary}");
        assert_eq!(r["lost"]["handshake_events"], 0, "{summary}");
    }
}

/// A `tlsprof serve` run listening on 127.0.0.1:`listen` with `args` besides; `start` returns once its
/// probes are attached.
pub struct Serving {
    pub running: super::Running,
    lines: mpsc::Receiver<String>,
    pub log: String,
}

impl Serving {
    pub fn start(listen: u16, args: &[String]) -> Serving {
        let mut child = tlsprof()
            .args(["serve", "--listen", &format!("127.0.0.1:{listen}")])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = lines_of(child.stderr.take().unwrap(), |_| true);
        let mut serving = Serving {
            running: super::Running(child),
            lines,
            log: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !serving.log.contains("probes live") {
            match serving.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => serving.log.push_str(&(l + "\n")),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => panic!("tlsprof serve ended:\n{}", serving.log),
            }
            assert!(
                Instant::now() < deadline,
                "tlsprof serve did not attach in 30 s:\n{}",
                serving.log
            );
        }
        serving
    }

    /// Ends it with SIGTERM and asserts that it stopped cleanly within 20 s.
    pub fn stop(mut self) {
        // SAFETY: plain signal to our own child.
        unsafe { libc::kill(self.running.pid() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = self.running.0.try_wait().unwrap() {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "tlsprof serve did not stop in 20 s after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        while let Ok(l) = self.lines.try_recv() {
            self.log.push_str(&(l + "\n"));
        }
        assert!(status.success(), "tlsprof serve exited with {status}:\n{}", self.log);
    }
}
