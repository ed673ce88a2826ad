// SPDX-License-Identifier: Apache-2.0
//! TLS library families: each one module implementing [`Family`], which says everything tlsprof knows of
//! that library: how a file names its functions, which mark which stage, how they take their arguments,
//! where its version is written, its record layer, its own code's frames for causes, and how the report
//! names it. Detection (record/discovery/objects.rs) tries each family of a list in turn, as `BUILT_IN` orders them;
//! the rest of tlsprof asks a library's family by its id ([`named`]) and never matches on which it is. The
//! families' cause rows and the common ones (catalogue/causes.rs) are looked up together here ([`cause_of`]).

pub mod boringssl;
pub mod go;
pub mod openssl;
pub mod rustls;
pub mod unsupported;

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::causes::{base_name, glob, Cause, CauseRow, Space, COMMON_ROWS};
use super::servers::Server;
use super::{Row, Stage, GO_ABI};

/// A TLS library family.
pub trait Family: Sync {
    /// Its name in recordings and reports (`Library::family`): stable across releases.
    fn id(&self) -> &'static str;
    /// Its name for people ("OpenSSL").
    fn name(&self) -> &'static str;
    /// The functions that mark its stages and carry facts about connections.
    fn rows(&self) -> &'static [Row];
    /// How the shared libraries that may hold its code are named: prefixes of their file names ("libssl").
    /// Executables are looked at whatever their name.
    fn library_names(&self) -> &'static [&'static str] {
        &[]
    }
    /// How a file names the functions of `rows`.
    fn naming(&self) -> Naming;
    /// Prefixes its C code's names carry, each followed by a version (`aws_lc_0_47_0_EVP_DigestSign`): with
    /// Naming::Demangled, rows name such functions without them.
    fn versioned_prefixes(&self) -> &'static [&'static str] {
        &[]
    }
    /// How its functions take arguments and return.
    fn calls(&self) -> Calls;
    /// Its version, from a stretch of a file's bytes that holds a whole version string if the file has one
    /// (families named by a Go function table read it from the build information instead).
    fn version_in(&self, _bytes: &[u8]) -> Option<String> {
        None
    }
    /// A file is this family's only if `version_in` finds its version string there: its functions alone are
    /// another family's too (AWS-LC's libssl keeps BoringSSL's).
    fn version_required(&self) -> bool {
        false
    }
    /// The longest version string `version_in` reads: how much of a file a scan keeps between stretches.
    fn version_len(&self) -> usize {
        0
    }
    /// What the report says a file of this family is, linked that way.
    fn describe(&self, flavor: Flavor) -> &'static str;
    /// What the report says the file's symbols let tlsprof see.
    fn describe_symbols(&self, symbols: Symbols) -> &'static str;
    /// Whose code the `tls_messages` cause is ("libssl's"), before " own code".
    fn own_code(&self) -> &'static str;
    /// Which of its own functions name which cause, narrow patterns first.
    fn cause_rows(&self) -> &'static [CauseRow];
    /// Frames that stand for a stage frame its code tail-calls away: samples taken while the probes were
    /// detached are placed by them (analyze/attribution.rs).
    fn stage_stand_ins(&self) -> &'static [(&'static str, Stage)] {
        &[]
    }
    /// The kind of server any program on this family is, configured through it whatever the program is
    /// called (Go's tls.Config); None where the program decides (nginx and Node.js both run OpenSSL).
    fn server(&self) -> Option<Server> {
        None
    }
    /// The record layer's functions: they place CPU samples in the read and write stages when those are not
    /// probed.
    fn record_layer(&self) -> &'static [(&'static str, Stage)];
    /// Whether its function `name` is ML-KEM's work alone, apart from the classical half of a hybrid group:
    /// what the hybrid group's advice weighs.
    fn ml_kem_alone(&self, _name: &str) -> bool {
        false
    }
    /// Its session tickets open with the name of the key that encrypted them, so a refused ticket tells
    /// whether the server held its key.
    fn ticket_key_names(&self) -> bool {
        false
    }
    /// Tables of its error sites, one per revision, by which its functions are found in a build without
    /// symbols (record/discovery/error_sites.rs).
    fn site_tables(&self) -> &'static [SiteTable] {
        &[]
    }
    /// Rows probed only in a build whose functions were located by their error sites: with its symbols,
    /// other functions tell the same at less cost.
    fn located_only(&self) -> &'static [&'static str] {
        &[]
    }
    /// Its accessors of a connection's handshake state and protocol version (each a load from the object
    /// its first argument points to): where they are read off its code, a handshake call that fails after its
    /// handshake completed is told from one that failed in it (bpf/tlsprof.h, struct ssl_layout).
    fn state_accessors(&self) -> Option<StateAccessors> {
        None
    }
}

