// SPDX-License-Identifier: Apache-2.0
//! Live: a server on BoringSSL with its symbols (examples/rust/boring-server, the boring crate's build)
//! profiled as its own family, against its clients' own counts (needs root): full and resumed handshakes of
//! TLS 1.3 and 1.2, the key exchange split into key generation and derivation, abandoned handshakes, no probe
//! entry single-stepped. The same server stripped of its symbols, its functions located by their error sites.
mod common;

use std::collections::HashMap;

use common::*;
use object::{Object, ObjectSymbol};
use tlsprof::catalogue::families::boringssl::{BORINGSSL, ROWS};
use tlsprof::catalogue::families::Family;
use tlsprof::record::error_sites::{locate, ErrorSites};

#[test]
fn boringssl_full_and_resumed_handshakes_are_counted_exactly() {
    if !require_root("boringssl_full_and_resumed_handshakes_are_counted_exactly") {
        return;
    }
    let scratch = Scratch::new("live_boringssl");
    let (server, port) = start_rust_server("boring-server", &scratch);
    // The server's Encap makes its key share and the secret (TLS 1.3); TLS 1.2's ECDHE decapsulates.
    assert_bssl_server_handshakes(
        server.pid(),
        port,
        &scratch,
        "boringssl",
        "BoringSSL (the boring 4.",
        |tls| {
            if tls == "1.3" {
                "bssl::(anonymous namespace)::X25519KeyShare::Encap"
            } else {
                "bssl::(anonymous namespace)::X25519KeyShare::Decap"
            }
        },
    );
}

/// Clients that leave after the server's flight: SSL_free ends each connection with its handshake abandoned.
#[test]
fn boringssl_abandoned_handshakes_are_counted() {
    if !require_root("boringssl_abandoned_handshakes_are_counted") {
        return;
    }
    let scratch = Scratch::new("live_boringssl_abandoned");
    let (server, port) = start_rust_server("boring-server", &scratch);
    assert_abandoned_counted(server.pid(), port, &scratch, "bssl::ssl_private_key_sign");
}

/// BoringSSL with Cloudflare's post-quantum patch (the boring crate's pq-experimental, as its users build it),
/// X25519MLKEM768 preferred: Node.js 24's clients negotiate it, and the key share's Encap is the server's side
/// of each exchange.
#[test]
fn boringssl_with_node24_clients_negotiates_the_hybrid_group() {
    if !require_root("boringssl_with_node24_clients_negotiates_the_hybrid_group") {
        return;
    }
    let scratch = Scratch::new("live_boringssl_node24");
    let (server, port) = start_rust_server_with("boring-server", &scratch, &["X25519MLKEM768:X25519"]);
    assert_node24_hybrid_handshakes(
        server.pid(),
        port,
        &scratch,
        "bssl::(anonymous namespace)::X25519MLKEM768KeyShare::Encap",
    );
}

/// A BoringSSL client (examples/rust/boring-client) resuming its sessions against the BoringSSL server: every
/// handshake counted once, as a client (told by its ClientHello: SSL_set_connect_state is not probed), none
/// single-stepped; the server's certificate key named from the signature the client checked.
#[test]
fn boringssl_client_handshakes_are_counted_as_the_client_saw() {
    if !require_root("boringssl_client_handshakes_are_counted_as_the_client_saw") {
        return;
    }
    let scratch = Scratch::new("live_boringssl_client");
    let (_server, port) = start_rust_server("boring-server", &scratch);
    let (counts, summary, r) = record_rust_client("boring-client", port, 100, &scratch);
    let (connections, resumed) = assert_counts_as_clients_saw(&counts, &r, "client", &summary);
    assert_eq!(r["probe_stepped_hits"], 0, "{summary}");
    assert!(
        every_full_kind(&r, |k| k["certificate_key"] == "ECDSA P-256"),
        "{summary}"
    );
    assert_eq!(
        calls_of(&r, "bssl::ssl_public_key_verify"),
        connections - resumed,
        "{summary}"
    );
}

/// A BoringSSL client whose server reads its ClientHello and hangs up: the client made its key share, its
/// handshake never completed, and freeing the connection counts it once, abandoned.
#[test]
fn boringssl_client_handshakes_the_server_hangs_up_on_are_abandoned() {
    if !require_root("boringssl_client_handshakes_the_server_hangs_up_on_are_abandoned") {
        return;
    }
    const CONNECTIONS: u32 = 30;
    let scratch = Scratch::new("live_boringssl_client_abandoned");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hang_up = std::thread::spawn(move || {
        for _ in 0..CONNECTIONS {
            let (mut sock, _) = listener.accept().unwrap();
            let mut hello = [0u8; 512];
            let _ = std::io::Read::read(&mut sock, &mut hello);
        }
    });
    let (counts, summary, r) = record_rust_client("boring-client", port, CONNECTIONS, &scratch);
    hang_up.join().unwrap();
    assert_eq!(counts["connections"], 0, "{counts}");
    assert_eq!(handshakes_of(&r, "abandoned"), u64::from(CONNECTIONS), "{summary}");
    assert_eq!(handshakes_of(&r, "total"), 0, "{summary}");
    assert_eq!(calls_of(&r, "X25519_keypair"), u64::from(CONNECTIONS), "{summary}");
    assert_eq!(r["probe_stepped_hits"], 0, "{summary}");
}

