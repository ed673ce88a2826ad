// SPDX-License-Identifier: Apache-2.0
//! Live: Java services (needs root). Netty on netty-tcnative's BoringSSL, a library Netty extracts to a temporary
//! file and deletes once loaded, found by its symbol table among the JVM's mapped files and profiled as
//! BoringSSL with its symbols: its handshakes counted as its clients saw them, one signature per full one, a
//! Node.js 24 client's hybrid post-quantum group named.
mod common;

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
    let store = java_keystore(&scratch, "ec.p12", &["-keyalg", "EC", "-groupname", "secp256r1"]);
    let (server, port) = start_java_server(&scratch, &store, &["-XX:+PreserveFramePointer"]);
    // The JIT compiles the handshake's code first: the recording is of a warm server, as in production.
    s_time_new_www(port, 3, "/");
    let recording = scratch.path("jsse.tlsprof");
    let rec = Recorder::start(&["--pid", &server.pid().to_string(), "-o", recording.to_str().unwrap()]);
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
