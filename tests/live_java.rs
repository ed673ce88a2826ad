// SPDX-License-Identifier: Apache-2.0
//! Live: Java services (needs root). Netty on netty-tcnative's BoringSSL, a library Netty extracts to a temporary
//! file and deletes once loaded, found by its symbol table among the JVM's mapped files and profiled as
//! BoringSSL with its symbols: its handshakes counted as its clients saw them, one signature per full one, a
//! Node.js 24 client's hybrid post-quantum group named. The JDK's own TLS (JSSE), counted from the wire and
//! its stages from the frames of its JIT-compiled code, against its clients and its ground-truth fixture
//! (examples/java/JsseHandshakes); the JDK's HttpClient as a client. The servers in exact and default mode.
mod common;

use std::io::{BufRead, Write};

use common::*;

#[test]
fn netty_tcnative_boringssl_is_profiled_in_its_deleted_library() {
    if !require_root("netty_tcnative_boringssl_is_profiled_in_its_deleted_library") {
        return;
    }
    let scratch = Scratch::new("live_java_netty");
    let (server, port) = start_netty_server(&scratch, &["X25519MLKEM768:X25519"]);
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", server.pid())).unwrap();
    assert!(
        maps.lines()
            .any(|l| l.contains("netty_tcnative") && l.ends_with("(deleted)")),
        "netty-tcnative is mapped from a deleted file:\n{maps}"
    );
    for tls in ["1.3", "1.2"] {
        let recording = scratch.path(&format!("tls{tls}.tlsprof"));
        let (client, summary, r) = record_while(server.pid(), &recording, || {
            let made = resume_clients(port, 60, tls);
            let full = s_time_new_www(port, 2, "/");
            serde_json::json!({
                "connections": made["connections"].as_u64().unwrap() + full,
                "reused": made["reused"],
            })
        });
        eprintln!("TLS {tls}: clients {client}\n{summary}");
        let (connections, reused) = assert_counts_as_clients_saw(&client, &r, "server", &summary);
        let lib = &r["libraries"][0];
        assert_eq!(lib["family"], "boringssl", "{summary}");
        assert!(lib["path"].as_str().unwrap().contains("netty_tcnative"), "{summary}");
        assert_eq!(
            calls_of(&r, "bssl::ssl_private_key_sign"),
            connections - reused,
            "{summary}"
        );
        assert_eq!(r["lost"]["handshake_events"], 0, "{summary}");
        assert_eq!(r["resumption"][0]["accepted"], reused, "{summary}");
    }
    assert_node24_hybrid_handshakes(
        server.pid(),
        port,
        &scratch,
        "bssl::(anonymous namespace)::X25519MLKEM768KeyShare::Encap",
    );
    let (r, summary) = check_default_mode(server.pid(), port, &scratch.path("default.tlsprof"));
    assert_eq!(r["libraries"][0]["family"], "boringssl", "{summary}");
}

/// The JDK's own TLS (JSSE), in a JDK 17 HttpsServer run with -XX:+PreserveFramePointer: its handshakes counted
/// from the wire within 1% of its clients' connections, and, the JVM asked for names of its JIT-compiled code,
/// its TLS CPU and stages from the frames of its CPU samples: the signature, the key share and the shared
/// secret each a part of it, in the frames of the JCA providers that do them.
#[test]
fn jdk_tls_is_counted_from_the_wire_and_its_stages_named_by_its_frames() {
    if !require_root("jdk_tls_is_counted_from_the_wire_and_its_stages_named_by_its_frames") {
        return;
    }
    let scratch = Scratch::new("live_java_jsse");
    let (server, port) = warm_jsse_server(&scratch, "ec.p12", &["-keyalg", "EC", "-groupname", "secp256r1"]);
    let recording = scratch.path("jsse.tlsprof");
    let pid = server.pid().to_string();
    let rec = Recorder::start(&[
        "--pid",
        &pid,
        "--max-overhead",
        "100",
        "-o",
        recording.to_str().unwrap(),
    ]);
    let full = s_time_new_www(port, 6, "/");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (summary, log) = rec.interrupt_with_log();
    eprintln!("s_time: {full}\n{summary}");
    let r = report_json(&recording);
    let counted = handshakes_of(&r, "total");
    assert!(
        counted.abs_diff(full) * 100 <= full,
        "{counted} counted, {full} made\n{summary}"
    );
    assert!(log.contains("asking the JVM of process"), "{log}");
    let tls_ms = f(&r["targets"][0]["tls_cpu_ms"]);
    assert!(tls_ms > 0.0, "{summary}");
    for name in ["sign", "keygen", "derive"] {
        let st = stage(&r, name);
        assert_eq!(st["sampled"], true, "{summary}");
        assert!(f(&st["self_cpu_ms"]) > 0.0, "{name}: {summary}");
    }
    assert!(flowed(&summary).contains("from the wire, TLS ≈"), "{summary}");
}

