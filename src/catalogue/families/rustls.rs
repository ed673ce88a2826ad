// SPDX-License-Identifier: Apache-2.0
//! rustls 0.23 on its default provider, aws-lc-rs (AWS-LC's libcrypto linked into the executable, its C
//! names prefixed with its version: `aws_lc_0_47_0_EVP_DigestSign`), or on ring. Rows name Rust functions
//! demangled without their hash and AWS-LC's without the prefix (Naming::Demangled). Key generation and
//! signatures on aws-lc-rs are AWS-LC's EVP calls (the signature's length names the certificate key); the
//! rest, and ring's, are the providers' trait methods (`<rustls::crypto::ring::kx::KxGroup as
//! SupportedKxGroup>::start`, ...), which no build inlines.
//!
//! rustls has no call around a handshake: the application hands it bytes and each handshake message is
//! handled by one step of its state machine, `<Expect… as State<…>>::handle` (trait-object methods, never
//! inlined away). `CommonState::process_main_protocol`, which runs each step, tells whose connection the
//! steps are (FF_CONN_CURRENT); the `ExpectFinished` step completes the handshake unless it sends a fatal
//! alert. A client's first flight (its ClientHello and key share) is made as its connection is created,
//! before its state has the address it keeps: it is kept for the thread and joins the thread's next
//! connection (FF_FIRST_FLIGHT).

use super::{Calls, Family, Flavor, Naming, Symbols};
use crate::catalogue::causes::Cause::*;
use crate::catalogue::causes::{user, CauseRow};
use crate::catalogue::servers::Server;
use crate::catalogue::Origin::{Internal, Public};
use crate::catalogue::Stage::{self, *};
use crate::catalogue::{
    frequent, internal_fact, op, row, Row, CLIENT, CONN_CURRENT, CONN_END, CONN_START, FATAL_ALERT, FIRST_FLIGHT,
    HS_FINISH, HS_STEP, PEER_CERT_CHECK, PRIVATE_KEY_OP, SERVER, SIG_LEN_PTR, SIG_RESULT, SSL_ARG,
};

pub struct Rustls;

impl Family for Rustls {
    fn id(&self) -> &'static str {
        "rustls"
    }
    fn name(&self) -> &'static str {
        "rustls"
    }
    fn rows(&self) -> &'static [Row] {
        ROWS
    }
    fn naming(&self) -> Naming {
        Naming::Demangled
    }
    fn versioned_prefixes(&self) -> &'static [&'static str] {
        &["aws_lc_"]
    }
    fn calls(&self) -> Calls {
        Calls::Native
    }
    fn version_in(&self, bytes: &[u8]) -> Option<String> {
        super::unsupported::crate_version(bytes, "rustls")
    }
    fn version_len(&self) -> usize {
        super::unsupported::MARKER_LEN
    }
    fn describe(&self, _flavor: Flavor) -> &'static str {
        "linked into the executable"
    }
    fn describe_symbols(&self, symbols: Symbols) -> &'static str {
        match symbols {
            Symbols::Internal => "its state machine and its crypto provider's functions visible",
            Symbols::Exported => "its crypto provider's functions only",
            Symbols::None => "no rustls functions",
            Symbols::ErrorSites => super::LOCATED_BY_ERROR_SITES,
        }
    }
    fn own_code(&self) -> &'static str {
        "rustls'"
    }
    fn cause_rows(&self) -> &'static [CauseRow] {
        CAUSE_ROWS
    }
    fn server(&self) -> Option<Server> {
        Some(Server::Rustls)
    }
    fn record_layer(&self) -> &'static [(&'static str, Stage)] {
        record_layer()
    }
}

/// A step of the server's handshake state machine.
const fn step(symbol: &'static str, flags: u32) -> Row {
    row(symbol, Handshake, Internal, HS_STEP | SERVER | flags)
}

/// A step of the client's.
const fn client_step(symbol: &'static str, flags: u32) -> Row {
    row(symbol, Handshake, Internal, HS_STEP | CLIENT | flags)
}

