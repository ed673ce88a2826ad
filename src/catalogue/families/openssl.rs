// SPDX-License-Identifier: Apache-2.0
//! OpenSSL (1.0 to 3.x, shared or linked in): the public API every build exports, the internals some builds
//! keep (Node.js), and nginx's TLS glue.

use super::{Calls, Family, Flavor, Naming, StateAccessors, Symbols};
use crate::catalogue::causes::Cause::*;
use crate::catalogue::causes::{user, CauseRow};
use crate::catalogue::Origin::{App, Internal, Public};
use crate::catalogue::Stage::{self, *};
use crate::catalogue::{
    fact, frequent, op, row, Row, CLIENT, CONN_END, CONN_START, IO_DRIVER, PEER_CERT_CHECK, PRIVATE_KEY_OP,
    SECRET_LEN_PTR, SECRET_LEN_RET, SERVER, SIG_LEN_ARG, SIG_LEN_PTR, SSL_ARG,
};

pub struct OpenSsl;

impl Family for OpenSsl {
    fn id(&self) -> &'static str {
        "openssl"
    }
    fn name(&self) -> &'static str {
        "OpenSSL"
    }
    fn rows(&self) -> &'static [Row] {
        ROWS
    }
    fn library_names(&self) -> &'static [&'static str] {
        &["libssl", "libcrypto"]
    }
    fn naming(&self) -> Naming {
        Naming::Symbols
    }
    fn calls(&self) -> Calls {
        Calls::Native
    }
    fn version_in(&self, bytes: &[u8]) -> Option<String> {
        find_version(bytes)
    }
    fn version_len(&self) -> usize {
        MARKER.len() + VERSION_MAX
    }
    fn describe(&self, flavor: Flavor) -> &'static str {
        match flavor {
            Flavor::Shared => "shared library",
            Flavor::Static => "linked into the executable",
            Flavor::App => "application TLS glue",
        }
    }
    fn describe_symbols(&self, symbols: Symbols) -> &'static str {
        match symbols {
            Symbols::Internal => "internal handshake functions visible",
            Symbols::Exported => "public API only",
            Symbols::None => "no OpenSSL functions",
            Symbols::ErrorSites => super::LOCATED_BY_ERROR_SITES,
        }
    }
    fn own_code(&self) -> &'static str {
        "libssl's"
    }
    fn cause_rows(&self) -> &'static [CauseRow] {
        CAUSE_ROWS
    }
    fn stage_stand_ins(&self) -> &'static [(&'static str, Stage)] {
        STAGE_STAND_INS
    }
    /// 16 bytes of key name, then the IV (ssl/t1_lib.c, tls_decrypt_ticket).
    fn ticket_key_names(&self) -> bool {
        true
    }
    /// OpenSSL 1.1.0 and later (OSSL_HANDSHAKE_STATE); 1.0.x, without TLS 1.3, has neither.
    fn state_accessors(&self) -> Option<StateAccessors> {
        Some(StateAccessors {
            state: "SSL_get_state",
            version: "SSL_version",
        })
    }
    fn record_layer(&self) -> &'static [(&'static str, Stage)] {
        &[
            ("SSL_read", Read),
            ("SSL_read_ex", Read),
            ("SSL_peek", Read),
            ("SSL_write", Write),
            ("SSL_write_ex", Write),
        ]
    }
}

