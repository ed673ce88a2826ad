// SPDX-License-Identifier: Apache-2.0
//! Handshake events from the kernel side: each completed or abandoned handshake classified (role, full or resumed,
//! certificate key, key exchange, and what its ServerHello said) and counted with its CPU, the probes' cost
//! taken out.

use std::collections::{BTreeMap, HashMap};

use super::anatomy;
use super::wire;
use crate::model::{CpuHistogram, HandshakeCounts, HandshakeGroup, HandshakeKind, Hits, Outcome, ProbeCost, Role};
use crate::record::kernel::bpf::copy_head;
use crate::record::kernel::bpf::types::{
    handshake_event, hello_event, tlsprof_event_kind, tlsprof_func_flags as ff, tlsprof_outcome,
};

/// ServerHellos captured for connections whose handshakes have not completed yet, at most: some never do.
/// The table is sized for it at start, so that it never doubles late in a recording.
const MAX_PENDING_HELLOS: usize = 4096;

/// The handshakes a probe window saw, by process.
#[derive(Default)]
pub struct WindowSeen {
    pub counts: BTreeMap<u32, HandshakeCounts>,
    /// How long each abandoned handshake took to end after its work began (ns): one is seen only when both
    /// fall inside the attachment.
    pub abandoned_work_to_end: BTreeMap<u32, CpuHistogram>,
}

pub struct Handshakes {
    cost: ProbeCost,
    /// By process and kind.
    groups: BTreeMap<(u32, HandshakeKind), CpuHistogram>,
    /// ServerHellos by (tgid, SSL *), until their handshake completes.
    hellos: HashMap<(u32, u64), wire::Hello>,
    pub completed: u64,
    pub abandoned: u64,
    /// Handshakes of the current probe window.
    window: WindowSeen,
}

impl Handshakes {
    pub fn new(cost: ProbeCost) -> Handshakes {
        Handshakes {
            cost,
            groups: BTreeMap::new(),
            hellos: HashMap::with_capacity(MAX_PENDING_HELLOS),
            completed: 0,
            abandoned: 0,
            window: WindowSeen::default(),
        }
    }

    /// Takes one record of the handshakes ring buffer (enum tlsprof_event_kind).
    pub fn add(&mut self, data: &[u8]) {
        let kind = data
            .get(..4)
            .map(|k| u32::from_ne_bytes(k.try_into().expect("4 bytes")));
        if kind == Some(tlsprof_event_kind::EVENT_HELLO.0) {
            if let Some((conn, hello)) = parse_hello(data) {
                if self.hellos.len() >= MAX_PENDING_HELLOS {
                    self.hellos.clear();
                }
                self.hellos.insert(conn, hello);
            }
            return;
        }
        let mut e = handshake_event::default();
        if plain::copy_from_bytes(&mut e, data).is_ok() {
            let nested = Hits {
                all: e.nested_hits.into(),
                stepped: e.nested_stepped.into(),
            };
            let cpu_ns = self.cost.correct(e.cpu_ns, u64::from(e.calls), nested);
            let hello = self.hellos.remove(&(e.tgid, e.ssl));
            let kind = classify(&e, hello);
            match kind.outcome {
                Outcome::Completed => self.completed += 1,
                Outcome::Abandoned => self.abandoned += 1,
            }
            self.window.counts.entry(e.tgid).or_default().add(&kind, 1);
            if kind.outcome == Outcome::Abandoned {
                self.window
                    .abandoned_work_to_end
                    .entry(e.tgid)
                    .or_default()
                    .add(e.work_to_end_ns);
            }
            self.groups.entry((e.tgid, kind)).or_default().add(cpu_ns);
        }
    }

    /// The current window's handshakes; the next window starts from none.
    pub fn take_window(&mut self) -> WindowSeen {
        std::mem::take(&mut self.window)
    }

    /// The handshakes counted since the last call, by process and kind; counting starts again from none.
    pub fn take_groups(&mut self) -> Vec<HandshakeGroup> {
        std::mem::take(&mut self.groups)
            .into_iter()
            .map(|((pid, kind), cpu)| HandshakeGroup {
                pid: Some(pid),
                kind,
                cpu,
            })
            .collect()
    }

