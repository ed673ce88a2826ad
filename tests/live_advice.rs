// SPDX-License-Identifier: Apache-2.0
//! Live: advice backed by measured costs, the handshake mix against the clients' own reports, and `diff`
//! before and after a change (needs root).
mod common;

use std::process::Command;

use serde_json::Value;

use common::*;

fn advice_ids(r: &Value) -> Vec<String> {
    r["advice"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_string())
        .collect()
}

fn advice<'a>(r: &'a Value, id: &str) -> &'a Value {
    r["advice"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no {id} advice: {r:#}"))
}

/// Records an nginx worker while the resuming Python client makes `count` connections; returns the client's
/// report and tlsprof's.
fn record_resuming_clients(nginx: &Nginx, recording: &std::path::Path, count: u32, tls: &str) -> (Value, Value) {
    let worker = nginx.workers()[0].to_string();
    let rec = Recorder::start(&[
        "--pid",
        &worker,
        "--hello-capture",
        "always",
        "-o",
        recording.to_str().unwrap(),
    ]);
    let out = run(Command::new("python3")
        .arg(repo().join("examples/resume_client.py"))
        .args([
            "--port",
            &nginx.port.to_string(),
            "--count",
            &count.to_string(),
            "--tls",
            tls,
        ]));
    assert!(
        out.status.success(),
        "resume_client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    rec.interrupt();
    (serde_json::from_slice(&out.stdout).unwrap(), report_json(recording))
}

/// The handshake mix must match what the client negotiated, by its own report.
fn check_mix_against_client(r: &Value, client: &Value) {
    for (ours, theirs) in [
        ("version", "version"),
        ("cipher", "cipher"),
        ("certificate_key", "certificate_key"),
    ] {
        assert_eq!(
            mix_key(r, ours),
            vec![client[theirs].as_str().unwrap().to_string()],
            "{ours}: {client} vs {r:#}"
        );
    }
}

fn mix_key(r: &Value, field: &str) -> Vec<String> {
    r["handshakes"]["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["resumed"] == false)
        .filter_map(|k| k[field].as_str().map(str::to_string))
        .collect()
}

#[test]
fn rsa_without_session_cache_then_ecdsa_with_cache() {
    if !require_root("rsa_without_session_cache_then_ecdsa_with_cache") {
        return;
    }
    let scratch = Scratch::new("advice-cert");
    let before = scratch.path("before.tlsprof");
    let after = scratch.path("after.tlsprof");
    {
        let nginx = Nginx::start(&scratch.path("rsa"), &["--protocols", "TLSv1.3"]);
        let (client, r) = record_resuming_clients(&nginx, &before, 200, "1.3");
        assert_eq!(client["reused"], 0, "nothing to resume with: {client}");
        check_mix_against_client(&r, &client);
        assert_eq!(mix_key(&r, "key_exchange"), vec!["x25519".to_string()]);
        let ids = advice_ids(&r);
        // The client offers its last session (a TLS 1.3 identity the size of a session ID: without tickets
        // OpenSSL keeps sessions in its cache), which nginx, without a cache, cannot resume: the advice names
        // that cause and its fix, not resumption in general.
        assert!(
            ids.contains(&"ecdsa_certificate".into()) && ids.contains(&"resumption_refused".into()),
            "{ids:?}"
        );
        assert!(!ids.contains(&"session_resumption".into()), "{ids:?}");
        assert_eq!(
            r["resumption"][0]["refused_by"][0]["reason"], "session_not_cached",
            "{:#}",
            r["resumption"]
        );
        let ecdsa = advice(&r, "ecdsa_certificate");
        assert!(
            ecdsa["estimated_saving"].as_str().unwrap().contains("% TLS CPU"),
            "{ecdsa}"
        );
        assert!(advice(&r, "resumption_refused")["change"]
            .as_str()
            .unwrap()
            .contains("ssl_session_cache"));
    }
    {
        let nginx = Nginx::start(
            &scratch.path("ecdsa"),
            &[
                "--protocols",
                "TLSv1.3",
                "--cert",
                "ecdsa-p256",
                "--session-cache",
                "on",
                "--tickets",
                "on",
            ],
        );
        let (client, r) = record_resuming_clients(&nginx, &after, 200, "1.3");
        assert!(f(&client["reused"]) >= 190.0, "{client}");
        check_mix_against_client(&r, &client);
        let resumed: Vec<&Value> = r["handshakes"]["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| k["resumed"] == true)
            .collect();
        assert!(
            !resumed.is_empty() && resumed.iter().all(|k| k["resumption"] == "TLS 1.3 PSK"),
            "{r:#}"
        );
    }
    let out = run(tlsprof()
        .args(["diff", "--json"])
        .arg(&before)
        .arg(&after)
        .arg("-o")
        .arg(scratch.path("diff.svg")));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sign = d["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "sign")
        .unwrap();
    // Resumption makes the drop (at most 10 of the 200 handshakes sign after), not the cheaper key: it holds
    // wherever an ECDSA signature costs less than four RSA-2048 ones, on any CPU.
    assert!(f(&sign["change"]) <= -0.8, "sign CPU per handshake: {sign}");
    assert!(
        f(&d["after"]["resumed_share"]) > f(&d["before"]["resumed_share"]) + 0.5,
        "{d:#}"
    );
    assert!(std::fs::read_to_string(scratch.path("diff.svg"))
        .unwrap()
        .contains("<svg"));
}

#[test]
fn dhe_only_tls12_names_the_key_exchange() {
    if !require_root("dhe_only_tls12_names_the_key_exchange") {
        return;
    }
    let scratch = Scratch::new("advice-dhe");
    let nginx = Nginx::start(
        &scratch.path("nginx"),
        &[
            "--protocols",
            "TLSv1.2",
            "--ciphers",
            "DHE-RSA-AES128-GCM-SHA256",
            "--dhparam",
            "ffdhe2048",
        ],
    );
    let recording = scratch.path("dhe.tlsprof");
    let (client, r) = record_resuming_clients(&nginx, &recording, 100, "1.2");
    assert!(client["cipher"].as_str().unwrap().starts_with("DHE-"), "{client}");
    check_mix_against_client(&r, &client);
    assert_eq!(mix_key(&r, "key_exchange"), vec!["DHE-2048".to_string()]);
    let dhe = advice(&r, "dhe_key_exchange");
    assert!(dhe["change"].as_str().unwrap().contains("ECDHE"), "{dhe}");
}

#[test]
fn node_client_without_keepalive_then_with() {
    if !require_root("node_client_without_keepalive_then_with") {
        return;
    }
    let scratch = Scratch::new("advice-keepalive");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let (before, after) = (scratch.path("before.tlsprof"), scratch.path("after.tlsprof"));
    let (plain, _) = profile_node_client(&before, nginx.port, &[], &["--count", "300"]);
    let r = report_json(&before);
    assert_eq!(f(&r["handshakes"]["client"]), f(&plain["connections"]), "{plain}");
    let reuse = advice(&r, "client_connection_reuse");
    assert!(reuse["change"].as_str().unwrap().contains("keepAlive: true"), "{reuse}");

    let (kept, _) = profile_node_client(&after, nginx.port, &[], &["--count", "300", "--keepalive", "on"]);
    let r = report_json(&after);
    assert!(
        f(&kept["connections"]) <= 2.0 && f(&r["handshakes"]["client"]) <= 2.0,
        "{kept} {r:#}"
    );
    let out = run(tlsprof().args(["diff", "--json"]).arg(&before).arg(&after));
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        f(&d["after"]["handshakes"]) * 100.0 < f(&d["before"]["handshakes"]),
        "{d:#}"
    );
}

#[test]
fn large_files_over_few_connections_are_not_a_handshake_problem() {
    if !require_root("large_files_over_few_connections_are_not_a_handshake_problem") {
        return;
    }
    let scratch = Scratch::new("advice-bulk");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let recording = scratch.path("bulk.tlsprof");
    let rec = Recorder::start(&[
        "--pid",
        &nginx.workers()[0].to_string(),
        "-o",
        recording.to_str().unwrap(),
    ]);
    // 4 connections, each fetching the 4 MiB file 15 times over keep-alive.
    let url = format!("https://127.0.0.1:{}/big", nginx.port);
    for _ in 0..4 {
        let mut cmd = Command::new("curl");
        cmd.args(["-sk", "--max-time", "60"]);
        for _ in 0..15 {
            cmd.args(["-o", "/dev/null", &url]);
        }
        assert!(run(&mut cmd).status.success());
    }
    rec.interrupt();
    let r = report_json(&recording);
    assert_eq!(advice_ids(&r), vec!["tls_not_the_cost".to_string()], "{r:#}");
    assert!(
        f(&r["record_layer_sampled"]["write"]) > 0.2,
        "bulk encryption shows in SSL_write samples: {r:#}"
    );
}
