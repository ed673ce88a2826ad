// SPDX-License-Identifier: Apache-2.0
//! QUIC handshakes on the wire. Over QUIC a connection's ClientHello and ServerHello travel in CRYPTO frames of
//! its Initial packets, protected with keys that anyone derives from the client's first Destination Connection
//! ID (RFC 9001 §5.2). The BPF side streams the targets' datagrams that begin with a long header (Initial or
//! Handshake packets; application data travels in short-header packets, never read); here their Initial
//! packets are opened, each hello reassembled from its CRYPTO frames, and the connection followed by its
//! connection IDs to its end: the client's first Handshake packet after the ServerHello (it has the server's
//! flight: completed), or none within HANDSHAKE_TIMEOUT of it (abandoned). Datagrams are target-controlled
//! bytes: every length is checked, and a packet that does not open is skipped.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ring::aead::quic::{HeaderProtectionKey, AES_128};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};
use ring::hkdf::{self, KeyType, Salt, HKDF_SHA256};

use crate::model::Role;

/// QUIC versions 1 (RFC 9000) and 2 (RFC 9369), whose Initial keys are known.
const V1: u32 = 1;
const V2: u32 = 0x6b33_43cf;
const SALT_V1: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f,
    0x0a,
];
const SALT_V2: [u8; 20] = [
    0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e,
    0xd9,
];

/// A handshake whose ServerHello crossed and whose client sent no Handshake packet for this long was abandoned
/// (quic-go gives a handshake 5 s by default).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections followed at once at most; past it the oldest are given up (counted).
const MAX_CONNECTIONS: usize = 4096;
/// Bytes of a hello kept at most (a post-quantum ClientHello is about 1.8 kB).
const MAX_HELLO_BYTES: usize = 16 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PacketType {
    Initial,
    ZeroRtt,
    Handshake,
    Retry,
}

/// A long-header packet of a datagram, as it crossed (protected).
struct LongPacket<'a> {
    version: u32,
    kind: PacketType,
    dcid: &'a [u8],
    scid: &'a [u8],
    /// The whole packet, and where its (protected) packet number starts in it.
    bytes: &'a [u8],
    pn_offset: usize,
}

struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.data.len() < n {
            return None;
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// A variable-length integer (RFC 9000 §16).
    fn varint(&mut self) -> Option<u64> {
        let first = *self.data.first()?;
        let len = 1usize << (first >> 6);
        let bytes = self.take(len)?;
        Some(
            bytes
                .iter()
                .skip(1)
                .fold(u64::from(first & 0x3f), |v, b| v << 8 | u64::from(*b)),
        )
    }

    fn varint_len(&mut self) -> Option<usize> {
        usize::try_from(self.varint()?).ok()
    }
}

/// The long-header packets a datagram begins with (coalesced packets, RFC 9000 §12.2), up to the first short
/// header, Retry or packet that does not parse.
fn long_packets(datagram: &[u8]) -> Vec<LongPacket<'_>> {
    let mut out = Vec::new();
    let mut rest = datagram;
    while let Some(p) = long_packet(rest) {
        rest = &rest[p.bytes.len()..];
        let last = p.kind == PacketType::Retry || rest.is_empty();
        out.push(p);
        if last {
            break;
        }
    }
    out
}