pub const ROWS: &[Row] = &[
    // Handshake entry points. 1 returned from the outermost one means the handshake completed.
    row("SSL_do_handshake", Handshake, Public, SSL_ARG),
    row("SSL_accept", Handshake, Public, SSL_ARG | SERVER),
    row("SSL_connect", Handshake, Public, SSL_ARG | CLIENT),
    // The state machine: how handshakes driven from SSL_read/SSL_write (Node.js) are seen.
    row("ossl_statem_accept", Handshake, Internal, SSL_ARG | SERVER),
    row("ossl_statem_connect", Handshake, Internal, SSL_ARG | CLIENT),
    row("ssl3_accept", Handshake, Internal, SSL_ARG | SERVER),
    row("ssl3_connect", Handshake, Internal, SSL_ARG | CLIENT),
    row("ssl23_accept", Handshake, Internal, SSL_ARG | SERVER),
    row("ssl23_connect", Handshake, Internal, SSL_ARG | CLIENT),
    // Every connection passes here first (SSL_accept/SSL_connect call them too): its start and role.
    fact("SSL_set_accept_state", SSL_ARG | SERVER | CONN_START),
    fact("SSL_set_connect_state", SSL_ARG | CLIENT | CONN_START),
    // Every connection ends here: one entry hit per connection reports a handshake it abandoned.
    fact("SSL_free", SSL_ARG | CONN_END),
    // Ephemeral key generation.
    // Not EVP_PKEY_generate: EVP_PKEY_paramgen goes through it too.
    row("EVP_PKEY_keygen", Keygen, Public, 0),
    row("EC_KEY_generate_key", Keygen, Public, 0),
    row("DH_generate_key", Keygen, Public, 0),
    row("ssl_generate_pkey", Keygen, Internal, 0),
    row("ssl_generate_pkey_group", Keygen, Internal, 0),
    // Shared secret, including RSA key transport.
    op("EVP_PKEY_derive", Derive, SECRET_LEN_PTR),
    op("EVP_PKEY_decrypt", Derive, PRIVATE_KEY_OP),
    // These return the secret's length (OpenSSL 1.0.x's key exchange; inside EVP_PKEY_derive in 1.1.x).
    row("ECDH_compute_key", Derive, Public, SECRET_LEN_RET),
    row("DH_compute_key", Derive, Public, SECRET_LEN_RET),
    row("RSA_private_decrypt", Derive, Public, PRIVATE_KEY_OP),
    row("ssl_derive", Derive, Internal, 0),
    row("tls_construct_client_key_exchange", Derive, Internal, 0),
    row("tls_process_client_key_exchange", Derive, Internal, 0),
    row("ssl3_send_client_key_exchange", Derive, Internal, 0),
    row("ssl3_get_client_key_exchange", Derive, Internal, 0),
    // Signatures: ServerKeyExchange and CertificateVerify.
    op("EVP_DigestSign", Sign, PRIVATE_KEY_OP | SIG_LEN_PTR),
    op("EVP_PKEY_sign", Sign, PRIVATE_KEY_OP | SIG_LEN_PTR),
    // OpenSSL 1.1+ signs with one-shot EVP_DigestSign, which calls this inside the same `sign` call; it also
    // computes every CBC-mode record MAC. So: only with --all-probes, and no private-key flag.
    Row {
        symbol: "EVP_DigestSignFinal",
        stage: Some(Sign),
        origin: Public,
        length_query_arg: 2,
        flags: 0,
        frequent: true,
    },
    row("RSA_sign", Sign, Public, PRIVATE_KEY_OP),
    row("ECDSA_do_sign", Sign, Public, PRIVATE_KEY_OP),
    row("tls_construct_server_key_exchange", Sign, Internal, 0),
    row("tls_construct_cert_verify", Sign, Internal, 0),
    row("ssl3_send_server_key_exchange", Sign, Internal, 0),
    // Peer certificate chain and signature checks.
    row("X509_verify_cert", Verify, Public, PEER_CERT_CHECK),
    row("EVP_DigestVerify", Verify, Public, PEER_CERT_CHECK | SIG_LEN_ARG),
    row("EVP_DigestVerifyFinal", Verify, Public, PEER_CERT_CHECK | SIG_LEN_ARG),
    row("EVP_PKEY_verify", Verify, Public, PEER_CERT_CHECK | SIG_LEN_ARG),
    row("ssl_verify_cert_chain", Verify, Internal, PEER_CERT_CHECK),
    row("tls_process_cert_verify", Verify, Internal, 0),
    row("tls_process_key_exchange", Verify, Internal, 0),
    // Key schedule: PRF/HKDF and switching cipher state.
    // About 20 calls per TLS 1.3 handshake: only with --all-probes.
    frequent("EVP_KDF_derive", KeySchedule, 0),
    row("tls13_change_cipher_state", KeySchedule, Internal, 0),
    row("tls1_change_cipher_state", KeySchedule, Internal, 0),
    row("tls13_generate_secret", KeySchedule, Internal, 0),
    row("tls13_generate_handshake_secret", KeySchedule, Internal, 0),
    row("tls13_generate_master_secret", KeySchedule, Internal, 0),
    row("tls1_generate_master_secret", KeySchedule, Internal, 0),
    row("ssl_generate_master_secret", KeySchedule, Internal, 0),
    row("tls1_setup_key_block", KeySchedule, Internal, 0),
    // Resumption: session cache and tickets.
    // Session (de)serialization: several calls per handshake (nginx: ~8), so only with --all-probes.
    frequent("d2i_SSL_SESSION", Resume, 0),
    frequent("i2d_SSL_SESSION", Resume, 0),
    row("ssl_get_prev_session", Resume, Internal, 0),
    row("lookup_sess_in_cache", Resume, Internal, 0),
    row("tls_decrypt_ticket", Resume, Internal, 0),
    row("tls_construct_new_session_ticket", Resume, Internal, 0),
    row("ssl_update_cache", Resume, Internal, 0),
    row("ngx_ssl_new_session", Resume, App, 0),
    row("ngx_ssl_get_cached_session", Resume, App, 0),
    // Record layer. A handshake the application never drives itself runs inside the first of these.
    frequent("SSL_read", Read, SSL_ARG | IO_DRIVER),
    frequent("SSL_read_ex", Read, SSL_ARG | IO_DRIVER),
    frequent("SSL_write", Write, SSL_ARG | IO_DRIVER),
    frequent("SSL_write_ex", Write, SSL_ARG | IO_DRIVER),
];

