// SPDX-License-Identifier: Apache-2.0
//! OpenSSL 3's run-time algorithm lookups: a cost of the library, not of the cryptography.

use super::wording::Phrase;
use super::{ms, Advice, Cause, Context, Saving};

/// Algorithm lookups above this share of TLS CPU are worth a library change.
const LOOKUPS_HEAVY_SHARE: f64 = 0.10;

pub(super) fn advise(cx: &Context) -> Option<Advice> {
    let (tls_ns, lookups_ns) = (cx.tls_ns, cx.cause_ns(Cause::Lookups));
    let heavy = tls_ns > 0.0 && lookups_ns / tls_ns >= LOOKUPS_HEAVY_SHARE;
    if !heavy {
        return None;
    }
    let openssl3 = cx
        .rec
        .libraries
        .iter()
        .filter_map(|l| l.version.as_deref())
        .find(|v| v.starts_with("OpenSSL 3."));
    Some(Advice {
        id: "algorithm_lookups",
        title: "Cut OpenSSL 3's algorithm lookups",
        evidence: format!(
            "algorithm lookups (fetches, name maps, parameters, EVP contexts) are {:.0}% of TLS CPU ({:.1} ms, estimated from {} CPU samples below the stage frames; most named by {}){}",
            100.0 * lookups_ns / tls_ns,
            ms(lookups_ns),
            cx.cause_samples(Cause::Lookups),
            cx.top_frames(Cause::Lookups),
            openssl3.map_or(String::new(), |v| format!("; the library is {v}"))
        ),
        change: format!(
            "This is the provider machinery of OpenSSL 3, which looks algorithms up by name, with locks, for each handshake's operations: not the cryptography, so keys, certificates and the protocol version do not change it. Later OpenSSL 3 releases cut this per-operation overhead (see their release notes), and libraries without run-time algorithm lookups (BoringSSL, AWS-LC) do none: {}.",
            cx.wording(Phrase::AlgorithmLookups)
        ),
        estimated_saving: format!(
            "at most -{:.0}% TLS CPU, if lookups cost nothing; how much a given release or library saves is not measured here",
            100.0 * lookups_ns / tls_ns
        ),
        saving: Saving::at_most(100.0 * lookups_ns / tls_ns),
    })
}