fn long_packet(data: &[u8]) -> Option<LongPacket<'_>> {
    let mut r = Reader { data };
    let first = r.u8()?;
    if first & 0xc0 != 0xc0 {
        return None;
    }
    let version = u32::from_be_bytes(r.take(4)?.try_into().ok()?);
    let bits = (first >> 4) & 3;
    let kind = match (version, bits) {
        (V1, 0) | (V2, 1) => PacketType::Initial,
        (V1, 1) | (V2, 2) => PacketType::ZeroRtt,
        (V1, 2) | (V2, 3) => PacketType::Handshake,
        (V1, 3) | (V2, 0) => PacketType::Retry,
        _ => return None,
    };
    let dcid_len = usize::from(r.u8()?);
    let dcid = r.take(dcid_len).filter(|_| dcid_len <= 20)?;
    let scid_len = usize::from(r.u8()?);
    let scid = r.take(scid_len).filter(|_| scid_len <= 20)?;
    if kind == PacketType::Retry {
        return Some(LongPacket {
            version,
            kind,
            dcid,
            scid,
            bytes: data,
            pn_offset: data.len(),
        });
    }
    if kind == PacketType::Initial {
        let token = r.varint_len()?;
        r.take(token)?;
    }
    let length = r.varint_len()?;
    let pn_offset = data.len() - r.data.len();
    // A packet cut short (the BPF side streams a Handshake packet's header alone) keeps what came: its header
    // is read, its payload never opens.
    let end = pn_offset.saturating_add(length).min(data.len());
    Some(LongPacket {
        version,
        kind,
        dcid,
        scid,
        bytes: &data[..end],
        pn_offset,
    })
}

/// An HKDF output length, as ring takes it.
struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand-Label (RFC 8446 §7.1) with an empty context.
fn expand_label(prk: &hkdf::Prk, label: &str, out: &mut [u8]) -> Option<()> {
    let full = format!("tls13 {label}");
    let length = u16::try_from(out.len()).ok()?.to_be_bytes();
    let label_len = [u8::try_from(full.len()).ok()?];
    let info: [&[u8]; 4] = [&length, &label_len, full.as_bytes(), &[0]];
    prk.expand(&info, Len(out.len())).ok()?.fill(out).ok()
}

/// One direction's Initial packet protection.
struct InitialKeys {
    aead: LessSafeKey,
    iv: [u8; 12],
    hp: HeaderProtectionKey,
}

impl InitialKeys {
    /// The keys of the Initial packets one side (`server`'s or the client's) sends, from the client's first
    /// Destination Connection ID (RFC 9001 §5.2, RFC 9369 §3.3).
    fn derive(version: u32, odcid: &[u8], server: bool) -> Option<InitialKeys> {
        let (salt, prefix) = match version {
            V1 => (&SALT_V1, "quic"),
            V2 => (&SALT_V2, "quicv2"),
            _ => return None,
        };
        let initial = Salt::new(HKDF_SHA256, salt).extract(odcid);
        let mut secret = [0u8; 32];
        expand_label(&initial, if server { "server in" } else { "client in" }, &mut secret)?;
        let secret = hkdf::Prk::new_less_safe(HKDF_SHA256, &secret);
        let (mut key, mut iv, mut hp) = ([0u8; 16], [0u8; 12], [0u8; 16]);
        expand_label(&secret, &format!("{prefix} key"), &mut key)?;
        expand_label(&secret, &format!("{prefix} iv"), &mut iv)?;
        expand_label(&secret, &format!("{prefix} hp"), &mut hp)?;
        Some(InitialKeys {
            aead: LessSafeKey::new(UnboundKey::new(&AES_128_GCM, &key).ok()?),
            iv,
            hp: HeaderProtectionKey::new(&AES_128, &hp).ok()?,
        })
    }

    /// The packet's payload, its header protection removed and its AEAD opened; None when it does not open
    /// (another connection's keys, a corrupt or hostile packet).
    fn open(&self, p: &LongPacket) -> Option<Vec<u8>> {
        let sample = p.bytes.get(p.pn_offset + 4..p.pn_offset + 20)?;
        let mask = self.hp.new_mask(sample).ok()?;
        let mut packet = p.bytes.to_vec();
        packet[0] ^= mask[0] & 0x0f;
        let pn_len = usize::from(packet[0] & 3) + 1;
        let mut pn = 0u64;
        for i in 0..pn_len {
            packet[p.pn_offset + i] ^= mask[1 + i];
            pn = pn << 8 | u64::from(packet[p.pn_offset + i]);
        }
        let mut nonce = self.iv;
        for (n, b) in nonce[4..].iter_mut().zip(pn.to_be_bytes()) {
            *n ^= b;
        }
        let (header, payload) = packet.split_at_mut(p.pn_offset + pn_len);
        let plain = self
            .aead
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(&*header), payload)
            .ok()?;
        Some(plain.to_vec())
    }
}

