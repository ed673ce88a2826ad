// SPDX-License-Identifier: Apache-2.0
//! BoringSSL with its symbols (the boring crate's build), and AWS-LC, whose libssl keeps BoringSSL's `bssl::`
//! internals under a name and version of its own: one module, two families (BORINGSSL, AWS_LC). The
//! public API is OpenSSL's (SSL_do_handshake returns 1 on completion, SSL_free ends a connection), the stages
//! are its C++ internals, matched by their names demangled without parameters (Naming::Demangled):
//! `bssl::ssl_private_key_sign` signs, the key shares' `Generate`/`Encap`/`Decap` make the key exchange,
//! `bssl::tls13_derive_*` the key schedule. A file counts as BoringSSL only with those internals: its public
//! names alone are OpenSSL's. A stripped BoringSSL of a revision with a table in bssl_sites/ has its functions
//! located by their error sites (record/discovery/error_sites.rs); any other is named, not profiled
//! (families/unsupported.rs).

use super::{Calls, Family, Flavor, Naming, SiteTable, Symbols};
use crate::catalogue::causes::Cause::*;
use crate::catalogue::causes::{user, CauseRow};
use crate::catalogue::Origin::{Internal, Public};
use crate::catalogue::Stage::{self, *};
use crate::catalogue::{
    fact, frequent, internal_fact, row, Row, CLIENT, CONN_END, CONN_START, IO_DRIVER, PEER_CERT_CHECK, PRIVATE_KEY_OP,
    SERVER, SIG_LEN_ARG, SIG_LEN_PTR, SSL_ARG, SSL_RET,
};

/// BoringSSL or a library built from it: the rows and causes are one, the name and version its own.
pub struct BoringSsl {
    id: &'static str,
    name: &'static str,
    own_code: &'static str,
    /// The version a file of this family says; a file without it is not this family's (AWS-LC's string
    /// tells its libssl from BoringSSL's), unless the family has no version string of its own.
    version: fn(&[u8]) -> Option<String>,
    version_required: bool,
    /// Its error sites by revision, for builds without symbols.
    site_tables: &'static [SiteTable],
}

pub static BORINGSSL: BoringSsl = BoringSsl {
    id: "boringssl",
    name: "BoringSSL",
    own_code: "BoringSSL's",
    // BoringSSL has no version of its own; the boring crate that built it has.
    version: |bytes| super::unsupported::crate_version(bytes, "boring").map(|v| format!("BoringSSL (the {v} crate)")),
    version_required: false,
    site_tables: &[SiteTable {
        name: "the boring 4.22.0 crate's BoringSSL",
        rows: include_str!("bssl_sites/boring-4.22.0.tsv"),
    }],
};

pub static AWS_LC: BoringSsl = BoringSsl {
    id: "aws-lc",
    name: "AWS-LC",
    own_code: "AWS-LC's",
    version: aws_lc_version,
    version_required: true,
    site_tables: &[],
};

/// "AWS-LC 5.12.0", as its version string (`OpenSSL_version`) writes it.
fn aws_lc_version(bytes: &[u8]) -> Option<String> {
    const MARKER: &[u8] = b"AWS-LC ";
    memchr::memmem::find_iter(bytes, MARKER).find_map(|at| {
        let rest = &bytes[at + MARKER.len()..];
        let len = rest
            .iter()
            .take(super::unsupported::MARKER_LEN)
            .position(|&b| !(b.is_ascii_digit() || b == b'.'))?;
        let version = std::str::from_utf8(&rest[..len]).ok()?;
        let parts: Vec<&str> = version.split('.').collect();
        (parts.len() == 3 && parts.iter().all(|p| !p.is_empty())).then(|| format!("AWS-LC {version}"))
    })
}

