// SPDX-License-Identifier: Apache-2.0
//! Reading a connection's ServerHello flight as it crossed the socket (handshake messages, sent in the clear):
//! the protocol version, cipher suite and key-exchange group the two sides agreed, whatever the TLS library;
//! and a ClientHello's offer to resume a session.

use super::x509;
use crate::model::Offer;

/// What the server's first flight says about a handshake.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hello {
    pub version: Option<&'static str>,
    pub cipher: Option<String>,
    pub group: Option<String>,
    /// TLS 1.3: the server accepted a pre-shared key (a resumed session).
    pub psk: bool,
    /// The session ID the server answered with: a TLS 1.2 server that resumes echoes the client's.
    pub session_id: Vec<u8>,
    /// TLS 1.2: whether the server's flight went on from its ServerHello with a ChangeCipherSpec (an
    /// abbreviated, resumed handshake) or a Certificate (a full one); None where the bytes do not show.
    pub abbreviated: Option<bool>,
    /// TLS 1.2: the server certificate's key, from its Certificate message (TLS 1.3 encrypts it).
    pub certificate_key: Option<String>,
}

/// What a ClientHello offers to resume with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientOffer {
    pub offer: Offer,
    /// The offered ticket's or TLS 1.3 identity's length, and its first 16 bytes (the key name of the tickets
    /// OpenSSL makes); 0 and zeros for the others.
    pub ticket_len: usize,
    pub ticket_head: [u8; 16],
    /// The client offers TLS 1.3.
    pub tls13: bool,
    /// Its legacy session ID (a random one from clients that offer TLS 1.3) and its length.
    pub session_id: [u8; 32],
    pub session_id_len: u8,
}

impl ClientOffer {
    /// A TLS 1.2 server resumes by echoing the session ID offered (RFC 5246 7.4.1.3; RFC 5077 3.4 with a
    /// ticket).
    pub fn echoed_by(&self, server: &Hello) -> bool {
        self.session_id_len > 0 && server.session_id == self.session_id[..usize::from(self.session_id_len)]
    }
}

const HANDSHAKE_RECORD: u8 = 22;
const CLIENT_HELLO: u8 = 1;
const SERVER_HELLO: u8 = 2;
const CHANGE_CIPHER_SPEC_RECORD: u8 = 20;
const CERTIFICATE: u8 = 11;
const SERVER_KEY_EXCHANGE: u8 = 12;
const EXT_SUPPORTED_VERSIONS: u16 = 0x002b;
const EXT_KEY_SHARE: u16 = 0x0033;
const EXT_PRE_SHARED_KEY: u16 = 0x0029;
const EXT_SESSION_TICKET: u16 = 0x0023;

struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.data.get(..n)?, self.data.get(n..)?);
        self.data = rest;
        Some(head)
    }
    /// Up to n bytes: a message the capture cut short (a read that took part of a record) keeps its start.
    fn take_at_most(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn u24(&mut self) -> Option<usize> {
        self.take(3)
            .map(|b| usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]))
    }
}

/// The handshake messages in captured bytes: the payloads of the handshake records there (the last one may be
/// cut short by the capture), or a bare message when the record header was read separately.
fn handshake_bytes(data: &[u8], body_only: bool) -> Vec<u8> {
    if body_only {
        return data.to_vec();
    }
    let mut out = Vec::new();
    let mut r = Reader { data };
    while let (Some(kind), Some(_version), Some(len)) = (r.u8(), r.u16(), r.u16()) {
        if kind != HANDSHAKE_RECORD {
            break;
        }
        let len = usize::from(len);
        let take = len.min(r.data.len());
        out.extend_from_slice(r.take(take).unwrap_or_default());
        if take < len {
            break;
        }
    }
    out
}