/// The CRYPTO frames of an opened Initial or Handshake payload: (offset, data). Frames past the first one
/// these packets cannot carry end the walk.
fn crypto_frames(payload: &[u8]) -> Vec<(u64, &[u8])> {
    let mut out = Vec::new();
    let mut r = Reader { data: payload };
    while let Some(kind) = r.varint() {
        match kind {
            // PADDING, PING.
            0x00 | 0x01 => {}
            // ACK, ACK with ECN counts.
            0x02 | 0x03 => {
                let (Some(_largest), Some(_delay), Some(ranges), Some(_first)) =
                    (r.varint(), r.varint(), r.varint(), r.varint())
                else {
                    break;
                };
                for _ in 0..ranges.min(256) {
                    if r.varint().and(r.varint()).is_none() {
                        return out;
                    }
                }
                if kind == 0x03 && (r.varint(), r.varint(), r.varint()).2.is_none() {
                    break;
                }
            }
            0x06 => {
                let (Some(offset), Some(len)) = (r.varint(), r.varint_len()) else {
                    break;
                };
                let Some(data) = r.take(len) else { break };
                out.push((offset, data));
            }
            _ => break,
        }
    }
    out
}

/// One direction's CRYPTO stream at the Initial level, from offset 0: the hello it carries once whole.
#[derive(Default)]
struct CryptoStream {
    bytes: Vec<u8>,
    /// Segments that came before the bytes they follow.
    ahead: Vec<(usize, Vec<u8>)>,
}

impl CryptoStream {
    fn add(&mut self, offset: u64, data: &[u8]) {
        let Ok(offset) = usize::try_from(offset) else { return };
        if offset.saturating_add(data.len()) > MAX_HELLO_BYTES {
            return;
        }
        if offset > self.bytes.len() {
            if self.ahead.len() < 64 {
                self.ahead.push((offset, data.to_vec()));
            }
            return;
        }
        self.extend(offset, data);
        while let Some(i) = self.ahead.iter().position(|(at, _)| *at <= self.bytes.len()) {
            let (at, data) = self.ahead.swap_remove(i);
            self.extend(at, &data);
        }
    }

    fn extend(&mut self, offset: usize, data: &[u8]) {
        let end = offset + data.len();
        if end > self.bytes.len() {
            self.bytes.extend_from_slice(&data[self.bytes.len() - offset..]);
        }
    }

    /// The first handshake message, whole (its 4-byte header included), of type `kind`.
    fn message(&self, kind: u8) -> Option<&[u8]> {
        let head = self.bytes.get(..4)?;
        let len = 4 + (usize::from(head[1]) << 16 | usize::from(head[2]) << 8 | usize::from(head[3]));
        (head[0] == kind).then(|| self.bytes.get(..len)).flatten()
    }
}

/// The random of a hello (a whole message, or its start as a TLS library took it in): after its message
/// header and legacy_version (3,3).
pub fn random(message: &[u8]) -> Option<[u8; 32]> {
    let head = message.get(..6)?;
    if !matches!(head[0], 1 | 2) || head[4..6] != [3, 3] {
        return None;
    }
    message.get(6..38)?.try_into().ok()
}

/// A connection's hellos as far as they came: whole messages, or None.
pub struct HelloBytes<'a> {
    pub server: Option<&'a [u8]>,
    pub client: Option<&'a [u8]>,
}

/// A QUIC handshake that ended: its hellos (whole messages, as the TCP ones with their record header read
/// apart) and how it ended.
#[derive(Debug)]
pub struct QuicHandshake {
    pub tgid: u32,
    /// The target's flags when its connection began (bpf/tlsprof.h, enum tlsprof_target_flags).
    pub target_flags: u32,
    pub role: Role,
    pub client_hello: Option<Vec<u8>>,
    pub server_hello: Option<Vec<u8>>,
    pub completed: bool,
    /// An abandoned one: from its ServerHello to when it was given up; a completed one: from its client's
    /// first Initial packet to its end.
    pub hello_to_end_ns: u64,
}

