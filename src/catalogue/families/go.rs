// SPDX-License-Identifier: Apache-2.0
//! Go's crypto/tls (Go 1.21 and later) and the runtime's scheduler. A row names a function as Go's function
//! table does, less any type parameters: generic functions carry a `[go.shape...]` list per instance, which
//! `base_name` drops. Go 1.24 moved primitives under crypto/internal/fips140/...: both places are listed.

use super::{Calls, Family, Flavor, Naming, Symbols};
use crate::catalogue::causes::Cause::*;
use crate::catalogue::causes::{user, CauseRow};
use crate::catalogue::servers::Server;
use crate::catalogue::Origin::Go as GoCode;
use crate::catalogue::Stage::{self, *};
use crate::catalogue::{
    Row, CLIENT, CONN_START, GO_SIG_STACK_ARG, G_END, G_RUN, G_STOP, PEER_CERT_CHECK, PRIVATE_KEY_OP, QUIC_HELLO,
    SERVER, SIG_RESULT, SSL_ARG,
};

pub struct Go;

impl Family for Go {
    fn id(&self) -> &'static str {
        "go"
    }
    fn name(&self) -> &'static str {
        "Go crypto/tls"
    }
    fn rows(&self) -> &'static [Row] {
        ROWS
    }
    fn naming(&self) -> Naming {
        Naming::GoFunctionTable
    }
    fn calls(&self) -> Calls {
        Calls::GoRegisters
    }
    fn describe(&self, _flavor: Flavor) -> &'static str {
        "Go crypto/tls"
    }
    fn describe_symbols(&self, symbols: Symbols) -> &'static str {
        match symbols {
            Symbols::Internal => "internal handshake functions visible",
            Symbols::Exported => "public API only",
            Symbols::None => "no crypto/tls functions",
            Symbols::ErrorSites => super::LOCATED_BY_ERROR_SITES,
        }
    }
    fn own_code(&self) -> &'static str {
        "Go's crypto/tls package's"
    }
    fn cause_rows(&self) -> &'static [CauseRow] {
        CAUSE_ROWS
    }
    fn server(&self) -> Option<Server> {
        Some(Server::Go)
    }
    fn ml_kem_alone(&self, name: &str) -> bool {
        name.contains("/mlkem.")
    }
    /// TLS's record layer, and QUIC's: quic-go protects its 1-RTT packets itself (crypto/tls gives it the keys),
    /// each opened or sealed with its header protection.
    fn record_layer(&self) -> &'static [(&'static str, Stage)] {
        &[
            ("crypto/tls.(*Conn).Read", Read),
            ("crypto/tls.(*Conn).Write", Write),
            (
                "github.com/quic-go/quic-go/internal/handshake.(*updatableAEAD).Open",
                Read,
            ),
            (
                "github.com/quic-go/quic-go/internal/handshake.(*updatableAEAD).DecryptHeader",
                Read,
            ),
            (
                "github.com/quic-go/quic-go/internal/handshake.(*updatableAEAD).Seal",
                Write,
            ),
            (
                "github.com/quic-go/quic-go/internal/handshake.(*updatableAEAD).EncryptHeader",
                Write,
            ),
        ]
    }
}

const fn go(symbol: &'static str, stage: Stage, flags: u32) -> Row {
    Row {
        symbol,
        stage: Some(stage),
        origin: GoCode,
        length_query_arg: 0,
        flags,
        frequent: false,
    }
}

/// Code whose entry tells the handshake it runs in a fact (`flags`), its CPU left in its caller's stage.
const fn go_fact(symbol: &'static str, flags: u32) -> Row {
    Row {
        stage: None,
        ..go(symbol, Handshake, flags)
    }
}

const fn go_frequent(symbol: &'static str, stage: Stage) -> Row {
    Row {
        frequent: true,
        ..go(symbol, stage, 0)
    }
}

const fn scheduler(symbol: &'static str, flags: u32) -> Row {
    Row {
        symbol,
        stage: None,
        origin: GoCode,
        length_query_arg: 0,
        flags,
        frequent: false,
    }
}

