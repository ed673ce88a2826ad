// SPDX-License-Identifier: Apache-2.0
//! Live: nginx built against AWS-LC (scripts/build-nginx-aws-lc.sh: Debian's nginx source, AWS-LC's libssl
//! linked in with its symbols) profiled as the AWS-LC family, against its clients' own counts (needs root):
//! full and resumed handshakes of TLS 1.3 and 1.2, the key exchange split into key generation and
//! derivation, the hybrid group AWS-LC prefers, abandoned handshakes, no probe entry single-stepped.
mod common;

use common::*;

/// One nginx on AWS-LC with an ECDSA P-256 certificate and both kinds of resumption.
fn start(scratch: &Scratch) -> (Nginx, u32) {
    let nginx = Nginx::start_binary(
        nginx_aws_lc(),
        &scratch.path("nginx"),
        &["--cert", "ecdsa-p256", "--session-cache", "on", "--tickets", "on"],
    );
    let workers = nginx.workers();
    assert_eq!(workers.len(), 1, "{workers:?}");
    let worker = workers[0];
    (nginx, worker)
}

#[test]
fn aws_lc_nginx_full_and_resumed_handshakes_are_counted_exactly() {
    if !require_root("aws_lc_nginx_full_and_resumed_handshakes_are_counted_exactly") {
        return;
    }
    let scratch = Scratch::new("live_aws_lc");
    let (nginx, worker) = start(&scratch);
    for tls in ["1.3", "1.2"] {
        let recording = scratch.path(&format!("tls{tls}.tlsprof"));
        let (client, summary, r) = record_while(worker, &recording, || {
            python_client(
                "resume_client.py",
                &[
                    "--port",
                    &nginx.port.to_string(),
                    "--count",
                    "100",
                    "--clients",
                    "10",
                    "--tls",
                    tls,
                ],
            )
        });
        eprintln!("TLS {tls}: client {client}\n{summary}");
        // The role from work only servers do: the key share's Accept (TLS 1.3), the session lookup (TLS 1.2).
        let (connections, reused) = assert_counts_as_clients_saw(&client, &r, "server", &summary);
        let full = connections - reused;
        assert!(full > 0 && reused > 0, "{summary}");
        assert_eq!(calls_of(&r, "bssl::ssl_private_key_sign"), full, "{summary}");
        // A key pair and a shared secret for every handshake that exchanges keys: every TLS 1.3 one (PSK with
        // ECDHE), the full TLS 1.2 ones.
        let exchanges = if tls == "1.3" { connections } else { full };
        assert_eq!(calls_of(&r, "X25519_keypair"), exchanges, "{summary}");
        assert_eq!(
            calls_of(&r, "bssl::(anonymous namespace)::X25519KeyShare::Finish"),
            exchanges,
            "{summary}"
        );
        let kinds = r["handshakes"]["kinds"].as_array().unwrap();
        let version = format!("TLSv{tls}");
        assert!(kinds.iter().all(|k| k["version"] == version.as_str()), "{summary}");
        assert!(
            kinds
                .iter()
                .filter(|k| k["resumed"] == false)
                .all(|k| k["certificate_key"] == "ECDSA P-256" && k["key_exchange"] == "x25519"),
            "{summary}"
        );
        let resumption = &r["resumption"][0];
        assert_eq!(resumption["accepted"], reused, "{summary}");
        assert_eq!(resumption["refused"], 0, "{summary}");
        let lib = &r["libraries"][0];
        assert_eq!(lib["family"], "aws-lc", "{summary}");
        assert!(lib["version"].as_str().unwrap().starts_with("AWS-LC "), "{summary}");
        assert!(summary.contains("AWS-LC "), "{summary}");
        assert_eq!(r["probe_stepped_hits"], 0, "{summary}");
        assert_eq!(r["lost"]["handshake_events"], 0, "{summary}");
    }
}

/// AWS-LC prefers X25519MLKEM768 by default and nginx leaves its groups alone: Node.js 24's clients
/// negotiate it, and the ML-KEM key share's Accept (its encapsulation) is the server's side of each exchange,
/// which the hybrid group's advice weighs in nginx's terms.
#[test]
fn aws_lc_nginx_with_node24_clients_negotiates_the_hybrid_group() {
    if !require_root("aws_lc_nginx_with_node24_clients_negotiates_the_hybrid_group") {
        return;
    }
    let scratch = Scratch::new("live_aws_lc_node24");
    let (nginx, worker) = start(&scratch);
    let (summary, r) = assert_node24_hybrid_handshakes(
        worker,
        nginx.port,
        &scratch,
        "bssl::(anonymous namespace)::KEMKeyShare::Accept",
    );
    let hybrid = advice(&r, "hybrid_key_exchange");
    assert!(
        hybrid["change"]
            .as_str()
            .unwrap()
            .contains("ssl_ecdh_curve X25519:prime256v1"),
        "{summary}"
    );
    let evidence = hybrid["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("of which ML-KEM ") && !evidence.contains("of which ML-KEM 0 µs"),
        "{summary}"
    );
}

/// Clients that leave after the server's flight: nginx frees each connection with its handshake abandoned.
#[test]
fn aws_lc_nginx_abandoned_handshakes_are_counted() {
    if !require_root("aws_lc_nginx_abandoned_handshakes_are_counted") {
        return;
    }
    let scratch = Scratch::new("live_aws_lc_abandoned");
    let (nginx, worker) = start(&scratch);
    assert_abandoned_counted(worker, nginx.port, &scratch, "bssl::ssl_private_key_sign");
}
