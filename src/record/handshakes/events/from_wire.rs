// SPDX-License-Identifier: Apache-2.0
//! Handshakes as the wire shows them: a TCP connection's hellos and end as the socket programs followed them,
//! and QUIC's from its Initial packets; counted for a process counted from the wire alone, kept to check the
//! probes' counts with (or to name a QUIC handshake the probes saw) for the others.

use std::time::Instant;

use super::{
    hello_bytes, offer_and_refusal, Handshakes, Hellos, PendingClientHello, MAX_CLIENT_HELLO_BYTES, MAX_PENDING_HELLOS,
};
use crate::model::{HandshakeKind, Outcome, Role};
use crate::record::handshakes::quic;
use crate::record::handshakes::wire;
use crate::record::kernel::bpf::types::{tlsprof_func_flags as ff, tlsprof_outcome, tlsprof_target_flags, wire_event};

/// A handshake followed on the wire, until it ends: its hellos as they came.
#[derive(Default)]
pub(super) struct WireHellos {
    client: Option<PendingClientHello>,
    server: Option<wire::Hello>,
}

impl Handshakes {
    /// A hello of a handshake followed on the wire: a ClientHello (or the rest of one), or a ServerHello.
    pub(super) fn add_wire_hello(&mut self, data: &[u8], client: bool) {
        let Some((e, bytes)) = hello_bytes(data) else {
            return;
        };
        let key = (e.tgid, e.ssl);
        if !self.wire.contains_key(&key) && self.wire.len() >= MAX_PENDING_HELLOS {
            self.wire.clear();
        }
        let h = self.wire.entry(key).or_default();
        let body_only = e.body_only != 0;
        match (client, &mut h.client) {
            (true, _) if e.continued == 0 => {
                h.client = Some(PendingClientHello {
                    body_only,
                    bytes: bytes.to_vec(),
                })
            }
            (true, Some(pending)) => {
                if pending.bytes.len() + bytes.len() <= MAX_CLIENT_HELLO_BYTES {
                    pending.bytes.extend_from_slice(bytes);
                }
            }
            (true, None) => {}
            (false, _) => h.server = wire::parse(bytes, body_only),
        }
    }

    /// A handshake followed on the wire ended.
    pub(super) fn add_wire_end(&mut self, data: &[u8]) {
        let mut e = wire_event::default();
        if plain::copy_from_bytes(&mut e, data).is_err() {
            return;
        }
        let hellos = self.wire.remove(&(e.tgid, e.conn)).unwrap_or_default();
        let client = hellos
            .client
            .and_then(|c| wire::parse_client_hello(&c.bytes, c.body_only));
        let role = if u32::from(e.role) == ff::FF_ROLE_CLIENT.0 {
            Role::Client
        } else {
            Role::Server
        };
        let completed = u64::from(e.outcome) != u64::from(tlsprof_outcome::OUTCOME_ABANDONED.0);
        let kind = classify_wire(role, completed, hellos.server, client);
        self.wire_ended(e.tgid, e.target_flags, kind, client, e.hello_to_end_ns);
    }

    /// A handshake the wire saw end: counted as the probes count theirs for a process counted from the wire
    /// alone (`target_flags`), else kept to check the probes' counts with.
    fn wire_ended(
        &mut self,
        tgid: u32,
        target_flags: u32,
        kind: HandshakeKind,
        client: Option<wire::ClientOffer>,
        hello_to_end_ns: u64,
    ) {
        if u64::from(target_flags) & tlsprof_target_flags::TARGET_WIRE_ONLY.0 as u64 != 0 {
            self.count(tgid, kind, client, None, hello_to_end_ns);
        } else if self.check_wire {
            self.window.wire.entry(tgid).or_default().add(&kind, 1);
        }
    }