pub const ROWS: &[Row] = &[
    // Handshakes: once per connection, the *Conn as receiver; a nil error returned means it completed.
    go(
        "crypto/tls.(*Conn).serverHandshake",
        Handshake,
        SSL_ARG | SERVER | CONN_START,
    ),
    go(
        "crypto/tls.(*Conn).clientHandshake",
        Handshake,
        SSL_ARG | CLIENT | CONN_START,
    ),
    // Only full handshakes go here, whatever crypto.Signer holds the key (a KMS or HSM signer is not probed):
    // TLS 1.2's server flight, and the Certificate message of TLS 1.3 (a resumed one sends none).
    go(
        "crypto/tls.(*serverHandshakeState).doFullHandshake",
        Handshake,
        PRIVATE_KEY_OP,
    ),
    // A fact, not a stage: an exit where its callers resume would be hit by every message they marshal.
    go_fact("crypto/tls.(*certificateMsgTLS13).marshal", PRIVATE_KEY_OP),
    // QUIC (quic-go): the handshake's messages come in through here, its hellos' starts among them, which tie
    // the connection to the hellos read off its Initial packets.
    go_fact("crypto/tls.(*QUICConn).HandleData", QUIC_HELLO),
    // Ephemeral key shares: X25519, P-256/384/521 (generic over the curve), ML-KEM (client side).
    go("crypto/ecdh.(*x25519Curve).GenerateKey", Keygen, 0),
    go("crypto/ecdh.(*nistCurve).GenerateKey", Keygen, 0),
    // Go 1.21 to 1.23 compute the public key on its first use, after GenerateKey has returned.
    go("crypto/ecdh.(*x25519Curve).privateKeyToPublicKey", Keygen, 0),
    go("crypto/ecdh.(*nistCurve).privateKeyToPublicKey", Keygen, 0),
    go("crypto/mlkem.GenerateKey768", Keygen, 0),
    go("crypto/internal/fips140/mlkem.GenerateKey768", Keygen, 0),
    // Go 1.26 makes the client's ML-KEM key from a seed (NewDecapsulationKey768), not GenerateKey768:
    // kemKeyGen is the key generation beneath both, for ML-KEM-768 and ML-KEM-1024 (SecP384r1MLKEM1024).
    go("crypto/internal/fips140/mlkem.kemKeyGen", Keygen, 0),
    go("crypto/internal/fips140/mlkem.kemKeyGen1024", Keygen, 0),
    // Shared secrets: ECDH, ML-KEM encapsulation (server) and decapsulation (client), RSA key transport.
    // Encapsulation starts with parsing the client's key, which expands its matrix: a part of its cost that
    // Encapsulate does not hold.
    go("crypto/internal/fips140/mlkem.parseEK", Derive, 0),
    go("crypto/internal/fips140/mlkem.parseEK1024", Derive, 0),
    go("crypto/ecdh.(*PrivateKey).ECDH", Derive, 0),
    go("crypto/mlkem.(*EncapsulationKey768).Encapsulate", Derive, 0),
    go("crypto/mlkem.(*DecapsulationKey768).Decapsulate", Derive, 0),
    go(
        "crypto/internal/fips140/mlkem.(*EncapsulationKey768).Encapsulate",
        Derive,
        0,
    ),
    go(
        "crypto/internal/fips140/mlkem.(*DecapsulationKey768).Decapsulate",
        Derive,
        0,
    ),
    go(
        "crypto/internal/fips140/mlkem.(*EncapsulationKey1024).Encapsulate",
        Derive,
        0,
    ),
    go(
        "crypto/internal/fips140/mlkem.(*DecapsulationKey1024).Decapsulate",
        Derive,
        0,
    ),
    go("crypto/rsa.DecryptPKCS1v15SessionKey", Derive, PRIVATE_KEY_OP),
    // Signatures through crypto.Signer: ServerKeyExchange (TLS 1.2) and CertificateVerify. The signature's
    // length names the certificate key.
    go("crypto/ecdsa.(*PrivateKey).Sign", Sign, PRIVATE_KEY_OP | SIG_RESULT),
    go("crypto/rsa.(*PrivateKey).Sign", Sign, PRIVATE_KEY_OP | SIG_RESULT),
    go("crypto/ed25519.PrivateKey.Sign", Sign, PRIVATE_KEY_OP | SIG_RESULT),
    // The peer's certificate chain and handshake signature.
    go("crypto/tls.(*Conn).verifyServerCertificate", Verify, PEER_CERT_CHECK),
    go("crypto/tls.(*Conn).processCertsFromClient", Verify, PEER_CERT_CHECK),
    // (sigType, pubkey, hashFunc, signed, sig): sig is the argument past the registers.
    go(
        "crypto/tls.verifyHandshakeSignature",
        Verify,
        PEER_CERT_CHECK | GO_SIG_STACK_ARG,
    ),
    // Key schedule: TLS 1.2's master secret and keys, TLS 1.3's HKDF extractions.
    go("crypto/tls.masterFromPreMasterSecret", KeySchedule, 0),
    go("crypto/tls.extMasterFromPreMasterSecret", KeySchedule, 0),
    go("crypto/tls.keysFromMasterSecret", KeySchedule, 0),
    go("crypto/tls.(*cipherSuiteTLS13).extract", KeySchedule, 0),
    go("crypto/internal/fips140/tls13.extract", KeySchedule, 0),
    // Several per TLS 1.3 handshake: only with --all-probes.
    go_frequent("crypto/tls.(*cipherSuiteTLS13).deriveSecret", KeySchedule),
    go_frequent("crypto/internal/fips140/tls13.deriveSecret", KeySchedule),
    // Resumption: tickets sealed and opened, the server's resumption checks, the client's session cache.
    go("crypto/tls.(*Config).encryptTicket", Resume, 0),
    go("crypto/tls.(*Config).decryptTicket", Resume, 0),
    go("crypto/tls.(*serverHandshakeState).checkForResumption", Resume, 0),
    go("crypto/tls.(*serverHandshakeStateTLS13).checkForResumption", Resume, 0),
    go("crypto/tls.(*Conn).loadSession", Resume, 0),
    go("crypto/tls.(*Conn).handleNewSessionTicket", Resume, 0),
    go("crypto/tls.(*clientHandshakeState).saveSessionTicket", Resume, 0),
    // Record layer.
    go_frequent("crypto/tls.(*Conn).Read", Read),
    go_frequent("crypto/tls.(*Conn).Write", Write),
    // The scheduler: which goroutine runs on a thread (see FF_G_RUN in bpf/tlsprof.h).
    scheduler("runtime.execute", G_RUN),
    scheduler("runtime.mcall", G_STOP),
    scheduler("runtime.goexit1", G_END),
];

