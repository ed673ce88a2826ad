// SPDX-License-Identifier: Apache-2.0
//! A TLS server on rustls: `rustls-server CERT.pem KEY.pem [aws-lc-rs|ring]` listens on a free loopback port,
//! prints it, and answers each connection's first request with a short HTTP response, one connection at a time.
//! Its crypto provider is aws-lc-rs (rustls' default) unless `ring` is asked for: the build links both, as a
//! program that chooses its provider at run time does.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

use rustls::crypto::{aws_lc_rs, ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (cert, key, provider): (&str, &str, CryptoProvider) = match args.as_slice() {
        [_, cert, key] => (cert, key, aws_lc_rs::default_provider()),
        [_, cert, key, p] if p == "aws-lc-rs" => (cert, key, aws_lc_rs::default_provider()),
        [_, cert, key, p] if p == "ring" => (cert, key, ring::default_provider()),
        _ => {
            eprintln!("usage: rustls-server CERT.pem KEY.pem [aws-lc-rs|ring]");
            std::process::exit(2);
        }
    };
    let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect())
        .unwrap_or_else(|e| panic!("{cert}: {e}"));
    let key = PrivateKeyDer::from_pem_file(key).unwrap_or_else(|e| panic!("{key}: {e}"));
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .expect("the provider's protocol versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("a certificate and its key"),
    );
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    println!("{}", listener.local_addr().expect("bound").port());
    std::io::stdout().flush().expect("stdout");
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let Ok(mut conn) = rustls::ServerConnection::new(config.clone()) else { continue };
        let mut tls = rustls::Stream::new(&mut conn, &mut stream);
        let mut request = [0u8; 1024];
        if tls.read(&mut request).is_ok() {
            let _ = tls.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nok\n");
            let _ = tls.flush();
        }
        conn.send_close_notify();
        let _ = conn.complete_io(&mut stream);
    }
}
