// SPDX-License-Identifier: Apache-2.0
//! The handshake mix: CPU per handshake, then each kind of handshake seen, under its process where there
//! are several.

use super::{cpu_line, pct};
use crate::analyze::{KindSummary, Summary};
use crate::output::mix;
use crate::output::styled::Line;

/// Processes whose mix is shown, at most.
const MAX_PROCESSES: usize = 12;

pub fn lines(s: &Summary) -> Vec<Line> {
    let hs = &s.handshakes;
    let paid_for = hs.observed.total + hs.observed.abandoned;
    let mut out = Vec::new();
    if hs.cpu.count > 0 {
        out.push(Line::prose(format!("CPU per handshake: {}", cpu_line(&hs.cpu_ms))));
    }
    if paid_for == 0 {
        return out;
    }
    out.push(Line::prose(
        "Version, cipher and group from the sockets' ServerHellos; certificate key from signature lengths:",
    ));
    // Each process's kinds under its name, its shares of its own handshakes, where there are several: those
    // with the most handshakes, where many came and went (a curl per request).
    let (by_process, mut mixes) = mix::by_process(s);
    let mut rest = Vec::new();
    if mixes.len() > MAX_PROCESSES {
        mixes.sort_by_key(|m| std::cmp::Reverse(m.of));
        rest = mixes.split_off(MAX_PROCESSES);
    }
    for m in mixes {
        if by_process {
            let name = m.pid.map_or("?".into(), |p| s.process_label(p));
            out.push(Line::row(format!("  {name}: {} handshakes seen", m.of)));
        }
        for g in m.kinds {
            out.push(Line::row(format!(
                "{}  {:>5.1}%  {}",
                if by_process { "  " } else { "" },
                pct(g.count as f64, m.of as f64),
                kind_line(g)
            )));
        }
    }
    if !rest.is_empty() {
        let handshakes: u64 = rest.iter().map(|m| m.of).sum();
        out.push(Line::row(format!(
            "  and {} more processes, {handshakes} handshakes (`report --json` lists each)",
            rest.len()
        )));
    }
    if hs.kinds.iter().any(|g| g.version.is_none()) {
        out.push(Line::prose("  (\"?\": the ServerHello was not seen: outside --hello-capture windows, or a library that keeps the handshake off the socket)"));
    }
    if hs
        .kinds
        .iter()
        .any(|g| !g.resumed && g.certificate_key.is_none() && g.from_wire)
    {
        out.push(Line::prose(
            "  (\"certificate key ?\" from the wire: TLS 1.3 encrypts the certificate; a TLS 1.2 one is read)",
        ));
    }
    if hs
        .kinds
        .iter()
        .any(|g| !g.resumed && g.certificate_key.is_none() && !g.from_wire)
    {
        out.push(Line::prose(
            "  (\"certificate key ?\": no signature made or checked was seen: a signer the probes do not cover)",
        ));
    }
    out
}

/// One kind of handshake: what it was made of, how many, and their CPU.
fn kind_line(g: &KindSummary) -> String {
    let w = mix::words(g);
    let cpu = g
        .cpu_ms
        .as_ref()
        .map_or("from the wire (CPU not seen)".to_string(), cpu_line);
    format!(
        "{}{}  {} {} ({}): {cpu}",
        w.transport,
        w.fields.join(" "),
        w.kind,
        w.role,
        g.count
    )
}
