// SPDX-License-Identifier: Apache-2.0
//! The key of a server's certificate as a TLS 1.2 Certificate message carries it in the clear: its
//! SubjectPublicKeyInfo read from the DER, named as the probes name a key from its signature's length
//! (anatomy::certificate_key). The certificate is bytes a peer sent: every length is checked, and what does
//! not parse names nothing.

/// One DER element at the start of `data`: its tag, its contents and what follows it.
fn element(data: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = data.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let (bytes, after) = rest.split_at_checked(n)?;
        rest = after;
        bytes.iter().fold(0usize, |v, b| v << 8 | usize::from(*b))
    };
    let (contents, rest) = rest.split_at_checked(len)?;
    Some((tag, contents, rest))
}

const SEQUENCE: u8 = 0x30;
const OID: u8 = 0x06;
const BIT_STRING: u8 = 0x03;
const INTEGER: u8 = 0x02;
const VERSION: u8 = 0xa0;

const RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const RSASSA_PSS: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a];
const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const ED25519: &[u8] = &[0x2b, 0x65, 0x70];
const ED448: &[u8] = &[0x2b, 0x65, 0x71];
const CURVES: [(&[u8], &str); 3] = [
    (&[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07], "ECDSA P-256"),
    (&[0x2b, 0x81, 0x04, 0x00, 0x22], "ECDSA P-384"),
    (&[0x2b, 0x81, 0x04, 0x00, 0x23], "ECDSA P-521"),
];

/// The key of a certificate (DER): "RSA-2048", "ECDSA P-256", "Ed25519"; None where it does not parse.
pub fn certificate_key(cert: &[u8]) -> Option<String> {
    let (SEQUENCE, cert, _) = element(cert)? else {
        return None;
    };
    let (SEQUENCE, mut tbs, _) = element(cert)? else {
        return None;
    };
    if element(tbs)?.0 == VERSION {
        tbs = element(tbs)?.2;
    }
    // serialNumber, signature, issuer, validity, subject; then subjectPublicKeyInfo.
    for _ in 0..5 {
        tbs = element(tbs)?.2;
    }
    let (SEQUENCE, spki, _) = element(tbs)? else {
        return None;
    };
    let (SEQUENCE, algorithm, key) = element(spki)? else {
        return None;
    };
    let (OID, oid, params) = element(algorithm)? else {
        return None;
    };
    match oid {
        RSA_ENCRYPTION | RSASSA_PSS => {
            let (BIT_STRING, bits, _) = element(key)? else {
                return None;
            };
            let (SEQUENCE, rsa, _) = element(bits.get(1..)?)? else {
                return None;
            };
            let (INTEGER, modulus, _) = element(rsa)? else {
                return None;
            };
            let significant = modulus.iter().skip_while(|&&b| b == 0).count();
            Some(format!("RSA-{}", significant * 8))
        }
        EC_PUBLIC_KEY => {
            let (OID, curve, _) = element(params)? else { return None };
            CURVES
                .iter()
                .find(|(c, _)| *c == curve)
                .map(|(_, name)| name.to_string())
        }
        ED25519 => Some("Ed25519".into()),
        ED448 => Some("Ed448".into()),
        _ => None,
    }
}

/// The first certificate of a TLS 1.2 Certificate message's body (a list of 3-byte-length-prefixed
/// certificates behind the list's own length), the server's own.
pub fn first_certificate(body: &[u8]) -> Option<&[u8]> {
    let len = |b: &[u8]| usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]);
    let list = body.get(3..)?;
    let cert_len = len(list.get(..3)?);
    list.get(3..3 + cert_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate made by openssl, DER.
    fn made(args: &[&str]) -> Vec<u8> {
        let dir = std::env::temp_dir().join(format!("tlsprof-x509-{}-{}", std::process::id(), args.join("")));
        std::fs::create_dir_all(&dir).unwrap();
        let (key, cert) = (dir.join("key.pem"), dir.join("cert.der"));
        let out = std::process::Command::new("openssl")
            .args([
                "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=x", "-outform", "DER",
            ])
            .args(args)
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let der = std::fs::read(&cert).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        der
    }

    #[test]
    fn keys_are_named_from_the_certificates_openssl_makes() {
        let rsa = made(&["-newkey", "rsa:2048"]);
        assert_eq!(certificate_key(&rsa).as_deref(), Some("RSA-2048"));
        let p256 = made(&["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]);
        assert_eq!(certificate_key(&p256).as_deref(), Some("ECDSA P-256"));
        let p384 = made(&["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384"]);
        assert_eq!(certificate_key(&p384).as_deref(), Some("ECDSA P-384"));
        let ed = made(&["-newkey", "ed25519"]);
        assert_eq!(certificate_key(&ed).as_deref(), Some("Ed25519"));
        // Cut anywhere, it names nothing, and never panics.
        for cut in 0..p256.len() {
            let _ = certificate_key(&p256[..cut]);
        }
        assert_eq!(certificate_key(&p256[..p256.len() / 2]), None);
        // In a Certificate message's list.
        let mut body = vec![0, 0, 0];
        body.extend([(rsa.len() >> 16) as u8, (rsa.len() >> 8) as u8, rsa.len() as u8]);
        body.extend(&rsa);
        assert_eq!(first_certificate(&body), Some(&rsa[..]));
    }

    #[test]
    fn fuzz_certificate() {
        use proptest::prelude::*;
        proptest!(|(data in proptest::collection::vec(any::<u8>(), 0..600))| {
            let _ = certificate_key(&data);
            let _ = first_certificate(&data);
        });
    }
}
