// SPDX-License-Identifier: Apache-2.0
//! The cause catalogue: which function or kernel frame says what a stage's CPU went to (algorithm lookups,
//! socket I/O, MACs, ...). Names a stripped library still exports, the internals a build may keep, libc's and
//! the kernel's. Adding a function is adding a row; the rule that walks a stack is in analyze/causes.rs.

use serde::Serialize;

use super::{Family, Stage};

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

    /// What the cause covers, for the text report; `families`: the TLS library families of the targets,
    /// whose own code `tls_messages` is.
    pub fn describe(self, families: &[Family]) -> &'static str {
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
            Cause::TlsMessages => match (families.contains(&Family::OpenSsl), families.contains(&Family::Go)) {
                (true, true) => {
                    "libssl's and Go's crypto/tls package's own code: state machine, messages, extensions, records"
                }
                (false, true) => "Go's crypto/tls package's own code: state machine, messages, extensions, records",
                _ => "libssl's own code: state machine, messages, extensions, records",
            },
            Cause::Application => "the application's callbacks",
            Cause::ErrorQueue => "OpenSSL's error queue",
            Cause::Memory => "memory allocation and page faults",
            Cause::Locks => "locks",
            Cause::Other => "named functions no cause lists",
            Cause::Unattributed => "no named frame below the stage",
        }
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

const fn user(pattern: &'static str, cause: Cause) -> CauseRow {
    CauseRow {
        pattern,
        space: Space::User,
        cause,
    }
}

const fn kernel(pattern: &'static str, cause: Cause) -> CauseRow {
    CauseRow {
        pattern,
        space: Space::Kernel,
        cause,
    }
}

use Cause::*;