impl Family for BoringSsl {
    fn id(&self) -> &'static str {
        self.id
    }
    fn name(&self) -> &'static str {
        self.name
    }
    fn rows(&self) -> &'static [Row] {
        ROWS
    }
    fn library_names(&self) -> &'static [&'static str] {
        &["libssl", "libcrypto"]
    }
    fn naming(&self) -> Naming {
        Naming::Demangled
    }
    fn calls(&self) -> Calls {
        Calls::Native
    }
    fn version_in(&self, bytes: &[u8]) -> Option<String> {
        (self.version)(bytes)
    }
    fn version_len(&self) -> usize {
        super::unsupported::MARKER_LEN
    }
    fn version_required(&self) -> bool {
        self.version_required
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
            Symbols::Internal => "its bssl:: internals visible",
            Symbols::Exported => "public API only",
            Symbols::None => "none of its functions",
            Symbols::ErrorSites => super::LOCATED_BY_ERROR_SITES,
        }
    }
    fn own_code(&self) -> &'static str {
        self.own_code
    }
    fn cause_rows(&self) -> &'static [CauseRow] {
        CAUSE_ROWS
    }
    /// AWS-LC's ML-KEM key share (a hybrid group's second half); BoringSSL's hybrid shares do both halves.
    fn ml_kem_alone(&self, name: &str) -> bool {
        name.contains("::KEMKeyShare::")
    }
    fn record_layer(&self) -> &'static [(&'static str, Stage)] {
        &[("SSL_read", Read), ("SSL_write", Write)]
    }
    fn site_tables(&self) -> &'static [SiteTable] {
        self.site_tables
    }
    fn located_only(&self) -> &'static [&'static str] {
        LOCATED_ONLY
    }
}

/// Rows for builds without symbols only (ROWS says why).
const LOCATED_ONLY: &[&str] = &[
    "SSL_new",
    "bssl::ssl_parse_clienthello_tlsext",
    "bssl::ssl_add_clienthello_tlsext",
];

/// BoringSSL's own C++ function (the `bssl::` namespace).
const fn bssl(symbol: &'static str, stage: Stage, flags: u32) -> Row {
    row(symbol, stage, Internal, flags)
}

