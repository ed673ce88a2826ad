// SPDX-License-Identifier: Apache-2.0
//! Go's crypto/tls (Go 1.21 and later) and the runtime's scheduler. A row names a function as Go's function
//! table does, less any type parameters: generic functions carry a `[go.shape...]` list per instance, which
//! `base_name` drops. Go 1.24 moved primitives under crypto/internal/fips140/...: both places are listed.
//! Every function here takes the Go register ABI (FF_GO_ABI).

use super::Origin::Go;
use super::Stage::*;
use super::{
    Row, CLIENT, CONN_START, GO_ABI, GO_SIG_RESULT, GO_SIG_STACK_ARG, G_END, G_RUN, G_STOP, PEER_CERT_CHECK,
    PRIVATE_KEY_OP, SERVER, SSL_ARG,
};

const fn go(symbol: &'static str, stage: super::Stage, flags: u32) -> Row {
    Row {
        symbol,
        stage: Some(stage),
        origin: Go,
        length_query_arg: 0,
        flags: flags | GO_ABI,
        frequent: false,
    }
}

const fn go_frequent(symbol: &'static str, stage: super::Stage) -> Row {
    Row {
        frequent: true,
        ..go(symbol, stage, 0)
    }
}

const fn scheduler(symbol: &'static str, flags: u32) -> Row {
    Row {
        symbol,
        stage: None,
        origin: Go,
        length_query_arg: 0,
        flags: flags | GO_ABI,
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
    go("crypto/tls.(*certificateMsgTLS13).marshal", Handshake, PRIVATE_KEY_OP),
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
    go("crypto/ecdsa.(*PrivateKey).Sign", Sign, PRIVATE_KEY_OP | GO_SIG_RESULT),
    go("crypto/rsa.(*PrivateKey).Sign", Sign, PRIVATE_KEY_OP | GO_SIG_RESULT),
    go("crypto/ed25519.PrivateKey.Sign", Sign, PRIVATE_KEY_OP | GO_SIG_RESULT),
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
    fn every_go_row_is_go_abi_and_named_without_type_parameters() {
        for r in ROWS {
            assert_ne!(r.flags & GO_ABI, 0, "{}", r.symbol);
            assert_eq!(base_name(r.symbol).unwrap(), r.symbol);
        }
    }
}
