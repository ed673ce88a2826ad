// SPDX-License-Identifier: Apache-2.0
//! A TLS client on rustls: `rustls-client PORT COUNT [--wait-for FILE]` (examples/rust/loopback-client) makes
//! COUNT connections to 127.0.0.1:PORT, each a GET of / read to its end, resuming the last session (rustls'
//! default client session cache). The server's certificate is taken as it comes (a loopback test client);
//! the handshake's signature is checked with it, as any client does.

use std::io::{Read, Write};
use std::sync::Arc;

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
    loopback_client::run("rustls-client", |mut sock| {
        let mut conn = rustls::ClientConnection::new(config.clone(), name.clone()).expect("a connection");
        let mut tls = rustls::Stream::new(&mut conn, &mut sock);
        tls.write_all(loopback_client::REQUEST).ok()?;
        let mut body = Vec::new();
        let _ = tls.read_to_end(&mut body);
        Some(conn.handshake_kind() == Some(HandshakeKind::Resumed))
    });
}