/// boring-server stripped of its symbols, as Envoy and Bun ship BoringSSL: the catalogue's functions located by
/// the source lines where they raise errors are those its symbols name, at the same addresses.
#[test]
fn stripped_boringssl_functions_are_located_where_their_symbols_say() {
    let scratch = Scratch::new("live_boringssl_located");
    let built = build_rust_example("boring-server");
    let stripped = stripped_copy(&built, &scratch);
    let sites = ErrorSites::read(&stripped).expect("the stripped copy has BoringSSL's error sites");
    let wanted: Vec<&str> = ROWS.iter().map(|r| r.symbol).collect();
    let located = locate(&BORINGSSL.site_tables()[0], &sites, &wanted).expect("the table is of its revision");
    let data = std::fs::read(&built).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let options = cpp_demangle::DemangleOptions::new().no_params().no_return_type();
    let by_symbol: HashMap<String, u64> = elf
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .filter_map(|s| {
            let raw = s.name().ok()?;
            let name = cpp_demangle::Symbol::new(raw)
                .ok()
                .and_then(|d| d.demangle_with_options(&options).ok())
                .unwrap_or_else(|| raw.to_string());
            Some((name, s.address()))
        })
        .collect();
    for l in &located {
        assert_eq!(
            by_symbol.get(l.name),
            Some(&l.addr),
            "{} located at {:#x}",
            l.name,
            l.addr
        );
    }
    let names: Vec<&str> = located.iter().map(|l| l.name).collect();
    let missed: Vec<&str> = wanted
        .iter()
        .filter(|w| by_symbol.contains_key(**w) && !names.contains(w))
        .copied()
        .collect();
    eprintln!(
        "located {} of the catalogue's functions: {names:?}; not located: {missed:?}",
        names.len()
    );
    // What counting and timing a server's handshakes takes: the handshake, a connection's start, the role,
    // the signature.
    for needed in [
        "SSL_do_handshake",
        "SSL_new",
        "bssl::ssl_parse_clienthello_tlsext",
        "bssl::ssl_private_key_sign",
    ] {
        assert!(names.contains(&needed), "{needed} not located: {names:?}");
    }
}

/// The stripped server profiled: its handshakes, full and resumed, counted as its clients saw them, every
/// signature counted, no probe entry single-stepped, and the library said to be located by its error sites;
/// and a stripped client's, as it saw them.
#[test]
fn stripped_boringssl_handshakes_are_counted_as_its_clients_saw() {
    if !require_root("stripped_boringssl_handshakes_are_counted_as_its_clients_saw") {
        return;
    }
    let scratch = Scratch::new("live_boringssl_stripped");
    let stripped = stripped_copy(&build_rust_example("boring-server"), &scratch);
    let (server, port) = start_server_binary(&stripped, &scratch, &[]);
    for tls in ["1.3", "1.2"] {
        let recording = scratch.path(&format!("tls{tls}.tlsprof"));
        let (client, summary, r) = record_while(server.pid(), &recording, || resume_clients(port, 100, tls));
        eprintln!("TLS {tls}: client {client}\n{summary}");
        let (connections, reused) = assert_counts_as_clients_saw(&client, &r, "server", &summary);
        assert!(connections > reused && reused > 0, "{summary}");
        assert_eq!(
            calls_of(&r, "bssl::ssl_private_key_sign"),
            connections - reused,
            "{summary}"
        );
        let lib = &r["libraries"][0];
        assert_eq!(
            (&lib["family"], &lib["symbols"]),
            (&"boringssl".into(), &"error_sites".into()),
            "{summary}"
        );
        assert!(
            summary.contains("functions located by the source lines of their errors"),
            "{summary}"
        );
        assert_eq!(r["probe_stepped_hits"], 0, "{summary}");
    }
    // A stripped client of the same crate, resuming: every handshake counted once, as a client.
    let client = stripped_copy(&build_rust_example("boring-client"), &scratch);
    let (counts, summary, r) = record_client_binary(&client, port, 100, &scratch);
    assert_counts_as_clients_saw(&counts, &r, "client", &summary);
    assert_eq!(r["libraries"][0]["symbols"], "error_sites", "{summary}");
    assert_eq!(r["probe_stepped_hits"], 0, "{summary}");
}
