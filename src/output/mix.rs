// SPDX-License-Identifier: Apache-2.0
//! The handshake mix as every report shows it: each process's kinds of handshake with their shares, and the
//! words for what each kind was made of, "?" where the probes did not see it.

use crate::analyze::{KindSummary, Summary};
use crate::model::{Outcome, Role};

/// One process's kinds of handshake (all processes' in recordings that did not tell them apart).
pub struct ProcessMix<'a> {
    pub pid: Option<u32>,
    /// The handshakes its kinds' shares are of.
    pub of: u64,
    pub kinds: Vec<&'a KindSummary>,
}

/// The kinds each process made, completed or abandoned, in the summary's order; and whether there are
/// several processes (each kind's share is then of its own process's handshakes).
pub fn by_process(s: &Summary) -> (bool, Vec<ProcessMix<'_>>) {
    let hs = &s.handshakes;
    let rows: Vec<&KindSummary> = hs.kinds.iter().filter(|g| g.role != Role::Partial).collect();
    let mut pids: Vec<Option<u32>> = Vec::new();
    for g in &rows {
        if !pids.contains(&g.pid) {
            pids.push(g.pid);
        }
    }
    let several = pids.len() > 1;
    let mixes = pids
        .into_iter()
        .map(|pid| {
            let kinds: Vec<&KindSummary> = rows.iter().copied().filter(|g| g.pid == pid).collect();
            let of = if several {
                kinds.iter().map(|g| g.count).sum()
            } else {
                hs.observed.total + hs.observed.abandoned
            };
            ProcessMix { pid, of, kinds }
        })
        .collect();
    (several, mixes)
}

/// What a kind of handshake was, in words.
pub struct KindWords<'a> {
    /// "full", "resumed (TLS 1.3 PSK)".
    pub kind: String,
    /// "server", "client abandoned".
    pub role: &'static str,
    /// Version, cipher, key exchange, certificate key.
    pub fields: [&'a str; 4],
    /// "QUIC " for a handshake made over QUIC, else empty: what goes before the fields.
    pub transport: &'static str,
}

pub fn words(g: &KindSummary) -> KindWords<'_> {
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
    KindWords {
        kind,
        role,
        fields: [
            g.version.as_deref().unwrap_or("version ?"),
            g.cipher.as_deref().unwrap_or("cipher ?"),
            key_exchange,
            certificate_key,
        ],
        transport: if g.quic { "QUIC " } else { "" },
    }
}