/// First matching row wins, so narrow rows come before the broad ones they carve out of.
pub const ROWS: &[CauseRow] = &[
    // Go (names from its function table; Go 1.24 moved primitives under crypto/internal/fips140/, and the
    // vendored x/crypto packages carry a vendor/ prefix). The broad crypto/tls row comes last among them.
    user("crypto/rand.*", Random),
    user("crypto/internal/sysrand.*", Random),
    user("crypto/internal/fips140/drbg.*", Random),
    user("crypto/internal/randutil.*", Random),
    // SHA-3/SHAKE: in a handshake, only ML-KEM's sampling and hashing uses them.
    user("crypto/internal/fips140/sha3.*", PublicKey),
    user("crypto/sha256.*", MacHash),
    user("crypto/sha512.*", MacHash),
    user("crypto/internal/fips140/sha256.*", MacHash),
    user("crypto/internal/fips140/sha512.*", MacHash),
    user("crypto/hmac.*", MacHash),
    user("crypto/internal/fips140/hmac.*", MacHash),
    user("crypto/tls.(*finishedHash).*", MacHash),
    user("crypto/hkdf.*", KeyDerivation),
    user("crypto/internal/fips140/hkdf.*", KeyDerivation),
    user("*golang.org/x/crypto/hkdf.*", KeyDerivation),
    user("crypto/internal/fips140/tls12.*", KeyDerivation),
    user("crypto/internal/fips140/tls13.*", KeyDerivation),
    user("crypto/tls.(*cipherSuiteTLS13).*", KeyDerivation),
    user("crypto/tls.prf*", KeyDerivation),
    user("crypto/tls.pHash", KeyDerivation),
    user("crypto/aes.*", Encryption),
    user("crypto/cipher.*", Encryption),
    user("crypto/internal/fips140/aes*", Encryption),
    user("*golang.org/x/crypto/chacha20*", Encryption),
    user("crypto/tls.(*halfConn).*", Encryption),
    user("crypto/ecdh.*", PublicKey),
    user("crypto/ecdsa.*", PublicKey),
    user("crypto/rsa.*", PublicKey),
    user("crypto/ed25519.*", PublicKey),
    user("crypto/elliptic.*", PublicKey),
    user("crypto/mlkem.*", PublicKey),
    user("crypto.SignMessage", PublicKey),
    user("crypto/internal/fips140/ecdh.*", PublicKey),
    user("crypto/internal/fips140/ecdsa.*", PublicKey),
    user("crypto/internal/fips140/rsa.*", PublicKey),
    user("crypto/internal/fips140/ed25519.*", PublicKey),
    user("crypto/internal/fips140/mlkem.*", PublicKey),
    user("crypto/internal/fips140/nistec*", PublicKey),
    user("crypto/internal/fips140/edwards25519*", PublicKey),
    user("crypto/internal/fips140/bigmod.*", PublicKey),
    user("crypto/internal/nistec*", PublicKey),
    user("crypto/internal/edwards25519*", PublicKey),
    user("crypto/internal/bigmod.*", PublicKey),
    user("crypto/internal/mlkem768.*", PublicKey),
    user("*golang.org/x/crypto/curve25519*", PublicKey),
    user("math/big.*", PublicKey),
    // nistec's assembly helpers, named without their package.
    user("p256*Internal", PublicKey),
    user("crypto/x509.*", Certificates),
    user("encoding/asn1.*", Certificates),
    user("crypto/tls.(*SessionState).*", Session),
    user("crypto/tls.ParseSessionState", Session),
    user("crypto/tls.(*lruSessionCache).*", Session),
    user("crypto/tls.(*Conn).readRecord*", SocketIo),
    user("crypto/tls.(*Conn).readFromUntil", SocketIo),
    user("crypto/tls.(*Conn).write", SocketIo),
    user("crypto/tls.(*Conn).flush", SocketIo),
    user("net.(*conn).*", SocketIo),
    user("net.(*netFD).*", SocketIo),
    user("internal/poll.*", SocketIo),
    user("syscall.*", SocketIo),
    user("internal/runtime/syscall*", SocketIo),
    user("runtime/internal/syscall.*", SocketIo),
    user("crypto/tls.*", TlsMessages),
    user("*golang.org/x/crypto/cryptobyte*", TlsMessages),
    // Allocation, the garbage collector's assists, and stack growth.
    user("runtime.mallocgc*", Memory),
    user("runtime.newobject", Memory),
    user("runtime.makeslice*", Memory),
    user("runtime.growslice", Memory),
    user("runtime.gcAssistAlloc*", Memory),
    user("runtime.morestack*", Memory),
    user("runtime.newstack", Memory),
    user("runtime.copystack", Memory),
    user("runtime.adjustframe", Memory),
    user("sync.(*Mutex).*", Locks),
    user("runtime.lock*", Locks),
    user("runtime.unlock*", Locks),
    user("runtime.futex*", Locks),
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
    user("getrandom", Random),
    user("__getrandom*", Random),
    kernel("__x64_sys_getrandom", Random),
    kernel("get_random_bytes*", Random),
    kernel("urandom_read*", Random),
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
    // Socket I/O: the BIO layer, the system calls and the kernel's network stack.
    user("BIO_*", SocketIo),
    user("bio_*", SocketIo),
    user("ossl_bio_*", SocketIo),
    user("sock_read", SocketIo),
    user("sock_write", SocketIo),
    user("sock_ctrl", SocketIo),
    user("buffer_write", SocketIo),
    user("buffer_ctrl", SocketIo),
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
    user("CRYPTO_malloc", Memory),
    user("CRYPTO_zalloc", Memory),
    user("CRYPTO_realloc", Memory),
    user("CRYPTO_clear_realloc", Memory),
    user("CRYPTO_free", Memory),
    user("CRYPTO_clear_free", Memory),
    user("CRYPTO_secure_*", Memory),
    user("OPENSSL_cleanse", Memory),
    user("BUF_MEM_*", Memory),
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
    user("CRYPTO_THREAD_*", Locks),
    user("CRYPTO_atomic_*", Locks),
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

/// Frames that stand for a stage frame in a sample the probes did not place (taken while they were
/// detached), where the stage function tail-calls and leaves no frame: OpenSSL 3's SSL_do_handshake jumps to
/// the state machine (its caller nginx's ngx_ssl_handshake stands for it when the library is stripped), as do
/// ossl_statem_accept and ossl_statem_connect; EVP_DigestSign jumps to EVP_DigestSignFinal.
pub const STAGE_STAND_INS: &[(&str, Stage)] = &[
    ("ngx_ssl_handshake", Stage::Handshake),
    ("state_machine", Stage::Handshake),
    ("EVP_DigestSignFinal", Stage::Sign),
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

/// The cause a frame names, if any row lists it.
pub fn cause_of(name: &str, space: Space) -> Option<Cause> {
    let base = base_name(name);
    ROWS.iter()
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
        for r in ROWS {
            assert!(seen.insert((r.pattern, r.space)), "{} listed twice", r.pattern);
        }
    }

    #[test]
    fn every_cause_but_the_fallbacks_has_rows() {
        for cause in Cause::ALL {
            let listed = ROWS.iter().any(|r| r.cause == cause);
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
