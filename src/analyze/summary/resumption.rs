// SPDX-License-Identifier: Apache-2.0
//! Resumption per process and role: what the clients offered (from the ClientHellos read), what the side
//! that decides accepted, why the rest was refused, and what the refusals cost in CPU.

use std::collections::BTreeMap;

use serde::Serialize;

use super::TargetSummary;
use crate::analyze::estimate::{self, Estimate, Spread};
use crate::catalogue::families;
use crate::model::{CpuHistogram, HelloCounts, Offer, Outcome, Recording, Refusal, Role, TicketKey};

/// Why offered sessions were refused, as the wire and the library's ticket format tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A ticket under a key name the server no longer accepted, or never did in the recording: ticket keys
    /// made anew (a reload, a restart) or different on another instance behind the same name.
    TicketKeyUnknown,
    /// A ticket under a key the server was still accepting: the session itself could not be used (expired,
    /// another cipher or version).
    TicketUnusable,
    /// A session ID the server's cache did not hold (evicted, expired, or another instance's cache).
    SessionNotCached,
    /// A TLS 1.2 session offered where TLS 1.3 was agreed, or the reverse.
    VersionChanged,
    /// Nothing shows why (tickets without a key name, as Go's; a client's view).
    Unknown,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReasonCount {
    pub reason: Reason,
    pub count: u64,
}

/// One process's resumption in one role (server: the clients' offers to it; client: its offers).
#[derive(Clone, Debug, Serialize)]
pub struct ResumptionSummary {
    pub pid: Option<u32>,
    pub role: Role,
    /// Completed handshakes the probes saw, and those whose ClientHello was read whole: the counts below are
    /// of these.
    pub handshakes: u64,
    pub read: u64,
    /// ServerHellos captured whose ClientHello was cut short, malformed or missed.
    pub unparsed: u64,
    pub offered_nothing: u64,
    pub offered_session_id: u64,
    pub offered_ticket: u64,
    pub offered_psk: u64,
    pub accepted: u64,
    pub refused: u64,
    pub refused_by: Vec<ReasonCount>,
    /// Refusals over the whole recording: exact when every handshake's ClientHello was read and the probes
    /// were attached throughout, else estimated from the share refused among those read.
    pub refused_total: Estimate,
    /// What each ClientHello read stands for over the whole recording (1 when every one was read): the
    /// counts above times this are estimates over the recording.
    pub scale: f64,
    /// CPU per full and per resumed handshake of this process and role (ms), both measured in this recording
    /// (of all processes in this role where this one made none of a kind).
    pub full_ms: Option<f64>,
    pub resumed_ms: Option<f64>,
    /// What the refusals cost over the recording: refused × (full − resumed), in ms and as a share of the
    /// recording's TLS CPU (%); None without both CPU figures.
    pub cost_ms: Option<Estimate>,
    pub cost_tls_pct: Option<f64>,
    /// Tickets offered to it by key name (a server whose library names ticket keys).
    pub ticket_keys: Vec<TicketKeySummary>,
}

/// A ticket key name offered to a server, and the other processes of the recording that accepted it.
#[derive(Clone, Debug, Serialize)]
pub struct TicketKeySummary {
    #[serde(flatten)]
    pub key: TicketKey,
    /// Other processes that accepted tickets under this name: (pid, seconds into the recording of the last).
    pub accepted_by_others: Vec<(u32, f64)>,
}

impl ResumptionSummary {
    pub fn offered(&self) -> u64 {
        self.offered_session_id + self.offered_ticket + self.offered_psk
    }
}

/// Counts of one process and role, as they add up over its kinds of handshake.
#[derive(Default)]
struct Tally {
    handshakes: u64,
    read: u64,
    unparsed: u64,
    offers: BTreeMap<Offer, u64>,
    accepted: u64,
    refusals: BTreeMap<Refusal, u64>,
    full: CpuHistogram,
    resumed: CpuHistogram,
}

