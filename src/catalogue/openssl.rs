// SPDX-License-Identifier: Apache-2.0
//! OpenSSL's functions (1.0 to 3.x, shared or linked in): the public API every build exports, the
//! internals some builds keep (Node.js), and nginx's TLS glue.

use super::Origin::{App, Internal, Public};
use super::Stage::*;
use super::{
    fact, frequent, op, row, Row, CLIENT, CONN_END, CONN_START, IO_DRIVER, PEER_CERT_CHECK, PRIVATE_KEY_OP,
    SECRET_LEN_PTR, SECRET_LEN_RET, SERVER, SIG_LEN_ARG, SIG_LEN_PTR, SSL_ARG,
};

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