pub const ROWS: &[Row] = &[
    // Handshake entry points, as OpenSSL's. BoringSSL's state machine (bssl::ssl_run_handshake) takes the
    // handshake's state, not the SSL *: a handshake driven from SSL_read/SSL_write is seen through them.
    row("SSL_do_handshake", Handshake, Public, SSL_ARG),
    row("SSL_accept", Handshake, Public, SSL_ARG | SERVER),
    row("SSL_connect", Handshake, Public, SSL_ARG | CLIENT),
    // SSL_set_accept_state and SSL_set_connect_state are not probed: their code has no instruction the kernel
    // emulates, so every probe hit on them would be single-stepped. A connection starts with its first
    // handshake call; a server is told by work only servers do (SERVER below), a client by its ClientHello.
    internal_fact("bssl::ssl_add_client_hello", CLIENT),
    fact("SSL_free", SSL_ARG | CONN_END),
    // In a build without symbols (LOCATED_ONLY), where SSL_free, the key shares and ssl_add_client_hello
    // cannot be found: a connection starts on the SSL * SSL_new returns (an address reused after it was freed
    // starts anew), a server is told by its parsing the ClientHello's extensions, a client by its adding its
    // own.
    fact("SSL_new", SSL_RET | CONN_START),
    internal_fact("bssl::ssl_parse_clienthello_tlsext", SERVER),
    internal_fact("bssl::ssl_add_clienthello_tlsext", CLIENT),
    // Key shares: the TLS 1.3 server's Encap makes its key and the shared secret at once (X25519's key pair and
    // exchange, or a curve's Generate and Decap, inside it; for the hybrid groups the KEM's encapsulation too).
    // X25519_keypair is the X25519 key pair wherever a key share's code inlined its Generate.
    row("X25519_keypair", Keygen, Public, 0),
    bssl("bssl::(anonymous namespace)::X25519KeyShare::Generate", Keygen, 0),
    bssl("bssl::(anonymous namespace)::ECKeyShare::Generate", Keygen, 0),
    bssl(
        "bssl::(anonymous namespace)::X25519Kyber768KeyShare::Generate",
        Keygen,
        0,
    ),
    bssl(
        "bssl::(anonymous namespace)::X25519MLKEM768KeyShare::Generate",
        Keygen,
        0,
    ),
    bssl("bssl::(anonymous namespace)::X25519KeyShare::Encap", Derive, SERVER),
    bssl("bssl::(anonymous namespace)::ECKeyShare::Encap", Derive, SERVER),
    bssl(
        "bssl::(anonymous namespace)::X25519Kyber768KeyShare::Encap",
        Derive,
        SERVER,
    ),
    bssl(
        "bssl::(anonymous namespace)::X25519MLKEM768KeyShare::Encap",
        Derive,
        SERVER,
    ),
    bssl("bssl::(anonymous namespace)::X25519KeyShare::Decap", Derive, 0),
    bssl("bssl::(anonymous namespace)::ECKeyShare::Decap", Derive, 0),
    bssl("bssl::(anonymous namespace)::X25519Kyber768KeyShare::Decap", Derive, 0),
    bssl("bssl::(anonymous namespace)::X25519MLKEM768KeyShare::Decap", Derive, 0),
    // AWS-LC keeps BoringSSL's older key-share interface: Offer makes the key (X25519's is X25519_keypair,
    // above), Finish the shared secret; a server's Accept is Offer then Finish (the base class', which tells
    // the role: AWS-LC has no Encap), a KEM's own Accept encapsulates. The hybrid group's methods only call
    // its parts'.
    internal_fact("bssl::SSLKeyShare::Accept", SERVER),
    bssl("bssl::(anonymous namespace)::ECKeyShare::Offer", Keygen, 0),
    bssl("bssl::(anonymous namespace)::KEMKeyShare::Offer", Keygen, 0),
    bssl("bssl::(anonymous namespace)::X25519KeyShare::Finish", Derive, 0),
    bssl("bssl::(anonymous namespace)::ECKeyShare::Finish", Derive, 0),
    bssl("bssl::(anonymous namespace)::KEMKeyShare::Finish", Derive, 0),
    bssl("bssl::(anonymous namespace)::KEMKeyShare::Accept", Derive, SERVER),
    row("MLKEM768_encap", Derive, Public, 0),
    row("MLKEM768_decap", Derive, Public, 0),
    row("KYBER_encap", Derive, Public, 0),
    row("KYBER_decap", Derive, Public, 0),
    // RSA key transport (TLS 1.2 RSA suites) decrypts with the certificate's key.
    bssl("bssl::ssl_private_key_decrypt", Derive, PRIVATE_KEY_OP),
    // The certificate's signature: argument 3 points to its length.
    bssl("bssl::ssl_private_key_sign", Sign, PRIVATE_KEY_OP | SIG_LEN_PTR),
    // The peer's certificate chain and handshake signature.
    bssl("bssl::ssl_verify_peer_cert", Verify, PEER_CERT_CHECK),
    bssl("bssl::tls13_process_certificate_verify", Verify, 0),
    // (SSL *, Span signature, ...): the span's length is argument 3, the certificate key's signature length.
    bssl("bssl::ssl_public_key_verify", Verify, PEER_CERT_CHECK | SIG_LEN_ARG),
    // Key schedule.
    bssl("bssl::tls13_init_key_schedule", KeySchedule, 0),
    bssl("bssl::tls13_derive_handshake_secrets", KeySchedule, 0),
    bssl("bssl::tls13_derive_application_secrets", KeySchedule, 0),
    bssl("bssl::tls1_generate_master_secret", KeySchedule, 0),
    bssl("bssl::tls1_change_cipher_state", KeySchedule, 0),
    // About 20 calls per TLS 1.3 handshake: only with --all-probes.
    frequent("HKDF_expand", KeySchedule, 0),
    frequent("HKDF_extract", KeySchedule, 0),
    // Resumption: finding the offered session (cache or ticket: every TLS 1.2 server handshake), and making
    // tickets (servers only).
    bssl("bssl::ssl_get_prev_session", Resume, SERVER),
    bssl("bssl::ssl_encrypt_ticket", Resume, SERVER),
    // One per TLS 1.3 handshake beside its ticket, and inside the key schedule's: with --all-probes.
    frequent("bssl::tls13_derive_resumption_secret", Resume, 0),
    // Record layer. A handshake the application never drives itself runs inside the first of these.
    frequent("SSL_read", Read, SSL_ARG | IO_DRIVER),
    frequent("SSL_write", Write, SSL_ARG | IO_DRIVER),
];

