// SPDX-License-Identifier: Apache-2.0
//! Rust targets: examples/rust/ built once into target/examples (cargo keeps the build between runs).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::fixture::self_signed_cert;
use super::process::{repo, run, Running, Scratch};
use super::profiler::{record_with_hellos, report_json};

/// examples/rust/NAME built in release mode, as its users would build it; returns the executable.
pub fn build_rust_example(name: &str) -> PathBuf {
    let dir = repo().join("examples/rust").join(name);
    let target = repo().join("target/examples");
    let out = run(Command::new(env!("CARGO"))
        .args(["build", "--release", "--locked", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target));
    assert!(
        out.status.success(),
        "build examples/rust/{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("release").join(name)
}

/// The TLS server examples/rust/NAME (rustls-server, boring-server) on a fresh ECDSA P-256 certificate, and
/// the port it prints.
pub fn start_rust_server(name: &str, scratch: &Scratch) -> (Running, u16) {
    start_rust_server_with(name, scratch, &[])
}

/// The same with `args` after the certificate and key (rustls-server's provider).
pub fn start_rust_server_with(name: &str, scratch: &Scratch, args: &[&str]) -> (Running, u16) {
    start_server_binary(&build_rust_example(name), scratch, args)
}

/// A TLS server of examples/rust (`binary`: its build, or a copy) on a fresh ECDSA P-256 certificate, and the
/// port it prints.
pub fn start_server_binary(binary: &Path, scratch: &Scratch, args: &[&str]) -> (Running, u16) {
    let name = binary.display();
    let (cert, key) = self_signed_cert(scratch);
    let mut child = Command::new(binary)
        .arg(cert)
        .arg(key)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let server = Running(child);
    let port = port
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name} prints its port, not {port:?}"));
    (server, port)
}

/// The TLS client examples/rust/NAME (rustls-client, boring-client) making `count` connections to `port`,
/// recorded with every hello read from its first connection to its exit: its counts (connections, resumed),
/// tlsprof's summary and its JSON report.
pub fn record_rust_client(name: &str, port: u16, count: u32, scratch: &Scratch) -> (Value, String, Value) {
    record_client_binary(&build_rust_example(name), port, count, scratch)
}

/// The same with the client's build (or a copy) given.
pub fn record_client_binary(binary: &Path, port: u16, count: u32, scratch: &Scratch) -> (Value, String, Value) {
    let name = binary.file_name().unwrap().to_string_lossy();
    let go = scratch.path("go");
    let client = Command::new(binary)
        .args([&port.to_string(), &count.to_string(), "--wait-for"])
        .arg(&go)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let recording = scratch.path(&format!("{name}.tlsprof"));
    let rec = record_with_hellos(client.id(), &recording);
    std::fs::write(&go, b"").unwrap();
    let out = client.wait_with_output().unwrap();
    assert!(out.status.success(), "{name} failed");
    let counts: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    let summary = rec.finish();
    (counts, summary, report_json(&recording))
}
