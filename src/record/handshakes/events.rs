// SPDX-License-Identifier: Apache-2.0
//! Handshake events from the kernel side: each completed or abandoned handshake classified (role, full or resumed,
//! certificate key, key exchange, what its ServerHello said and what its ClientHello offered to resume) and
//! counted with its CPU, the probes' cost taken out.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

mod from_wire;

use super::anatomy;
use super::quic::QuicWire;
use super::wire;
use crate::model::{
    CpuHistogram, HandshakeCounts, HandshakeGroup, HandshakeKind, HelloCounts, Hits, Offer, Outcome, ProbeCost,
    Refusal, Role, TicketKey,
};
use crate::record::kernel::bpf::copy_head;
use crate::record::kernel::bpf::types::{
    handshake_event, hello_event, tlsprof_event_kind, tlsprof_func_flags as ff, tlsprof_outcome,
};

/// ServerHellos captured for connections whose handshakes have not completed yet, at most: some never do.
/// The table is sized for it at start, so that it never doubles late in a recording.
const MAX_PENDING_HELLOS: usize = 4096;

/// The most bytes of one ClientHello assembled from the reads that carried it: more is no ClientHello.
const MAX_CLIENT_HELLO_BYTES: usize = 16 << 10;

/// Ticket key names kept per process; more (a client sending made-up tickets) are counted together.
const MAX_TICKET_KEYS_PER_PROCESS: usize = 32;

/// What a connection's hellos said, until its handshake completes.
struct Hellos {
    server: wire::Hello,
    /// None: the ClientHello was not read whole.
    client: Option<wire::ClientOffer>,
}

/// A ClientHello's bytes as they came, until the ServerHello on the same socket.
struct PendingClientHello {
    body_only: bool,
    bytes: Vec<u8>,
}

/// The handshakes a probe window saw, by process.
#[derive(Default)]
pub struct WindowSeen {
    pub counts: BTreeMap<u32, HandshakeCounts>,
    /// How long each abandoned handshake took to end after its work began (ns): one is seen only when both
    /// fall inside the attachment.
    pub abandoned_work_to_end: BTreeMap<u32, CpuHistogram>,
    /// How long each handshake counted from the wire alone took from its ClientHello to its end (ns): one is
    /// followed only when both fall inside the attachment, while its connection counts if it was accepted
    /// there.
    pub wire_hello_to_end: BTreeMap<u32, CpuHistogram>,
    /// The completed handshakes whose ClientHello was read, by process and role.
    pub hellos: BTreeMap<u32, BTreeMap<Role, HelloCounts>>,
    /// The handshakes of probed processes as their sockets showed them, to check the probes' counts with.
    pub wire: BTreeMap<u32, HandshakeCounts>,
}

pub struct Handshakes {
    cost: ProbeCost,
    /// By process, kind and whether counted from the wire.
    groups: BTreeMap<(u32, HandshakeKind, bool), CpuHistogram>,
    /// Handshakes followed on the wire by (tgid, connection number), until they end.
    wire: HashMap<(u32, u64), from_wire::WireHellos>,
    /// QUIC connections followed from their Initial packets, until they end.
    quic: QuicWire,
    /// Probed processes' QUIC connections by (tgid, connection): the random of the first hello their library
    /// took in, until their handshake ends.
    quic_randoms: HashMap<(u32, u64), [u8; 32]>,
    /// Probed processes' QUIC handshakes that ended on the wire, by (tgid, each of their randoms): their hellos,
    /// until the probes' event of the same handshake takes them.
    quic_ended: HashMap<(u32, [u8; 32]), from_wire::ParsedHellos>,
    /// The sockets are read whenever the probes are attached (--hello-capture always): the wire's counts of
    /// probed processes check the probes'. In short hello windows they would count a part alone.
    check_wire: bool,
    /// ServerHellos (and the ClientHellos before them) by (tgid, SSL *), until their handshake completes.
    hellos: HashMap<(u32, u64), Hellos>,
    /// ClientHellos by (tgid, fd), until a ServerHello on that socket.
    client_hellos: HashMap<(u32, i32), PendingClientHello>,
    /// Ticket key names offered to servers, by process and name (None: past the number kept).
    ticket_keys: BTreeMap<(u32, Option<[u8; 16]>), TicketKey>,
    /// Since when ticket keys' times count.
    since: Instant,
    pub completed: u64,
    pub abandoned: u64,
    /// Handshakes of the current probe window.
    window: WindowSeen,
}

