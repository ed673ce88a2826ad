// SPDX-License-Identifier: Apache-2.0
//! A TLS client on rustls: `rustls-client PORT COUNT [--wait-for FILE]` makes COUNT connections to
//! 127.0.0.1:PORT one after another, each a GET of / read to its end, resuming the last session (rustls'
//! default client session cache), and prints one JSON line: connections made and resumed. With --wait-for it
//! starts once FILE exists (at most 30 s): a profiler attaches first. The server's certificate is taken as
//! it comes (a loopback test client); the handshake's signature is checked with it, as any client does.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, HandshakeKind, SignatureScheme};

/// Accepts the server's chain unchecked, checks its handshake signatures.
#[derive(Debug)]
struct LoopbackVerifier(Arc<CryptoProvider>);

impl ServerCertVerifier for LoopbackVerifier {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (port, count, wait_for) = match args.as_slice() {
        [_, port, count] => (port, count, None),
        [_, port, count, flag, file] if flag == "--wait-for" => (port, count, Some(file)),
        _ => {
            eprintln!("usage: rustls-client PORT COUNT [--wait-for FILE]");
            std::process::exit(2);
        }
    };
    let (Ok(port), Ok(count)) = (port.parse::<u16>(), count.parse::<u32>()) else {
        eprintln!("rustls-client: PORT and COUNT are numbers");
        std::process::exit(2);
    };
    if let Some(file) = wait_for {
        let until = Instant::now() + Duration::from_secs(30);
        while !std::path::Path::new(file).exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = Arc::new(
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("the provider's protocol versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(LoopbackVerifier(provider)))
            .with_no_client_auth(),
    );
    let name = ServerName::try_from("localhost").expect("a name");
    let (mut made, mut resumed) = (0u32, 0u32);
    for _ in 0..count {
        let Ok(mut sock) = TcpStream::connect(("127.0.0.1", port)) else {
            eprintln!("rustls-client: cannot connect to port {port}");
            std::process::exit(1);
        };
        let mut conn = rustls::ClientConnection::new(config.clone(), name.clone()).expect("a connection");
        let mut tls = rustls::Stream::new(&mut conn, &mut sock);
        if tls.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n").is_err() {
            continue;
        }
        let mut body = Vec::new();
        let _ = tls.read_to_end(&mut body);
        made += 1;
        if conn.handshake_kind() == Some(HandshakeKind::Resumed) {
            resumed += 1;
        }
    }
    println!("{{\"connections\": {made}, \"resumed\": {resumed}}}");
}
