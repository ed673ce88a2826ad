// SPDX-License-Identifier: Apache-2.0
//! The hybrid post-quantum key exchange, and what its ML-KEM half costs where a family's functions tell it
//! apart (Go's, AWS-LC's).

use super::wording::Phrase;
use super::{Advice, Context, Saving};
use crate::catalogue::families;
use crate::catalogue::Stage;
use crate::model::{Function, Recording};

/// The hybrid post-quantum group: Go's default from 1.24, AWS-LC's, OpenSSL 3.5's.
pub(super) const HYBRID_GROUP: &str = "X25519MLKEM768";

/// Self CPU of the call-tree nodes whose innermost function `leaf` accepts, in ns as the probes saw it.
fn tree_self_ns(rec: &Recording, leaf: impl Fn(&Function) -> bool) -> u64 {
    rec.tree
        .iter()
        .filter(|n| {
            n.path
                .last()
                .and_then(|&id| rec.functions.get(usize::from(id)))
                .is_some_and(&leaf)
        })
        .map(|n| n.self_ns)
        .sum()
}

pub(super) fn advise(cx: &Context) -> Option<Advice> {
    let (rec, tls_ns) = (cx.rec, cx.tls_ns);
    let hybrid: u64 = rec
        .handshakes
        .iter()
        .filter(|g| g.kind.key_exchange.as_deref() == Some(HYBRID_GROUP))
        .map(|g| g.cpu.count)
        .sum();
    let kx_seen = tree_self_ns(rec, |f| matches!(f.stage, Some(Stage::Keygen | Stage::Derive)));
    let mlkem_seen = tree_self_ns(rec, |f| {
        rec.libraries
            .get(f.library)
            .and_then(|l| families::named(&l.family))
            .is_some_and(|family| family.ml_kem_alone(&f.name))
    });
    if !(hybrid > 0 && kx_seen > 0 && mlkem_seen > 0 && tls_ns > 0.0) {
        return None;
    }
    let kx_ns = cx.stage_self_ns(Stage::Keygen) + cx.stage_self_ns(Stage::Derive);
    let mlkem_ns = kx_ns * mlkem_seen as f64 / kx_seen as f64;
    let per = |ns: f64| ns / 1e3 / hybrid as f64;
    Some(Advice {
        id: "hybrid_key_exchange",
        title: "Weigh the hybrid post-quantum key exchange",
        evidence: format!(
            "the key exchange is {HYBRID_GROUP} in {hybrid} handshakes: key generation and derivation cost {:.0} µs per handshake, of which ML-KEM {:.0} µs and X25519 {:.0} µs; ML-KEM is {:.0}% of TLS CPU",
            per(kx_ns),
            per(mlkem_ns),
            per(kx_ns - mlkem_ns),
            100.0 * mlkem_ns / tls_ns
        ),
        change: format!(
            "The hybrid group protects recorded traffic against a future quantum computer, at the cost measured here. Where that is not needed, make the exchange X25519 alone: {}. A client that sent only a hybrid key share then pays a round trip (HelloRetryRequest); Go's, Chrome's and OpenSSL 3.5's send an X25519 share beside it.",
            cx.wording(Phrase::HybridKeyExchange)
        ),
        estimated_saving: format!(
            "about -{:.0}% TLS CPU ({:.0} µs per handshake: the ML-KEM functions' share of key generation and derivation in this recording)",
            100.0 * mlkem_ns / tls_ns,
            per(mlkem_ns)
        ),
        saving: Saving::about(100.0 * mlkem_ns / tls_ns),
    })
}