impl Handshakes {
    pub fn new(cost: ProbeCost, check_wire: bool) -> Handshakes {
        Handshakes {
            cost,
            groups: BTreeMap::new(),
            hellos: HashMap::with_capacity(MAX_PENDING_HELLOS),
            client_hellos: HashMap::with_capacity(MAX_PENDING_HELLOS),
            wire: HashMap::with_capacity(MAX_PENDING_HELLOS),
            quic: QuicWire::default(),
            quic_randoms: HashMap::new(),
            quic_ended: HashMap::new(),
            check_wire,
            ticket_keys: BTreeMap::new(),
            since: Instant::now(),
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
        if kind == Some(tlsprof_event_kind::EVENT_CLIENT_HELLO.0) {
            self.add_client_hello(data);
            return;
        }
        if kind == Some(tlsprof_event_kind::EVENT_HELLO.0) {
            self.add_server_hello(data);
            return;
        }
        if kind == Some(tlsprof_event_kind::EVENT_WIRE_CLIENT_HELLO.0) {
            self.add_wire_hello(data, true);
            return;
        }
        if kind == Some(tlsprof_event_kind::EVENT_WIRE_SERVER_HELLO.0) {
            self.add_wire_hello(data, false);
            return;
        }
        if kind == Some(tlsprof_event_kind::EVENT_WIRE_END.0) {
            self.add_wire_end(data);
            return;
        }
        if kind == Some(tlsprof_event_kind::EVENT_QUIC_DATAGRAM.0) {
            self.add_quic_datagram(data);
            return;
        }
        if kind == Some(tlsprof_event_kind::EVENT_QUIC_CONN.0) {
            self.add_quic_conn(data);
            return;
        }
        let mut e = handshake_event::default();
        if plain::copy_from_bytes(&mut e, data).is_ok() {
            let nested = Hits {
                all: e.nested_hits.into(),
                stepped: e.nested_stepped.into(),
            };
            let cpu_ns = self.cost.correct(e.cpu_ns, u64::from(e.calls), nested);
            // A client's ServerHello may have come under its first flight's key (bpf/tlsprof.h, hello_ssl).
            let hello_key = if e.hello_ssl != 0 { e.hello_ssl } else { e.ssl };
            let (hellos, quic) = match self.hellos.remove(&(e.tgid, hello_key)) {
                Some(h) => (Some(h), false),
                None => {
                    let h = self.quic_hellos(e.tgid, e.ssl);
                    let quic = h.is_some();
                    (h, quic)
                }
            };
            let client = hellos.as_ref().and_then(|h| h.client);
            let kind = HandshakeKind {
                quic,
                ..classify(&e, hellos.map(|h| (h.server, h.client)))
            };
            self.count(e.tgid, kind, client, Some(cpu_ns), e.work_to_end_ns);
        }
    }

    /// A handshake of process tgid seen to end: in the totals, the window's counts and its group (`cpu_ns`:
    /// its CPU; None, counted from the wire, whose CPU is not known); `work_to_end_ns`: an abandoned one's
    /// time from its work to its end.
    fn count(
        &mut self,
        tgid: u32,
        kind: HandshakeKind,
        client: Option<wire::ClientOffer>,
        cpu_ns: Option<u64>,
        work_to_end_ns: u64,
    ) {
        self.count_ticket_key(tgid, &kind, client);
        match kind.outcome {
            Outcome::Completed => self.completed += 1,
            Outcome::Abandoned => self.abandoned += 1,
        }
        self.window.counts.entry(tgid).or_default().add(&kind, 1);
        if kind.hello_read() {
            let h = self
                .window
                .hellos
                .entry(tgid)
                .or_default()
                .entry(kind.role)
                .or_default();
            h.read += 1;
            h.refused += u64::from(kind.refusal.is_some());
        }
        if kind.outcome == Outcome::Abandoned {
            self.window
                .abandoned_work_to_end
                .entry(tgid)
                .or_default()
                .add(work_to_end_ns);
        } else if cpu_ns.is_none() {
            self.window
                .wire_hello_to_end
                .entry(tgid)
                .or_default()
                .add(work_to_end_ns);
        }
        self.groups
            .entry((tgid, kind, cpu_ns.is_none()))
            .or_default()
            .add(cpu_ns.unwrap_or(0));
    }

    /// A ClientHello, or the rest of one: kept by socket until the ServerHello that answers it.
    fn add_client_hello(&mut self, data: &[u8]) {
        let Some((e, bytes)) = hello_bytes(data) else {
            return;
        };
        let key = (e.tgid, e.fd);
        if e.continued == 0 {
            if self.client_hellos.len() >= MAX_PENDING_HELLOS {
                self.client_hellos.clear();
            }
            let body_only = e.body_only != 0;
            let bytes = bytes.to_vec();
            self.client_hellos.insert(key, PendingClientHello { body_only, bytes });
        } else if let Some(pending) = self.client_hellos.get_mut(&key) {
            if pending.bytes.len() + bytes.len() <= MAX_CLIENT_HELLO_BYTES {
                pending.bytes.extend_from_slice(bytes);
            }
        }
    }

    /// A ServerHello, with the ClientHello that came before it on its socket.
    fn add_server_hello(&mut self, data: &[u8]) {
        let Some((e, bytes)) = hello_bytes(data) else {
            return;
        };
        let Some(server) = wire::parse(bytes, e.body_only != 0) else {
            return;
        };
        let client = self
            .client_hellos
            .remove(&(e.tgid, e.fd))
            .and_then(|c| wire::parse_client_hello(&c.bytes, c.body_only));
        if self.hellos.len() >= MAX_PENDING_HELLOS {
            self.hellos.clear();
        }
        self.hellos.insert((e.tgid, e.ssl), Hellos { server, client });
    }

    /// A ticket offered to a server: under its key name, accepted or refused.
    fn count_ticket_key(&mut self, pid: u32, kind: &HandshakeKind, client: Option<wire::ClientOffer>) {
        let Some(offer) = client.filter(|_| kind.outcome == Outcome::Completed && kind.role == Role::Server) else {
            return;
        };
        if !(kind.resumed || kind.refusal == Some(Refusal::Ticket)) || !carries_key_name(&offer) {
            return;
        }
        let named = self.ticket_keys.range((pid, None)..=(pid, Some([0xff; 16]))).count();
        let name = Some(offer.ticket_head)
            .filter(|n| named < MAX_TICKET_KEYS_PER_PROCESS || self.ticket_keys.contains_key(&(pid, Some(*n))));
        let at_s = self.since.elapsed().as_secs_f64();
        self.ticket_keys
            .entry((pid, name))
            .or_insert_with(|| TicketKey::new(pid, name.map(hex), at_s))
            .add(kind.resumed, at_s);
    }

    /// The ticket key names counted since the last call; counting starts again from none, its times from now.
    pub fn take_ticket_keys(&mut self) -> Vec<TicketKey> {
        self.since = Instant::now();
        std::mem::take(&mut self.ticket_keys).into_values().collect()
    }

    /// Whether the current probe window has read ClientHellos.
    pub fn window_read_hellos(&self) -> bool {
        !self.window.hellos.is_empty()
    }

    /// The current window's handshakes; the next window starts from none.
    pub fn take_window(&mut self) -> WindowSeen {
        std::mem::take(&mut self.window)
    }

    /// The handshakes counted since the last call, by process and kind; counting starts again from none.
    pub fn take_groups(&mut self) -> Vec<HandshakeGroup> {
        std::mem::take(&mut self.groups)
            .into_iter()
            .map(|((pid, kind, from_wire), cpu)| HandshakeGroup {
                pid: Some(pid),
                kind,
                cpu,
                from_wire,
            })
            .collect()
    }

    /// The stage probes detach: no handshake event comes until they attach again, so the ServerHellos still
    /// waiting for one are dropped. Hellos the capture takes while the probes are detached (it runs on its
    /// own schedule) would otherwise pile up until the bound.
    pub fn forget_pending_hellos(&mut self) {
        self.hellos.clear();
        self.client_hellos.clear();
        self.wire.clear();
        self.quic.clear();
        self.quic_randoms.clear();
        self.quic_ended.clear();
    }

    /// Forgets what is kept of a process that exited: its hellos waiting for a handshake.
    pub fn forget(&mut self, pid: u32) {
        self.hellos.retain(|&(tgid, _), _| tgid != pid);
        self.client_hellos.retain(|&(tgid, _), _| tgid != pid);
        self.wire.retain(|&(tgid, _), _| tgid != pid);
        self.quic.forget(pid);
        self.quic_randoms.retain(|&(tgid, _), _| tgid != pid);
        self.quic_ended.retain(|&(tgid, _), _| tgid != pid);
    }
}

/// A hello event's header and the bytes it carries.
fn hello_bytes(data: &[u8]) -> Option<(hello_event, &[u8])> {
    let header = std::mem::offset_of!(hello_event, data);
    let mut e = hello_event::default();
    if !copy_head(&mut e, data, header) {
        return None;
    }
    let bytes = data.get(header..header + e.len as usize)?;
    Some((e, bytes))
}

/// Tickets longer than a session ID, as OpenSSL's are (key name, IV, encrypted session, MAC); a TLS 1.3
/// identity the size of a session ID is a cache entry's.
fn carries_key_name(offer: &wire::ClientOffer) -> bool {
    matches!(offer.offer, Offer::Ticket | Offer::Psk) && offer.ticket_len > MAX_SESSION_ID_LEN
}

/// RFC 5246: a session ID is at most 32 bytes.
const MAX_SESSION_ID_LEN: usize = 32;

fn hex(bytes: [u8; 16]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the ClientHello offered, and if the offer was refused, why as far as the wire tells.
fn offer_and_refusal(
    role: Role,
    resumed: bool,
    version: Option<&str>,
    client: Option<&wire::ClientOffer>,
) -> (Offer, Option<Refusal>) {
    let Some(c) = client else {
        return (Offer::Unparsed, None);
    };
    if !c.offer.offered() || resumed || role == Role::Partial {
        return (c.offer, None);
    }
    let refusal = match (c.offer, version) {
        (Offer::SessionId | Offer::Ticket, Some("TLSv1.3")) => Refusal::VersionChanged,
        (Offer::Psk, Some(v)) if v != "TLSv1.3" => Refusal::VersionChanged,
        (Offer::SessionId, _) => Refusal::SessionNotCached,
        (Offer::Psk, _) if c.ticket_len <= MAX_SESSION_ID_LEN => Refusal::SessionNotCached,
        _ if role == Role::Server => Refusal::Ticket,
        _ => Refusal::Unknown,
    };
    (c.offer, Some(refusal))
}

/// A handshake is full when it used the certificate (a private-key operation or a peer chain check);
/// resumed ones authenticate with the session's secret instead (a TLS 1.3 server says so: pre_shared_key).
/// RSA key transport only where the ServerHello named such a suite: a private-key operation without a
/// signature seen is no proof (a signer the probes do not see, as Go's crypto.Signer, makes none).
fn classify(e: &handshake_event, hellos: Option<(wire::Hello, Option<wire::ClientOffer>)>) -> HandshakeKind {
    let cert_ops = u32::from(e.cert_ops);
    let role = match u32::from(e.role) {
        r if r == ff::FF_ROLE_SERVER.0 => Role::Server,
        r if r == ff::FF_ROLE_CLIENT.0 => Role::Client,
        _ => Role::Partial,
    };
    let resumed = cert_ops & (ff::FF_PRIVATE_KEY_OP.0 | ff::FF_PEER_CERT_CHECK.0) == 0;
    let outcome = if u64::from(e.outcome) == u64::from(tlsprof_outcome::OUTCOME_ABANDONED.0) {
        Outcome::Abandoned
    } else {
        Outcome::Completed
    };
    let (hello, offer) = match hellos {
        // A refusal is told of completed handshakes only: an abandoned one may have failed for any reason.
        Some((hello, client)) => {
            let resumed_or_unknown = resumed || outcome == Outcome::Abandoned;
            let offer = offer_and_refusal(role, resumed_or_unknown, hello.version, client.as_ref());
            (hello, Some(offer))
        }
        None => (wire::Hello::default(), None),
    };
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
        // A signer the probes do not see (Go's crypto.Signer): a TLS 1.2 certificate's key, as the wire read it.
        certificate_key: if resumed {
            None
        } else {
            anatomy::certificate_key(e.sig_len).or_else(|| hello.certificate_key.clone())
        },
        key_exchange: hello
            .group
            .or_else(|| anatomy::key_exchange_returned(e.returned_secret_len))
            .or_else(|| anatomy::key_exchange(e.secret_len, rsa_transport)),
        version: hello.version.map(str::to_string),
        cipher: hello.cipher,
        outcome,
        offer: offer.map(|o| o.0),
        refusal: offer.and_then(|o| o.1),
        quic: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProbeCost;
    use crate::record::kernel::bpf::types::{tlsprof_target_flags, wire_event};
    use wire::tests::{client_hello, psk, tls13_server_hello, tls13_versions};

    /// A hello event as the ring buffer carries it.
    fn hello(kind: tlsprof_event_kind, fd: i32, continued: bool, data: &[u8]) -> Vec<u8> {
        let mut e = hello_event {
            kind: kind.0,
            tgid: 7,
            ssl: 0x5000,
            fd,
            continued: u32::from(continued),
            len: data.len() as u32,
            ..hello_event::default()
        };
        e.data[..data.len()].copy_from_slice(data);
        // SAFETY: hello_event is plain data (record::kernel::bpf), read as the bytes it is made of.
        let bytes = unsafe { plain::as_bytes(&e) };
        bytes[..std::mem::offset_of!(hello_event, data) + data.len()].to_vec()
    }

    #[test]
    fn a_client_hello_read_in_two_parts_is_tied_to_its_connection_through_the_server_hello() {
        let mut h = Handshakes::new(ProbeCost::default(), false);
        let mut ticket = vec![0xab; 16];
        ticket.extend([3u8; 150]);
        let ch = client_hello(&[tls13_versions(), psk(&ticket)]);
        // Another socket's ClientHello, whose ServerHello never comes, and the one of fd 9 in two reads.
        h.add(&hello(
            tlsprof_event_kind::EVENT_CLIENT_HELLO,
            8,
            false,
            &client_hello(&[]),
        ));
        h.add(&hello(tlsprof_event_kind::EVENT_CLIENT_HELLO, 9, false, &ch[..100]));
        h.add(&hello(tlsprof_event_kind::EVENT_CLIENT_HELLO, 9, true, &ch[100..]));
        h.add(&hello(
            tlsprof_event_kind::EVENT_HELLO,
            9,
            false,
            &tls13_server_hello(false),
        ));
        let full = handshake_event {
            kind: tlsprof_event_kind::EVENT_HANDSHAKE.0,
            tgid: 7,
            ssl: 0x5000,
            role: ff::FF_ROLE_SERVER.0 as u16,
            cert_ops: ff::FF_PRIVATE_KEY_OP.0 as u16,
            calls: 1,
            ..handshake_event::default()
        };
        // SAFETY: as above.
        h.add(unsafe { plain::as_bytes(&full) });
        let groups = h.take_groups();
        let [g] = &groups[..] else { panic!("{groups:?}") };
        assert_eq!(
            (g.kind.offer, g.kind.refusal),
            (Some(Offer::Psk), Some(Refusal::Ticket))
        );
        let keys = h.take_ticket_keys();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].name.as_deref(), Some("abababababababababababababababab"));
        assert_eq!((keys[0].accepted, keys[0].refused_unknown_key), (0, 1));
        // Without its second part the same ClientHello is not read: unparsed, never taken for no offer.
        h.add(&hello(tlsprof_event_kind::EVENT_CLIENT_HELLO, 9, false, &ch[..100]));
        h.add(&hello(
            tlsprof_event_kind::EVENT_HELLO,
            9,
            false,
            &tls13_server_hello(false),
        ));
        h.add(unsafe { plain::as_bytes(&full) });
        assert_eq!(h.take_groups()[0].kind.offer, Some(Offer::Unparsed));
    }

