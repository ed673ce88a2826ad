// SPDX-License-Identifier: Apache-2.0
//! The JDK's own TLS (JSSE, over the JCA providers SunEC, SunRsaSign, SunJCE) by the frames of its
//! JIT-compiled code: a frame's class and method (`sun.security.ec.ECDSASignature.engineSign`, as a JVM's perf
//! map names it) by prefix, to the stage whose work it does. Nothing is probed: a JVM on JSSE has its handshakes
//! counted from the wire, and its stages' CPU estimated from the CPU samples these frames name (whole stacks
//! through JIT code need -XX:+PreserveFramePointer). The innermost frame that a row names places a sample.

use super::causes::{user, Cause::*, CauseRow};
use super::Stage::{self, *};

/// The name a JVM's perf map gives its bytecode interpreter's code: a method not yet compiled runs there,
/// unnamed.
pub const INTERPRETED_FRAME: &str = "Interpreter";

/// What the frames inside a JSSE stage frame did (analyze/causes.rs): the JDK's classes by package, the first
/// row that matches naming the cause. A perf map's name leads with the method's return type: `*` takes it.
pub const CAUSE_ROWS: &[CauseRow] = &[
    // Big-number, field and curve arithmetic of signatures and key exchanges.
    user("*sun.security.util.math.*", PublicKey),
    user("*sun.security.ec.*", PublicKey),
    user("*sun.security.rsa.*", PublicKey),
    user("*java.math.BigInteger*", PublicKey),
    user("*java.math.MutableBigInteger*", PublicKey),
    // The transcript hash, Finished MACs and HKDF's HMACs.
    user("*sun.security.provider.SHA*", MacHash),
    user("*sun.security.provider.DigestBase*", MacHash),
    user("*java.security.MessageDigest*", MacHash),
    user("*com.sun.crypto.provider.HmacCore*", MacHash),
    user("*javax.crypto.Mac.*", MacHash),
    // Handshake records encrypted and decrypted.
    user("*com.sun.crypto.provider.GaloisCounterMode*", Encryption),
    user("*com.sun.crypto.provider.GHASH*", Encryption),
    user("*com.sun.crypto.provider.AESCrypt*", Encryption),
    user("*com.sun.crypto.provider.ChaCha20*", Encryption),
    user("*javax.crypto.Cipher.*", Encryption),
    // Certificates, their chains and DER.
    user("*sun.security.x509.*", Certificates),
    user("*sun.security.util.Der*", Certificates),
    user("*sun.security.util.ObjectIdentifier*", Certificates),
    user("*java.security.cert.*", Certificates),
    user("*sun.security.provider.certpath.*", Certificates),
    // Randomness.
    user("*java.security.SecureRandom*", Random),
    user("*sun.security.provider.DRBG*", Random),
    user("*sun.security.provider.NativePRNG*", Random),
    user("*sun.security.provider.AbstractDrbg*", Random),
    user("*sun.security.provider.HashDrbg*", Random),
    // The JCA's provider lookups: services found by name for each operation.
    user("*java.security.Provider*", Lookups),
    user("*sun.security.jca.*", Lookups),
    // JSSE's own work: messages, extensions, the state machine.
    user("*sun.security.ssl.*", TlsMessages),
];

/// Whether a frame is the JDK's RSA private-key operation: a server signing with an RSA certificate.
pub fn signs_with_rsa(frame: &str) -> bool {
    frame.contains("sun.security.rsa.RSACore.crtCrypt")
        || frame.contains("sun.security.rsa.RSACore.rsa(byte[], java.security.interfaces.RSAPrivateKey")
}

