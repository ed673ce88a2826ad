// SPDX-License-Identifier: Apache-2.0
//! The cause catalogue: which function or kernel frame says what a stage's CPU went to (algorithm lookups,
//! socket I/O, MACs, ...). Each TLS library family lists its own functions (families/); here are libc's,
//! the kernel's and the applications'. Adding a function is adding a row; the rule that walks a stack is in
//! analyze/causes.rs.

use std::sync::OnceLock;

use serde::Serialize;

use super::families::{self, Family};

/// What a stage's CPU was spent on, from the frames below its stage frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// OpenSSL 3's provider machinery: algorithm fetches, name maps, property queries, parameters, the
    /// contexts made and freed around them.
    Lookups,
    /// The BIO layer, the system calls that move the bytes, and the kernel's network stack below them.
    SocketIo,
    /// MACs (Finished, tickets) and hashing of the handshake transcript.
    MacHash,
    Random,
    /// Session encoding (i2d/d2i_SSL_SESSION) and the session cache.
    Session,
    /// Certificates and ASN.1/DER encoding.
    Certificates,
    /// Record encryption of handshake messages and setting up ciphers.
    Encryption,
    /// HKDF and the TLS PRF.
    KeyDerivation,
    /// Signatures, key exchange and key generation: big-number, curve and RSA arithmetic, key objects.
    PublicKey,
    /// libssl's own work: the state machine, building and parsing messages and extensions, records.
    TlsMessages,
    /// The application's callbacks into its own code (nginx's, Node.js's JavaScript).
    Application,
    /// OpenSSL's error queue (marks set and popped around lookups that may fail).
    ErrorQueue,
    /// Memory allocation and page faults: counted only where no other cause encloses them.
    Memory,
    /// Locks and the futex calls they make: counted only where no other cause encloses them.
    Locks,
    /// A named function that no row lists.
    Other,
    /// No named frame below the stage frame: code without symbols, or a stack the unwinder lost.
    Unattributed,
}

impl Cause {
    pub const ALL: [Cause; 16] = [
        Cause::Lookups,
        Cause::SocketIo,
        Cause::MacHash,
        Cause::Random,
        Cause::Session,
        Cause::Certificates,
        Cause::Encryption,
        Cause::KeyDerivation,
        Cause::PublicKey,
        Cause::TlsMessages,
        Cause::Application,
        Cause::ErrorQueue,
        Cause::Memory,
        Cause::Locks,
        Cause::Other,
        Cause::Unattributed,
    ];

    /// The name in JSON, folded stacks and the text report.
    pub fn name(self) -> &'static str {
        match self {
            Cause::Lookups => "lookups",
            Cause::SocketIo => "socket_io",
            Cause::MacHash => "mac_hash",
            Cause::Random => "random",
            Cause::Session => "session",
            Cause::Certificates => "certificates",
            Cause::Encryption => "encryption",
            Cause::KeyDerivation => "key_derivation",
            Cause::PublicKey => "public_key",
            Cause::TlsMessages => "tls_messages",
            Cause::Application => "application",
            Cause::ErrorQueue => "error_queue",
            Cause::Memory => "memory",
            Cause::Locks => "locks",
            Cause::Other => "other",
            Cause::Unattributed => "unattributed",
        }
    }

    /// What the cause covers, for the text report; `families`: the TLS library families of the targets, each
    /// once, whose own code `tls_messages` is.
    pub fn describe(self, families: &[&dyn Family]) -> String {
        if self == Cause::TlsMessages {
            let mut owners: Vec<&str> = families.iter().map(|f| f.own_code()).collect();
            if owners.is_empty() {
                owners.push("the TLS library's");
            }
            return format!(
                "{} own code: state machine, messages, extensions, records",
                owners.join(" and ")
            );
        }
        match self {
            Cause::Lookups => "algorithm lookups: fetches, name maps, property queries, parameters, EVP contexts",
            Cause::SocketIo => "socket I/O: BIO layer, system calls, kernel network stack",
            Cause::MacHash => "MACs and transcript hashing",
            Cause::Random => "random numbers",
            Cause::Session => "session encoding and cache",
            Cause::Certificates => "certificates and ASN.1 encoding",
            Cause::Encryption => "record encryption and cipher setup",
            Cause::KeyDerivation => "key derivation (HKDF, PRF)",
            Cause::PublicKey => "public-key operations: signatures, key exchange, keys, their arithmetic",
            Cause::TlsMessages => unreachable!("described above"),
            Cause::Application => "the application's callbacks",
            Cause::ErrorQueue => "OpenSSL's error queue",
            Cause::Memory => "memory allocation and page faults",
            Cause::Locks => "locks",
            Cause::Other => "named functions no cause lists",
            Cause::Unattributed => "no named frame below the stage",
        }
        .into()
    }

    /// Memory and locks serve whatever work takes them: a fetch's lock is the fetch's cost. They count
    /// only where no other cause encloses them.
    pub fn serves_others(self) -> bool {
        matches!(self, Cause::Memory | Cause::Locks | Cause::ErrorQueue)
    }
}