/// BoringSSL's own functions by cause, narrow rows first. The C names it shares with OpenSSL (EVP_*, BN_*,
/// SHA*, ...) are OpenSSL's rows, which come later in the one list (families::cause_of). Stacks name C++
/// functions with their parameters (`bssl::ssl_get_prev_session(bssl::SSL_HANDSHAKE*, ...)`): their rows end
/// in `*`.
const CAUSE_ROWS: &[CauseRow] = &[
    user("CRYPTO_sysrand*", Random),
    user("CTR_DRBG_*", Random),
    user("bssl::ssl_session_*", Session),
    user("bssl::ssl_get_prev_session*", Session),
    user("bssl::ssl_get_new_session*", Session),
    user("bssl::ssl_lookup_session*", Session),
    user("bssl::ssl_encrypt_ticket*", Session),
    user("bssl::ssl_process_ticket*", Session),
    user("bssl::ssl_private_key_*", PublicKey),
    user("bssl::ssl_public_key_*", PublicKey),
    user("bssl::SSLTranscript::*", MacHash),
    user("bssl::tls13_finished_mac*", MacHash),
    user("CRYPTO_tls13_hkdf_*", KeyDerivation),
    user("CRYPTO_tls1_prf", KeyDerivation),
    user("tls1_P_hash", KeyDerivation),
    user("bssl::tls13_derive_*", KeyDerivation),
    user("bssl::tls13_advance_key_schedule*", KeyDerivation),
    user("bssl::tls13_init_key_schedule*", KeyDerivation),
    user("bssl::tls1_generate_master_secret*", KeyDerivation),
    user("EVP_AEAD_*", Encryption),
    user("aead_*", Encryption),
    user("CRYPTO_chacha_20", Encryption),
    user("bssl::SSLAEADContext::*", Encryption),
    user("bssl::tls13_set_traffic_key*", Encryption),
    user("CBS_*", Certificates),
    user("CBB_*", Certificates),
    user("CRYPTO_BUFFER_*", Certificates),
    user("bssl::ssl_add_cert_chain*", Certificates),
    user("fiat_*", PublicKey),
    user("KYBER_*", PublicKey),
    user("MLKEM*", PublicKey),
    user("mlkem_*", PublicKey),
    user("bssl::*KeyShare::*", PublicKey),
    user("CRYPTO_MUTEX_*", Locks),
    user("CRYPTO_refcount_*", Locks),
    // BoringSSL's own code: the state machine, messages, extensions, records.
    user("bssl::*", TlsMessages),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_lc_is_known_by_its_version_string() {
        let found = |bytes: &[u8]| AWS_LC.version_in(bytes);
        assert_eq!(
            found(b"\0OpenSSL 1.1.1 (compatible; AWS-LC 5.12.0)\0").as_deref(),
            Some("AWS-LC 5.12.0")
        );
        // Its other strings, and versions that are not three numbers.
        assert_eq!(found(b"AWS-LC KEM method\0AWS-LC 5.12\0AWS-LC 1..2\0"), None);
        assert!(AWS_LC.version_required() && !BORINGSSL.version_required());
        assert_eq!(BORINGSSL.version_in(b"AWS-LC 5.12.0"), None);
    }
}