pub const ROWS: &[Row] = &[
    // Whose connection the next steps are: every message of every connection passes here.
    internal_fact("rustls::common_state::CommonState::process_main_protocol", CONN_CURRENT),
    internal_fact("rustls::common_state::CommonState::send_fatal_alert", FATAL_ALERT),
    // The connection's state goes: a handshake that did work and never completed was abandoned.
    internal_fact("core::ptr::drop_in_place<rustls::common_state::CommonState>", SSL_ARG | CONN_END),
    // The server's handshake, one step per message from the client. The ClientHello's step does most of a
    // TLS 1.3 handshake: key exchange, the certificate's signature, the key schedule up to the server's
    // Finished.
    step(
        "<rustls::server::hs::ExpectClientHello as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        CONN_START,
    ),
    step(
        "<rustls::server::tls13::ExpectFinished as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        HS_FINISH,
    ),
    step(
        "<rustls::server::tls13::ExpectCertificate as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        0,
    ),
    step(
        "<rustls::server::tls13::ExpectCertificateOrCompressedCertificate as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        0,
    ),
    step(
        "<rustls::server::tls13::ExpectCompressedCertificate as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        0,
    ),
    step(
        "<rustls::server::tls13::ExpectCertificateVerify as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        0,
    ),
    step(
        "<rustls::server::tls13::ExpectEarlyData as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        0,
    ),
    step(
        "<rustls::server::tls13::ExpectAndSkipRejectedEarlyData as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        0,
    ),
    step(
        "<rustls::server::tls12::ExpectCertificate as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        0,
    ),
    step(
        "<rustls::server::tls12::ExpectClientKx as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        0,
    ),
    step(
        "<rustls::server::tls12::ExpectCertificateVerify as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        0,
    ),
    step(
        "<rustls::server::tls12::ExpectCcs as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        0,
    ),
    step(
        "<rustls::server::tls12::ExpectFinished as rustls::common_state::State<rustls::server::server_conn::ServerConnectionData>>::handle",
        HS_FINISH,
    ),
    // The client's handshake: its first flight (the ClientHello and its key share, made as the connection is
    // created, before its state has its address: FF_FIRST_FLIGHT), then one step per message from the server.
    client_step("rustls::client::hs::ClientHelloInput::start_handshake", FIRST_FLIGHT | CONN_START),
    client_step(
        "<rustls::client::hs::ExpectServerHello as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::hs::ExpectServerHelloOrHelloRetryRequest as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls13::ExpectEncryptedExtensions as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls13::ExpectCertificateOrCompressedCertificateOrCertReq as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls13::ExpectCertificateOrCompressedCertificate as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls13::ExpectCertificateOrCertReq as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls13::ExpectCertificateRequest as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls13::ExpectCompressedCertificate as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls13::ExpectCertificate as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls13::ExpectCertificateVerify as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls13::ExpectFinished as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        HS_FINISH,
    ),
    client_step(
        "<rustls::client::tls12::ExpectCertificate as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls12::ExpectCertificateStatusOrServerKx as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls12::ExpectCertificateStatus as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls12::ExpectServerKx as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls12::ExpectServerDoneOrCertReq as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls12::ExpectCertificateRequest as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls12::ExpectServerDone as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls12::ExpectNewTicket as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls12::ExpectCcs as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        0,
    ),
    client_step(
        "<rustls::client::tls12::ExpectFinished as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle",
        HS_FINISH,
    ),
    // A client checks the server's chain and its handshake signature (full handshakes only): webpki's
    // algorithms' trait methods, for either provider (AWS-LC's EVP_PKEY_verify opens with `sub $8,%rsp`).
    row(
        "<rustls::webpki::server_verifier::WebPkiServerVerifier as rustls::verify::ServerCertVerifier>::verify_server_cert",
        Verify,
        Internal,
        PEER_CERT_CHECK,
    ),
    row(
        "<webpki::aws_lc_rs_algs::AwsLcRsAlgorithm as rustls_pki_types::SignatureVerificationAlgorithm>::verify_signature",
        Verify,
        Internal,
        PEER_CERT_CHECK,
    ),
    row(
        "<webpki::ring_algs::RingAlgorithm as rustls_pki_types::SignatureVerificationAlgorithm>::verify_signature",
        Verify,
        Internal,
        PEER_CERT_CHECK,
    ),
    // aws-lc-rs: key generation and signatures are AWS-LC's EVP calls, the same as OpenSSL's (the signature's
    // length names the certificate key). The exchange is the provider's trait methods: AWS-LC's
    // EVP_PKEY_derive and EVP_PKEY_encapsulate open with `sub $8,%rsp`, which the kernel single-steps.
    row("EVP_PKEY_keygen", Keygen, Public, 0),
    row(
        "<rustls::crypto::aws_lc_rs::kx::KeyExchange as rustls::crypto::ActiveKeyExchange>::complete",
        Derive,
        Internal,
        0,
    ),
    // The hybrid and ML-KEM groups: the server's key share and secret at once (its X25519 key pair, the
    // exchange and the ML-KEM encapsulation), the client's completion (decapsulation).
    row(
        "<rustls::crypto::aws_lc_rs::pq::hybrid::Hybrid as rustls::crypto::SupportedKxGroup>::start_and_complete",
        Derive,
        Internal,
        0,
    ),
    row(
        "<rustls::crypto::aws_lc_rs::pq::mlkem::MlKem as rustls::crypto::SupportedKxGroup>::start_and_complete",
        Derive,
        Internal,
        0,
    ),
    row(
        "<rustls::crypto::aws_lc_rs::pq::hybrid::ActiveHybrid as rustls::crypto::ActiveKeyExchange>::complete",
        Derive,
        Internal,
        0,
    ),
    row(
        "<rustls::crypto::aws_lc_rs::pq::mlkem::Active as rustls::crypto::ActiveKeyExchange>::complete",
        Derive,
        Internal,
        0,
    ),
    op("EVP_DigestSign", Sign, PRIVATE_KEY_OP | SIG_LEN_PTR),
    // The ring provider's key exchange (the TLS 1.3 server starts and completes it at once) and signatures
    // (returned as a Vec, whose length names the certificate key).
    row(
        "<rustls::crypto::ring::kx::KxGroup as rustls::crypto::SupportedKxGroup>::start",
        Keygen,
        Internal,
        0,
    ),
    row(
        "<rustls::crypto::ring::kx::KeyExchange as rustls::crypto::ActiveKeyExchange>::complete",
        Derive,
        Internal,
        0,
    ),
    row(
        "<rustls::crypto::ring::sign::EcdsaSigner as rustls::crypto::signer::Signer>::sign",
        Sign,
        Internal,
        PRIVATE_KEY_OP | SIG_RESULT,
    ),
    row(
        "<rustls::crypto::ring::sign::RsaSigner as rustls::crypto::signer::Signer>::sign",
        Sign,
        Internal,
        PRIVATE_KEY_OP | SIG_RESULT,
    ),
    row(
        "<rustls::crypto::ring::sign::Ed25519Signer as rustls::crypto::signer::Signer>::sign",
        Sign,
        Internal,
        PRIVATE_KEY_OP | SIG_RESULT,
    ),
    // The TLS 1.3 key schedule's steps (each a few HKDF calls): the two that make the handshake and the
    // traffic secrets; the rest (Finished MACs, the early secret) with --all-probes.
    frequent("rustls::tls13::key_schedule::KeySchedulePreHandshake::into_handshake", KeySchedule, 0),
    row(
        "rustls::tls13::key_schedule::KeyScheduleHandshakeStart::into_handshake",
        KeySchedule,
        Internal,
        0,
    ),
    row(
        "rustls::tls13::key_schedule::KeyScheduleHandshake::into_traffic_with_client_finished_pending",
        KeySchedule,
        Internal,
        0,
    ),
    frequent("rustls::tls13::key_schedule::KeyScheduleSuite::sign_verify_data", KeySchedule, 0),
    // About 20 HKDF calls per TLS 1.3 handshake: only with --all-probes.
    frequent("HKDF_extract", KeySchedule, 0),
    frequent("HKDF_expand", KeySchedule, 0),
    // Resumption: finding the session a client offers. Making tickets (two or more per TLS 1.3 handshake,
    // each stored) is probed with --all-probes.
    row(
        "rustls::server::tls13::client_hello::CompleteClientHelloHandling::attempt_tls13_ticket_decryption",
        Resume,
        Internal,
        0,
    ),
    row(
        "rustls::server::tls13::client_hello::CompleteClientHelloHandling::check_binder",
        Resume,
        Internal,
        0,
    ),
    frequent("rustls::tls13::key_schedule::KeyScheduleResumption::derive_ticket_psk", Resume, 0),
    frequent("<rustls::server::handy::cache::ServerSessionMemoryCache as rustls::server::server_conn::StoresServerSessions>::put", Resume, 0),
    row(
        "<rustls::server::handy::cache::ServerSessionMemoryCache as rustls::server::server_conn::StoresServerSessions>::take",
        Resume,
        Internal,
        0,
    ),
    row(
        "<rustls::server::handy::cache::ServerSessionMemoryCache as rustls::server::server_conn::StoresServerSessions>::get",
        Resume,
        Internal,
        0,
    ),
    // Record layer: the ciphers' encryption and decryption of each record.
    frequent(
        "<rustls::crypto::aws_lc_rs::tls13::AeadMessageDecrypter as rustls::crypto::cipher::MessageDecrypter>::decrypt",
        Read,
        0,
    ),
    frequent(
        "<rustls::crypto::aws_lc_rs::tls13::GcmMessageDecrypter as rustls::crypto::cipher::MessageDecrypter>::decrypt",
        Read,
        0,
    ),
    frequent(
        "<rustls::crypto::aws_lc_rs::tls12::GcmMessageDecrypter as rustls::crypto::cipher::MessageDecrypter>::decrypt",
        Read,
        0,
    ),
    frequent(
        "<rustls::crypto::aws_lc_rs::tls12::ChaCha20Poly1305MessageDecrypter as rustls::crypto::cipher::MessageDecrypter>::decrypt",
        Read,
        0,
    ),
    frequent(
        "<rustls::crypto::aws_lc_rs::tls13::AeadMessageEncrypter as rustls::crypto::cipher::MessageEncrypter>::encrypt",
        Write,
        0,
    ),
    frequent(
        "<rustls::crypto::aws_lc_rs::tls13::GcmMessageEncrypter as rustls::crypto::cipher::MessageEncrypter>::encrypt",
        Write,
        0,
    ),
    frequent(
        "<rustls::crypto::aws_lc_rs::tls12::GcmMessageEncrypter as rustls::crypto::cipher::MessageEncrypter>::encrypt",
        Write,
        0,
    ),
    frequent(
        "<rustls::crypto::aws_lc_rs::tls12::ChaCha20Poly1305MessageEncrypter as rustls::crypto::cipher::MessageEncrypter>::encrypt",
        Write,
        0,
    ),
    frequent(
        "<rustls::crypto::ring::tls13::Tls13MessageDecrypter as rustls::crypto::cipher::MessageDecrypter>::decrypt",
        Read,
        0,
    ),
    frequent(
        "<rustls::crypto::ring::tls12::GcmMessageDecrypter as rustls::crypto::cipher::MessageDecrypter>::decrypt",
        Read,
        0,
    ),
    frequent(
        "<rustls::crypto::ring::tls12::ChaCha20Poly1305MessageDecrypter as rustls::crypto::cipher::MessageDecrypter>::decrypt",
        Read,
        0,
    ),
    frequent(
        "<rustls::crypto::ring::tls13::Tls13MessageEncrypter as rustls::crypto::cipher::MessageEncrypter>::encrypt",
        Write,
        0,
    ),
    frequent(
        "<rustls::crypto::ring::tls12::GcmMessageEncrypter as rustls::crypto::cipher::MessageEncrypter>::encrypt",
        Write,
        0,
    ),
    frequent(
        "<rustls::crypto::ring::tls12::ChaCha20Poly1305MessageEncrypter as rustls::crypto::cipher::MessageEncrypter>::encrypt",
        Write,
        0,
    ),
];

