// SPDX-License-Identifier: Apache-2.0
//! Live: a server on rustls 0.23 with aws-lc-rs (examples/rust/rustls-server, a release build as cargo makes
//! it) profiled as its own family, against its clients' own counts (needs root): full and resumed handshakes
//! of TLS 1.3 and 1.2, abandoned ones, the hybrid post-quantum group, no probe entry single-stepped; and the
//! same server on the ring provider.
mod common;

use std::process::Command;

use common::*;

#[test]
fn rustls_full_and_resumed_handshakes_are_counted_exactly() {
    if !require_root("rustls_full_and_resumed_handshakes_are_counted_exactly") {
        return;
    }
    let scratch = Scratch::new("live_rustls");
    let (server, port) = start_rust_server("rustls-server", &scratch);
    for (tls, count) in [("1.3", 120), ("1.2", 60)] {
        let recording = scratch.path(&format!("tls{tls}.tlsprof"));
        let (client, summary, r) = record_while(server.pid(), &recording, || resume_clients(port, count, tls));
        eprintln!("TLS {tls}: client {client}\n{summary}");
        let (connections, reused) = assert_counts_as_clients_saw(&client, &r, "server", &summary);
        // One signature per full handshake; a key exchange in every TLS 1.3 one (PSK with ECDHE), only in
        // full TLS 1.2 ones.
        assert_eq!(calls_of(&r, "EVP_DigestSign"), connections - reused, "{summary}");
        let exchanges = if tls == "1.3" {
            connections
        } else {
            connections - reused
        };
        assert_eq!(calls_of(&r, "EVP_PKEY_keygen"), exchanges, "{summary}");
        assert_eq!(
            calls_of(
                &r,
                "<rustls::crypto::aws_lc_rs::kx::KeyExchange as rustls::crypto::ActiveKeyExchange>::complete"
            ),
            exchanges,
            "{summary}"
        );
        // The handshake mix from the wire, the certificate key from the signature's length.
        let kinds = r["handshakes"]["kinds"].as_array().unwrap();
        let version = format!("TLSv{tls}");
        assert!(kinds.iter().all(|k| k["version"] == version.as_str()), "{summary}");
        assert!(
            every_full_kind(&r, |k| k["certificate_key"] == "ECDSA P-256"),
            "{summary}"
        );
        // The offers read from the ClientHellos: every accepted one is one the client reused.
        let resumption = &r["resumption"][0];
        let (accepted, unparsed) = (
            resumption["accepted"].as_u64().unwrap(),
            resumption["unparsed"].as_u64().unwrap(),
        );
        assert!(
            accepted <= reused && accepted + unparsed >= reused,
            "accepted {accepted}, {unparsed} not read whole, client reused {reused}\n{summary}"
        );
        assert_eq!(resumption["refused"], 0, "{summary}");
        // The family, named as rustls, with its version; nothing single-stepped.
        let lib = &r["libraries"][0];
        assert_eq!(lib["family"], "rustls", "{summary}");
        assert!(
            lib["version"].as_str().unwrap().starts_with("rustls 0.23."),
            "{summary}"
        );
        assert_eq!(r["probe_stepped_hits"], 0, "{summary}");
        assert_eq!(r["lost"]["handshake_events"], 0, "{summary}");
        assert!(summary.contains("rustls 0.23."), "{summary}");
    }
}

/// Clients that leave after the server's flight: each handshake did its work and never completed. rustls
/// drops the connection's state when the server's loop moves on; each is counted once, abandoned.
#[test]
fn rustls_abandoned_handshakes_are_counted() {
    if !require_root("rustls_abandoned_handshakes_are_counted") {
        return;
    }
    let scratch = Scratch::new("live_rustls_abandoned");
    let (server, port) = start_rust_server("rustls-server", &scratch);
    assert_abandoned_counted(server.pid(), port, &scratch, "EVP_DigestSign");
}