/// A connection followed from its client's first Initial packet.
struct Connection {
    tgid: u32,
    target_flags: u32,
    /// Server: the target read the ClientHello.
    role: Role,
    version: u32,
    client_keys: InitialKeys,
    server_keys: InitialKeys,
    client_scid: Vec<u8>,
    client_hello: CryptoStream,
    server_hello: CryptoStream,
    started: Instant,
    /// When its ServerHello was whole.
    server_hello_at: Option<Instant>,
}

impl Connection {
    fn ended(self, completed: bool, now: Instant) -> QuicHandshake {
        let since_hello = self.server_hello_at.map_or(Duration::ZERO, |at| now.duration_since(at));
        QuicHandshake {
            tgid: self.tgid,
            target_flags: self.target_flags,
            role: self.role,
            hello_to_end_ns: match completed {
                true => now.duration_since(self.started),
                false => since_hello,
            }
            .as_nanos() as u64,
            client_hello: self.client_hello.message(1).map(<[u8]>::to_vec),
            server_hello: self.server_hello.message(2).map(<[u8]>::to_vec),
            completed,
        }
    }

    /// The connection IDs its packets are found by: the client's first Destination Connection ID (its
    /// first Initial packets), and its own, which the server's packets are sent to and every long-header
    /// packet of the client carries as its source (the server's IDs may change: quic-go's do).
    fn ids(&self, odcid: &[u8]) -> [Vec<u8>; 2] {
        [odcid.to_vec(), self.client_scid.clone()]
    }
}

/// The QUIC connections of the targets being followed, by the process and each of their connection IDs.
#[derive(Default)]
pub struct QuicWire {
    /// By (tgid, the client's first Destination Connection ID).
    connections: HashMap<(u32, Vec<u8>), Connection>,
    /// (tgid, a connection ID) -> the key of `connections`.
    ids: HashMap<(u32, Vec<u8>), Vec<u8>>,
    /// Connections given up: no room, or a client without a connection ID of its own.
    pub lost: u64,
}

impl QuicWire {
    /// A datagram a target received (`inbound`) or sent, as the BPF side read it (its first bytes): the
    /// handshakes it ended.
    pub fn datagram(
        &mut self,
        tgid: u32,
        target_flags: u32,
        inbound: bool,
        data: &[u8],
        now: Instant,
    ) -> Vec<QuicHandshake> {
        let mut ended = Vec::new();
        for p in long_packets(data) {
            let key = [p.dcid, p.scid]
                .iter()
                .find_map(|id| self.ids.get(&(tgid, id.to_vec())))
                .cloned();
            match key {
                Some(odcid) => ended.extend(self.follow(tgid, &odcid, &p, now)),
                None if p.kind == PacketType::Initial => self.start(tgid, target_flags, inbound, &p, now),
                None => {}
            }
        }
        ended
    }

    /// A client's first Initial packet: a connection to follow when it opens with the keys of its own
    /// Destination Connection ID and carries the start of a ClientHello.
    fn start(&mut self, tgid: u32, target_flags: u32, inbound: bool, p: &LongPacket, now: Instant) {
        let Some(client_keys) = InitialKeys::derive(p.version, p.dcid, false) else {
            return;
        };
        let Some(payload) = client_keys.open(p) else { return };
        let mut hello = CryptoStream::default();
        for (offset, data) in crypto_frames(&payload) {
            hello.add(offset, data);
        }
        if hello.bytes.first() != Some(&1) {
            return;
        }
        let Some(server_keys) = InitialKeys::derive(p.version, p.dcid, true) else {
            return;
        };
        // A client without a connection ID of its own cannot be told apart from the server's side.
        if p.scid.is_empty() || p.dcid.is_empty() {
            self.lost += 1;
            return;
        }
        if self.connections.len() >= MAX_CONNECTIONS {
            self.lost += self.connections.len() as u64;
            self.connections.clear();
            self.ids.clear();
        }
        let c = Connection {
            tgid,
            target_flags,
            role: if inbound { Role::Server } else { Role::Client },
            version: p.version,
            client_keys,
            server_keys,
            client_scid: p.scid.to_vec(),
            client_hello: hello,
            server_hello: CryptoStream::default(),
            started: now,
            server_hello_at: None,
        };
        for id in c.ids(p.dcid) {
            self.ids.insert((tgid, id), p.dcid.to_vec());
        }
        self.connections.insert((tgid, p.dcid.to_vec()), c);
    }

