// SPDX-License-Identifier: Apache-2.0
//! Servers that resume few handshakes.

use super::wording::Phrase;
use super::{Advice, Context, Saving};
use crate::catalogue::Stage;
use crate::model::{CpuHistogram, Role};

/// Resumption below this share of a server's handshakes leaves full handshakes to save.
const LOW_RESUMPTION: f64 = 0.5;
/// The share of returning clients the estimate assumes would resume.
const RESUMING: f64 = 0.9;
/// A saving that rounds to less than a percent of TLS CPU is not advised on.
const MIN_SAVING_PCT: f64 = 0.5;

/// The CPU a resumed handshake saved over a full one, as measured: the difference of their means, when the
/// lower end of its 95% interval (each mean's standard error from its histogram; a lone resumed handshake
/// taken to vary as the full ones do) is above zero; None when the two are not clearly apart.
fn measured_saving_ns(full: &CpuHistogram, resumed: &CpuHistogram) -> Option<f64> {
    let resumed_var = if resumed.count < 2 {
        full.variance_ns2()
    } else {
        resumed.variance_ns2()
    };
    let se = (full.variance_ns2() / full.count.max(1) as f64 + resumed_var / resumed.count.max(1) as f64).sqrt();
    let saved = full.mean_ns() - resumed.mean_ns();
    (saved - 1.96 * se > 0.0).then_some(saved)
}

/// Most full handshakes whose ClientHello was read refused an offered session: resumption_refused advises
/// on their cause; enabling resumption is not the change.
fn clients_offer_and_are_refused(cx: &Context) -> bool {
    let (refused, offered_nothing) = cx
        .summary
        .resumption
        .iter()
        .filter(|r| r.role == Role::Server)
        .fold((0, 0), |(a, b), r| (a + r.refused, b + r.offered_nothing));
    refused > 0 && refused >= offered_nothing
}

pub(super) fn advise(cx: &Context) -> Option<Advice> {
    let full_cpu = cx.handshakes(Role::Server, Some(false));
    let server_full = full_cpu.count;
    let server_total = cx.handshakes(Role::Server, None).count;
    if server_full == 0 {
        return None;
    }
    let resumed_share = (server_total - server_full) as f64 / server_total as f64;
    if resumed_share >= LOW_RESUMPTION || clients_offer_and_are_refused(cx) {
        return None;
    }
    // Handshakes counted from the wire have no CPU of their own: the TLS CPU their frames show, shared out.
    let full_us = match cx.by_frames {
        true => cx.tls_ns / 1e3 / server_total as f64,
        false => full_cpu.mean_ns() / 1e3,
    };
    // A resumed handshake skips the certificate's work: measured here if any were resumed.
    let resumed_cpu = cx.handshakes(Role::Server, Some(true));
    let measured = resumed_cpu.count > 0 && !cx.by_frames;
    let saved_us = if measured {
        measured_saving_ns(&full_cpu, &resumed_cpu).map(|ns| ns / 1e3)
    } else {
        Some((cx.stage_self_ns(Stage::Sign) + cx.stage_self_ns(Stage::Verify)) / 1e3 / server_full as f64)
    };
    // Advice states only a saving it measured clearly above zero, and one that rounds to a percent at least.
    let saved = saved_us.map_or(0.0, |us| us * server_full as f64 * RESUMING * 1e3);
    let saved_pct = 100.0 * saved / cx.tls_ns.max(1.0);
    let saved_us = saved_us.filter(|_| saved_pct >= MIN_SAVING_PCT)?;
    let resumed_us = full_us - saved_us;
    Some(Advice {
        id: "session_resumption",
        title: "Let clients resume sessions",
        evidence: format!(
            "{:.0}% of {server_total} server handshakes seen were resumed; a full one costs {:.2} ms, a resumed one {:.2} ms{}",
            resumed_share * 100.0,
            full_us / 1e3,
            resumed_us / 1e3,
            match (measured, cx.by_frames) {
                (true, _) => "",
                (false, false) => " (derived: no resumed handshake was seen, so a full one less its sign and verify CPU)",
                (false, true) => " (estimated: the TLS CPU the frames of its samples show over the handshakes counted from the wire, and that less its sign and verify CPU)",
            }
        ),
        change: cx.wording(Phrase::SessionResumption),
        estimated_saving: format!(
            "if {:.0}% of returning clients resume: about -{saved_pct:.0}% TLS CPU ({:.2} ms saved per resumed handshake)",
            RESUMING * 100.0,
            saved_us / 1e3
        ),
        saving: Saving::about(saved_pct),
    })
}