/// The functions whose code shows where a family keeps a connection's handshake state and version.
#[derive(Clone, Copy, Debug)]
pub struct StateAccessors {
    pub state: &'static str,
    pub version: &'static str,
}

/// The revisions `families` have error-site tables of, for people.
pub fn site_table_names(families: &[&dyn Family]) -> String {
    let names: Vec<&str> = families
        .iter()
        .flat_map(|f| f.site_tables().iter().map(|t| t.name))
        .collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// What the report says of a file whose functions were located by their error sites.
pub const LOCATED_BY_ERROR_SITES: &str = "no symbols: functions located by the source lines of their errors";

/// A table of a revision's error sites: each (file, line) its code raises an error at, and the function that
/// line lies in, from a build of that revision with its symbols (scripts/bssl_sites.rs writes them). A line
/// of an inlined function lies in each function it was inlined into.
pub struct SiteTable {
    /// Which revision, for people ("the boring 4.22.0 crate's BoringSSL").
    pub name: &'static str,
    /// `file<TAB>line<TAB>function` lines; `#` starts a comment.
    pub rows: &'static str,
}

impl SiteTable {
    pub fn rows(&self) -> impl Iterator<Item = (&'static str, u32, &'static str)> {
        self.rows.lines().filter(|l| !l.starts_with('#')).filter_map(|l| {
            let mut fields = l.split('\t');
            let (file, line, function) = (fields.next()?, fields.next()?, fields.next()?);
            Some((file, line.parse().ok()?, function))
        })
    }
}

/// How a file names a family's functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// ELF symbol tables (.dynsym, .symtab).
    Symbols,
    /// A Go executable's function table (pclntab), which stripped builds keep.
    GoFunctionTable,
    /// ELF symbol tables whose names carry marks of the build: Rust's mangling with its hash, a C library's
    /// version prefix (`Family::versioned_prefixes`): rows name functions without them
    /// (record/discovery/names.rs). A file is the family's only if it defines one of the family's own
    /// functions (Origin::Internal): its C library's names alone may be any OpenSSL's.
    Demangled,
}

/// How a family's functions are called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Calls {
    /// The platform's C convention: arguments in registers, a return probe on each call.
    Native,
    /// Go's register ABI on goroutine stacks, which the kernel's return probes would corrupt: entry-style
    /// probes at the entry and at every exit site (FF_GO_ABI in the cookie).
    GoRegisters,
}

impl Calls {
    /// The function flags the BPF programs need to read such a call (bpf/tlsprof.h).
    pub fn cookie_flags(self) -> u32 {
        match self {
            Calls::Native => 0,
            Calls::GoRegisters => GO_ABI,
        }
    }
}

/// How a file holds a family's code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavor {
    /// A shared library (libssl/libcrypto).
    Shared,
    /// Linked into the executable (Node.js, a Go program).
    Static,
    /// Only the application's own TLS glue (nginx's session cache callbacks).
    App,
}

/// Which of the family's functions the file lets us see.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Symbols {
    /// Only the public API: stages are seen through its exported calls.
    Exported,
    /// Internal handshake functions too (tls_construct_*, ssl_derive, ...).
    Internal,
    /// None of the library's functions: application functions only.
    None,
    /// No symbols: its functions located by their error sites (Family::site_tables).
    ErrorSites,
}

/// The families tlsprof knows, in the order detection tries them: a Go executable is Go's before any
/// symbol in it is looked up; BoringSSL's and rustls' files (found by their own internals) before OpenSSL's
/// public names, which BoringSSL and AWS-LC share; AWS-LC (known by its version string) before the
/// BoringSSL whose internals it keeps.
pub static BUILT_IN: &[&dyn Family] = &[
    &go::Go,
    &rustls::Rustls,
    &boringssl::AWS_LC,
    &boringssl::BORINGSSL,
    &openssl::OpenSsl,
];

/// The names of `families` for a message: "Go crypto/tls, rustls, AWS-LC, BoringSSL or OpenSSL".
pub fn names(families: &[&dyn Family]) -> String {
    let names: Vec<&str> = families.iter().map(|f| f.name()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// The built-in families of these ids, each once, in the order first named (a recording's libraries).
pub fn of_ids<'a>(ids: impl IntoIterator<Item = &'a str>) -> Vec<&'static dyn Family> {
    let mut out: Vec<&'static dyn Family> = Vec::new();
    for f in ids.into_iter().filter_map(named) {
        if !out.iter().any(|known| known.id() == f.id()) {
            out.push(f);
        }
    }
    out
}