/// Which frames a row matches: user-space function names, or kernel functions (--kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    User,
    Kernel,
}

/// A pattern and its cause. `*` matches any run of characters; compiler suffixes (`.part.0`, `.isra.0`,
/// `.constprop.0`, `.cold`) are taken off a name before it is matched.
#[derive(Clone, Copy, Debug)]
pub struct CauseRow {
    pub pattern: &'static str,
    pub space: Space,
    pub cause: Cause,
}

pub(crate) const fn user(pattern: &'static str, cause: Cause) -> CauseRow {
    CauseRow {
        pattern,
        space: Space::User,
        cause,
    }
}

pub(crate) const fn kernel(pattern: &'static str, cause: Cause) -> CauseRow {
    CauseRow {
        pattern,
        space: Space::Kernel,
        cause,
    }
}

use Cause::*;

/// Rows of no TLS library family's: libc, the kernel and the applications. Each family's own rows come
/// first (families::Family::cause_rows).
pub const COMMON_ROWS: &[CauseRow] = &[
    // Random numbers.
    user("getrandom", Random),
    user("__getrandom*", Random),
    kernel("__x64_sys_getrandom", Random),
    kernel("get_random_bytes*", Random),
    kernel("urandom_read*", Random),
    // Socket I/O: the system calls and the kernel's network stack.
    user("write", SocketIo),
    user("read", SocketIo),
    user("__write", SocketIo),
    user("__read", SocketIo),
    user("*libc_write", SocketIo),
    user("*libc_read", SocketIo),
    user("*libc_send*", SocketIo),
    user("*libc_recv*", SocketIo),
    user("send", SocketIo),
    user("recv", SocketIo),
    user("sendmsg", SocketIo),
    user("recvmsg", SocketIo),
    user("sendto", SocketIo),
    user("recvfrom", SocketIo),
    user("writev", SocketIo),
    user("readv", SocketIo),
    user("*_writev", SocketIo),
    user("*_readv", SocketIo),
    kernel("tcp_*", SocketIo),
    kernel("__tcp_*", SocketIo),
    kernel("sock_*", SocketIo),
    kernel("__sock_*", SocketIo),
    kernel("inet_*", SocketIo),
    kernel("ip_*", SocketIo),
    kernel("__ip_*", SocketIo),
    kernel("ip6_*", SocketIo),
    kernel("unix_stream_*", SocketIo),
    kernel("*sys_sendto", SocketIo),
    kernel("*sys_recvfrom", SocketIo),
    kernel("*sys_sendmsg", SocketIo),
    kernel("*sys_recvmsg", SocketIo),
    kernel("__dev_queue_xmit", SocketIo),
    kernel("dev_hard_start_xmit", SocketIo),
    kernel("loopback_xmit", SocketIo),
    kernel("net_rx_action", SocketIo),
    kernel("__netif_*", SocketIo),
    kernel("netif_*", SocketIo),
    kernel("process_backlog", SocketIo),
    kernel("skb_*", SocketIo),
    kernel("__skb_*", SocketIo),
    // The application.
    user("ngx_*", Application),
    user("node::*", Application),
    user("v8::*", Application),
    user("Builtins_*", Application),
    user("JS:*", Application),
    user("uv_*", Application),
    user("uv__*", Application),
    user("napi_*", Application),
    // Memory.
    user("malloc", Memory),
    user("calloc", Memory),
    user("realloc", Memory),
    user("free", Memory),
    user("cfree", Memory),
    user("__libc_malloc", Memory),
    user("__libc_calloc", Memory),
    user("__libc_realloc", Memory),
    user("__libc_free", Memory),
    user("__GI___libc_malloc", Memory),
    user("__GI___libc_free", Memory),
    user("__GI___libc_realloc", Memory),
    user("_int_malloc", Memory),
    user("_int_free*", Memory),
    user("_int_realloc", Memory),
    user("tcache_*", Memory),
    user("malloc_consolidate", Memory),
    user("sysmalloc", Memory),
    user("unlink_chunk*", Memory),
    user("__default_morecore", Memory),
    user("__brk", Memory),
    user("__sbrk", Memory),
    user("__madvise", Memory),
    user("__munmap", Memory),
    user("__mmap", Memory),
    kernel("exc_page_fault", Memory),
    kernel("asm_exc_page_fault", Memory),
    kernel("do_user_addr_fault", Memory),
    kernel("handle_mm_fault", Memory),
    kernel("__handle_mm_fault", Memory),
    kernel("*sys_brk", Memory),
    kernel("*sys_mmap", Memory),
    kernel("*sys_munmap", Memory),
    kernel("*sys_madvise", Memory),
    // Locks.
    user("*pthread_mutex_*", Locks),
    user("*pthread_rwlock_*", Locks),
    user("*pthread_spin_*", Locks),
    user("*pthread_once*", Locks),
    user("__lll_lock_*", Locks),
    user("__futex*", Locks),
    user("futex_*", Locks),
    kernel("*sys_futex", Locks),
    kernel("do_futex", Locks),
    kernel("futex_*", Locks),
    kernel("__futex_*", Locks),
];