/// The record layer's functions: every read and write row (the ciphers' own), where CPU samples fall in
/// those stages.
fn record_layer() -> &'static [(&'static str, Stage)] {
    static LAYER: std::sync::OnceLock<Vec<(&'static str, Stage)>> = std::sync::OnceLock::new();
    LAYER.get_or_init(|| {
        ROWS.iter()
            .filter_map(|r| r.stage.filter(|s| matches!(s, Read | Write)).map(|s| (r.symbol, s)))
            .collect()
    })
}

/// Functions by cause, narrow rows first. AWS-LC's keep their version prefix in stacks: `aws_lc_*_` rows.
const CAUSE_ROWS: &[CauseRow] = &[
    user("aws_lc_*_ERR_*", ErrorQueue),
    user("aws_lc_*_RAND_*", Random),
    user("aws_lc_*_CRYPTO_sysrand*", Random),
    user("aws_lc_*_ctr_drbg_*", Random),
    user("*aws_lc_rs::rand::*", Random),
    user("*ServerSessionMemoryCache*", Session),
    user("rustls::msgs::persist::*", Session),
    user("*rustls::msgs::persist::*", Session),
    user("rustls::server::handy::*", Session),
    user("*StoresServerSessions*", Session),
    user("*ProducesTickets*", Session),
    user("aws_lc_*_EVP_DigestSign*", PublicKey),
    user("aws_lc_*_EVP_DigestVerify*", PublicKey),
    user("*Signer as rustls::crypto::signer::Signer>::sign", PublicKey),
    // ML-KEM's hashing (SHAKE, Keccak) is its own arithmetic.
    user("aws_lc_*_SHAKE*", PublicKey),
    user("aws_lc_*_keccak*", PublicKey),
    user("aws_lc_*_SHA*", MacHash),
    user("aws_lc_*_sha*", MacHash),
    user("aws_lc_*_HMAC*", MacHash),
    user("aws_lc_*_EVP_Digest*", MacHash),
    user("rustls::hash_hs::*", MacHash),
    user("*aws_lc_rs::digest::*", MacHash),
    user("*aws_lc_rs::hmac::*", MacHash),
    user("aws_lc_*_HKDF*", KeyDerivation),
    user("rustls::tls13::key_schedule::*", KeyDerivation),
    user("*rustls::tls13::key_schedule::*", KeyDerivation),
    user("*aws_lc_rs::hkdf::*", KeyDerivation),
    user("*aws_lc_rs::tls_prf::*", KeyDerivation),
    user("rustls::tls12::prf*", KeyDerivation),
    user("aws_lc_*_aes_*", Encryption),
    user("aws_lc_*_aesni_*", Encryption),
    user("aws_lc_*_AES_*", Encryption),
    user("aws_lc_*_EVP_AEAD_*", Encryption),
    user("aws_lc_*_EVP_CIPHER*", Encryption),
    user("aws_lc_*_CRYPTO_gcm128_*", Encryption),
    user("aws_lc_*_gcm_*", Encryption),
    user("aws_lc_*_chacha20*", Encryption),
    user("aws_lc_*_CRYPTO_chacha_20", Encryption),
    user("aws_lc_*_poly1305*", Encryption),
    user("*MessageEncrypter*", Encryption),
    user("*MessageDecrypter*", Encryption),
    user("*aws_lc_rs::aead::*", Encryption),
    user("webpki::*", Certificates),
    user("*webpki::*", Certificates),
    user("rustls_pki_types::*", Certificates),
    user("aws_lc_*_X509*", Certificates),
    user("aws_lc_*_ASN1_*", Certificates),
    user("aws_lc_*_CBS_*", Certificates),
    user("aws_lc_*_CBB_*", Certificates),
    user("aws_lc_*_BN_*", PublicKey),
    user("aws_lc_*_bn_*", PublicKey),
    user("aws_lc_*_EC_*", PublicKey),
    user("aws_lc_*_ec_*", PublicKey),
    user("aws_lc_*_ECDSA_*", PublicKey),
    user("aws_lc_*_ECDH_*", PublicKey),
    user("aws_lc_*_ecp_nistz256*", PublicKey),
    user("aws_lc_*_p256*", PublicKey),
    user("aws_lc_*_p384*", PublicKey),
    user("aws_lc_*_fiat_*", PublicKey),
    user("aws_lc_*_X25519*", PublicKey),
    user("aws_lc_*_x25519*", PublicKey),
    user("aws_lc_*_ml_kem_*", PublicKey),
    user("aws_lc_*_mlkem*", PublicKey),
    user("aws_lc_*_KYBER*", PublicKey),
    user("aws_lc_*_RSA_*", PublicKey),
    user("aws_lc_*_rsa_*", PublicKey),
    user("aws_lc_*_rsaz_*", PublicKey),
    user("aws_lc_*_EVP_PKEY_*", PublicKey),
    user("aws_lc_*_EVP_*", PublicKey),
    user("*aws_lc_rs::agreement::*", PublicKey),
    user("*aws_lc_rs::kem::*", PublicKey),
    user("*aws_lc_rs::ec::*", PublicKey),
    user("*aws_lc_rs::rsa::*", PublicKey),
    user("*rustls::crypto::aws_lc_rs::kx::*", PublicKey),
    user("*rustls::crypto::aws_lc_rs::pq::*", PublicKey),
    user("aws_lc_*_OPENSSL_malloc", Memory),
    user("aws_lc_*_OPENSSL_zalloc", Memory),
    user("aws_lc_*_OPENSSL_free", Memory),
    user("aws_lc_*_OPENSSL_cleanse", Memory),
    user("__rust_alloc", Memory),
    user("__rust_dealloc", Memory),
    user("__rust_realloc", Memory),
    user("alloc::raw_vec::*", Memory),
    user("aws_lc_*_CRYPTO_*_lock_*", Locks),
    // ring: its Rust code, and its C and assembly (prefixed `ring_core_0_17_14_`).
    user("ring::rand::*", Random),
    user("ring::digest::*", MacHash),
    user("ring::hmac::*", MacHash),
    user("ring_core_*_sha*", MacHash),
    user("ring::hkdf::*", KeyDerivation),
    user("ring::aead::*", Encryption),
    user("ring_core_*_aes*", Encryption),
    user("ring_core_*_gcm*", Encryption),
    user("ring_core_*_chacha*", Encryption),
    user("ring::ec::*", PublicKey),
    user("ring::rsa::*", PublicKey),
    user("ring::arithmetic::*", PublicKey),
    user("ring_core_*", PublicKey),
    user("*rustls::crypto::ring::kx::*", PublicKey),
    user("*rustls::crypto::ring::sign::*", PublicKey),
    // rustls' own code: the state machine, building and parsing messages, records.
    user("rustls::*", TlsMessages),
    user("<rustls::*", TlsMessages),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_layer_is_both_directions_of_both_providers() {
        for (stage, n) in [(Read, 7), (Write, 7)] {
            assert_eq!(record_layer().iter().filter(|&&(_, s)| s == stage).count(), n);
        }
    }

    #[test]
    fn every_handshake_completes_in_a_finished_step() {
        let steps: Vec<&Row> = ROWS.iter().filter(|r| r.flags & HS_STEP != 0).collect();
        assert!(steps.iter().all(|r| r.stage == Some(Handshake)));
        for role in [SERVER, CLIENT] {
            let of_role = || steps.iter().filter(move |r| r.flags & role != 0);
            assert_eq!(of_role().filter(|r| r.flags & HS_FINISH != 0).count(), 2);
            assert_eq!(of_role().filter(|r| r.flags & CONN_START != 0).count(), 1);
        }
        assert!(steps
            .iter()
            .all(|r| r.flags & FIRST_FLIGHT == 0 || r.flags & CLIENT != 0));
    }
}