/// How the report names the record layer's `stage` (read or write) in these families' terms: each
/// family's first function of it, "SSL_read" or "SSL_read or crypto/tls.(*Conn).Read"; the stage's name
/// where none names it.
pub fn record_layer_name(families: &[&dyn Family], stage: Stage) -> String {
    let names: Vec<&str> = families
        .iter()
        .filter_map(|f| {
            f.record_layer()
                .iter()
                .find(|&&(_, s)| s == stage)
                .map(|&(name, _)| name)
        })
        .collect();
    if names.is_empty() {
        stage.name().to_string()
    } else {
        names.join(" or ")
    }
}

/// The built-in family of that id; None for one this tlsprof does not know (a recording made with a
/// family added through the library).
pub fn named(id: &str) -> Option<&'static dyn Family> {
    BUILT_IN.iter().copied().find(|f| f.id() == id)
}

/// Every cause row, first match wins: the built-in families' own, in their order (once for families that share
/// them, as AWS-LC and BoringSSL do), then the common ones. Families' names do not overlap each other's, and
/// none is a libc, kernel or application name.
fn cause_rows() -> &'static [CauseRow] {
    static ROWS: OnceLock<Vec<CauseRow>> = OnceLock::new();
    ROWS.get_or_init(|| {
        let mut lists: Vec<&'static [CauseRow]> = Vec::new();
        for f in BUILT_IN {
            if !lists.iter().any(|l| std::ptr::eq(*l, f.cause_rows())) {
                lists.push(f.cause_rows());
            }
        }
        lists
            .into_iter()
            .flatten()
            .chain(super::jsse::CAUSE_ROWS)
            .chain(COMMON_ROWS)
            .copied()
            .collect()
    })
}

