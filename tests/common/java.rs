// SPDX-License-Identifier: Apache-2.0
//! Java targets: examples/java built with the machine's JDK and the libraries Maven fetches, on keystores and
//! certificates made for them.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::{listening_line, repo, run, self_signed_cert, Running, Scratch};

/// The class path of examples/java/pom.xml's libraries (Netty and netty-tcnative), which Maven fetches into
/// ~/.m2 from Maven Central the first time.
fn library_class_path() -> String {
    let file = repo().join("target/java-examples/libraries.classpath");
    let out = run(Command::new("mvn")
        .args(["-q", "-f"])
        .arg(repo().join("examples/java/pom.xml"))
        .arg("dependency:build-classpath")
        .arg(format!("-Dmdep.outputFile={}", file.display())));
    assert!(
        out.status.success(),
        "mvn dependency:build-classpath: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&file).unwrap().trim().to_string()
}

/// examples/java compiled into target/java-examples; the class path that runs them.
pub fn build_java_examples() -> String {
    let out_dir = repo().join("target/java-examples");
    let libraries = library_class_path();
    let out = run(Command::new("javac")
        .arg("-cp")
        .arg(&libraries)
        .arg("-d")
        .arg(&out_dir)
        .arg(repo().join("examples/java/TlsServer.java"))
        .arg(repo().join("examples/java/TlsClient.java"))
        .arg(repo().join("examples/java/JsseHandshakes.java"))
        .arg(repo().join("examples/java/NettyTlsServer.java")));
    assert!(out.status.success(), "javac: {}", String::from_utf8_lossy(&out.stderr));
    format!("{}:{libraries}", out_dir.display())
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
    let store = keystore.to_str().unwrap();
    start_java_class(scratch, jvm_args, "TlsServer", &[store, "changeit"])
}

/// examples/java/NettyTlsServer (Netty on netty-tcnative's BoringSSL) on a fresh ECDSA P-256 certificate, with
/// `args` after it (its groups); and its port.
pub fn start_netty_server(scratch: &Scratch, args: &[&str]) -> (Running, u16) {
    let (cert, key) = self_signed_cert(scratch);
    let pkcs8 = scratch.path("key.pk8.pem");
    let out = run(Command::new("openssl")
        .args(["pkcs8", "-topk8", "-nocrypt", "-in"])
        .arg(&key)
        .arg("-out")
        .arg(&pkcs8));
    assert!(
        out.status.success(),
        "openssl pkcs8: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut all = vec![cert.to_str().unwrap(), pkcs8.to_str().unwrap()];
    all.extend(args);
    start_java_class(scratch, &[], "NettyTlsServer", &all)
}

/// A class of examples/java run with `jvm_args` and `args` until it prints "listening 127.0.0.1:PORT"; and the
/// port.
fn start_java_class(scratch: &Scratch, jvm_args: &[&str], class: &str, args: &[&str]) -> (Running, u16) {
    let class_path = build_java_examples();
    let mut child = Command::new("java")
        .args(jvm_args)
        .arg("-cp")
        .arg(&class_path)
        .arg(class)
        .args(args)
        .current_dir(&scratch.0)
        .stdout(Stdio::piped())
        .spawn()
        .expect("java (OpenJDK 17)");
    let line = listening_line(&mut child, class);
    let port = line
        .rsplit(':')
        .next()
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("{class} printed {line:?}"));
    (Running(child), port)
}

/// A class of examples/java run with `jvm_args` and `args`, its standard input and output piped: a client or
/// fixture that waits for a line before it starts.
pub fn spawn_java_class_piped(jvm_args: &[&str], class: &str, args: &[&str]) -> std::process::Child {
    Command::new("java")
        .args(jvm_args)
        .arg("-cp")
        .arg(build_java_examples())
        .arg(class)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("java (OpenJDK 17)")
}
