// SPDX-License-Identifier: Apache-2.0
//! Servers that refuse the sessions their clients offer: the cause the wire shows, and its fix.

use super::wording::Phrase;
use super::{Advice, Context, Saving};
use crate::analyze::summary::Reason;
use crate::model::Role;

/// A cost that rounds to less than a percent of TLS CPU is not advised on.
const MIN_SAVING_PCT: f64 = 0.5;
/// Where the cost could not be measured (no resumed handshake to compare with), refusals of at least this
/// share of the offers are advised on, without a saving.
const MANY_REFUSED: f64 = 0.1;

/// The fix for each cause, as the kinds of server word it.
fn phrase(reason: Reason) -> Phrase {
    match reason {
        Reason::TicketKeyUnknown => Phrase::RefusedTicketKey,
        Reason::SessionNotCached => Phrase::RefusedSessionCache,
        Reason::VersionChanged => Phrase::RefusedVersion,
        Reason::TicketUnusable | Reason::Unknown => Phrase::RefusedUnknown,
    }
}

pub(super) fn advise(cx: &Context) -> Option<Advice> {
    let servers: Vec<_> = cx
        .summary
        .resumption
        .iter()
        .filter(|r| r.role == Role::Server && r.refused > 0)
        .collect();
    let costed = servers.iter().all(|r| r.cost_tls_pct.is_some());
    let cost_pct: f64 = servers.iter().filter_map(|r| r.cost_tls_pct).sum();
    let (offered, refused): (u64, u64) = servers
        .iter()
        .fold((0, 0), |(o, n), r| (o + r.offered(), n + r.refused));
    let worth_it = if costed {
        cost_pct >= MIN_SAVING_PCT
    } else {
        refused as f64 >= MANY_REFUSED * offered as f64
    };
    if servers.is_empty() || !worth_it {
        return None;
    }
    let mut reasons: Vec<(Reason, u64)> = Vec::new();
    for c in servers.iter().flat_map(|r| &r.refused_by) {
        match reasons.iter_mut().find(|(r, _)| *r == c.reason) {
            Some((_, n)) => *n += c.count,
            None => reasons.push((c.reason, c.count)),
        }
    }
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let &(main, _) = reasons.first()?;
    let (offered, refused): (u64, u64) = servers
        .iter()
        .map(|r| (r.offered(), r.refused))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let cost_ms: f64 = servers.iter().filter_map(|r| r.cost_ms.map(|c| c.value)).sum();
    let by_reason = reasons
        .iter()
        .map(|(r, n)| format!("{n} {}", r.describe()))
        .collect::<Vec<_>>()
        .join("; ");
    Some(Advice {
        id: "resumption_refused",
        title: "Resume the sessions clients offer",
        evidence: format!(
            "clients offered a session in {offered} of the ClientHellos read and {refused} were refused: {by_reason}; \
             each refusal was a full handshake where a resumed one would have done"
        ),
        change: cx.wording(phrase(main)),
        estimated_saving: if costed {
            format!(
                "about -{cost_pct:.0}% TLS CPU ({cost_ms:.1} ms over the recording) if the refused sessions resume, \
                 at the full and resumed handshakes' CPU measured here"
            )
        } else {
            "not measured: no resumed handshake in the recording to compare a full one with".to_string()
        },
        saving: if costed { Saving::about(cost_pct) } else { None },
    })
}

#[cfg(test)]
mod tests {
    use crate::analyze::analyze;
    use crate::model::tests::recording_with_refusals;

    #[test]
    fn refused_tickets_get_the_fix_for_their_cause_with_the_measured_saving() {
        let analysis = analyze(&recording_with_refusals());
        let a = analysis
            .advice
            .iter()
            .find(|a| a.id == "resumption_refused")
            .expect("advised");
        assert!(a.change.contains("ssl_session_ticket_key"), "{}", a.change);
        assert!(a.evidence.contains("3 tickets under a key name"), "{}", a.evidence);
        let saving = a.saving.unwrap().tls_cpu_pct;
        let cost = analysis.summary.resumption[0].cost_tls_pct.unwrap();
        assert!((saving - cost).abs() < 1e-9 && saving > 0.0, "{saving} vs {cost}");
        // The generic advice to let clients resume does not also fire: they do offer.
        assert!(!analysis.advice.iter().any(|a| a.id == "session_resumption"));
    }

    #[test]
    fn haproxy_is_told_its_own_directive() {
        let mut rec = recording_with_refusals();
        rec.targets[0].comm = "haproxy".into();
        let analysis = analyze(&rec);
        let a = analysis.advice.iter().find(|a| a.id == "resumption_refused").unwrap();
        assert!(a.change.contains("tls-ticket-keys"), "{}", a.change);
    }
}
