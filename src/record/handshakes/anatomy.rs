// SPDX-License-Identifier: Apache-2.0
//! What a handshake was made of, told by lengths the probes saw (never by guessing from CPU): the
//! certificate key by the length of its signature, the key exchange by the length of the shared secret.

/// The certificate key, from the length of the last signature made (server) or checked (client).
pub fn certificate_key(sig_len: u16) -> Option<String> {
    let name = match sig_len {
        0 => return None,
        // RSA signatures are exactly as long as the modulus.
        128 | 256 | 384 | 512 => return Some(format!("RSA-{}", u32::from(sig_len) * 8)),
        64 => "Ed25519",
        // ECDSA signatures are DER: two integers of the curve's size, a few bytes shorter at times.
        60..=72 => "ECDSA P-256",
        92..=104 => "ECDSA P-384",
        128..=139 => "ECDSA P-521",
        114 => "Ed448",
        _ => return Some(format!("unknown ({sig_len}-byte signature)")),
    };
    Some(name.to_string())
}

/// Sizes of the finite-field groups in use (RFC 7919 and the classic MODP ones).
const DH_GROUP_BITS: [u32; 7] = [1024, 1536, 2048, 3072, 4096, 6144, 8192];

/// The key exchange, from the length of the shared secret derived.
pub fn key_exchange(secret_len: u16, rsa_transport: bool) -> Option<String> {
    let name = match secret_len {
        0 if rsa_transport => "RSA key transport",
        0 => return None,
        // X25519 and P-256 both give 32 bytes: tell them apart only where the group is seen.
        32 => "ECDHE (X25519 or P-256)",
        48 => "ECDHE P-384",
        56 => "ECDHE X448",
        66 => "ECDHE P-521",
        // A DH secret loses its leading zero bytes (1 time in 256): name the group size it fits.
        n if n >= 128 => {
            let bits = u32::from(n) * 8;
            let group = DH_GROUP_BITS.iter().find(|&&g| g >= bits).copied().unwrap_or(bits);
            return Some(format!("DHE-{group}"));
        }
        _ => return Some(format!("unknown ({secret_len}-byte secret)")),
    };
    Some(name.to_string())
}

/// The key exchange, from the secret length ECDH_compute_key or DH_compute_key returned: these compute only
/// on prime curves (never X25519/X448) and finite-field groups, so 32 bytes is P-256 here.
pub fn key_exchange_returned(secret_len: u16) -> Option<String> {
    let name = match secret_len {
        0 => return None,
        32 => "ECDHE P-256",
        48 => "ECDHE P-384",
        66 => "ECDHE P-521",
        n if n >= 128 => return key_exchange(n, false),
        _ => return Some(format!("unknown ({secret_len}-byte secret)")),
    };
    Some(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_lengths_name_certificate_keys() {
        assert_eq!(certificate_key(256).as_deref(), Some("RSA-2048"));
        assert_eq!(certificate_key(512).as_deref(), Some("RSA-4096"));
        assert_eq!(certificate_key(71).as_deref(), Some("ECDSA P-256"));
        assert_eq!(certificate_key(103).as_deref(), Some("ECDSA P-384"));
        assert_eq!(certificate_key(0), None);
        assert_eq!(certificate_key(17).as_deref(), Some("unknown (17-byte signature)"));
    }

    #[test]
    fn secret_lengths_name_key_exchanges() {
        assert_eq!(key_exchange(32, false).as_deref(), Some("ECDHE (X25519 or P-256)"));
        assert_eq!(key_exchange(256, false).as_deref(), Some("DHE-2048"));
        assert_eq!(key_exchange(255, false).as_deref(), Some("DHE-2048"));
        assert_eq!(key_exchange(0, true).as_deref(), Some("RSA key transport"));
        assert_eq!(key_exchange(0, false), None);
    }

    #[test]
    fn returned_secret_lengths_name_prime_curves() {
        assert_eq!(key_exchange_returned(32).as_deref(), Some("ECDHE P-256"));
        assert_eq!(key_exchange_returned(48).as_deref(), Some("ECDHE P-384"));
        assert_eq!(key_exchange_returned(66).as_deref(), Some("ECDHE P-521"));
        assert_eq!(key_exchange_returned(256).as_deref(), Some("DHE-2048"));
        assert_eq!(key_exchange_returned(0), None);
    }
}