/// Parses a captured ServerHello flight; None when it is not one.
pub fn parse(data: &[u8], body_only: bool) -> Option<Hello> {
    let messages = handshake_bytes(data, body_only);
    let mut r = Reader { data: &messages };
    let mut hello = Hello::default();
    let mut cipher_id = None;
    while let Some(kind) = r.u8() {
        let len = r.u24()?;
        // The last message may be cut short: its fields before the cut are read (a hybrid group's key share
        // makes a ServerHello longer than a first read takes).
        let mut m = Reader {
            data: r.take_at_most(len),
        };
        match kind {
            SERVER_HELLO => {
                let legacy_version = m.u16()?;
                m.take(32)?;
                let sid_len = usize::from(m.u8()?);
                hello.session_id = m.take(sid_len)?.to_vec();
                cipher_id = Some(m.u16()?);
                m.u8()?;
                hello.version = version_name(legacy_version);
                if let Some(ext_len) = m.u16() {
                    let mut exts = Reader {
                        data: m.take_at_most(usize::from(ext_len)),
                    };
                    while let (Some(ext), Some(len)) = (exts.u16(), exts.u16()) {
                        let mut e = Reader {
                            data: exts.take_at_most(usize::from(len)),
                        };
                        match ext {
                            EXT_SUPPORTED_VERSIONS => hello.version = e.u16().and_then(version_name),
                            EXT_KEY_SHARE => hello.group = e.u16().map(group_name),
                            EXT_PRE_SHARED_KEY => hello.psk = true,
                            _ => {}
                        }
                    }
                }
            }
            CERTIFICATE => {
                hello.abbreviated = Some(false);
                hello.certificate_key = x509::first_certificate(m.data).and_then(x509::certificate_key);
            }
            // TLS 1.2 (EC)DHE: the group is in the ServerKeyExchange.
            SERVER_KEY_EXCHANGE if hello.group.is_none() => {
                hello.group = match cipher_id.map(cipher_name) {
                    Some(name) if name.starts_with("ECDHE") => match m.u8() {
                        Some(3) => m.u16().map(group_name),
                        _ => None,
                    },
                    Some(name) if name.starts_with("DHE") => {
                        m.u16().map(|p_len| format!("DHE-{}", usize::from(p_len) * 8))
                    }
                    _ => None,
                };
            }
            _ => {}
        }
    }
    hello.cipher = Some(cipher_name(cipher_id?));
    if hello.abbreviated.is_none() && !body_only && change_cipher_spec_follows(data) {
        hello.abbreviated = Some(true);
    }
    Some(hello)
}

/// Whether the first record after the handshake records at the start of data is a ChangeCipherSpec.
fn change_cipher_spec_follows(data: &[u8]) -> bool {
    let mut r = Reader { data };
    while let (Some(kind), Some(_version), Some(len)) = (r.u8(), r.u16(), r.u16()) {
        if kind != HANDSHAKE_RECORD {
            return kind == CHANGE_CIPHER_SPEC_RECORD;
        }
        if r.take(usize::from(len)).is_none() {
            return false;
        }
    }
    false
}

/// Parses a captured ClientHello for its offer of resumption; None when the bytes are not a whole ClientHello
/// (cut short, malformed): the pre_shared_key extension comes last, so a message cut anywhere could hide one.
pub fn parse_client_hello(data: &[u8], body_only: bool) -> Option<ClientOffer> {
    let messages = handshake_bytes(data, body_only);
    let mut r = Reader { data: &messages };
    if r.u8()? != CLIENT_HELLO {
        return None;
    }
    let len = r.u24()?;
    let mut m = Reader { data: r.take(len)? };
    m.u16()?;
    m.take(32)?;
    let session_id_len = m.u8()?;
    let session_id = m.take(usize::from(session_id_len))?;
    let suites = m.u16()?;
    m.take(usize::from(suites))?;
    let compressions = m.u8()?;
    m.take(usize::from(compressions))?;
    let mut offer = ClientOffer {
        offer: Offer::Nothing,
        ticket_len: 0,
        ticket_head: [0; 16],
        tls13: false,
        session_id: [0; 32],
        session_id_len: 0,
    };
    if session_id.len() <= 32 {
        offer.session_id[..session_id.len()].copy_from_slice(session_id);
        offer.session_id_len = session_id_len;
    }
    let mut ticket: Option<&[u8]> = None;
    let mut identity: Option<&[u8]> = None;
    if !m.data.is_empty() {
        let ext_len = m.u16()?;
        let mut exts = Reader {
            data: m.take(usize::from(ext_len))?,
        };
        while !exts.data.is_empty() {
            let (ext, len) = (exts.u16()?, exts.u16()?);
            let mut e = Reader {
                data: exts.take(usize::from(len))?,
            };
            match ext {
                EXT_SESSION_TICKET if !e.data.is_empty() => ticket = Some(e.data),
                EXT_SUPPORTED_VERSIONS => {
                    let n = e.u8()?;
                    let versions = e.take(usize::from(n))?;
                    offer.tls13 = versions.chunks_exact(2).any(|v| v == [0x03, 0x04]);
                }
                EXT_PRE_SHARED_KEY => {
                    let identities = e.u16()?;
                    let mut ids = Reader {
                        data: e.take(usize::from(identities))?,
                    };
                    let n = ids.u16()?;
                    identity = Some(ids.take(usize::from(n))?);
                }
                _ => {}
            }
        }
    }
    // A client that offers TLS 1.3 sends a random legacy session ID (RFC 8446 D.4): an offer only without 1.3.
    let (kind, offered) = match (identity, ticket) {
        (Some(id), _) => (Offer::Psk, id),
        (None, Some(t)) => (Offer::Ticket, t),
        (None, None) if session_id_len > 0 && !offer.tls13 => (Offer::SessionId, &[][..]),
        (None, None) => (Offer::Nothing, &[][..]),
    };
    offer.offer = kind;
    offer.ticket_len = offered.len();
    let head = offered.len().min(16);
    offer.ticket_head[..head].copy_from_slice(&offered[..head]);
    Some(offer)
}