/// Frames that stand for a stage frame in a sample the probes did not place (taken while they were
/// detached), where the stage function tail-calls and leaves no frame: OpenSSL 3's SSL_do_handshake jumps to
/// the state machine (its caller nginx's ngx_ssl_handshake stands for it when the library is stripped), as do
/// ossl_statem_accept and ossl_statem_connect; EVP_DigestSign jumps to EVP_DigestSignFinal.
const STAGE_STAND_INS: &[(&str, Stage)] = &[
    ("ngx_ssl_handshake", Handshake),
    ("state_machine", Handshake),
    ("EVP_DigestSignFinal", Sign),
];

/// libcrypto's and libssl's functions, by cause. First matching row wins, so narrow rows come before the
/// broad ones they carve out of.
const CAUSE_ROWS: &[CauseRow] = &[
    // Provider machinery. Contexts and parameters are in it: each one a fetch, a lookup or a provider call.
    user("EVP_*_fetch", Lookups),
    user("EVP_*_fetch_*", Lookups),
    user("*evp_generic_fetch*", Lookups),
    user("evp_*_fetch*", Lookups),
    user("ossl_method_*", Lookups),
    user("ossl_namemap_*", Lookups),
    user("namemap_*", Lookups),
    user("ossl_lib_ctx_*", Lookups),
    user("ossl_property_*", Lookups),
    user("ossl_prop_*", Lookups),
    user("ossl_provider_*", Lookups),
    user("ossl_algorithm_*", Lookups),
    user("ossl_decoder_*", Lookups),
    user("ossl_encoder_*", Lookups),
    user("ossl_sa_*", Lookups),
    user("ossl_ht_*", Lookups),
    user("ossl_bsearch", Lookups),
    user("ossl_param_*", Lookups),
    user("OSSL_*", Lookups),
    user("OPENSSL_LH_*", Lookups),
    user("OBJ_*", Lookups),
    user("EVP_get_*byname", Lookups),
    user("EVP_*_is_a", Lookups),
    user("EVP_*_get0_name", Lookups),
    user("EVP_*_get0_provider", Lookups),
    user("EVP_*_names_do_all", Lookups),
    user("EVP_*_get_params", Lookups),
    user("EVP_*_set_params", Lookups),
    user("EVP_*_get_*_param", Lookups),
    user("EVP_*_set_*_param", Lookups),
    user("EVP_*_gettable_*", Lookups),
    user("EVP_*_settable_*", Lookups),
    user("*_get_ctx_params", Lookups),
    user("*_set_ctx_params", Lookups),
    user("EVP_*_CTX_new*", Lookups),
    user("EVP_*_CTX_free", Lookups),
    user("EVP_*_CTX_reset", Lookups),
    user("EVP_*_CTX_dup", Lookups),
    user("EVP_*_CTX_ctrl*", Lookups),
    user("EVP_*_up_ref", Lookups),
    user("EVP_*_free", Lookups),
    user("EVP_DigestSignInit*", Lookups),
    user("EVP_DigestVerifyInit*", Lookups),
    user("do_sigver_init", Lookups),
    user("EVP_PKEY_digestsign_supports_digest", Lookups),
    user("EVP_PKEY_*_init*", Lookups),
    user("evp_keymgmt_*", Lookups),
    user("evp_pkey_*", Lookups),
    user("evp_md_ctx_*", Lookups),
    user("HMAC_CTX_new", Lookups),
    user("HMAC_CTX_free", Lookups),
    // Errors.
    user("ERR_*", ErrorQueue),
    user("ossl_err_*", ErrorQueue),
    // Random numbers.
    user("RAND_*", Random),
    user("rand_*", Random),
    user("ossl_rand_*", Random),
    user("EVP_RAND_*", Random),
    user("evp_rand_*", Random),
    user("drbg_*", Random),
    user("ossl_drbg_*", Random),
    user("ossl_prov_drbg_*", Random),
    user("ssl_fill_hello_random", Random),
    // Session encoding and cache.
    user("i2d_SSL_SESSION", Session),
    user("d2i_SSL_SESSION", Session),
    user("SSL_SESSION_*", Session),
    user("ssl_session_*", Session),
    user("ssl_get_new_session", Session),
    user("ssl_get_prev_session", Session),
    user("ssl_generate_session_id", Session),
    user("SSL_CTX_add_session", Session),
    user("SSL_CTX_flush_sessions*", Session),
    user("ssl_update_cache", Session),
    user("*SSL_SESSION_ASN1*", Session),
    // Signatures: hashing the message is part of them.
    user("EVP_DigestSign*", PublicKey),
    user("EVP_DigestVerify*", PublicKey),
    // MACs and hashes.
    user("EVP_Q_mac", MacHash),
    user("EVP_MAC_*", MacHash),
    user("HMAC*", MacHash),
    user("hmac_*", MacHash),
    user("ossl_hmac_*", MacHash),
    user("EVP_MD_CTX_copy*", MacHash),
    user("EVP_Digest*", MacHash),
    user("EVP_Q_digest", MacHash),
    user("SHA*", MacHash),
    user("sha*_block_*", MacHash),
    user("sha*_update", MacHash),
    user("sha*_final", MacHash),
    user("ossl_sha*", MacHash),
    user("MD5*", MacHash),
    user("md5_*", MacHash),
    user("ossl_md5*", MacHash),
    user("ssl3_finish_mac", MacHash),
    user("ssl_handshake_hash", MacHash),
    user("ssl3_digest_cached_records", MacHash),
    user("ssl3_init_finished_mac", MacHash),
    user("tls1_final_finish_mac", MacHash),
    user("tls13_final_finish_mac", MacHash),
    user("ssl_handshake_md", MacHash),
    // Key derivation.
    user("EVP_KDF_*", KeyDerivation),
    user("kdf_*", KeyDerivation),
    user("ossl_kdf_*", KeyDerivation),
    user("HKDF*", KeyDerivation),
    user("hkdf_*", KeyDerivation),
    user("tls13_hkdf_*", KeyDerivation),
    user("tls13_derive_*", KeyDerivation),
    user("tls1_PRF", KeyDerivation),
    user("tls1_prf_*", KeyDerivation),
    // Ciphers.
    user("EVP_Cipher*", Encryption),
    user("EVP_Encrypt*", Encryption),
    user("EVP_Decrypt*", Encryption),
    user("EVP_CIPHER_*", Encryption),
    user("aesni_*", Encryption),
    user("_aesni_*", Encryption),
    user("__aesni_*", Encryption),
    user("aes_*", Encryption),
    user("AES_*", Encryption),
    user("ossl_aes*", Encryption),
    user("gcm_*", Encryption),
    user("ossl_gcm_*", Encryption),
    user("CRYPTO_gcm128_*", Encryption),
    user("ChaCha20*", Encryption),
    user("chacha20_*", Encryption),
    user("ossl_chacha20*", Encryption),
    user("Poly1305*", Encryption),
    user("poly1305_*", Encryption),
    user("tls13_enc", Encryption),
    user("tls1_enc", Encryption),
    user("ssl3_enc", Encryption),
    // Certificates and ASN.1.
    user("X509*", Certificates),
    user("x509_*", Certificates),
    user("ossl_x509_*", Certificates),
    user("ASN1_*", Certificates),
    user("asn1_*", Certificates),
    user("ossl_asn1_*", Certificates),
    user("i2d_*", Certificates),
    user("d2i_*", Certificates),
    user("PEM_*", Certificates),
    user("ssl_add_cert_*", Certificates),
    user("ssl3_output_cert_chain", Certificates),
    user("ssl_cert_*", Certificates),
    user("ssl_security_cert*", Certificates),
    // Public-key arithmetic and key objects.
    user("BN_*", PublicKey),
    user("bn_*", PublicKey),
    user("ossl_bn_*", PublicKey),
    user("EC_*", PublicKey),
    user("ec_*", PublicKey),
    user("ecp_*", PublicKey),
    user("ossl_ec_*", PublicKey),
    user("ossl_ecdsa_*", PublicKey),
    user("ossl_ecdh_*", PublicKey),
    user("ECDSA_*", PublicKey),
    user("ECDH_*", PublicKey),
    user("*x25519*", PublicKey),
    user("*X25519*", PublicKey),
    user("x448*", PublicKey),
    user("fe51_*", PublicKey),
    user("fe64_*", PublicKey),
    user("RSA_*", PublicKey),
    user("rsa_*", PublicKey),
    user("rsaz_*", PublicKey),
    user("ossl_rsa_*", PublicKey),
    user("DH_*", PublicKey),
    user("dh_*", PublicKey),
    user("ossl_dh_*", PublicKey),
    user("ossl_ffc_*", PublicKey),
    user("EVP_PKEY_*", PublicKey),
    user("ssl_generate_param_group", PublicKey),
    // libssl's own code.
    user("ossl_statem_*", TlsMessages),
    user("state_machine", TlsMessages),
    user("read_state_machine", TlsMessages),
    user("write_state_machine", TlsMessages),
    user("statem_*", TlsMessages),
    user("tls_*", TlsMessages),
    user("tls1_*", TlsMessages),
    user("tls12_*", TlsMessages),
    user("tls13_*", TlsMessages),
    user("ssl3_*", TlsMessages),
    user("do_ssl3_write", TlsMessages),
    user("ssl_*", TlsMessages),
    user("SSL_*", TlsMessages),
    user("dtls*", TlsMessages),
    user("WPACKET_*", TlsMessages),
    user("wpacket_*", TlsMessages),
    user("PACKET_*", TlsMessages),
    user("custom_ext_*", TlsMessages),
    user("bytes_to_cipher_list", TlsMessages),
    // Socket I/O: the BIO layer.
    user("BIO_*", SocketIo),
    user("bio_*", SocketIo),
    user("ossl_bio_*", SocketIo),
    user("sock_read", SocketIo),
    user("sock_write", SocketIo),
    user("sock_ctrl", SocketIo),
    user("buffer_write", SocketIo),
    user("buffer_ctrl", SocketIo),
    // Memory.
    user("CRYPTO_malloc", Memory),
    user("CRYPTO_zalloc", Memory),
    user("CRYPTO_realloc", Memory),
    user("CRYPTO_clear_realloc", Memory),
    user("CRYPTO_free", Memory),
    user("CRYPTO_clear_free", Memory),
    user("CRYPTO_secure_*", Memory),
    user("OPENSSL_cleanse", Memory),
    user("BUF_MEM_*", Memory),
    // Locks.
    user("CRYPTO_THREAD_*", Locks),
    user("CRYPTO_atomic_*", Locks),
];