/// The cause a frame names, if any row lists it.
pub fn cause_of(name: &str, space: Space) -> Option<Cause> {
    let base = base_name(name);
    cause_rows()
        .iter()
        .find(|r| r.space == space && glob(r.pattern, base))
        .map(|r| r.cause)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_and_found_by_name() {
        let mut seen = HashSet::new();
        for f in BUILT_IN {
            assert!(seen.insert(f.id()), "{} twice", f.id());
            assert_eq!(named(f.id()).unwrap().id(), f.id());
        }
        assert!(named("no such family").is_none());
    }

    #[test]
    fn families_are_named_in_a_list() {
        assert_eq!(names(BUILT_IN), "Go crypto/tls, rustls, AWS-LC, BoringSSL or OpenSSL");
        assert_eq!(names(&BUILT_IN[..1]), "Go crypto/tls");
        assert_eq!(names(&[]), "");
    }

    #[test]
    fn the_record_layer_is_named_in_each_family_s_terms() {
        let both = of_ids(["openssl", "go", "openssl", "no such family"]);
        assert_eq!(both.len(), 2);
        assert_eq!(record_layer_name(&both[..1], Stage::Read), "SSL_read");
        assert_eq!(
            record_layer_name(&both, Stage::Write),
            "SSL_write or crypto/tls.(*Conn).Write"
        );
        assert_eq!(record_layer_name(&[], Stage::Read), "read");
    }

    #[test]
    fn every_stage_has_a_marker_in_every_family() {
        for f in BUILT_IN {
            for stage in Stage::ALL {
                assert!(
                    f.rows().iter().any(|r| r.stage == Some(stage)),
                    "{}: {} has no function",
                    f.id(),
                    stage.name()
                );
            }
        }
    }

    #[test]
    fn symbols_are_unique_within_a_family() {
        for f in BUILT_IN {
            let mut seen = HashSet::new();
            for r in f.rows() {
                assert!(seen.insert(r.symbol), "{}: {} listed twice", f.id(), r.symbol);
            }
        }
    }

    #[test]
    fn record_layer_is_probed_only_on_request() {
        for f in BUILT_IN {
            for r in f
                .rows()
                .iter()
                .filter(|r| matches!(r.stage, Some(Stage::Read | Stage::Write)))
            {
                assert!(r.frequent, "{} would cost a probe hit on every request", r.symbol);
                assert!(
                    f.record_layer()
                        .iter()
                        .any(|&(name, stage)| name == r.symbol && Some(stage) == r.stage),
                    "{}: {} is not sampled as the record layer",
                    f.id(),
                    r.symbol
                );
            }
        }
    }

    #[test]
    fn patterns_are_listed_once() {
        let mut seen = HashSet::new();
        for r in cause_rows() {
            assert!(seen.insert((r.pattern, r.space)), "{} listed twice", r.pattern);
        }
    }

    #[test]
    fn every_cause_but_the_fallbacks_has_rows() {
        for cause in Cause::ALL {
            let listed = cause_rows().iter().any(|r| r.cause == cause);
            assert_eq!(
                listed,
                !matches!(cause, Cause::Other | Cause::Unattributed),
                "{}",
                cause.name()
            );
        }
    }

    #[test]
    fn frames_name_their_causes() {
        use Cause::*;
        use Space::*;
        let cases = [
            ("EVP_KDF_fetch", User, Lookups),
            ("inner_evp_generic_fetch.constprop.0", User, Lookups),
            ("OPENSSL_LH_doall_arg", User, Lookups),
            ("OSSL_PARAM_locate", User, Lookups),
            ("EVP_PKEY_CTX_new_from_name", User, Lookups),
            ("EVP_DigestSignInit_ex", User, Lookups),
            ("EVP_KDF_CTX_free", User, Lookups),
            ("EVP_Q_mac", User, MacHash),
            ("HMAC_Final", User, MacHash),
            ("EVP_DigestUpdate", User, MacHash),
            ("sha512_block_data_order_avx2", User, MacHash),
            ("RAND_bytes_ex", User, Random),
            ("i2d_SSL_SESSION", User, Session),
            ("d2i_SSL_SESSION", User, Session),
            ("d2i_X509", User, Certificates),
            ("EVP_CipherInit_ex", User, Encryption),
            ("EVP_EncryptUpdate", User, Encryption),
            ("EVP_KDF_derive", User, KeyDerivation),
            ("ecp_nistz256_point_mul", User, PublicKey),
            ("EVP_PKEY_generate", User, PublicKey),
            ("EVP_DigestSignFinal", User, PublicKey),
            ("state_machine.part.0", User, TlsMessages),
            ("tls_construct_server_hello", User, TlsMessages),
            ("BIO_ctrl", User, SocketIo),
            ("__GI___libc_write", User, SocketIo),
            (
                "node::crypto::TLSWrap::SSLInfoCallback(ssl_st const*, int, int)",
                User,
                Application,
            ),
            ("__GI___libc_free", User, Memory),
            ("_int_free", User, Memory),
            ("__pthread_rwlock_rdlock_full64", User, Locks),
            ("CRYPTO_THREAD_read_lock", User, Locks),
            ("ERR_set_mark", User, ErrorQueue),
            ("tcp_sendmsg_locked", Kernel, SocketIo),
            ("__tcp_transmit_skb", Kernel, SocketIo),
            ("asm_exc_page_fault", Kernel, Memory),
            ("__x64_sys_futex", Kernel, Locks),
        ];
        for (name, space, cause) in cases {
            assert_eq!(cause_of(name, space), Some(cause), "{name}");
        }
        let go = [
            ("crypto/internal/fips140/sha512.blockAVX2", MacHash),
            ("crypto/internal/fips140/nistec.p256OrdMul", PublicKey),
            ("p256MulInternal", PublicKey),
            ("crypto/ecdh.x25519ScalarMult", PublicKey),
            ("crypto/internal/fips140/mlkem.sampleNTT", PublicKey),
            ("crypto/internal/fips140/sha3.keccakF1600", PublicKey),
            (
                "crypto/internal/fips140/hmac.New[go.shape.interface { BlockSize() int }]",
                MacHash,
            ),
            (
                "crypto/internal/fips140/tls13.NewEarlySecret[go.shape.interface { Reset() }]",
                KeyDerivation,
            ),
            ("crypto/tls.(*halfConn).encrypt", Encryption),
            ("crypto/tls.(*Conn).writeRecordLocked", TlsMessages),
            ("crypto/tls.(*Conn).write", SocketIo),
            ("internal/poll.(*FD).Write", SocketIo),
            ("crypto/tls.(*serverHandshakeStateTLS13).handshake", TlsMessages),
            ("vendor/golang.org/x/crypto/cryptobyte.(*Builder).AddBytes", TlsMessages),
            ("crypto/x509.ParseCertificate", Certificates),
            ("runtime.mallocgc", Memory),
            ("runtime.adjustframe", Memory),
        ];
        for (name, cause) in go {
            assert_eq!(cause_of(name, User), Some(cause), "{name}");
        }
        for generic in [
            "__strcmp_evex",
            "__memcpy_avx512_unaligned_erms",
            "main",
            "runtime.memmove",
        ] {
            assert_eq!(cause_of(generic, User), None, "{generic}");
        }
        assert_eq!(
            cause_of("tcp_sendmsg", User),
            None,
            "kernel rows only match kernel frames"
        );
    }
}