    /// A packet of a followed connection: the rest of a hello, the server's connection ID, or its end.
    fn follow(&mut self, tgid: u32, odcid: &[u8], p: &LongPacket, now: Instant) -> Option<QuicHandshake> {
        let key = (tgid, odcid.to_vec());
        let c = self.connections.get_mut(&key)?;
        if p.version != c.version {
            return None;
        }
        let from_server = p.dcid == c.client_scid.as_slice();
        match (p.kind, from_server) {
            (PacketType::Initial, true) => {
                let payload = c.server_keys.open(p)?;
                for (offset, data) in crypto_frames(&payload) {
                    c.server_hello.add(offset, data);
                }
                if c.server_hello_at.is_none() && c.server_hello.message(2).is_some() {
                    c.server_hello_at = Some(now);
                }
                None
            }
            (PacketType::Initial, false) => {
                let payload = c.client_keys.open(p)?;
                for (offset, data) in crypto_frames(&payload) {
                    c.client_hello.add(offset, data);
                }
                None
            }
            (PacketType::Handshake, false) if c.server_hello_at.is_some() => {
                let c = self.remove(&key)?;
                Some(c.ended(true, now))
            }
            _ => None,
        }
    }

    fn remove(&mut self, key: &(u32, Vec<u8>)) -> Option<Connection> {
        let c = self.connections.remove(key)?;
        for id in c.ids(&key.1) {
            self.ids.remove(&(key.0, id));
        }
        Some(c)
    }

    /// Handshakes whose ServerHello crossed HANDSHAKE_TIMEOUT ago with no Handshake packet from the client
    /// since: abandoned. Connections whose server never answered within it are forgotten (no handshake the
    /// server paid for).
    pub fn expire(&mut self, now: Instant) -> Vec<QuicHandshake> {
        let stale: Vec<(u32, Vec<u8>)> = self
            .connections
            .iter()
            .filter(|(_, c)| now.duration_since(c.server_hello_at.unwrap_or(c.started)) >= HANDSHAKE_TIMEOUT)
            .map(|(k, _)| k.clone())
            .collect();
        stale
            .iter()
            .filter_map(|k| self.remove(k))
            .filter(|c| c.server_hello_at.is_some())
            .map(|c| c.ended(false, now))
            .collect()
    }