const MARKER: &[u8] = b"OpenSSL ";
/// Longest version string looked for, after "OpenSSL ".
const VERSION_MAX: usize = 64;

/// The OpenSSL version string compiled into a file ("OpenSSL 3.0.19 27 Jan 2026"), if `bytes` hold one.
fn find_version(bytes: &[u8]) -> Option<String> {
    memchr::memmem::find_iter(bytes, MARKER).find_map(|at| {
        let rest = &bytes[at + MARKER.len()..];
        let len = rest.iter().take(VERSION_MAX).position(|&b| b == 0)?;
        let text = std::str::from_utf8(&rest[..len]).ok()?;
        // "3.0.19 27 Jan 2026": a dotted version, then the release date. 1.1.1 releases pad a one-digit day
        // with a second space ("1.1.1k  25 Mar 2021"): shown with one.
        let words: Vec<&str> = text.split_whitespace().collect();
        let version = words.first()?;
        let dotted = version.split('.').count() == 3 && version.starts_with(|c: char| c.is_ascii_digit());
        (dotted && words.len() == 4).then(|| format!("OpenSSL {}", words.join(" ")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(crate::fuzz_config(1))]

        #[test]
        fn fuzz_version_strings(bytes in proptest::collection::vec(any::<u8>(), 0..512), text in "(OpenSSL [0-9. a-zA-Z]{0,70}\\x00?){0,3}") {
            find_version(&bytes);
            let mut both = bytes.clone();
            both.extend(text.as_bytes());
            if let Some(v) = find_version(&both) {
                prop_assert!(v.len() <= 8 + VERSION_MAX);
            }
        }
    }

    #[test]
    fn version_string_is_found_among_other_text() {
        let blob = b"\0OpenSSL %s\0OpenSSL 3.0.19 27 Jan 2026\0more";
        assert_eq!(find_version(blob).as_deref(), Some("OpenSSL 3.0.19 27 Jan 2026"));
        assert_eq!(find_version(b"OpenSSL support\0"), None);
        // An earlier "OpenSSL " with no end in sight does not stop the search.
        let mut blob = b"OpenSSL ".to_vec();
        blob.extend([b'x'; 100]);
        blob.extend(b"\0OpenSSL 3.0.2 15 Mar 2022\0");
        assert_eq!(find_version(&blob).as_deref(), Some("OpenSSL 3.0.2 15 Mar 2022"));
        // Node.js 16's OpenSSL 1.1.1 writes two spaces before the date.
        assert_eq!(
            find_version(b"\0OpenSSL 1.1.1q+quic  5 Jul 2022\0").as_deref(),
            Some("OpenSSL 1.1.1q+quic 5 Jul 2022")
        );
    }
}