/// Kernel frames of tlsprof's own uprobes (the breakpoint trap, the single-step, the return trampoline):
/// a sample with one of them measures the probes, whose calibrated cost is already out of the stage's CPU.
pub const PROBE_KERNEL_FRAMES: &[&str] = &[
    "asm_exc_int3",
    "exc_int3",
    "do_int3*",
    "handle_swbp",
    "asm_exc_debug",
    "exc_debug_user",
    "uprobe_*",
    "arch_uprobe_*",
    "handle_singlestep",
    "uretprobe_*",
    "handle_trampoline",
];

/// Takes the compiler's suffixes off a function name: `state_machine.part.0` is `state_machine`.
pub fn base_name(name: &str) -> &str {
    let mut base = name;
    for suffix in [".part.", ".isra.", ".constprop.", ".cold", ".lto_priv."] {
        if let Some(i) = base.find(suffix) {
            base = &base[..i];
        }
    }
    base
}

/// `*` matches any run of characters, anything else itself.
pub fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Every row, first match wins: the built-in families' own, in their order (once for families that share
/// them, as AWS-LC and BoringSSL do), then the common ones. Families' names do not overlap each other's, and
/// none is a libc, kernel or application name.
fn rows() -> &'static [CauseRow] {
    static ROWS: OnceLock<Vec<CauseRow>> = OnceLock::new();
    ROWS.get_or_init(|| {
        let mut lists: Vec<&'static [CauseRow]> = Vec::new();
        for f in families::BUILT_IN {
            if !lists.iter().any(|l| std::ptr::eq(*l, f.cause_rows())) {
                lists.push(f.cause_rows());
            }
        }
        lists.into_iter().flatten().chain(COMMON_ROWS).copied().collect()
    })
}

/// The cause a frame names, if any row lists it.
pub fn cause_of(name: &str, space: Space) -> Option<Cause> {
    let base = base_name(name);
    rows()
        .iter()
        .find(|r| r.space == space && glob(r.pattern, base))
        .map(|r| r.cause)
}

/// Whether a kernel frame is tlsprof's own uprobe machinery.
pub fn is_probe_frame(kernel_name: &str) -> bool {
    PROBE_KERNEL_FRAMES.iter().any(|p| glob(p, kernel_name))
}

/// Whether a frame has a name: not an address in a file (`libssl.so.3+0x65ee0`) or a marker (`[anon]`,
/// `[unwind gap]`, `[truncated]`, `[kernel 0x...]`).
pub fn is_named(frame: &str) -> bool {
    !(frame.is_empty() || frame.starts_with('[') || frame.starts_with("0x") || frame.contains("+0x"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn glob_matches_prefixes_suffixes_and_middles() {
        assert!(glob("EVP_*_fetch", "EVP_MD_fetch"));
        assert!(!glob("EVP_*_fetch", "EVP_MD_fetch_by_name"));
        assert!(glob("EVP_*_fetch_*", "EVP_MD_fetch_by_name"));
        assert!(glob("*libc_write", "__GI___libc_write"));
        assert!(glob("*x25519*", "ossl_x25519_public_from_private"));
        assert!(glob("write", "write"));
        assert!(!glob("write", "writev"));
        assert!(!glob("ab*ba", "aba"), "prefix and suffix may not overlap");
    }

    #[test]
    fn patterns_are_listed_once() {
        let mut seen = HashSet::new();
        for r in rows() {
            assert!(seen.insert((r.pattern, r.space)), "{} listed twice", r.pattern);
        }
    }

    #[test]
    fn every_cause_but_the_fallbacks_has_rows() {
        for cause in Cause::ALL {
            let listed = rows().iter().any(|r| r.cause == cause);
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

    #[test]
    fn probe_frames_and_unnamed_frames_are_told_apart() {
        assert!(is_probe_frame("exc_debug_user"));
        assert!(is_probe_frame("uprobe_notify_resume"));
        assert!(!is_probe_frame("irqentry_exit_to_user_mode"));
        for unnamed in ["libssl.so.3+0x65ee0", "[unwind gap]", "[anon]", "[truncated]", "0x7f00"] {
            assert!(!is_named(unnamed), "{unnamed}");
        }
        assert!(is_named("EVP_MD_fetch"));
    }
}