/// Go's own packages and runtime, by cause (names from its function table; Go 1.24 moved primitives under
/// crypto/internal/fips140/, and the vendored x/crypto packages carry a vendor/ prefix). First matching row
/// wins: the broad crypto/tls row comes last among its neighbours.
const CAUSE_ROWS: &[CauseRow] = &[
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
];

/// A Go function's name without its type-parameter lists: `crypto/ecdh.(*nistCurve[go.shape.*uint8]).ecdh`
/// is `crypto/ecdh.(*nistCurve).ecdh`. None when the brackets do not balance.
pub fn base_name(name: &str) -> Option<std::borrow::Cow<'_, str>> {
    if !name.contains('[') {
        return Some(name.into());
    }
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.checked_sub(1)?,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    (depth == 0).then_some(out.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_parameters_are_dropped() {
        assert_eq!(
            base_name("crypto/ecdh.(*nistCurve[*crypto/internal/nistec.P256Point]).GenerateKey").unwrap(),
            "crypto/ecdh.(*nistCurve).GenerateKey"
        );
        assert_eq!(
            base_name("crypto/internal/fips140/tls13.extract[go.shape.interface { Reset() }]").unwrap(),
            "crypto/internal/fips140/tls13.extract"
        );
        assert_eq!(base_name("crypto/tls.(*Conn).Read").unwrap(), "crypto/tls.(*Conn).Read");
        assert!(base_name("a[b").is_none());
        assert!(base_name("a]b[").is_none());
    }

    #[test]
    fn every_row_is_named_without_type_parameters() {
        for r in ROWS {
            assert_eq!(base_name(r.symbol).unwrap(), r.symbol);
        }
    }
}
