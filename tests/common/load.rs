// SPDX-License-Identifier: Apache-2.0
//! Clients and load: openssl s_time, openssl speed beside a server, plain HTTP GETs.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::{lines_of, Running};

/// `openssl s_time -new` for `secs` seconds: returns the number of connections it made. Its client closes
/// each connection as soon as its own handshake is done: the server may not have finished its side.
pub fn s_time_new(port: u16, secs: u32) -> u64 {
    s_time(port, secs, &[], None)
}

/// Like `s_time_new`, pinned to `cpu` if given (see `Cpus`).
pub fn s_time_new_on(port: u16, secs: u32, cpu: Option<usize>) -> u64 {
    s_time(port, secs, &[], cpu)
}

/// `openssl s_time -new -www PATH`: each connection also sends a request and reads the response, so the
/// server completes every handshake.
pub fn s_time_new_www(port: u16, secs: u32, path: &str) -> u64 {
    s_time(port, secs, &["-www", path], None)
}

fn s_time(port: u16, secs: u32, extra: &[&str], cpu: Option<usize>) -> u64 {
    let mut cmd = match cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu.to_string(), "openssl"]);
            c
        }
        None => Command::new("openssl"),
    };
    let out = cmd
        .args([
            "s_time",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-new",
            "-time",
            &secs.to_string(),
        ])
        .args(extra)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // "1733 connections in 4 real seconds, ..." is the whole-run line (the user-seconds line comes first).
    text.lines()
        .find(|l| l.contains("real seconds"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("cannot parse s_time output: {text}"))
}

/// `openssl speed rsa2048`'s signing loop beside a server under load, read once the load is over. Pinned to
/// the server's CPU at the lowest priority, it signs in the gaps the server leaves between handshakes: it
/// sees that CPU at the same moments as the signatures it is compared with, and barely slows them.
pub struct SpeedBeside {
    speed: Running,
    results: mpsc::Receiver<String>,
}

impl SpeedBeside {
    /// Signs for `secs` seconds (the load's length) on `cpu`.
    pub fn rsa2048_sign(cpu: usize, secs: u32) -> SpeedBeside {
        let mut child = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "nice", "-n", "19"])
            .args(["openssl", "speed", "-mr", "-seconds", &secs.to_string(), "rsa2048"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // `-mr` reports each loop on stderr as it ends: "+R1:<signatures>:2048:<CPU seconds>" for signing.
        let results = lines_of(child.stderr.take().unwrap(), |l| l.starts_with("+R1:"));
        SpeedBeside {
            speed: Running(child),
            results,
        }
    }

    /// CPU µs per signature. Dropping `self` stops speed before it has timed verifications for as long.
    pub fn sign_us(self) -> f64 {
        let line = self
            .results
            .recv_timeout(Duration::from_secs(60))
            .expect("openssl speed rsa2048 gave no signing figure");
        let fields: Vec<&str> = line.split(':').collect();
        let count: f64 = fields[1].parse().unwrap();
        let secs: f64 = fields[3].parse().unwrap();
        // Its CPU time has two decimals: a few hundredths of a second would say little.
        assert!(
            count > 0.0 && secs >= 0.2,
            "openssl speed had too little of the server's CPU to measure it: {line}"
        );
        eprintln!("openssl speed beside the server: {count} RSA-2048 signatures in {secs} s of CPU");
        secs * 1e6 / count
    }
}

/// RSA-2048 signing measured in a busy server against `openssl speed` signing beside it (`SpeedBeside`):
/// a signature costs more in the server than in speed's tight loop (libssl sets up a context and hashes
/// the transcript for each; the server's other work holds the caches; docs/limits.md). A sanity band,
/// -10%…+40%, that still catches a figure off by half; the exact check is against the fixture's own clock
/// (live_fixture.rs). Per call or in total (calls × speed's figure), in the same unit.
pub fn server_sign_matches_speed(server: f64, speed: f64) -> bool {
    (0.9 * speed..=1.4 * speed).contains(&server)
}

/// GET `path` from a local HTTP server: status and body.
pub fn get(port: u16, path: &str) -> (u16, Vec<u8>) {
    let (status, _, body) = get_with_head(port, path);
    (status, body)
}

/// Waits up to `timeout` until an HTTP server on `port` answers GET `path` with 200 (`what` names it).
pub fn wait_until_ready(port: u16, path: &str, what: &str, timeout: Duration) {
    let deadline = std::time::Instant::now() + timeout;
    while TcpStream::connect(("127.0.0.1", port)).is_err() || get(port, path).0 != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not get ready in {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `v` percent-encoded for a URL's query.
pub fn url_encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The status, the head (status line and headers) and the body of a GET.
pub fn get_with_head(port: u16, path: &str) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap();
    (status, head, raw[split + 4..].to_vec())
}

pub fn get_text(port: u16, path: &str) -> String {
    let (status, body) = get(port, path);
    let body = String::from_utf8(body).unwrap();
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// Runs a Python client of examples/ (resume_client.py, abandon_client.py) with `args` to the end; its JSON
/// line of counts.
pub fn python_client(script: &str, args: &[&str]) -> serde_json::Value {
    let out = super::run(
        std::process::Command::new("python3")
            .arg(super::repo().join("examples").join(script))
            .args(args),
    );
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON line")
}

/// examples/resume_client.py: `count` connections to `port` over TLS `tls` from 10 clients, each offering its
/// last session; its counts.
pub fn resume_clients(port: u16, count: u32, tls: &str) -> serde_json::Value {
    python_client(
        "resume_client.py",
        &[
            "--port",
            &port.to_string(),
            "--count",
            &count.to_string(),
            "--clients",
            "10",
            "--tls",
            tls,
        ],
    )
}
