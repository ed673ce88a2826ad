// SPDX-License-Identifier: Apache-2.0
//! Ground-truth fixture for rustls: `rustls-ops [--derive x25519|p256] [--sign rsa2048|p256] [--no-twin]
//! [--op-log PATH] N_DERIVE M_SIGN` makes exactly N key exchanges and M signatures through rustls' crypto
//! provider (aws-lc-rs) as a handshake makes them: a fresh key share completed against the peer's
//! (`ActiveKeyExchange::complete`), a fresh signer for the certificate key signing a CertificateVerify-sized
//! message (`Signer::sign`), interleaved one by one. Each is timed with the thread's CPU clock, beside an
//! unprobed twin (examples/rust/twin-clock); the JSON line has tests/fixtures/crypto_ops.c's fields.

use std::sync::Arc;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use rustls::crypto::{aws_lc_rs as provider, SupportedKxGroup};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::{CertifiedKey, SigningKey};
use rustls::{NamedGroup, SignatureScheme};
use twin_clock::{fail, Options};

const DERIVE: usize = 0;
const SIGN: usize = 1;

// A TLS 1.3 CertificateVerify signs 64 spaces, a 33-byte context string, a zero byte and a SHA-256 transcript hash.
const SIGNED_LEN: usize = 64 + 33 + 1 + 32;

struct Keys {
    group: &'static dyn SupportedKxGroup,
    peer_share: Vec<u8>,
    signer: Arc<dyn SigningKey>,
    scheme: SignatureScheme,
}

fn keys(derive_alg: &str, sign_alg: &str) -> Keys {
    let group_name = if derive_alg == "p256" {
        NamedGroup::secp256r1
    } else {
        NamedGroup::X25519
    };
    let group = *provider::ALL_KX_GROUPS
        .iter()
        .find(|g| g.name() == group_name)
        .unwrap_or_else(|| fail("finding the key exchange group"));
    let peer_share = group
        .start()
        .unwrap_or_else(|_| fail("the peer's key share"))
        .pub_key()
        .to_vec();
    let (pkcs8, scheme) = if sign_alg == "p256" {
        let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap_or_else(|_| fail("key generation"));
        let der = key.to_pkcs8v1().unwrap_or_else(|_| fail("key encoding"));
        (der.as_ref().to_vec(), SignatureScheme::ECDSA_NISTP256_SHA256)
    } else {
        let key = RsaKeyPair::generate(KeySize::Rsa2048).unwrap_or_else(|_| fail("key generation"));
        let der = key.as_der().unwrap_or_else(|_| fail("key encoding"));
        (der.as_ref().to_vec(), SignatureScheme::RSA_PSS_SHA256)
    };
    let signer = provider::sign::any_supported_type(&PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pkcs8)))
        .unwrap_or_else(|_| fail("loading the signing key"));
    Keys {
        group,
        peer_share,
        signer,
        scheme,
    }
}

#[derive(Debug)]
struct NoCertificate;

impl ResolvesServerCert for NoCertificate {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        None
    }
}

/// One ClientHello through a server connection before the clock starts: the binary holds rustls' handshake code
/// as a server's does (tlsprof recognises rustls by it), and first-use costs are paid.
fn warm_up() {
    let client_config = rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let server_config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(NoCertificate));
    let name = ServerName::try_from("localhost").unwrap_or_else(|_| fail("server name"));
    let mut client =
        rustls::ClientConnection::new(Arc::new(client_config), name).unwrap_or_else(|_| fail("client connection"));
    let mut server =
        rustls::ServerConnection::new(Arc::new(server_config)).unwrap_or_else(|_| fail("server connection"));
    let mut hello = Vec::new();
    client
        .write_tls(&mut hello)
        .unwrap_or_else(|_| fail("writing the ClientHello"));
    server
        .read_tls(&mut hello.as_slice())
        .unwrap_or_else(|_| fail("reading the ClientHello"));
    // No certificate: the server refuses, as it should.
    if server.process_new_packets().is_ok() {
        fail("refusing a handshake without a certificate");
    }
}

fn main() {
    let options = Options::parse(2, "N_DERIVE M_SIGN");
    let (n, m) = (options.counts[0], options.counts[1]);
    warm_up();
    let keys = keys(options.derive_alg, options.sign_alg);
    let message = [0x20u8; SIGNED_LEN];
    let (mut d, mut s) = (0, 0);
    twin_clock::run(
        &options,
        ["derive", "sign"],
        n + m,
        "\"as_speed\":false,\"library\":\"rustls\"",
        |clock| {
            if d < n && (s >= m || d * m <= s * n) {
                // A server's key share, then the shared secret with the client's: only the latter is timed.
                let share = keys.group.start().unwrap_or_else(|_| fail("key share"));
                clock
                    .timed(DERIVE, || share.complete(&keys.peer_share))
                    .unwrap_or_else(|_| fail("key exchange"));
                clock.end_op(DERIVE);
                d += 1;
            } else {
                // rustls chooses a signer for each handshake.
                let signer = keys
                    .signer
                    .choose_scheme(&[keys.scheme])
                    .unwrap_or_else(|| fail("choosing the scheme"));
                clock
                    .timed(SIGN, || signer.sign(&message))
                    .unwrap_or_else(|_| fail("signing"));
                clock.end_op(SIGN);
                s += 1;
            }
        },
    );
}
