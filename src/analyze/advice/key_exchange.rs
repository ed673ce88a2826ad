// SPDX-License-Identifier: Apache-2.0
//! Finite-field Diffie-Hellman, or a curve slower than X25519 and P-256.

use super::wording::Phrase;
use super::{speed, Advice, Context, Saving};
use crate::catalogue::Stage;
use crate::model::Role;

fn finite_field_dh(kx: &str) -> bool {
    kx.starts_with("DHE") || kx.starts_with("ffdhe")
}

/// Finite-field Diffie-Hellman, or a curve slower than X25519 and P-256.
pub(super) fn slow(kx: &str) -> bool {
    finite_field_dh(kx) || kx.contains("P-384") || kx.contains("P-521") || kx.to_lowercase().contains("x448")
}

pub(super) fn advise(cx: &Context) -> Option<Advice> {
    let kx = cx
        .most_common(Role::Server, |g| g.kind.key_exchange.as_ref())
        .or_else(|| cx.most_common(Role::Client, |g| g.kind.key_exchange.as_ref()))?;
    let handshakes = cx.summary.handshakes.observed.total;
    if !slow(&kx) || handshakes == 0 {
        return None;
    }
    let tls_ns = cx.tls_ns;
    let kx_ns = cx.stage_self_ns(Stage::Keygen) + cx.stage_self_ns(Stage::Derive);
    let kx_us = kx_ns / 1e3 / handshakes as f64;
    let (estimate, saving) = match cx.rec.openssl_speed.get(speed::X25519_DERIVE) {
        // An X25519 exchange is one key generation and one derivation, each a scalar multiplication.
        Some(&x25519_us) => {
            let saved_pct = 100.0 * (kx_us - 2.0 * x25519_us).max(0.0) * handshakes as f64 * 1e3 / tls_ns.max(1.0);
            let text = format!(
                "X25519 costs about {:.0} µs per handshake here (2 × openssl speed ecdhx25519) instead of {kx_us:.0} µs: about -{saved_pct:.0}% TLS CPU",
                2.0 * x25519_us,
            );
            (text, Saving::about(saved_pct))
        }
        None => (
            "unknown: `openssl speed ecdhx25519` could not be run to measure the alternative".into(),
            None,
        ),
    };
    let dhe = finite_field_dh(&kx);
    Some(Advice {
        id: if dhe { "dhe_key_exchange" } else { "curve_choice" },
        title: if dhe {
            "Use an elliptic-curve key exchange"
        } else {
            "Use X25519 or P-256"
        },
        evidence: format!(
            "the key exchange is {kx}: key generation and derivation cost {kx_us:.0} µs per handshake ({:.0}% of TLS CPU)",
            100.0 * kx_ns / tls_ns.max(1.0)
        ),
        change: cx.wording(Phrase::KeyExchange),
        estimated_saving: estimate,
        saving,
    })
}