    /// The stage probes detach: no handshake event comes until they attach again, so the ServerHellos still
    /// waiting for one are dropped. Hellos the capture takes while the probes are detached (it runs on its
    /// own schedule) would otherwise pile up until the bound.
    pub fn forget_pending_hellos(&mut self) {
        self.hellos.clear();
    }

    /// Forgets what is kept of a process that exited: its ServerHellos waiting for a handshake.
    pub fn forget(&mut self, pid: u32) {
        self.hellos.retain(|&(tgid, _), _| tgid != pid);
    }
}

fn parse_hello(data: &[u8]) -> Option<((u32, u64), wire::Hello)> {
    let header = std::mem::offset_of!(hello_event, data);
    let mut e = hello_event::default();
    if !copy_head(&mut e, data, header) {
        return None;
    }
    let bytes = data.get(header..header + e.len as usize)?;
    Some(((e.tgid, e.ssl), wire::parse(bytes, e.body_only != 0)?))
}

/// A handshake is full when it used the certificate (a private-key operation or a peer chain check);
/// resumed ones authenticate with the session's secret instead (a TLS 1.3 server says so: pre_shared_key).
/// RSA key transport only where the ServerHello named such a suite: a private-key operation without a
/// signature seen is no proof (a signer the probes do not see, as Go's crypto.Signer, makes none).
fn classify(e: &handshake_event, hello: Option<wire::Hello>) -> HandshakeKind {
    let cert_ops = u32::from(e.cert_ops);
    let role = match u32::from(e.role) {
        r if r == ff::FF_ROLE_SERVER.0 => Role::Server,
        r if r == ff::FF_ROLE_CLIENT.0 => Role::Client,
        _ => Role::Partial,
    };
    let resumed = cert_ops & (ff::FF_PRIVATE_KEY_OP.0 | ff::FF_PEER_CERT_CHECK.0) == 0;
    let hello = hello.unwrap_or_default();
    let rsa_transport = hello.cipher.as_deref().is_some_and(wire::rsa_key_transport);
    // TLS 1.3 resumes with a pre-shared key; TLS 1.2's ServerHello does not say whether by ID or ticket.
    let resumption = match (resumed, hello.version) {
        (true, Some("TLSv1.3")) if hello.psk => Some("TLS 1.3 PSK".to_string()),
        (true, Some("TLSv1.2")) => Some("TLS 1.2 session ID or ticket".to_string()),
        _ => None,
    };
    HandshakeKind {
        resumption,
        role,
        resumed,
        certificate_key: if resumed {
            None
        } else {
            anatomy::certificate_key(e.sig_len)
        },
        key_exchange: hello
            .group
            .or_else(|| anatomy::key_exchange_returned(e.returned_secret_len))
            .or_else(|| anatomy::key_exchange(e.secret_len, rsa_transport)),
        version: hello.version.map(str::to_string),
        cipher: hello.cipher,
        outcome: if u64::from(e.outcome) == u64::from(tlsprof_outcome::OUTCOME_ABANDONED.0) {
            Outcome::Abandoned
        } else {
            Outcome::Completed
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsa_key_transport_only_where_the_server_hello_names_it() {
        // A full server handshake whose signer the probes did not see (Go's crypto.Signer), no ServerHello.
        let mut e = handshake_event {
            role: ff::FF_ROLE_SERVER.0 as u16,
            cert_ops: ff::FF_PRIVATE_KEY_OP.0 as u16,
            ..handshake_event::default()
        };
        assert_eq!(classify(&e, None).key_exchange, None);
        let hello = |cipher: &str| wire::Hello {
            version: Some("TLSv1.2"),
            cipher: Some(cipher.into()),
            ..wire::Hello::default()
        };
        assert_eq!(
            classify(&e, Some(hello("AES128-GCM-SHA256"))).key_exchange.as_deref(),
            Some("RSA key transport")
        );
        assert_eq!(
            classify(&e, Some(hello("ECDHE-RSA-AES128-GCM-SHA256"))).key_exchange,
            None
        );
        e.secret_len = 32;
        assert_eq!(
            classify(&e, None).key_exchange.as_deref(),
            Some("ECDHE (X25519 or P-256)")
        );
    }
}
