// SPDX-License-Identifier: Apache-2.0
//! A TLS server on BoringSSL (the boring crate): `boring-server CERT.pem KEY.pem [GROUPS]` listens on a free
//! loopback port, prints it, and answers each connection's first request with a short HTTP response, one
//! connection at a time. GROUPS (e.g. `X25519MLKEM768:X25519`) replaces BoringSSL's default key-exchange groups.

use std::io::{Read, Write};
use std::net::TcpListener;

use boring::ssl::{SslAcceptor, SslFiletype, SslMethod};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (cert, key, groups) = match args.as_slice() {
        [_, cert, key] => (cert, key, None),
        [_, cert, key, groups] => (cert, key, Some(groups)),
        _ => {
            eprintln!("usage: boring-server CERT.pem KEY.pem [GROUPS]");
            std::process::exit(2);
        }
    };
    let mut acceptor = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).expect("a TLS context");
    acceptor
        .set_certificate_chain_file(cert)
        .unwrap_or_else(|e| panic!("{cert}: {e}"));
    acceptor
        .set_private_key_file(key, SslFiletype::PEM)
        .unwrap_or_else(|e| panic!("{key}: {e}"));
    if let Some(groups) = groups {
        acceptor
            .set_curves_list(groups)
            .unwrap_or_else(|e| panic!("{groups}: {e}"));
    }
    let acceptor = acceptor.build();
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    println!("{}", listener.local_addr().expect("bound").port());
    std::io::stdout().flush().expect("stdout");
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let Ok(mut tls) = acceptor.accept(stream) else { continue };
        let mut request = [0u8; 1024];
        if tls.read(&mut request).is_ok() {
            let _ = tls.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nok\n");
        }
        let _ = tls.shutdown();
    }
}