/// Go 1.26's client offers X25519MLKEM768 (GODEBUG=tlsmlkem=1: the example module declares go 1.21), which
/// rustls prefers: the server's side of the hybrid exchange (an X25519 key pair and exchange and an ML-KEM
/// encapsulation) is counted once per handshake, its key pair as keygen.
#[test]
fn rustls_hybrid_key_exchange_is_named_and_timed() {
    if !require_root("rustls_hybrid_key_exchange_is_named_and_timed") {
        return;
    }
    let scratch = Scratch::new("live_rustls_hybrid");
    let (server, port) = start_rust_server("rustls-server", &scratch);
    let go_client_bin = go_build("client", None, false);
    let recording = scratch.path("hybrid.tlsprof");
    let addr = format!("127.0.0.1:{port}");
    let (client, summary, r) = record_while(server.pid(), &recording, || {
        let out = run(Command::new(&go_client_bin)
            .env("GODEBUG", "tlsmlkem=1")
            .args(["-addr", &addr, "-n", "150", "-workers", "1"]));
        assert!(
            out.status.success(),
            "go client: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    });
    let connections = client["connections"].as_u64().unwrap();
    assert_eq!(client["errors"], 0, "{client}");
    assert_eq!(handshakes_of(&r, "full"), connections, "{summary}");
    let kinds = r["handshakes"]["kinds"].as_array().unwrap();
    assert!(kinds.iter().all(|k| k["key_exchange"] == "X25519MLKEM768"), "{summary}");
    assert_eq!(
        calls_of(
            &r,
            "<rustls::crypto::aws_lc_rs::pq::hybrid::Hybrid as rustls::crypto::SupportedKxGroup>::start_and_complete"
        ),
        connections,
        "{summary}"
    );
    assert_eq!(calls_of(&r, "EVP_PKEY_keygen"), connections, "{summary}");
    assert!(f(&stage(&r, "derive")["cpu_ms"]) > 0.0, "{summary}");
}

/// rustls on ring: the provider's key exchange and signatures are its trait methods; counts as on aws-lc-rs,
/// and the certificate key named from the signature the signer returns.
#[test]
fn rustls_on_ring_is_counted_and_staged() {
    if !require_root("rustls_on_ring_is_counted_and_staged") {
        return;
    }
    let scratch = Scratch::new("live_rustls_ring");
    let (server, port) = start_rust_server_with("rustls-server", &scratch, &["ring"]);
    let recording = scratch.path("ring.tlsprof");
    let (client, summary, r) = record_while(server.pid(), &recording, || resume_clients(port, 60, "1.3"));
    let (connections, reused) = assert_counts_as_clients_saw(&client, &r, "server", &summary);
    assert_eq!(
        calls_of(
            &r,
            "<rustls::crypto::ring::sign::EcdsaSigner as rustls::crypto::signer::Signer>::sign"
        ),
        connections - reused,
        "{summary}"
    );
    for exchange in [
        "<rustls::crypto::ring::kx::KxGroup as rustls::crypto::SupportedKxGroup>::start",
        "<rustls::crypto::ring::kx::KeyExchange as rustls::crypto::ActiveKeyExchange>::complete",
    ] {
        assert_eq!(calls_of(&r, exchange), connections, "{summary}");
    }
    // No AWS-LC call in this process's handshakes.
    assert!(
        function(&r, "EVP_DigestSign").is_none_or(|f| f["calls"] == 0),
        "{summary}"
    );
    assert!(
        every_full_kind(&r, |k| k["certificate_key"] == "ECDSA P-256"),
        "{summary}"
    );
    assert_eq!(r["probe_stepped_hits"], 0, "{summary}");
}

/// A rustls client (examples/rust/rustls-client) against the BoringSSL server: its first flight (ClientHello
/// and key share, made before the connection's state has its address) joins its connection, every
/// handshake counted once as a client, resumed as the client saw it.
#[test]
fn rustls_client_handshakes_are_counted_with_their_first_flight() {
    if !require_root("rustls_client_handshakes_are_counted_with_their_first_flight") {
        return;
    }
    let scratch = Scratch::new("live_rustls_client");
    let (_server, port) = start_rust_server("boring-server", &scratch);
    let (counts, summary, r) = record_rust_client("rustls-client", port, 100, &scratch);
    let (connections, _) = assert_counts_as_clients_saw(&counts, &r, "client", &summary);
    assert_eq!(
        calls_of(&r, "rustls::client::hs::ClientHelloInput::start_handshake"),
        connections,
        "{summary}"
    );
    // Every key share made inside a handshake's steps, none left outside one: one per connection, and one
    // more where the server asks for another group than the first connection's share (rustls then remembers
    // the server's group).
    let keygens = calls_of(&r, "EVP_PKEY_keygen");
    assert!(
        (connections..=connections + 1).contains(&keygens),
        "{keygens} key pairs\n{summary}"
    );
    assert_eq!(r["lost"]["unframed_work"], 0, "{summary}");
    // The ServerHello, read before the connection was known, still names its handshake.
    let kinds = r["handshakes"]["kinds"].as_array().unwrap();
    assert!(kinds.iter().all(|k| k["version"] == "TLSv1.3"), "{summary}");
    assert_eq!(r["probe_stepped_hits"], 0, "{summary}");
}

/// Node.js 24's client (OpenSSL 3.5) offers X25519MLKEM768 first and resumes its sessions: rustls' hybrid
/// exchange once per handshake, full and resumed alike (TLS 1.3 resumption with a fresh exchange).
#[test]
fn rustls_with_node24_clients_negotiates_the_hybrid_group() {
    if !require_root("rustls_with_node24_clients_negotiates_the_hybrid_group") {
        return;
    }
    let scratch = Scratch::new("live_rustls_node24");
    let (server, port) = start_rust_server("rustls-server", &scratch);
    assert_node24_hybrid_handshakes(
        server.pid(),
        port,
        &scratch,
        "<rustls::crypto::aws_lc_rs::pq::hybrid::Hybrid as rustls::crypto::SupportedKxGroup>::start_and_complete",
    );
}
