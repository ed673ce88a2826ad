// SPDX-License-Identifier: Apache-2.0
//! Live: nginx built against AWS-LC (scripts/build-aws-lc.sh: Debian's nginx source, AWS-LC's libssl
//! linked in with its symbols) profiled as the AWS-LC family, against its clients' own counts (needs root):
//! full and resumed handshakes of TLS 1.3 and 1.2, the key exchange split into key generation and
//! derivation, the hybrid group AWS-LC prefers, abandoned handshakes, no probe entry single-stepped.
mod common;

use common::*;

/// One nginx on AWS-LC with an ECDSA P-256 certificate and both kinds of resumption.
fn start(scratch: &Scratch) -> (Nginx, u32) {
    let nginx = Nginx::start_binary(
        &nginx_aws_lc(),
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
    // The role from work only servers do: the key share's Accept (TLS 1.3), the session lookup (TLS 1.2).
    assert_bssl_server_handshakes(worker, nginx.port, &scratch, "aws-lc", "AWS-LC ", |_| {
        "bssl::(anonymous namespace)::X25519KeyShare::Finish"
    });
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
