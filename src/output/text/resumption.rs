// SPDX-License-Identifier: Apache-2.0
//! The text report's resumption section: per process and role, what clients offered, what was accepted,
//! why the rest was refused and what that cost; ticket key names beside the processes that accepted them.

use crate::analyze::{ResumptionSummary, Summary};
use crate::model::Role;
use crate::output::styled::Line;

/// Key names are shown by their first 8 bytes (hex); the JSON report has them whole.
const KEY_NAME_SHOWN: usize = 16;

pub(super) fn lines(s: &Summary) -> Vec<Line> {
    if s.resumption.is_empty() {
        return Vec::new();
    }
    let mut out =
        vec!["Offers read from ClientHellos on the sockets; ≈ estimated where not all were read:".to_string()];
    for r in &s.resumption {
        out.extend(process_lines(s, r));
    }
    out.into_iter().map(Line::prose).collect()
}

fn process_lines(s: &Summary, r: &ResumptionSummary) -> Vec<String> {
    let who = match r.pid {
        Some(pid) => s.process_label(pid),
        None => "all processes".to_string(),
    };
    let role = match r.role {
        Role::Client => "as a client",
        _ => "as a server",
    };
    let mut offers = Vec::new();
    for (n, what) in [
        (r.offered_psk, "TLS 1.3 PSK"),
        (r.offered_ticket, "TLS 1.2 ticket"),
        (r.offered_session_id, "TLS 1.2 session ID"),
    ] {
        if n > 0 {
            offers.push(format!("{n} {what}"));
        }
    }
    let unparsed = if r.unparsed > 0 {
        format!(", {} not read whole (not counted)", r.unparsed)
    } else {
        String::new()
    };
    let mut out = vec![
        format!(
            "  {who} {role}: {} handshakes, {} ClientHellos read{unparsed}",
            r.handshakes, r.read
        ),
        format!(
            "    offered {}{}, accepted {}, refused {}; offered none {}",
            r.offered(),
            if offers.is_empty() {
                String::new()
            } else {
                format!(" ({})", offers.join(", "))
            },
            r.accepted,
            r.refused,
            r.offered_nothing,
        ),
    ];
    for c in &r.refused_by {
        out.push(format!("    refused {}: {}", c.count, c.reason.describe()));
    }
    if r.refused > 0 {
        out.push(cost_line(r));
    }
    for k in &r.ticket_keys {
        let name = match &k.key.name {
            Some(n) => format!("{}…", &n[..n.len().min(KEY_NAME_SHOWN)]),
            None => "other names".to_string(),
        };
        let mut line = format!(
            "    ticket key {name}: accepted {}, refused {}",
            k.key.accepted,
            k.key.refused_in_use + k.key.refused_unknown_key
        );
        // A name first offered late in the recording is a key made meanwhile (a reload, a restart).
        line.push_str(&format!(", first offered at {:.1} s", k.key.first_offered_s));
        if let Some(t) = k.key.last_accepted_s {
            line.push_str(&format!(", last accepted at {t:.1} s"));
        }
        for (pid, at) in &k.accepted_by_others {
            line.push_str(&format!("; accepted by {} until {at:.1} s", s.process_label(*pid)));
        }
        out.push(line);
    }
    out
}

/// What the refusals cost: each one a full handshake where a resumed one would have done.
fn cost_line(r: &ResumptionSummary) -> String {
    let total = &r.refused_total;
    let refused = if total.exact {
        format!("{:.0}", total.value)
    } else {
        format!("≈ {:.0} [{:.0}–{:.0}]", total.value, total.ci95[0], total.ci95[1])
    };
    match (r.cost_ms, r.full_ms, r.resumed_ms) {
        (Some(cost), Some(full), Some(resumed)) => {
            let share = r
                .cost_tls_pct
                .map(|p| format!(" = {p:.1}% of TLS CPU"))
                .unwrap_or_default();
            let ms = if cost.exact {
                format!("{:.1} ms", cost.value)
            } else {
                format!("≈ {:.1} [{:.1}–{:.1}] ms", cost.value, cost.ci95[0], cost.ci95[1])
            };
            format!("    cost: {refused} refused × ({full:.2} − {resumed:.2} ms: full − resumed) = {ms}{share}")
        }
        _ => format!("    cost: {refused} refused; not costed: no full and resumed handshakes both measured"),
    }
}