    /// The hellos so far (ServerHello, ClientHello: whole messages) of a connection under way one of whose
    /// hellos has `random`.
    pub fn hellos_by_random(&self, tgid: u32, random: &[u8; 32]) -> Option<HelloBytes<'_>> {
        self.connections.values().find_map(|c| {
            let (client, server) = (c.client_hello.message(1), c.server_hello.message(2));
            let ours = [client, server]
                .into_iter()
                .flatten()
                .any(|m| self::random(m) == Some(*random));
            (c.tgid == tgid && ours).then_some(HelloBytes { server, client })
        })
    }

    /// Forgets a process that exited.
    pub fn forget(&mut self, tgid: u32) {
        self.connections.retain(|(t, _), _| *t != tgid);
        self.ids.retain(|(t, _), _| *t != tgid);
    }

    /// Forgets every connection under way (the programs were detached: their packets meanwhile were not seen).
    pub fn clear(&mut self) {
        self.connections.clear();
        self.ids.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 9001 Appendix A: the client's first Destination Connection ID, and the server's Initial packet
    /// (A.3) protected with the keys derived from it.
    const ODCID: &str = "8394c8f03e515708";
    const SERVER_INITIAL: &str = "cf000000010008f067a5502a4262b5004075c0d95a482cd0991cd25b0aac406a
        5816b6394100f37a1c69797554780bb38cc5a99f5ede4cf73c3ec2493a1839b3dbcba3f6ea46c5b7684df3548e7ddeb9
        c3bf9c73cc3f3bded74b562bfb19fb84022f8ef4cdd93795d77d06edbb7aaf2f58891850abbdca3d20398c276456cbc4
        2158407dd074ee";
    const SERVER_INITIAL_PAYLOAD: &str = "02000000000600405a020000560303eefce7f7b37ba1d1632e96677825ddf739
        88cfc79825df566dc5430b9a045a1200130100002e00330024001d00209d3c940d89690b84d08a60993c144eca684d10
        81287c834d5311bcf32bb9da1a002b00020304";

    #[test]
    fn the_rfc_9001_server_initial_opens_with_keys_from_the_client_connection_id() {
        let datagram = hex(SERVER_INITIAL);
        let packets = long_packets(&datagram);
        let [p] = &packets[..] else { panic!("one packet") };
        // The client chose a zero-length connection ID of its own: the server's has none to send to.
        assert_eq!(
            (p.kind, p.dcid.len(), p.scid),
            (PacketType::Initial, 0, &hex("f067a5502a4262b5")[..])
        );
        let keys = InitialKeys::derive(V1, &hex(ODCID), true).unwrap();
        let payload = keys.open(p).unwrap();
        assert_eq!(payload, hex(SERVER_INITIAL_PAYLOAD));
        let frames = crypto_frames(&payload);
        let [(0, hello)] = &frames[..] else {
            panic!("{frames:?}")
        };
        let mut s = CryptoStream::default();
        s.add(0, hello);
        let hello = super::super::wire::parse(s.message(2).unwrap(), true).unwrap();
        assert_eq!(hello.version, Some("TLSv1.3"));
        assert_eq!(hello.group.as_deref(), Some("x25519"));
        // The client's keys, another connection's or a byte changed: it does not open.
        assert!(InitialKeys::derive(V1, &hex(ODCID), false).unwrap().open(p).is_none());
        assert!(InitialKeys::derive(V1, &hex("0011223344556677"), true)
            .unwrap()
            .open(p)
            .is_none());
        let mut bad = datagram.clone();
        bad[60] ^= 1;
        assert!(keys.open(&long_packets(&bad)[0]).is_none());
    }

    /// A packet protected as a QUIC endpoint would, with the keys from `odcid`.
    fn protect(
        version: u32,
        odcid: &[u8],
        server: bool,
        kind_bits: u8,
        (dcid, scid): (&[u8], &[u8]),
        pn: u8,
        frames: &[u8],
    ) -> Vec<u8> {
        let keys = InitialKeys::derive(version, odcid, server).unwrap();
        let mut header = vec![0xc0 | kind_bits << 4];
        header.extend(version.to_be_bytes());
        header.push(dcid.len() as u8);
        header.extend(dcid);
        header.push(scid.len() as u8);
        header.extend(scid);
        if (version == V1 && kind_bits == 0) || (version == V2 && kind_bits == 1) {
            header.push(0);
        }
        let mut payload = frames.to_vec();
        payload.resize(payload.len().max(20), 0);
        let length = 1 + payload.len() + 16;
        header.extend([0x40 | (length >> 8) as u8, length as u8]);
        let pn_offset = header.len();
        header.push(pn);
        let mut nonce = keys.iv;
        nonce[11] ^= pn;
        let tag = keys
            .aead
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&header[..]),
                &mut payload,
            )
            .unwrap();
        let mut packet = header;
        packet.extend(&payload);
        packet.extend(tag.as_ref());
        let mask = keys.hp.new_mask(&packet[pn_offset + 4..pn_offset + 20]).unwrap();
        packet[0] ^= mask[0] & 0x0f;
        packet[pn_offset] ^= mask[1];
        packet
    }

    fn crypto(offset: u8, data: &[u8]) -> Vec<u8> {
        let mut f = vec![0x06, offset, 0x40 | (data.len() >> 8) as u8, data.len() as u8];
        f.extend(data);
        f
    }

    #[test]
    fn a_connection_is_followed_by_its_ids_from_client_hello_to_its_end() {
        let (odcid, cscid, sscid) = (hex("0102030405060708"), hex("aaaa"), hex("bbbbbbbb"));
        let ch = super::super::wire::tests::client_hello(&[super::super::wire::tests::tls13_versions()]);
        let ch = &ch[5..];
        let sh = &super::super::wire::tests::tls13_server_hello(true)[5..];
        let t0 = Instant::now();
        let mut w = QuicWire::default();
        // The ClientHello in two Initial packets (as a post-quantum one is), the second coalesced with nothing.
        let (a, b) = ch.split_at(40);
        w.datagram(
            7,
            0,
            true,
            &protect(V1, &odcid, false, 0, (&odcid, &cscid), 0, &crypto(0, a)),
            t0,
        );
        w.datagram(
            7,
            0,
            true,
            &protect(V1, &odcid, false, 0, (&odcid, &cscid), 1, &crypto(40, b)),
            t0,
        );
        // The server's Initial with its ServerHello, and a Handshake packet coalesced behind it.
        let mut flight = protect(V1, &odcid, true, 0, (&cscid, &sscid), 0, &crypto(0, sh));
        flight.extend(protect(V1, &odcid, true, 2, (&cscid, &sscid), 0, &[1]));
        assert!(w.datagram(7, 0, false, &flight, t0).is_empty());
        // Another process's packets are not this one's.
        assert!(w
            .datagram(
                8,
                0,
                true,
                &protect(V1, &odcid, false, 2, (&sscid, &cscid), 0, &[1]),
                t0
            )
            .is_empty());
        // The client's Handshake packet, its header alone (as the BPF side streams it), sent to another of the
        // server's connection IDs.
        let handshake = protect(V1, &odcid, false, 2, (&hex("cccc"), &cscid), 0, &[1]);
        let ended = w.datagram(7, 0, true, &handshake[..24], t0);
        let [h] = &ended[..] else { panic!("{ended:?}") };
        assert!(h.completed && h.role == Role::Server);
        assert_eq!(h.client_hello.as_deref(), Some(ch));
        assert_eq!(h.server_hello.as_deref(), Some(sh));
        assert!(w.connections.is_empty() && w.ids.is_empty());

        // A client that leaves after the server's flight: abandoned once the timeout passes.
        w.datagram(
            7,
            0,
            true,
            &protect(V2, &odcid, false, 1, (&odcid, &cscid), 0, &crypto(0, ch)),
            t0,
        );
        w.datagram(
            7,
            0,
            false,
            &protect(V2, &odcid, true, 1, (&cscid, &sscid), 0, &crypto(0, sh)),
            t0,
        );
        assert!(w.expire(t0 + Duration::from_secs(1)).is_empty());
        let ended = w.expire(t0 + HANDSHAKE_TIMEOUT);
        let [h] = &ended[..] else { panic!("{ended:?}") };
        assert!(!h.completed && h.server_hello.is_some());
        // A ClientHello never answered is no handshake.
        w.datagram(
            7,
            0,
            true,
            &protect(V1, &odcid, false, 0, (&odcid, &cscid), 0, &crypto(0, ch)),
            t0,
        );
        assert!(w.expire(t0 + HANDSHAKE_TIMEOUT).is_empty() && w.connections.is_empty());
    }

    #[test]
    fn fuzz_datagrams() {
        use proptest::prelude::*;
        proptest!(|(data in proptest::collection::vec(any::<u8>(), 0..1400), prefix in 0usize..3)| {
            // Random bytes, and random bytes behind a valid long header's start.
            let mut d = [&[0xc3u8, 0, 0, 0, 1, 8][..prefix * 3], &data[..]].concat();
            d.truncate(1400);
            let mut w = QuicWire::default();
            prop_assert!(w.datagram(1, 0, true, &d, Instant::now()).is_empty());
            let _ = crypto_frames(&d);
        });
    }
}