pub(super) fn resumption(rec: &Recording, targets: &[TargetSummary], tls_cpu_ms: f64) -> Vec<ResumptionSummary> {
    let mut tallies: BTreeMap<(Option<u32>, Role), Tally> = BTreeMap::new();
    for g in rec.handshakes.iter().filter(|g| g.kind.outcome == Outcome::Completed) {
        let k = &g.kind;
        if k.role == Role::Partial {
            continue;
        }
        let t = tallies.entry((g.pid, k.role)).or_default();
        let n = g.cpu.count;
        t.handshakes += n;
        if k.resumed {
            t.resumed.merge(&g.cpu);
        } else {
            t.full.merge(&g.cpu);
        }
        if k.offer == Some(Offer::Unparsed) {
            t.unparsed += n;
        }
        if let (true, Some(offer)) = (k.hello_read(), k.offer) {
            t.read += n;
            *t.offers.entry(offer).or_default() += n;
            if offer.offered() && k.resumed {
                t.accepted += n;
            }
            if let Some(r) = k.refusal {
                *t.refusals.entry(r).or_default() += n;
            }
        }
    }
    // A process that made only one kind (a new worker that resumed everything) is costed with the CPU per
    // handshake of all processes in its role.
    let mut by_role: BTreeMap<Role, (CpuHistogram, CpuHistogram)> = BTreeMap::new();
    for ((_, role), t) in &tallies {
        let (full, resumed) = by_role.entry(*role).or_default();
        full.merge(&t.full);
        resumed.merge(&t.resumed);
    }
    tallies
        .into_iter()
        .filter(|(_, t)| t.read > 0)
        .map(|((pid, role), t)| {
            let role_cpu = &by_role[&role];
            summarize_one(rec, targets, tls_cpu_ms, (pid, role), t, role_cpu)
        })
        .collect()
}

/// Mean CPU of the handshakes in `mine`, else in `all` (ms); None when neither has any.
fn mean_ms(mine: &CpuHistogram, all: &CpuHistogram) -> Option<f64> {
    [mine, all].into_iter().find(|h| h.count > 0).map(|h| h.mean_ns() / 1e6)
}

fn summarize_one(
    rec: &Recording,
    targets: &[TargetSummary],
    tls_cpu_ms: f64,
    (pid, role): (Option<u32>, Role),
    t: Tally,
    (role_full, role_resumed): &(CpuHistogram, CpuHistogram),
) -> ResumptionSummary {
    let ticket_keys: Vec<TicketKey> = if role == Role::Server && names_ticket_keys(rec, pid) {
        rec.ticket_keys.iter().filter(|k| Some(k.pid) == pid).cloned().collect()
    } else {
        Vec::new()
    };
    let refused_by = reasons(&t.refusals, &ticket_keys);
    let ticket_keys = ticket_keys
        .into_iter()
        .map(|key| TicketKeySummary {
            accepted_by_others: rec
                .ticket_keys
                .iter()
                .filter(|o| o.pid != key.pid && o.name.is_some() && o.name == key.name)
                .filter_map(|o| Some((o.pid, o.last_accepted_s?)))
                .collect(),
            key,
        })
        .collect();
    let refused: u64 = t.refusals.values().sum();
    let (refused_total, scale) = whole_recording(rec, targets, (pid, role), &t, refused);
    let full_ms = mean_ms(&t.full, role_full);
    let resumed_ms = mean_ms(&t.resumed, role_resumed);
    let cost_ms = match (full_ms, resumed_ms) {
        (Some(f), Some(r)) => Some(refused_total.scaled((f - r).max(0.0))),
        _ => None,
    };
    let offer = |o: Offer| t.offers.get(&o).copied().unwrap_or(0);
    ResumptionSummary {
        pid,
        role,
        handshakes: t.handshakes,
        read: t.read,
        unparsed: t.unparsed,
        offered_nothing: offer(Offer::Nothing),
        offered_session_id: offer(Offer::SessionId),
        offered_ticket: offer(Offer::Ticket),
        offered_psk: offer(Offer::Psk),
        accepted: t.accepted,
        refused,
        refused_by,
        refused_total,
        scale,
        full_ms,
        resumed_ms,
        cost_tls_pct: cost_ms
            .filter(|_| tls_cpu_ms > 0.0)
            .map(|c| 100.0 * c.value / tls_cpu_ms),
        cost_ms,
        ticket_keys,
    }
}

/// The process runs a library whose tickets carry their key's name.
fn names_ticket_keys(rec: &Recording, pid: Option<u32>) -> bool {
    rec.libraries
        .iter()
        .filter(|l| pid.is_some_and(|p| l.pids.contains(&p)))
        .any(|l| families::named(&l.family).is_some_and(|f| f.ticket_key_names()))
}