    /// A handshake's end as the wire saw it, on connection 3 of process 7.
    fn wire_end(outcome: tlsprof_outcome, flags: tlsprof_target_flags) -> Vec<u8> {
        let e = wire_event {
            kind: tlsprof_event_kind::EVENT_WIRE_END.0,
            tgid: 7,
            conn: 3,
            role: ff::FF_ROLE_SERVER.0 as u16,
            outcome: outcome.0 as u16,
            target_flags: flags.0,
            ..wire_event::default()
        };
        // SAFETY: wire_event is plain data, read as the bytes it is made of.
        unsafe { plain::as_bytes(&e) }.to_vec()
    }

    /// A wire hello of connection 3 (hello_event's `ssl`).
    fn wire_hello(kind: tlsprof_event_kind, continued: bool, data: &[u8]) -> Vec<u8> {
        let mut bytes = hello(kind, 9, continued, data);
        let at = std::mem::offset_of!(hello_event, ssl);
        bytes[at..at + 8].copy_from_slice(&3u64.to_ne_bytes());
        bytes
    }

    #[test]
    fn a_handshake_counted_from_the_wire_alone_is_a_group_without_cpu() {
        let mut h = Handshakes::new(ProbeCost::default(), false);
        let mut ticket = vec![0xcd; 16];
        ticket.extend([5u8; 120]);
        let ch = client_hello(&[tls13_versions(), psk(&ticket)]);
        h.add(&wire_hello(
            tlsprof_event_kind::EVENT_WIRE_CLIENT_HELLO,
            false,
            &ch[..60],
        ));
        h.add(&wire_hello(
            tlsprof_event_kind::EVENT_WIRE_CLIENT_HELLO,
            true,
            &ch[60..],
        ));
        h.add(&wire_hello(
            tlsprof_event_kind::EVENT_WIRE_SERVER_HELLO,
            false,
            &tls13_server_hello(true),
        ));
        h.add(&wire_end(
            tlsprof_outcome::OUTCOME_COMPLETED,
            tlsprof_target_flags::TARGET_WIRE_ONLY,
        ));
        let groups = h.take_groups();
        let [g] = &groups[..] else { panic!("{groups:?}") };
        assert!(g.from_wire && g.kind.resumed && g.kind.role == Role::Server, "{g:?}");
        assert_eq!((g.kind.offer, g.kind.refusal), (Some(Offer::Psk), None));
        assert_eq!(g.kind.version.as_deref(), Some("TLSv1.3"));
        assert_eq!(g.cpu.count, 1);
        assert_eq!(h.completed, 1);
        // Its end without hellos (the programs attached after them): counted, its fields unknown.
        h.add(&wire_end(
            tlsprof_outcome::OUTCOME_ABANDONED,
            tlsprof_target_flags::TARGET_WIRE_ONLY,
        ));
        let groups = h.take_groups();
        let [g] = &groups[..] else { panic!("{groups:?}") };
        assert!(
            g.from_wire && g.kind.outcome == Outcome::Abandoned && g.kind.version.is_none(),
            "{g:?}"
        );
    }

