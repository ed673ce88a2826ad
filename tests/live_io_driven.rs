// SPDX-License-Identifier: Apache-2.0
//! Live: a server that leaves its handshakes to SSL_read (Python's ssl module on Debian's public-API-only
//! libssl, never calling do_handshake): every handshake it paid for is counted, completed or abandoned
//! (needs root).
mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

/// examples/io_driven_server.py with the certificate an nginx-target run made in `cert_dir`.
fn start_server(cert_dir: &Path) -> (Running, u16) {
    let mut child = Command::new("/usr/bin/python3")
        .arg(repo().join("examples/io_driven_server.py"))
        .arg("--cert")
        .arg(cert_dir.join("cert.pem"))
        .arg("--key")
        .arg(cert_dir.join("key.pem"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let line = listening_line(&mut child, "io_driven_server");
    let port = line
        .strip_prefix("listening ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("io_driven_server gave no port: {line:?}"));
    (Running(child), port)
}

#[test]
fn handshakes_inside_ssl_read_are_counted_completed_and_abandoned() {
    if !require_root("handshakes_inside_ssl_read_are_counted_completed_and_abandoned") {
        return;
    }
    let scratch = Scratch::new("io-driven");
    let certs = Nginx::start(&scratch.path("certs"), &["--protocols", "TLSv1.3"]);
    let (server, port) = start_server(&certs.dir);
    let recording = scratch.path("io.tlsprof");
    let mut rec = Recorder::start(&["--pid", &server.pid().to_string(), "-o", recording.to_str().unwrap()]);
    // Its first handshakes run their key exchange and signature outside any handshake call: tlsprof then
    // probes SSL_read/SSL_write in it, and counts what it saw before as unframed work.
    let first = s_time_new_www(port, 1, "/");
    rec.wait_for("runs its handshakes inside SSL_read/SSL_write");
    let completed = s_time_new_www(port, 3, "/");
    let out = run(Command::new("python3")
        .arg(repo().join("examples/abandon_client.py"))
        .args(["--port", &port.to_string(), "--count", "100"]));
    assert!(
        out.status.success(),
        "abandon_client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let left = left["abandoned"].as_u64().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let summary = rec.interrupt();

    let r = report_json(&recording);
    let h = &r["handshakes"];
    let (total, abandoned) = (h["total"].as_u64().unwrap(), h["abandoned"].as_u64().unwrap());
    let unframed = r["lost"]["unframed_work"].as_u64().unwrap();
    eprintln!(
        "{first} + {completed} connections with a request, {left} abandoned; counted {total} completed, \
         {abandoned} abandoned, {unframed} stage calls before SSL_read was probed"
    );
    assert!(r["targets"][0]["io_driven_from_s"].is_number(), "{summary}");
    assert!(
        flowed(&summary).contains("leaves its handshakes to SSL_read/SSL_write"),
        "{summary}"
    );
    // After that, every one exactly: the abandoned ones made the server's key share and signature too.
    assert_eq!(abandoned, left, "{summary}");
    assert!(
        total >= completed,
        "{total} completed counted, {completed} made after the probes\n{summary}"
    );
    // Before it, each handshake left its stage calls unframed (here its key share, shared secret, signature
    // and the server's own chain check): with them, every connection is accounted for.
    let connections = first + completed + left;
    let stage_calls: u64 = ["keygen", "derive", "sign", "verify"]
        .iter()
        .map(|name| stage(&r, name)["calls"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        stage_calls % connections,
        0,
        "{stage_calls} stage calls for {connections} handshakes\n{summary}"
    );
    let per_handshake = stage_calls / connections;
    assert_eq!(unframed % per_handshake, 0, "{summary}");
    assert_eq!(total + unframed / per_handshake, first + completed, "{summary}");
    assert_eq!(r["handshakes"]["observed"]["partial"], 0, "{summary}");
    let signatures = stage(&r, "sign")["calls"].as_u64().unwrap();
    assert_eq!(
        signatures,
        first + completed + left,
        "one signature per connection\n{summary}"
    );
    let kinds = h["kinds"].as_array().unwrap();
    assert!(
        kinds.iter().all(|k| k["role"] == "server" && k["resumed"] == false),
        "{summary}"
    );
}