    /// A target's datagram that begins with a QUIC long header: the QUIC handshakes it (or the time since
    /// the last) ended. A probed process's are kept for the probes' event of the same handshake, which comes
    /// after (a server completes on the client's Handshake packet) and is tied to them by a random.
    pub(super) fn add_quic_datagram(&mut self, data: &[u8]) {
        let Some((e, bytes)) = hello_bytes(data) else {
            return;
        };
        let now = Instant::now();
        let mut ended = self.quic.datagram(e.tgid, e.target_flags, e.ssl == 1, bytes, now);
        ended.extend(self.quic.expire(now));
        for h in ended {
            let (server, client) = quic_hellos_parsed(h.server_hello.as_deref(), h.client_hello.as_deref());
            let probed = u64::from(h.target_flags) & tlsprof_target_flags::TARGET_WIRE_ONLY.0 as u64 == 0;
            if probed {
                if self.quic_ended.len() >= MAX_PENDING_HELLOS {
                    self.quic_ended.clear();
                }
                for random in [&h.client_hello, &h.server_hello]
                    .into_iter()
                    .flatten()
                    .filter_map(|m| quic::random(m))
                {
                    self.quic_ended.insert((h.tgid, random), (server.clone(), client));
                }
            }
            let kind = HandshakeKind {
                quic: true,
                ..classify_wire(h.role, h.completed, server, client)
            };
            self.wire_ended(h.tgid, h.target_flags, kind, client, h.hello_to_end_ns);
        }
    }

    /// The start of a QUIC connection's hello as its TLS library took it in: its random ties the connection to
    /// its Initial packets.
    pub(super) fn add_quic_conn(&mut self, data: &[u8]) {
        let Some((e, bytes)) = hello_bytes(data) else {
            return;
        };
        let Some(random) = quic::random(bytes) else {
            return;
        };
        if self.quic_randoms.len() >= MAX_PENDING_HELLOS {
            self.quic_randoms.clear();
        }
        self.quic_randoms.insert((e.tgid, e.ssl), random);
    }

    /// The hellos the wire read of the QUIC connection `ssl` of a probed process: of one that ended on the
    /// wire, or of one under way there (a client completes before it sends its Handshake packet).
    pub(super) fn quic_hellos(&mut self, tgid: u32, ssl: u64) -> Option<Hellos> {
        let random = self.quic_randoms.remove(&(tgid, ssl))?;
        let (server, client) = match self.quic_ended.remove(&(tgid, random)) {
            Some(h) => h,
            None => {
                let h = self.quic.hellos_by_random(tgid, &random)?;
                quic_hellos_parsed(h.server, h.client)
            }
        };
        Some(Hellos {
            server: server?,
            client,
        })
    }
}

/// A handshake's hellos as parsed: its ServerHello's fields and its ClientHello's offer.
pub(super) type ParsedHellos = (Option<wire::Hello>, Option<wire::ClientOffer>);

/// A QUIC handshake's hellos (whole messages) as parsed.
fn quic_hellos_parsed(server_hello: Option<&[u8]>, client_hello: Option<&[u8]>) -> ParsedHellos {
    (
        server_hello.and_then(|b| wire::parse(b, true)),
        client_hello.and_then(|b| wire::parse_client_hello(b, true)),
    )
}

/// A handshake as the wire showed it: resumed when a TLS 1.3 server accepted a pre-shared key, or a TLS 1.2
/// one echoed the session ID offered (or, where the ClientHello was not read whole, answered with a
/// ChangeCipherSpec instead of a certificate). The certificate key is a TLS 1.2 server's Certificate's (a TLS
/// 1.3 certificate is encrypted).
pub(super) fn classify_wire(
    role: Role,
    completed: bool,
    server: Option<wire::Hello>,
    client: Option<wire::ClientOffer>,
) -> HandshakeKind {
    let outcome = if completed {
        Outcome::Completed
    } else {
        Outcome::Abandoned
    };
    let hello = server.unwrap_or_default();
    let resumed = match hello.version {
        Some("TLSv1.3") => hello.psk,
        _ => match client {
            Some(c) => c.echoed_by(&hello),
            None => hello.abbreviated == Some(true),
        },
    };
    let offer = offer_and_refusal(
        role,
        resumed || outcome == Outcome::Abandoned,
        hello.version,
        client.as_ref(),
    );
    let resumption = match (resumed, hello.version) {
        (true, Some("TLSv1.3")) => Some("TLS 1.3 PSK".to_string()),
        (true, Some("TLSv1.2")) => Some("TLS 1.2 session ID or ticket".to_string()),
        _ => None,
    };
    let key_exchange = match &hello.cipher {
        Some(c) if wire::rsa_key_transport(c) => Some("RSA key transport".to_string()),
        _ => hello.group.clone(),
    };
    HandshakeKind {
        role,
        resumed,
        certificate_key: if resumed { None } else { hello.certificate_key.clone() },
        key_exchange: if resumed && hello.version != Some("TLSv1.3") {
            None
        } else {
            key_exchange
        },
        version: hello.version.map(str::to_string),
        cipher: hello.cipher,
        resumption,
        outcome,
        offer: Some(offer.0),
        refusal: offer.1,
        quic: false,
    }
}
