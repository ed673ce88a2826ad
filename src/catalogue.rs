// SPDX-License-Identifier: Apache-2.0
//! The stage catalogue: which function marks which stage. Adding a library, version or function is adding a row.

use serde::{Deserialize, Serialize};

use crate::bpf::types::{tlsprof_func_flags as ff, tlsprof_stage};

/// A stage of TLS work. Names are fixed: they appear as-is in text and JSON output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Handshake,
    Keygen,
    Derive,
    Sign,
    Verify,
    KeySchedule,
    Resume,
    Read,
    Write,
}

impl Stage {
    pub const ALL: [Stage; 9] = [
        Stage::Handshake,
        Stage::Keygen,
        Stage::Derive,
        Stage::Sign,
        Stage::Verify,
        Stage::KeySchedule,
        Stage::Resume,
        Stage::Read,
        Stage::Write,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Handshake => "handshake",
            Stage::Keygen => "keygen",
            Stage::Derive => "derive",
            Stage::Sign => "sign",
            Stage::Verify => "verify",
            Stage::KeySchedule => "key_schedule",
            Stage::Resume => "resume",
            Stage::Read => "read",
            Stage::Write => "write",
        }
    }

    /// The id the BPF side uses (bpf/tlsprof.h).
    pub fn bpf_id(self) -> tlsprof_stage {
        match self {
            Stage::Handshake => tlsprof_stage::STAGE_HANDSHAKE,
            Stage::Keygen => tlsprof_stage::STAGE_KEYGEN,
            Stage::Derive => tlsprof_stage::STAGE_DERIVE,
            Stage::Sign => tlsprof_stage::STAGE_SIGN,
            Stage::Verify => tlsprof_stage::STAGE_VERIFY,
            Stage::KeySchedule => tlsprof_stage::STAGE_KEY_SCHEDULE,
            Stage::Resume => tlsprof_stage::STAGE_RESUME,
            Stage::Read => tlsprof_stage::STAGE_READ,
            Stage::Write => tlsprof_stage::STAGE_WRITE,
        }
    }
}

/// Where a function comes from: what its presence says about the binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// OpenSSL's public API: exported by every build.
    Public,
    /// OpenSSL internals: visible only when the binary exports or keeps them (Node.js does).
    Internal,
    /// The application's own TLS glue (nginx).
    App,
}

/// Facts a function carries about the connection it works on (bpf/tlsprof.h, enum tlsprof_func_flags).
pub const SSL_ARG: u32 = ff::FF_SSL_ARG.0;
pub const SERVER: u32 = ff::FF_ROLE_SERVER.0;
pub const CLIENT: u32 = ff::FF_ROLE_CLIENT.0;
pub const PRIVATE_KEY_OP: u32 = ff::FF_PRIVATE_KEY_OP.0;
pub const PEER_CERT_CHECK: u32 = ff::FF_PEER_CERT_CHECK.0;
pub const CONN_START: u32 = ff::FF_CONN_START.0;
pub const SIG_LEN_PTR: u32 = ff::FF_SIG_LEN_PTR.0;
pub const SIG_LEN_ARG: u32 = ff::FF_SIG_LEN_ARG.0;
pub const SECRET_LEN_PTR: u32 = ff::FF_SECRET_LEN_PTR.0;

#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub symbol: &'static str,
    /// None: the function only carries facts (role, end of connection) and opens no stage.
    pub stage: Option<Stage>,
    pub origin: Origin,
    /// 1-based argument that is NULL when the call only asks for an output length (not an operation).
    pub length_query_arg: u8,
    pub flags: u32,
    /// Called many times per handshake or on every request: each probe hit costs microseconds, so it is
    /// attached only with --all-probes.
    pub frequent: bool,
}

const fn row(symbol: &'static str, stage: Stage, origin: Origin, flags: u32) -> Row {
    Row {
        symbol,
        stage: Some(stage),
        origin,
        length_query_arg: 0,
        flags,
        frequent: false,
    }
}

/// An operation whose output buffer (argument 2) is NULL on the length query libssl makes first.
const fn op(symbol: &'static str, stage: Stage, flags: u32) -> Row {
    Row {
        symbol,
        stage: Some(stage),
        origin: Origin::Public,
        length_query_arg: 2,
        flags,
        frequent: false,
    }
}