fn version_name(v: u16) -> Option<&'static str> {
    Some(match v {
        0x0304 => "TLSv1.3",
        0x0303 => "TLSv1.2",
        0x0302 => "TLSv1.1",
        0x0301 => "TLSv1",
        _ => return None,
    })
}

/// Named groups (RFC 8446, 7919; the post-quantum ones as IANA's registry and OpenSSL 3.5 name them).
fn group_name(g: u16) -> String {
    match g {
        0x001d => "x25519".into(),
        0x0017 => "P-256".into(),
        0x0018 => "P-384".into(),
        0x0019 => "P-521".into(),
        0x001e => "x448".into(),
        0x0100 => "ffdhe2048".into(),
        0x0101 => "ffdhe3072".into(),
        0x0102 => "ffdhe4096".into(),
        0x0200 => "MLKEM512".into(),
        0x0201 => "MLKEM768".into(),
        0x0202 => "MLKEM1024".into(),
        0x11eb => "SecP256r1MLKEM768".into(),
        0x11ec => "X25519MLKEM768".into(),
        0x11ed => "SecP384r1MLKEM1024".into(),
        _ => format!("group 0x{g:04x}"),
    }
}

/// Cipher suites by IANA number, named as OpenSSL names them.
fn cipher_name(c: u16) -> String {
    let name = match c {
        0x1301 => "TLS_AES_128_GCM_SHA256",
        0x1302 => "TLS_AES_256_GCM_SHA384",
        0x1303 => "TLS_CHACHA20_POLY1305_SHA256",
        0xc02b => "ECDHE-ECDSA-AES128-GCM-SHA256",
        0xc02c => "ECDHE-ECDSA-AES256-GCM-SHA384",
        0xc02f => "ECDHE-RSA-AES128-GCM-SHA256",
        0xc030 => "ECDHE-RSA-AES256-GCM-SHA384",
        0xcca8 => "ECDHE-RSA-CHACHA20-POLY1305",
        0xcca9 => "ECDHE-ECDSA-CHACHA20-POLY1305",
        0xc013 => "ECDHE-RSA-AES128-SHA",
        0xc014 => "ECDHE-RSA-AES256-SHA",
        0x009e => "DHE-RSA-AES128-GCM-SHA256",
        0x009f => "DHE-RSA-AES256-GCM-SHA384",
        0xccaa => "DHE-RSA-CHACHA20-POLY1305",
        0x009c => "AES128-GCM-SHA256",
        0x009d => "AES256-GCM-SHA384",
        0x002f => "AES128-SHA",
        0x0035 => "AES256-SHA",
        _ => return format!("cipher 0x{c:04x}"),
    };
    name.to_string()
}

