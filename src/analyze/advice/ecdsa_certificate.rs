// SPDX-License-Identifier: Apache-2.0
//! An RSA certificate whose signatures dominate the TLS CPU.

use super::wording::{self, Phrase};
use super::{speed, Advice, Context, Saving};
use crate::catalogue::Stage;
use crate::model::Role;

/// Signing above this share of TLS CPU makes the certificate key worth changing.
const SIGN_HEAVY_SHARE: f64 = 0.20;

/// An RSA certificate key, as the handshakes name it ("RSA-2048").
pub(super) fn rsa(certificate_key: &str) -> bool {
    certificate_key.starts_with("RSA")
}

pub(super) fn advise(cx: &Context) -> Option<Advice> {
    let tls_ns = cx.tls_ns;
    let server_full = cx.handshakes(Role::Server, Some(false)).count;
    let cert = cx.certificate_key(Role::Server)?;
    let sign_ns = cx.stage_self_ns(Stage::Sign);
    let sign_heavy = server_full > 0 && tls_ns > 0.0 && rsa(&cert) && sign_ns / tls_ns >= SIGN_HEAVY_SHARE;
    if !sign_heavy {
        return None;
    }
    let sign_us = sign_ns / 1e3 / server_full as f64;
    // The JDK signs in Java: OpenSSL's ECDSA is no measure of its own.
    let reference = cx
        .rec
        .openssl_speed
        .get(speed::ECDSA_P256_SIGN)
        .filter(|_| !cx.by_frames);
    let (estimate, saving) = match reference {
        Some(&ecdsa_us) => {
            let saved_pct = 100.0 * (sign_us - ecdsa_us).max(0.0) * server_full as f64 * 1e3 / tls_ns;
            let text = format!(
                "an ECDSA P-256 signature costs {ecdsa_us:.0} µs here (openssl speed{}) instead of {sign_us:.0} µs: about -{saved_pct:.0}% TLS CPU",
                wording::remark(Phrase::EcdsaSpeedSource, &cx.kinds),
            );
            (text, Saving::about(saved_pct))
        }
        None if cx.by_frames => (
            "unknown: the JDK's own ECDSA P-256 signature is not measured here (OpenSSL's would overstate the saving); \
             compare with `tlsprof diff` after adding the EC key"
                .into(),
            None,
        ),
        None => (
            "unknown: `openssl speed ecdsap256` could not be run to measure the alternative".into(),
            None,
        ),
    };
    Some(Advice {
        id: "ecdsa_certificate",
        title: "Serve an ECDSA P-256 certificate",
        evidence: format!(
            "sign is {:.0}% of TLS CPU ({cert}, {:.2} ms per full handshake, {server_full} full handshakes)",
            100.0 * sign_ns / tls_ns,
            sign_us / 1e3
        ),
        change: cx.wording(Phrase::EcdsaCertificate),
        estimated_saving: estimate,
        saving,
    })
}
