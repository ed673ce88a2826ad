// SPDX-License-Identifier: Apache-2.0
//! Socket I/O the largest cause of the handshake's own CPU: the server's flight is worth shortening.

use super::wording::Phrase;
use super::{ms, Advice, Cause, Context, Saving};
use crate::catalogue::Stage;

/// Socket I/O above this share of TLS CPU, and the handshake's largest named cause, points at the flight.
const SOCKET_IO_HEAVY_SHARE: f64 = 0.10;

pub(super) fn advise(cx: &Context) -> Option<Advice> {
    let handshake_causes = cx
        .summary
        .stages
        .iter()
        .find(|st| st.name == Stage::Handshake && !st.sampled)
        .map(|st| st.causes.as_slice())
        .unwrap_or_default();
    let largest_named = handshake_causes
        .iter()
        .find(|c| !matches!(c.name, Cause::Unattributed | Cause::Other));
    let (tls_ns, io_ns) = (cx.tls_ns, cx.cause_ns(Cause::SocketIo));
    let heavy = tls_ns > 0.0
        && io_ns / tls_ns >= SOCKET_IO_HEAVY_SHARE
        && largest_named.is_some_and(|c| c.name == Cause::SocketIo);
    if !heavy {
        return None;
    }
    Some(Advice {
        id: "handshake_flight_size",
        title: "Send less per handshake",
        evidence: format!(
            "socket I/O (the BIO layer, system calls{}) is {:.0}% of TLS CPU ({:.1} ms, estimated from {} CPU samples; most named by {}), the largest named cause of the handshake's own CPU",
            if cx.rec.samples.iter().any(|s| !s.kernel.is_empty()) { " and the kernel's network stack" } else { "; add --kernel to see the kernel's part" },
            100.0 * io_ns / tls_ns,
            ms(io_ns),
            cx.cause_samples(Cause::SocketIo),
            cx.top_frames(Cause::SocketIo)
        ),
        change: format!(
            "Send less per handshake: only the leaf certificate and the intermediates it needs (never the root or extra cross-signed certificates), and, with TLS 1.3, no more session tickets than clients use ({}). On loopback the kernel's part includes the receiver's network processing, so a benchmark over loopback overstates it.",
            cx.wording(Phrase::HandshakeFlight)
        ),
        estimated_saving: format!(
            "at most -{:.0}% TLS CPU, if sending the flight cost nothing; a shorter chain saves in proportion to the bytes it removes",
            100.0 * io_ns / tls_ns
        ),
        saving: Saving::at_most(100.0 * io_ns / tls_ns),
    })
}
