// SPDX-License-Identifier: Apache-2.0
//! The handshake mix: CPU per handshake, then each kind of handshake seen, under its process where there
//! are several.

use super::{cpu_line, pct};
use crate::analyze::{KindSummary, Summary};
use crate::model::untrusted::Printable;
use crate::model::{Outcome, Role};
use crate::output::styled::Line;

pub fn lines(s: &Summary) -> Vec<Line> {
    let hs = &s.handshakes;
    let paid_for = hs.observed.total + hs.observed.abandoned;
    let mut out = Vec::new();
    if hs.observed.total > 0 {
        out.push(Line::prose(format!("CPU per handshake: {}", cpu_line(&hs.cpu_ms))));
    }
    if paid_for == 0 {
        return out;
    }
    out.push(Line::prose(
        "Version, cipher and group from the sockets' ServerHellos; certificate key from signature lengths:",
    ));
    let rows: Vec<&KindSummary> = hs.kinds.iter().filter(|g| g.role != Role::Partial).collect();
    // Each process's kinds under its name, its shares of its own handshakes, where there are several.
    let mut pids: Vec<Option<u32>> = Vec::new();
    for g in &rows {
        if !pids.contains(&g.pid) {
            pids.push(g.pid);
        }
    }
    let by_process = pids.len() > 1;
    for pid in pids {
        let mine: Vec<&KindSummary> = rows.iter().copied().filter(|g| g.pid == pid).collect();
        let of: u64 = if by_process {
            mine.iter().map(|g| g.count).sum()
        } else {
            paid_for
        };
        if by_process {
            let name = pid.map_or("?".into(), |p| format!("{} (pid {p})", Printable(comm_of(s, p))));
            out.push(Line::row(format!("  {name}: {of} handshakes seen")));
        }
        for g in mine {
            out.push(Line::row(format!(
                "{}  {:>5.1}%  {}",
                if by_process { "  " } else { "" },
                pct(g.count as f64, of as f64),
                kind_line(g)
            )));
        }
    }
    if hs.kinds.iter().any(|g| g.version.is_none()) {
        out.push(Line::prose("  (\"?\": the ServerHello was not seen: outside --hello-capture windows, or a library that keeps the handshake off the socket)"));
    }
    if hs.kinds.iter().any(|g| !g.resumed && g.certificate_key.is_none()) {
        out.push(Line::prose(
            "  (\"certificate key ?\": no signature made or checked was seen: a signer the probes do not cover)",
        ));
    }
    out
}

/// A target's name by its pid.
fn comm_of(s: &Summary, pid: u32) -> &str {
    s.targets
        .iter()
        .find(|t| t.target.pid == pid)
        .map_or("?", |t| t.target.comm.as_str())
}

/// One kind of handshake: what it was made of, how many, and their CPU.
fn kind_line(g: &KindSummary) -> String {
    let kind = match (&g.resumption, g.resumed) {
        (Some(how), true) => format!("resumed ({how})"),
        (None, true) => "resumed".to_string(),
        (_, false) => "full".to_string(),
    };
    let role = match (g.role, g.outcome) {
        (Role::Server, Outcome::Completed) => "server",
        (_, Outcome::Completed) => "client",
        (Role::Server, Outcome::Abandoned) => "server abandoned",
        (_, Outcome::Abandoned) => "client abandoned",
    };
    // "no" only where it is known: a full handshake always exchanges a key and shows a certificate, a
    // resumed one has no certificate, and no key exchange when its ServerHello, seen, names no group;
    // else the probes did not see them (no ServerHello, a missed ServerKeyExchange, Go's signers).
    let key_exchange = match (&g.key_exchange, g.resumed && g.version.is_some()) {
        (Some(kx), _) => kx.as_str(),
        (None, true) => "no key exchange",
        (None, false) => "key exchange ?",
    };
    let certificate_key = match (&g.certificate_key, g.resumed) {
        (Some(key), _) => key.as_str(),
        (None, true) => "no certificate",
        (None, false) => "certificate key ?",
    };
    let fields = [
        g.version.as_deref().unwrap_or("version ?"),
        g.cipher.as_deref().unwrap_or("cipher ?"),
        key_exchange,
        certificate_key,
    ];
    format!(
        "{}  {kind} {role} ({}): {}",
        fields.join(" "),
        g.count,
        cpu_line(&g.cpu_ms)
    )
}