/// The same server on an RSA-2048 keystore, recorded in default mode: its handshakes estimated within the
/// stated interval, and advice in Java's terms (an EC key entry in the keystore, the JDK's session cache and
/// tickets) from what its frames show.
#[test]
fn jdk_tls_on_an_rsa_key_is_estimated_by_default_and_advised_in_java_terms() {
    if !require_root("jdk_tls_on_an_rsa_key_is_estimated_by_default_and_advised_in_java_terms") {
        return;
    }
    let scratch = Scratch::new("live_java_jsse_rsa");
    let (server, port) = warm_jsse_server(&scratch, "rsa.p12", &["-keyalg", "RSA", "-keysize", "2048"]);
    let (r, summary) = check_default_mode(server.pid(), port, &scratch.path("jsse-rsa.tlsprof"));
    let ecdsa = advice(&r, "ecdsa_certificate");
    assert!(
        ecdsa["change"]
            .as_str()
            .unwrap()
            .contains("keytool -genkeypair -keyalg EC"),
        "{summary}"
    );
    assert!(
        ecdsa["evidence"]
            .as_str()
            .unwrap()
            .contains("RSA (by its signing frames)"),
        "{summary}"
    );
    let resumption = advice(&r, "session_resumption");
    assert!(
        resumption["change"]
            .as_str()
            .unwrap()
            .contains("javax.net.ssl.sessionCacheSize"),
        "{summary}"
    );
}

/// examples/java/TlsServer with -XX:+PreserveFramePointer on a keystore of `keytool` arguments, after 6 s of
/// full handshakes: the JIT has compiled the handshake's code, and the recording is of a warm server, as in
/// production.
fn warm_jsse_server(scratch: &Scratch, store: &str, keytool: &[&str]) -> (Running, u16) {
    let store = java_keystore(scratch, store, keytool);
    let (server, port) = start_java_server(scratch, &store, &["-XX:+PreserveFramePointer"]);
    s_time_new_www(port, 6, "/");
    (server, port)
}

/// A default-mode recording of the server `pid` under `openssl s_time -new` for 8 s: its handshakes estimated
/// within 15% of the client's connections, and the estimate's 95% interval holding them. The report and its
/// summary.
fn check_default_mode(pid: u32, port: u16, recording: &std::path::Path) -> (serde_json::Value, String) {
    let pid = pid.to_string();
    let rec = Recorder::start(&[
        "--pid",
        &pid,
        "--max-overhead",
        "0.3",
        "-o",
        recording.to_str().unwrap(),
    ]);
    let made = s_time_new_www(port, 8, "/");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let summary = rec.interrupt();
    let r = report_json(recording);
    check_estimate(&r, "total", made, 0.15, &summary);
    (r, summary)
}