/// (class and method prefix, stage).
pub const FRAMES: &[(&str, Stage)] = &[
    // The handshake's own work: its state machine, messages and extensions.
    ("sun.security.ssl.TransportContext.dispatch", Handshake),
    ("sun.security.ssl.TransportContext.kickstart", Handshake),
    ("sun.security.ssl.HandshakeContext.", Handshake),
    ("sun.security.ssl.ServerHandshakeContext.", Handshake),
    ("sun.security.ssl.ClientHandshakeContext.", Handshake),
    ("sun.security.ssl.SSLHandshake.", Handshake),
    ("sun.security.ssl.ClientHello", Handshake),
    ("sun.security.ssl.ServerHello", Handshake),
    ("sun.security.ssl.EncryptedExtensions", Handshake),
    ("sun.security.ssl.CertificateMessage", Handshake),
    ("sun.security.ssl.CertificateVerify", Handshake),
    ("sun.security.ssl.Finished", Handshake),
    ("sun.security.ssl.SSLExtensions", Handshake),
    ("sun.security.ssl.HandshakeOutStream", Handshake),
    ("sun.security.ssl.SSLSocketImpl.startHandshake", Handshake),
    // Signatures: the generic JCA entry and the providers' engines.
    ("java.security.Signature.sign", Sign),
    ("java.security.Signature$Delegate.engineSign", Sign),
    ("sun.security.ec.ECDSASignature.engineSign", Sign),
    ("sun.security.ec.ECDSAOperations.sign", Sign),
    ("sun.security.ec.ed.EdDSASignature.engineSign", Sign),
    ("sun.security.rsa.RSASignature.engineSign", Sign),
    ("sun.security.rsa.RSAPSSSignature.engineSign", Sign),
    // The peer's chain and signature checked.
    ("java.security.Signature.verify", Verify),
    ("sun.security.ec.ECDSASignature.engineVerify", Verify),
    ("sun.security.rsa.RSASignature.engineVerify", Verify),
    ("sun.security.rsa.RSAPSSSignature.engineVerify", Verify),
    ("sun.security.provider.certpath.", Verify),
    ("sun.security.validator.", Verify),
    ("sun.security.ssl.X509TrustManagerImpl.check", Verify),
    // Key shares made.
    ("java.security.KeyPairGenerator", Keygen),
    ("sun.security.ec.XDHKeyPairGenerator.", Keygen),
    ("sun.security.ec.ECKeyPairGenerator.", Keygen),
    ("com.sun.crypto.provider.DHKeyPairGenerator.", Keygen),
    ("sun.security.ssl.XDHKeyExchange$XDHEPossession.<init>", Keygen),
    ("sun.security.ssl.ECDHKeyExchange$ECDHEPossession.<init>", Keygen),
    ("sun.security.ssl.DHKeyExchange$DHEPossession.<init>", Keygen),
    // The shared secret.
    ("javax.crypto.KeyAgreement.", Derive),
    ("sun.security.ec.XDHKeyAgreement.", Derive),
    ("sun.security.ec.ECDHKeyAgreement.", Derive),
    ("com.sun.crypto.provider.DHKeyAgreement.", Derive),
    // The key schedule: TLS 1.3's HKDF, TLS 1.2's PRF.
    ("sun.security.ssl.HKDF.", KeySchedule),
    ("sun.security.ssl.SSLSecretDerivation.", KeySchedule),
    ("sun.security.ssl.SSLTrafficKeyDerivation", KeySchedule),
    ("sun.security.ssl.SSLBasicKeyDerivation.", KeySchedule),
    ("sun.security.ssl.KAKeyDerivation.", KeySchedule),
    ("sun.security.ssl.SSLMasterKeyDerivation", KeySchedule),
    ("com.sun.crypto.provider.TlsMasterSecretGenerator.", KeySchedule),
    ("com.sun.crypto.provider.TlsKeyMaterialGenerator.", KeySchedule),
    ("com.sun.crypto.provider.TlsPrfGenerator", KeySchedule),
    // Resumption: tickets sealed and opened, the session cache.
    ("sun.security.ssl.SessionTicketExtension", Resume),
    ("sun.security.ssl.NewSessionTicket", Resume),
    ("sun.security.ssl.PreSharedKeyExtension", Resume),
    ("sun.security.ssl.SSLSessionContextImpl.", Resume),
    // The record layer: records decrypted (read) and encrypted (write), handshake records included.
    ("sun.security.ssl.SSLEngineInputRecord.", Read),
    ("sun.security.ssl.SSLSocketInputRecord.", Read),
    ("sun.security.ssl.SSLEngineOutputRecord.", Write),
    ("sun.security.ssl.SSLSocketOutputRecord.", Write),
];

/// The stage a frame's name places it in, if a row names its method. A perf map names a compiled method with
/// its return and parameter types (`void sun.security.ec.ECOperations.setSum(...)`): the class and method are
/// the word before the parameters.
pub fn stage_of(frame: &str) -> Option<Stage> {
    let head = frame.split('(').next()?;
    let method = head.rsplit(' ').next()?;
    FRAMES
        .iter()
        .find(|(prefix, _)| method.starts_with(prefix))
        .map(|&(_, stage)| stage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::causes::Space;
    use crate::catalogue::families::cause_of;

    #[test]
    fn perf_map_names_name_their_causes() {
        let cause = |name| cause_of(name, Space::User);
        assert_eq!(
            cause("void sun.security.util.math.intpoly.IntegerPolynomialP256.mult(long[], long[], long[])"),
            Some(PublicKey)
        );
        assert_eq!(
            cause("int com.sun.crypto.provider.GaloisCounterMode$GCMDecrypt.doFinal(byte[], int, int, byte[], int)"),
            Some(Encryption)
        );
        assert_eq!(
            cause("java.util.List sun.security.ssl.SSLExtensions.get(sun.security.ssl.SSLExtension)"),
            Some(TlsMessages)
        );
        assert_eq!(cause("Interpreter"), None);
    }

    #[test]
    fn perf_map_names_are_placed_by_their_method() {
        assert_eq!(
            stage_of("byte[] sun.security.ec.ECDSASignature.engineSign()"),
            Some(Sign)
        );
        assert_eq!(
            stage_of("void sun.security.ssl.XDHKeyExchange$XDHEPossession.<init>(sun.security.ssl.NamedGroup, java.security.SecureRandom)"),
            Some(Keygen)
        );
        assert_eq!(
            stage_of("byte[] javax.crypto.KeyAgreement.generateSecret()"),
            Some(Derive)
        );
        // A method whose name only begins like a row's class is not it; nor is any other code.
        assert_eq!(stage_of("void sun.security.ssl.HKDFX.expand()"), None);
        assert_eq!(stage_of("void java.lang.Thread.run()"), None);
        assert_eq!(stage_of("libjvm.so+0x1234"), None);
        assert_eq!(stage_of(""), None);
    }
}
