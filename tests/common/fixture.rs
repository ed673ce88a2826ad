// SPDX-License-Identifier: Apache-2.0
//! The hostile target of tests/fixtures, and certificates for test servers.

use std::path::PathBuf;
use std::process::Command;

use super::{repo, run, Scratch};

/// tests/fixtures/hostile_target.c built into `scratch` as `name`, and a certificate for it.
pub fn build_hostile_target(scratch: &Scratch, name: &str) -> PathBuf {
    let bin = scratch.path(name);
    let out = run(Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&bin)
        .arg(repo().join("tests/fixtures/hostile_target.c"))
        .args(["-lssl", "-lcrypto"]));
    assert!(out.status.success(), "build: {}", String::from_utf8_lossy(&out.stderr));
    if !scratch.path("cert.pem").exists() {
        self_signed_cert(scratch);
    }
    bin
}

/// An ECDSA P-256 certificate for localhost and its key, made in `scratch` (cert.pem, key.pem).
pub fn self_signed_cert(scratch: &Scratch) -> (PathBuf, PathBuf) {
    let (cert, key) = (scratch.path("cert.pem"), scratch.path("key.pem"));
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
        .arg(&key)
        .arg("-out")
        .arg(&cert));
    assert!(
        out.status.success(),
        "openssl req: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}