/// The refusals by reason; refused tickets split by their key names' record when the library names its keys
/// (the key table counts the same refusals), else of unknown reason.
fn reasons(refusals: &BTreeMap<Refusal, u64>, keys: &[TicketKey]) -> Vec<ReasonCount> {
    let mut by: BTreeMap<Reason, u64> = BTreeMap::new();
    for (&refusal, &n) in refusals {
        match refusal {
            Refusal::SessionNotCached => *by.entry(Reason::SessionNotCached).or_default() += n,
            Refusal::VersionChanged => *by.entry(Reason::VersionChanged).or_default() += n,
            Refusal::Unknown => *by.entry(Reason::Unknown).or_default() += n,
            Refusal::Ticket if keys.is_empty() => *by.entry(Reason::Unknown).or_default() += n,
            Refusal::Ticket => {
                let unknown_key: u64 = keys.iter().map(|k| k.refused_unknown_key).sum();
                let in_use: u64 = keys.iter().map(|k| k.refused_in_use).sum();
                *by.entry(Reason::TicketKeyUnknown).or_default() += unknown_key.min(n);
                *by.entry(Reason::TicketUnusable).or_default() += in_use.min(n - unknown_key.min(n));
                let rest = n.saturating_sub(unknown_key + in_use);
                if rest > 0 {
                    *by.entry(Reason::Unknown).or_default() += rest;
                }
            }
        }
    }
    by.into_iter()
        .filter(|&(_, count)| count > 0)
        .map(|(reason, count)| ReasonCount { reason, count })
        .collect()
}

/// Refusals over the whole recording: their share among the ClientHellos read, of the process's handshakes
/// in this role (exact when all of them were read and counted exactly); and what one ClientHello read
/// stands for. The ClientHellos are read in a few windows, and clients' offers change over time (a reload,
/// a wave of new clients), so the share's interval comes from how the windows differ (each a cluster), where
/// the recording kept them.
fn whole_recording(
    rec: &Recording,
    targets: &[TargetSummary],
    (pid, role): (Option<u32>, Role),
    t: &Tally,
    refused: u64,
) -> (Estimate, f64) {
    let target = targets.iter().find(|ts| Some(ts.target.pid) == pid);
    let (total, total_ci) = match target.and_then(|ts| Some((ts.handshakes?, ts.handshakes_ci95?))) {
        Some((n, ci)) => (n as f64, ci.map(|c| c as f64)),
        None => (t.handshakes as f64, [t.handshakes as f64; 2]),
    };
    // The process's handshakes in other roles are in its total too: this role's part of those seen.
    let observed = target
        .and_then(|ts| ts.observed_handshakes)
        .unwrap_or(t.handshakes)
        .max(1);
    let role_part = (t.handshakes as f64 / observed as f64).min(1.0);
    if t.read == t.handshakes && total_ci[0] == total_ci[1] && total as u64 == observed {
        return (Estimate::exact(refused as f64), 1.0);
    }
    let windows: Vec<HelloCounts> = rec
        .probing
        .window_figures
        .iter()
        .filter_map(|w| {
            w.processes
                .iter()
                .find(|p| Some(p.pid) == pid)?
                .hellos
                .get(&role)
                .copied()
        })
        .filter(|h| h.read > 0)
        .collect();
    let of_role = role_part * total.max(1.0);
    let share = if windows.iter().map(|h| h.read).sum::<u64>() == t.read {
        let (seen, read): (Vec<f64>, Vec<f64>) = windows.iter().map(|h| (h.refused as f64, h.read as f64)).unzip();
        estimate::ratio(&seen, &read, of_role, Spread::PerUnit, 0.0).scaled(1.0 / of_role)
    } else {
        // Windows not kept (an older recording) or not all of them: as one random sample.
        estimate::sampled_share(refused as f64, t.read as f64, 1.0)
    };
    let estimate = Estimate {
        value: share.value * of_role,
        ci95: [
            share.ci95[0] * role_part * total_ci[0],
            share.ci95[1] * role_part * total_ci[1],
        ],
        exact: false,
    };
    (estimate, of_role / t.read.max(1) as f64)
}

