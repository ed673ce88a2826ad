// SPDX-License-Identifier: Apache-2.0
//! Java targets: examples/java built with the machine's JDK, on keystores made with its keytool.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::{listening_line, repo, run, Running, Scratch};

/// examples/java compiled into target/java-examples; the class path.
pub fn build_java_examples() -> PathBuf {
    let out_dir = repo().join("target/java-examples");
    let out = run(Command::new("javac")
        .arg("-d")
        .arg(&out_dir)
        .arg(repo().join("examples/java/TlsServer.java")));
    assert!(out.status.success(), "javac: {}", String::from_utf8_lossy(&out.stderr));
    out_dir
}

/// A PKCS12 keystore in `scratch` with one key pair of `keytool_args` (`-keyalg EC -groupname secp256r1`),
/// password "changeit".
pub fn java_keystore(scratch: &Scratch, name: &str, keytool_args: &[&str]) -> PathBuf {
    let store = scratch.path(name);
    let out = run(Command::new("keytool")
        .args([
            "-genkeypair",
            "-alias",
            "tls",
            "-dname",
            "CN=localhost",
            "-validity",
            "2",
        ])
        .args(keytool_args)
        .args([
            "-storetype",
            "PKCS12",
            "-storepass",
            "changeit",
            "-keypass",
            "changeit",
            "-keystore",
        ])
        .arg(&store));
    assert!(
        out.status.success(),
        "keytool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    store
}

/// examples/java/TlsServer (the JDK's HttpsServer on JSSE) on `keystore`, with `jvm_args`; and its port.
pub fn start_java_server(scratch: &Scratch, keystore: &std::path::Path, jvm_args: &[&str]) -> (Running, u16) {
    let classes = build_java_examples();
    let mut child = Command::new("java")
        .args(jvm_args)
        .arg("-cp")
        .arg(&classes)
        .arg("TlsServer")
        .arg(keystore)
        .arg("changeit")
        .current_dir(&scratch.0)
        .stdout(Stdio::piped())
        .spawn()
        .expect("java (OpenJDK 17)");
    let line = listening_line(&mut child, "TlsServer");
    let port = line
        .rsplit(':')
        .next()
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("TlsServer printed {line:?}"));
    (Running(child), port)
}
