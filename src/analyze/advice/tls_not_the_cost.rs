// SPDX-License-Identifier: Apache-2.0
//! Handshakes too small a part of the CPU for tuning them to matter.

use super::{ms, Advice, Context};
use crate::catalogue::families;
use crate::catalogue::Stage;

/// TLS below this share of the process's CPU is not worth tuning.
const SMALL_TLS_SHARE: f64 = 0.10;

pub(super) fn advise(cx: &Context) -> Option<Advice> {
    let s = cx.summary;
    let proc_ms = s.probed_cpu_ms;
    let share = if proc_ms > 0.0 { ms(cx.tls_ns) / proc_ms } else { 0.0 };
    // A process counted from the wire alone spent TLS CPU that no probe saw.
    let small = proc_ms > 0.0 && share < SMALL_TLS_SHARE && s.wire_only().next().is_none();
    if !small {
        return None;
    }
    let (read, write) = (s.record_layer_sampled.read, s.record_layer_sampled.write);
    let families = families::of_ids(cx.rec.libraries.iter().map(|l| l.family.as_str()));
    let name = |stage| families::record_layer_name(&families, stage);
    Some(Advice {
        id: "tls_not_the_cost",
        title: "Handshakes are not the cost",
        evidence: format!(
            "TLS handshakes are {:.1}% of the process's CPU ({:.0} of {:.0} ms; {} handshakes in {:.0} s of probes); the record layer is {:.0}% of CPU samples ({} {:.0}%, {} {:.0}%)",
            share * 100.0,
            ms(cx.tls_ns),
            proc_ms,
            s.handshakes.observed.total,
            cx.rec.probing.live_s,
            100.0 * (read + write),
            name(Stage::Write),
            100.0 * write,
            name(Stage::Read),
            100.0 * read
        ),
        change: "Handshakes are not the cost, so tuning certificates, key exchange or resumption will not help. What remains is the record layer's bulk encryption and the rest of the flame graph (`tlsprof flamegraph`).".into(),
        estimated_saving: format!("at most {:.1}% of CPU, even if handshakes cost nothing", share * 100.0),
        saving: None,
    })
}
