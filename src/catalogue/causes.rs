// SPDX-License-Identifier: Apache-2.0
//! The cause catalogue: which function or kernel frame says what a stage's CPU went to (algorithm lookups,
//! socket I/O, MACs, ...). Each TLS library family lists its own functions (families/), which also gathers
//! every row to look a frame up in; here are the causes, libc's, the kernel's and the applications' rows.
//! Adding a function is adding a row; the rule that walks a stack is in analyze/causes.rs.

use serde::Serialize;

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

    /// What the cause covers, for the text report; `own_code`: whose own code `tls_messages` is ("libssl's"),
    /// for each TLS library family of the targets once (Family::own_code).
    pub fn describe(self, own_code: &[&str]) -> String {
        if self == Cause::TlsMessages {
            let mut owners = own_code.to_vec();
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
/// first (families::cause_of).
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