/// A TLS 1.2 cipher suite (as cipher_name names it) whose key exchange is RSA key transport: the client
/// encrypts the premaster secret to the certificate's RSA key.
pub fn rsa_key_transport(cipher: &str) -> bool {
    matches!(
        cipher,
        "AES128-GCM-SHA256" | "AES256-GCM-SHA384" | "AES128-SHA" | "AES256-SHA"
    )
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(crate::fuzz_config(1))]

        /// Bytes off a target's socket: any of them, and handshake records with any body.
        #[test]
        fn fuzz_server_hello(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600), body_only: bool) {
            parse(&data, body_only);
            let mut record = vec![22, 3, 3, (data.len() >> 8) as u8, data.len() as u8];
            record.extend(&data);
            parse(&record, false);
            let mut message = vec![2, 0, (data.len() >> 8) as u8, data.len() as u8];
            message.extend(&data);
            parse(&message, true);
        }
    }

    /// A TLS 1.3 ServerHello record choosing TLS_AES_256_GCM_SHA384 and x25519 (key share truncated).
    pub(in crate::record::handshakes) fn tls13_server_hello(psk: bool) -> Vec<u8> {
        let mut exts = vec![
            0x00, 0x2b, 0x00, 0x02, 0x03, 0x04, 0x00, 0x33, 0x00, 0x04, 0x00, 0x1d, 0x00, 0x00,
        ];
        if psk {
            exts.extend([0x00, 0x29, 0x00, 0x02, 0x00, 0x00]);
        }
        let mut body = vec![0x03, 0x03];
        body.extend([7u8; 32]);
        body.extend([0x00, 0x13, 0x02, 0x00]);
        body.extend((exts.len() as u16).to_be_bytes());
        body.extend(exts);
        let mut msg = vec![SERVER_HELLO, 0, 0, body.len() as u8];
        msg.extend(body);
        let mut record = vec![HANDSHAKE_RECORD, 0x03, 0x03];
        record.extend((msg.len() as u16).to_be_bytes());
        record.extend(msg);
        record
    }

    #[test]
    fn tls13_server_hello_gives_version_cipher_group_and_psk() {
        let h = parse(&tls13_server_hello(false), false).unwrap();
        assert_eq!(
            h,
            Hello {
                version: Some("TLSv1.3"),
                cipher: Some("TLS_AES_256_GCM_SHA384".into()),
                group: Some("x25519".into()),
                psk: false,
                session_id: Vec::new(),
                abbreviated: None,
                certificate_key: None,
            }
        );
        assert!(parse(&tls13_server_hello(true), false).unwrap().psk);
        // The same message read after its record header.
        let record = tls13_server_hello(false);
        assert_eq!(parse(&record[5..], true).unwrap().group.as_deref(), Some("x25519"));
    }

    #[test]
    fn a_hybrid_server_hello_cut_by_the_first_read_still_names_its_group() {
        // X25519MLKEM768's key share: the ML-KEM ciphertext and the X25519 share, 1120 bytes.
        let share_len: u16 = 1120;
        let mut exts = vec![0x00, 0x2b, 0x00, 0x02, 0x03, 0x04, 0x00, 0x33];
        exts.extend((share_len + 4).to_be_bytes());
        exts.extend([0x11, 0xec]);
        exts.extend(share_len.to_be_bytes());
        exts.extend(vec![9u8; usize::from(share_len)]);
        let mut body = vec![0x03, 0x03];
        body.extend([7u8; 32]);
        body.extend([0x00, 0x13, 0x01, 0x00]);
        body.extend((exts.len() as u16).to_be_bytes());
        body.extend(exts);
        let mut msg = vec![SERVER_HELLO, 0];
        msg.extend((body.len() as u16).to_be_bytes());
        msg.extend(body);
        let mut record = vec![HANDSHAKE_RECORD, 0x03, 0x03];
        record.extend((msg.len() as u16).to_be_bytes());
        record.extend(msg);
        let h = parse(&record[..576], false).unwrap();
        assert_eq!(h.version, Some("TLSv1.3"));
        assert_eq!(h.cipher.as_deref(), Some("TLS_AES_128_GCM_SHA256"));
        assert_eq!(h.group.as_deref(), Some("X25519MLKEM768"));
        assert_eq!(parse(&record, false).unwrap(), h);
    }

    #[test]
    fn post_quantum_groups_are_named_as_openssl_names_them() {
        for (id, name) in [
            (0x11ec, "X25519MLKEM768"),
            (0x11eb, "SecP256r1MLKEM768"),
            (0x11ed, "SecP384r1MLKEM1024"),
            (0x0202, "MLKEM1024"),
        ] {
            assert_eq!(group_name(id), name);
        }
        assert_eq!(group_name(0x11ee), "group 0x11ee");
    }

    #[test]
    fn tls12_group_comes_from_the_server_key_exchange() {
        let mut body = vec![0x03, 0x03];
        body.extend([1u8; 32]);
        body.extend([0x00, 0xc0, 0x2f, 0x00]);
        let mut msgs = vec![SERVER_HELLO, 0, 0, body.len() as u8];
        msgs.extend(body);
        msgs.extend([SERVER_KEY_EXCHANGE, 0, 0, 4, 3, 0x00, 0x17, 65]);
        let mut record = vec![HANDSHAKE_RECORD, 0x03, 0x03];
        record.extend((msgs.len() as u16).to_be_bytes());
        record.extend(msgs);
        let h = parse(&record, false).unwrap();
        assert_eq!(h.version, Some("TLSv1.2"));
        assert_eq!(h.cipher.as_deref(), Some("ECDHE-RSA-AES128-GCM-SHA256"));
        assert_eq!(h.group.as_deref(), Some("P-256"));
    }

    /// A ClientHello record: a 32-byte session ID, the extensions given, whole.
    pub(in crate::record::handshakes) fn client_hello(exts: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend([5u8; 32]);
        body.push(32);
        body.extend([6u8; 32]);
        body.extend([0x00, 0x02, 0x13, 0x01, 0x01, 0x00]);
        let ext_bytes: Vec<u8> = exts
            .iter()
            .flat_map(|(id, data)| {
                let mut e = id.to_be_bytes().to_vec();
                e.extend((data.len() as u16).to_be_bytes());
                e.extend(data);
                e
            })
            .collect();
        body.extend((ext_bytes.len() as u16).to_be_bytes());
        body.extend(ext_bytes);
        let mut msg = vec![CLIENT_HELLO, 0];
        msg.extend((body.len() as u16).to_be_bytes());
        msg.extend(body);
        let mut record = vec![HANDSHAKE_RECORD, 0x03, 0x01];
        record.extend((msg.len() as u16).to_be_bytes());
        record.extend(msg);
        record
    }

    pub(in crate::record::handshakes) fn tls13_versions() -> (u16, Vec<u8>) {
        (EXT_SUPPORTED_VERSIONS, vec![4, 0x03, 0x04, 0x03, 0x03])
    }

    pub(in crate::record::handshakes) fn psk(identity: &[u8]) -> (u16, Vec<u8>) {
        let mut ids = (identity.len() as u16).to_be_bytes().to_vec();
        ids.extend(identity);
        ids.extend([0, 0, 0, 1]);
        let mut data = (ids.len() as u16).to_be_bytes().to_vec();
        data.extend(ids);
        data.extend([0x00, 0x21, 0x20]);
        data.extend([0u8; 32]);
        (EXT_PRE_SHARED_KEY, data)
    }

    #[test]
    fn client_hello_offers_are_read_from_whole_messages_only() {
        let offer = |exts: &[(u16, Vec<u8>)]| parse_client_hello(&client_hello(exts), false).map(|o| o.offer);
        // TLS 1.3 with a random legacy session ID and nothing else: no offer.
        assert_eq!(offer(&[tls13_versions()]), Some(Offer::Nothing));
        // TLS 1.2 only: its session ID is an offer; an empty ticket extension asks for a ticket, offers none.
        assert_eq!(offer(&[(EXT_SESSION_TICKET, vec![])]), Some(Offer::SessionId));
        let mut ticket = vec![0xab; 16];
        ticket.extend([1u8; 160]);
        assert_eq!(offer(&[(EXT_SESSION_TICKET, ticket.clone())]), Some(Offer::Ticket));
        let o = parse_client_hello(&client_hello(&[tls13_versions(), psk(&ticket)]), false).unwrap();
        assert_eq!(
            (o.offer, o.ticket_len, o.ticket_head, o.tls13),
            (Offer::Psk, 176, [0xab; 16], true)
        );
        // The same read after its record header.
        let record = client_hello(&[tls13_versions(), psk(&ticket)]);
        assert_eq!(parse_client_hello(&record[5..], true), Some(o));
        // Cut anywhere, it is no reading: the offer may lie in the part not seen.
        for cut in 0..record.len() {
            assert_eq!(parse_client_hello(&record[..cut], false), None, "cut at {cut}");
        }
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzz_config(1))]

        /// A client's bytes: any of them, in a record or after one.
        #[test]
        fn fuzz_client_hello(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600), body_only: bool) {
            parse_client_hello(&data, body_only);
            let mut message = vec![CLIENT_HELLO, 0, (data.len() >> 8) as u8, data.len() as u8];
            message.extend(&data);
            parse_client_hello(&message, true);
            let mut record = vec![22, 3, 1, (message.len() >> 8) as u8, message.len() as u8];
            record.extend(&message);
            parse_client_hello(&record, false);
        }
    }

    #[test]
    fn other_bytes_are_not_a_hello() {
        assert_eq!(parse(&[23, 3, 3, 0, 5, 1, 2, 3, 4, 5], false), None);
        assert_eq!(parse(&[], true), None);
    }
}