const fn fact(symbol: &'static str, flags: u32) -> Row {
    Row {
        symbol,
        stage: None,
        origin: Origin::Public,
        length_query_arg: 0,
        flags,
        frequent: false,
    }
}

const fn frequent(symbol: &'static str, stage: Stage) -> Row {
    Row {
        symbol,
        stage: Some(stage),
        origin: Origin::Public,
        length_query_arg: 0,
        flags: 0,
        frequent: true,
    }
}

use Origin::{App, Internal, Public};
use Stage::*;

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
    row("ECDH_compute_key", Derive, Public, 0),
    row("DH_compute_key", Derive, Public, 0),
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
    frequent("EVP_KDF_derive", KeySchedule),
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
    frequent("d2i_SSL_SESSION", Resume),
    frequent("i2d_SSL_SESSION", Resume),
    row("ssl_get_prev_session", Resume, Internal, 0),
    row("lookup_sess_in_cache", Resume, Internal, 0),
    row("tls_decrypt_ticket", Resume, Internal, 0),
    row("tls_construct_new_session_ticket", Resume, Internal, 0),
    row("ssl_update_cache", Resume, Internal, 0),
    row("ngx_ssl_new_session", Resume, App, 0),
    row("ngx_ssl_get_cached_session", Resume, App, 0),
    // Record layer.
    frequent("SSL_read", Read),
    frequent("SSL_read_ex", Read),
    frequent("SSL_write", Write),
    frequent("SSL_write_ex", Write),
];

/// Builds the BPF attach cookie of a function (bpf/tlsprof.h, COOKIE_*); `stepped`: see prologue.rs.
pub fn cookie(func_id: u16, row: &Row, stepped: bool) -> u64 {
    let stage = row.stage.map_or(tlsprof_stage::STAGE_NONE.0, |s| s.bpf_id().0) as u64;
    let flags = row.flags | if stepped { ff::FF_STEPPED.0 } else { 0 };
    u64::from(func_id) | stage << 16 | u64::from(row.length_query_arg) << 24 | u64::from(flags) << 32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn find(symbol: &str) -> Option<&'static Row> {
        ROWS.iter().find(|r| r.symbol == symbol)
    }

    #[test]
    fn symbols_are_unique() {
        let mut seen = HashSet::new();
        for r in ROWS {
            assert!(seen.insert(r.symbol), "{} listed twice", r.symbol);
        }
    }

    #[test]
    fn every_stage_has_a_public_marker() {
        for stage in Stage::ALL {
            assert!(
                ROWS.iter()
                    .any(|r| r.stage == Some(stage) && r.origin == Origin::Public),
                "{} has no function in the public API",
                stage.name()
            );
        }
    }

    #[test]
    fn cookie_packs_the_header_layout() {
        let r = find("EVP_PKEY_decrypt").unwrap();
        let c = cookie(513, r, false);
        assert_eq!(c & 0xffff, 513);
        assert_eq!((c >> 16) & 0xff, u64::from(tlsprof_stage::STAGE_DERIVE.0));
        assert_eq!((c >> 24) & 0xff, 2);
        assert_eq!((c >> 32) & 0xffff, u64::from(PRIVATE_KEY_OP));
        let stepped = cookie(513, r, true);
        assert_eq!((stepped >> 32) & 0xffff, u64::from(PRIVATE_KEY_OP | ff::FF_STEPPED.0));
    }

    #[test]
    fn stage_names_round_trip_through_json() {
        for stage in Stage::ALL {
            let json = serde_json::to_string(&stage).unwrap();
            assert_eq!(json, format!("\"{}\"", stage.name()));
            assert_eq!(serde_json::from_str::<Stage>(&json).unwrap(), stage);
        }
    }

    #[test]
    fn record_layer_is_probed_only_on_request() {
        for r in ROWS
            .iter()
            .filter(|r| matches!(r.stage, Some(Stage::Read | Stage::Write)))
        {
            assert!(r.frequent, "{} would cost a probe hit on every request", r.symbol);
        }
    }
}