impl Reason {
    /// Its name in the JSON report and in metrics' labels.
    pub fn id(self) -> &'static str {
        match self {
            Reason::TicketKeyUnknown => "ticket_key_unknown",
            Reason::TicketUnusable => "ticket_unusable",
            Reason::SessionNotCached => "session_not_cached",
            Reason::VersionChanged => "version_changed",
            Reason::Unknown => "unknown",
        }
    }

    /// What it means, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Reason::TicketKeyUnknown => {
                "tickets under a key name the server did not hold (keys made anew at a reload or restart, or \
                 different on each instance)"
            }
            Reason::TicketUnusable => {
                "tickets under a key the server still accepted: those sessions could not be used (expired, \
                 another cipher, or made for another certificate)"
            }
            Reason::SessionNotCached => {
                "session IDs the server's cache did not hold (evicted, expired, or cached by another worker or \
                 instance)"
            }
            Reason::VersionChanged => {
                "sessions of another protocol version (TLS 1.2 offered, TLS 1.3 agreed, or the reverse)"
            }
            Reason::Unknown => "not shown on the wire (tickets without a key name, as Go's; a client's view)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::summarize;
    use crate::model::tests::recording_with_refusals;
    use crate::model::{ProbeWindow, WindowPart};

    #[test]
    fn offers_refusals_and_their_reasons_add_up_with_their_cost() {
        let s = summarize(&recording_with_refusals());
        let [r] = &s.resumption[..] else {
            panic!("{:?}", s.resumption)
        };
        assert_eq!(
            (r.handshakes, r.read, r.offered(), r.accepted, r.refused),
            (10, 10, 9, 6, 3)
        );
        assert_eq!(r.offered_nothing, 1);
        assert_eq!(r.refused_by.len(), 1);
        assert_eq!(
            (r.refused_by[0].reason, r.refused_by[0].count),
            (Reason::TicketKeyUnknown, 3)
        );
        assert!(r.refused_total.exact, "{:?}", r.refused_total);
        // 3 refused × (1.29 − 0.40 ms).
        let cost = r.cost_ms.unwrap().value;
        assert!((cost - 3.0 * (1.29 - 0.4)).abs() < 0.01, "{cost}");
        assert_eq!(r.ticket_keys.len(), 2);
    }

    #[test]
    fn reasons_are_named_alike_in_json_and_metrics() {
        for r in [
            Reason::TicketKeyUnknown,
            Reason::TicketUnusable,
            Reason::SessionNotCached,
            Reason::VersionChanged,
            Reason::Unknown,
        ] {
            assert_eq!(serde_json::to_value(r).unwrap(), r.id());
        }
    }

    #[test]
    fn tickets_without_key_names_are_refused_for_a_reason_unknown() {
        let mut rec = recording_with_refusals();
        rec.libraries[0].family = "go".into();
        let s = summarize(&rec);
        let r = &s.resumption[0];
        assert_eq!((r.refused_by[0].reason, r.refused_by[0].count), (Reason::Unknown, 3));
        assert!(r.ticket_keys.is_empty());
    }

    #[test]
    fn handshakes_whose_client_hello_was_not_read_are_estimated_not_counted() {
        let mut rec = recording_with_refusals();
        let mut unseen = rec.handshakes[2].clone();
        unseen.kind.offer = None;
        rec.handshakes.push(unseen);
        let s = summarize(&rec);
        let r = &s.resumption[0];
        assert_eq!((r.handshakes, r.read, r.refused), (11, 10, 3));
        assert!(!r.refused_total.exact);
        let [lo, hi] = r.refused_total.ci95;
        assert!(
            lo <= r.refused_total.value && r.refused_total.value <= hi,
            "{:?}",
            r.refused_total
        );
    }

    /// The same ClientHellos read in two windows: one where nothing was refused (clients that had no
    /// session yet), one where most were. The windows disagree, so the interval is wider than if the
    /// hellos had been a random sample; when the windows do not hold them all, they are taken as one.
    #[test]
    fn refusals_are_estimated_from_the_windows_the_hellos_were_read_in() {
        let mut rec = recording_with_refusals();
        let mut unseen = rec.handshakes[2].clone();
        unseen.kind.offer = None;
        rec.handshakes.push(unseen);
        let as_one_sample = summarize(&rec).resumption[0].refused_total;
        let window = |read, refused| ProbeWindow {
            processes: vec![WindowPart {
                pid: 10,
                hellos: [(Role::Server, HelloCounts { read, refused })].into(),
                ..WindowPart::default()
            }],
            ..ProbeWindow::default()
        };
        rec.probing.window_figures = vec![window(5, 0), window(5, 3)];
        let by_window = summarize(&rec).resumption[0].refused_total;
        assert_eq!(by_window.value, as_one_sample.value);
        let width = |e: Estimate| e.ci95[1] - e.ci95[0];
        assert!(
            width(by_window) > width(as_one_sample),
            "{by_window:?} {as_one_sample:?}"
        );
        rec.probing.window_figures.pop();
        assert_eq!(summarize(&rec).resumption[0].refused_total, as_one_sample);
    }
}