    #[test]
    fn a_probed_process_wire_counts_only_check_the_probes_when_its_sockets_are_read_throughout() {
        for check in [false, true] {
            let mut h = Handshakes::new(ProbeCost::default(), check);
            h.add(&wire_hello(
                tlsprof_event_kind::EVENT_WIRE_SERVER_HELLO,
                false,
                &tls13_server_hello(false),
            ));
            h.add(&wire_end(
                tlsprof_outcome::OUTCOME_COMPLETED,
                tlsprof_target_flags::TARGET_PROBED,
            ));
            assert!(
                h.take_groups().is_empty(),
                "the probes count a probed process's handshakes"
            );
            let seen = h.window.wire.get(&7).copied().unwrap_or_default();
            assert_eq!((seen.total, seen.full), (u64::from(check), u64::from(check)));
        }
    }

    #[test]
    fn rsa_key_transport_only_where_the_server_hello_names_it() {
        // A full server handshake whose signer the probes did not see (Go's crypto.Signer), no ServerHello.
        let mut e = handshake_event {
            role: ff::FF_ROLE_SERVER.0 as u16,
            cert_ops: ff::FF_PRIVATE_KEY_OP.0 as u16,
            ..handshake_event::default()
        };
        assert_eq!(classify(&e, None).key_exchange, None);
        let with_offer = |h: wire::Hello| Some((h, None));
        let hello = |cipher: &str| wire::Hello {
            version: Some("TLSv1.2"),
            cipher: Some(cipher.into()),
            ..wire::Hello::default()
        };
        assert_eq!(
            classify(&e, with_offer(hello("AES128-GCM-SHA256")))
                .key_exchange
                .as_deref(),
            Some("RSA key transport")
        );
        assert_eq!(
            classify(&e, with_offer(hello("ECDHE-RSA-AES128-GCM-SHA256"))).key_exchange,
            None
        );
        e.secret_len = 32;
        assert_eq!(
            classify(&e, None).key_exchange.as_deref(),
            Some("ECDHE (X25519 or P-256)")
        );
    }
}