/// The JDK's HttpClient as a client (JSSE): each of its requests on a connection of its own, counted from the
/// wire as a client's handshakes, as many as it made.
#[test]
fn jdk_http_client_is_counted_from_the_wire_as_a_client() {
    if !require_root("jdk_http_client_is_counted_from_the_wire_as_a_client") {
        return;
    }
    let scratch = Scratch::new("live_java_client");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--tickets", "on"]);
    let server = format!("127.0.0.1:{}", nginx.port);
    let mut client = spawn_java_class_piped(
        &["-Djdk.internal.httpclient.disableHostnameVerification=true"],
        "TlsClient",
        &[&server, "60"],
    );
    let recording = scratch.path("client.tlsprof");
    let pid = client.id().to_string();
    let rec = Recorder::start(&["--pid", &pid, "--no-jvm-perf-map", "-o", recording.to_str().unwrap()]);
    client.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(client.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(client.wait().unwrap().success(), "TlsClient: {line}");
    let made: serde_json::Value = serde_json::from_str(&line).unwrap();
    // The client exited: the recording ends by itself.
    let summary = rec.finish();
    let r = report_json(&recording);
    let connections = made["connections"].as_u64().unwrap();
    assert_eq!(connections, 60, "{made}");
    assert_eq!(handshakes_of(&r, "total"), connections, "{summary}");
    assert_eq!(handshakes_of(&r, "client"), connections, "{summary}");
    assert_eq!(handshakes_of(&r, "server"), 0, "{summary}");
    assert_eq!(handshakes_of(&r, "abandoned"), 0, "{summary}");
    assert!(r["targets"][0]["wire_only"] == true, "{summary}");
}

/// The JDK's TLS against its ground-truth fixture (examples/java/JsseHandshakes: handshakes in memory, each
/// timed by its thread's CPU clock, and after each a signature made alone with the certificate's key, timed the
/// same way), on an EC P-256 and an RSA-2048 keystore: tlsprof's TLS CPU per handshake by the frames of its
/// samples within 15% of the fixture's clock, and its sign stage's per signature within 15% of the fixture's
/// Signature.sign. Each figure is the same run's: no CPU's speed is assumed.
#[test]
fn jdk_tls_cpu_by_frames_agrees_with_its_fixture() {
    if !require_root("jdk_tls_cpu_by_frames_agrees_with_its_fixture") {
        return;
    }
    let scratch = Scratch::new("live_java_fixture");
    for (name, keytool) in [
        ("ec.p12", &["-keyalg", "EC", "-groupname", "secp256r1"][..]),
        ("rsa.p12", &["-keyalg", "RSA", "-keysize", "2048"][..]),
    ] {
        let store = java_keystore(&scratch, name, keytool);
        let mut fixture = spawn_java_class_piped(
            &["-XX:+PreserveFramePointer"],
            "JsseHandshakes",
            &[store.to_str().unwrap(), "changeit", "800"],
        );
        let mut stdout = std::io::BufReader::new(fixture.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        let recording = scratch.path("fixture.tlsprof");
        let pid = fixture.id().to_string();
        // Ten times the default rate: enough samples of each stage for a 15% comparison.
        let rec = Recorder::start(&["--pid", &pid, "--freq", "999", "-o", recording.to_str().unwrap()]);
        let mut stdin = fixture.stdin.take().unwrap();
        stdin.write_all(b"go\n").unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
        // Stopped while the JVM runs: it names the code it compiled until the end.
        let summary = rec.interrupt();
        drop(stdin);
        assert!(fixture.wait().unwrap().success(), "JsseHandshakes: {line}");
        let truth: serde_json::Value = serde_json::from_str(&line).unwrap();
        let r = report_json(&recording);
        let handshakes = f(&truth["handshakes"]);
        let signs = f(&truth["signs"]);
        let sign_truth = f(&truth["sign_cpu_us"]);
        // The signatures made alone are TLS CPU by their frames too: taken out at the fixture's own figure.
        let tls_us = 1000.0 * f(&r["targets"][0]["tls_cpu_ms"]);
        let per_handshake = (tls_us - signs * sign_truth) / handshakes;
        // One signature per handshake, the server's CertificateVerify, and one alone.
        let per_sign = 1000.0 * f(&stage(&r, "sign")["self_cpu_ms"]) / (handshakes + signs);
        let figures = format!(
            "{} {}: TLS CPU per handshake: tlsprof {per_handshake:.0} µs, the fixture's clock {:.0} µs; \
             per signature: tlsprof {per_sign:.0} µs, the fixture's Signature.sign {sign_truth:.0} µs",
            truth["key"].as_str().unwrap_or("?"),
            truth["protocol"].as_str().unwrap_or("?"),
            f(&truth["handshake_cpu_us"]),
        );
        eprintln!("{figures}");
        assert!(
            within(per_handshake, f(&truth["handshake_cpu_us"]), 0.15),
            "{figures}\n{summary}"
        );
        assert!(within(per_sign, sign_truth, 0.15), "{figures}\n{summary}");
        for name in ["keygen", "derive", "verify"] {
            assert!(f(&stage(&r, name)["self_cpu_ms"]) > 0.0, "{name}: {summary}");
        }
        // What the signature's own CPU went to: the JDK's big-number and curve arithmetic, by its frames.
        assert_eq!(stage(&r, "sign")["causes"][0]["name"], "public_key", "{summary}");
    }
}
