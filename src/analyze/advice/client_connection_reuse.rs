// SPDX-License-Identifier: Apache-2.0
//! Clients that open a new connection, and make a full handshake, for their requests.

use super::wording::Phrase;
use super::{ms, Advice, Context, Saving};
use crate::model::Role;

/// A client making handshakes this often, spending this share of its CPU in them, opens connections per request.
const BUSY_CLIENT_RATE: f64 = 1.0;
const BUSY_CLIENT_SHARE: f64 = 0.05;

pub(super) fn advise(cx: &Context) -> Option<Advice> {
    let proc_ms = cx.summary.probed_cpu_ms;
    let client = cx.handshakes(Role::Client, None);
    let (client_total, client_ns) = (client.count, client.sum_ns);
    let rate = client_total as f64 / cx.rec.probing.live_s.max(1e-9);
    let busy = rate >= BUSY_CLIENT_RATE && ms(client_ns as f64) >= BUSY_CLIENT_SHARE * proc_ms;
    if !busy {
        return None;
    }
    let resumed = cx.handshakes(Role::Client, Some(true)).count;
    let tls_ns = cx.tls_ns;
    Some(Advice {
        id: "client_connection_reuse",
        title: "Reuse client connections",
        evidence: format!(
            "this client made {client_total} handshakes ({rate:.1}/s, {:.0}% resumed) costing {:.0}% of its TLS CPU and {:.0}% of its CPU",
            100.0 * resumed as f64 / client_total as f64,
            100.0 * client_ns as f64 / tls_ns.max(1.0),
            100.0 * ms(client_ns as f64) / proc_ms.max(1e-9)
        ),
        change: cx.wording(Phrase::ClientConnectionReuse),
        estimated_saving: format!(
            "every handshake avoided saves {:.2} ms of CPU; with keep-alive, up to -{:.0}% TLS CPU",
            client_ns as f64 / client_total as f64 / 1e6,
            100.0 * client_ns as f64 / tls_ns.max(1.0)
        ),
        saving: Saving::at_most(100.0 * client_ns as f64 / tls_ns.max(1.0)),
    })
}
