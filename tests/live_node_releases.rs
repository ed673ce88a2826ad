// SPDX-License-Identifier: Apache-2.0
//! Live: Node.js releases with older OpenSSLs (1.1.1, 1.0.2), fetched from the npm registry, profiled under
//! `openssl s_time -new` (needs root and, once, the registry).
mod common;

use common::*;

fn kinds(r: &serde_json::Value) -> Vec<&serde_json::Value> {
    r["handshakes"]["kinds"].as_array().unwrap().iter().collect()
}

/// Profiles `node` (a release binary) serving s_time -new for `secs`, then `abandon` connections of
/// examples/abandon_client.py, with the ServerHello capture off, so the key exchange is named from what the
/// probes saw; returns (connections, report, summary).
fn profile(
    name: &str,
    node: &std::path::Path,
    server_args: &[&str],
    secs: u32,
    abandon: u32,
) -> (u64, serde_json::Value, String) {
    let scratch = Scratch::new(name);
    // nginx-target.sh makes the RSA-2048 certificate; the nginx itself is not used.
    let certs = Nginx::start(&scratch.path("certs"), &[]);
    let (server, port) = start_node_server_with(node, &certs.dir, server_args);
    let recording = scratch.path("node.tlsprof");
    let rec = Recorder::start(&[
        "--pid",
        &server.pid().to_string(),
        "--hello-capture",
        "off",
        "-o",
        recording.to_str().unwrap(),
    ]);
    let mut connections = s_time_new(port, secs);
    if abandon > 0 {
        let out = run(std::process::Command::new("python3")
            .arg(repo().join("examples/abandon_client.py"))
            .args(["--port", &port.to_string(), "--count", &abandon.to_string()]));
        assert!(
            out.status.success(),
            "abandon_client: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        connections += u64::from(abandon);
    }
    // The server frees a connection once it reads the close.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let summary = rec.interrupt();
    let r = report_json(&recording);
    eprintln!(
        "{name}: {connections} connections, {} completed, {} abandoned",
        r["handshakes"]["total"], r["handshakes"]["abandoned"]
    );
    (connections, r, summary)
}

fn calls(r: &serde_json::Value, name: &str) -> u64 {
    stage(r, name)["calls"]
        .as_u64()
        .unwrap_or_else(|| panic!("{name} calls: {r:#}"))
}

fn count(r: &serde_json::Value, field: &str) -> u64 {
    r["handshakes"][field].as_u64().unwrap()
}

/// Every connection's handshake is counted once, completed or abandoned, and made one key share, signature
/// and shared secret (`secret_fn`'s calls); every kind names the same key exchange.
fn assert_one_key_exchange_per_connection(
    connections: u64,
    r: &serde_json::Value,
    summary: &str,
    secret_fn: &str,
    kx: &str,
) {
    assert_eq!(count(r, "total") + count(r, "abandoned"), connections, "{summary}");
    assert_eq!(r["handshakes"]["observed"]["partial"], 0, "{summary}");
    for stage in ["keygen", "sign"] {
        assert_eq!(calls(r, stage), connections, "{stage}\n{summary}");
    }
    let secrets = function(r, secret_fn).unwrap_or_else(|| panic!("{secret_fn} not seen\n{summary}"));
    assert_eq!(secrets["calls"].as_u64(), Some(connections), "{secret_fn}\n{summary}");
    for k in kinds(r) {
        assert_eq!(k["key_exchange"], kx, "{summary}");
    }
}

/// Connections examples/abandon_client.py abandons after the server's flight.
const ABANDONED: u32 = 100;

#[test]
fn node16_openssl111_hkdf_is_key_schedule() {
    if !require_root("node16_openssl111_hkdf_is_key_schedule") {
        return;
    }
    let node = node_release("16.20.2");
    assert!(node_openssl_version(&node).starts_with("1.1.1"));
    // s_time offers X25519 first; TLS 1.3 with TLS_AES_256_GCM_SHA384, whose HKDF outputs are 48 bytes.
    let (connections, r, summary) = profile("node16", &node, &[], 3, ABANDONED);
    assert_one_key_exchange_per_connection(connections, &r, &summary, "ssl_derive", "ECDHE (X25519 or P-256)");
    // The key exchange is the only derive: the HKDF's EVP_PKEY_derive calls count in key_schedule/resume.
    assert_eq!(calls(&r, "derive"), connections, "{summary}");
    // Node.js drives the handshake from SSL_read; the abandoned ones are counted all the same.
    assert!(count(&r, "abandoned") >= u64::from(ABANDONED), "{summary}");
    // The HKDF's EVP_PKEY_derive calls are many per handshake, all key_schedule (or resume: tickets) work.
    let evp_derive = function(&r, "EVP_PKEY_derive").unwrap()["calls"].as_u64().unwrap();
    assert!(evp_derive > 4 * connections, "{summary}");
    // At least four cipher-state changes per TLS 1.3 handshake (handshake and application, each way).
    assert!(calls(&r, "key_schedule") >= 4 * connections, "{summary}");
    assert!(summary.contains("EVP_PKEY_derive [key_schedule]"), "{summary}");
    // The key exchange's own derive costs more than an HKDF step of the same run.
    let per_call = |s: &str| f(&stage(&r, s)["cpu_us_per_call"]);
    assert!(per_call("derive") > per_call("key_schedule"), "{summary}");
    assert!(!summary.contains("P-384"), "{summary}");

    // P-384: EVP_PKEY_derive's ECDH goes through ECDH_compute_key, which names the curve.
    let (connections, r, summary) = profile("node16-p384", &node, &["--ecdh-curve", "P-384"], 2, 0);
    assert_one_key_exchange_per_connection(connections, &r, &summary, "ECDH_compute_key", "ECDHE P-384");
}

#[test]
fn node8_openssl102_key_exchange_named() {
    if !require_root("node8_openssl102_key_exchange_named") {
        return;
    }
    let node = node_release("8.17.0");
    assert!(node_openssl_version(&node).starts_with("1.0.2"));
    let (connections, r, summary) = profile("node8-p256", &node, &["--ecdh-curve", "prime256v1"], 3, 0);
    // 1.0.2 enters ssl3_get_client_key_exchange (derive) again when the message had not arrived: count the
    // secrets ECDH_compute_key made instead.
    assert_one_key_exchange_per_connection(connections, &r, &summary, "ECDH_compute_key", "ECDHE P-256");
    let (connections, r, summary) = profile("node8-p384", &node, &["--ecdh-curve", "secp384r1"], 2, 0);
    assert_one_key_exchange_per_connection(connections, &r, &summary, "ECDH_compute_key", "ECDHE P-384");
}
