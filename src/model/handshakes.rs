// SPDX-License-Identifier: Apache-2.0
//! Handshakes: what each was and how it ended, and how many of each kind were seen, with their CPU.

use serde::{Deserialize, Serialize};

use super::{CpuHistogram, Offer, Refusal};

/// Handshakes completed, by what was seen of them. `partial`: under way when the probes attached, so
/// neither role nor resumption is known; not in the other counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HandshakeCounts {
    pub total: u64,
    pub full: u64,
    pub resumed: u64,
    pub server: u64,
    pub client: u64,
    pub partial: u64,
    /// Did work but ended before completing: not in the other counts.
    pub abandoned: u64,
}

impl HandshakeCounts {
    pub fn is_zero(&self) -> bool {
        *self == HandshakeCounts::default()
    }

    pub fn add_counts(&mut self, o: &HandshakeCounts) {
        self.total += o.total;
        self.full += o.full;
        self.resumed += o.resumed;
        self.server += o.server;
        self.client += o.client;
        self.partial += o.partial;
        self.abandoned += o.abandoned;
    }

    pub fn add(&mut self, kind: &HandshakeKind, n: u64) {
        if kind.outcome == Outcome::Abandoned {
            self.abandoned += n;
            return;
        }
        if kind.role == Role::Partial {
            self.partial += n;
            return;
        }
        self.total += n;
        if kind.resumed {
            self.resumed += n;
        } else {
            self.full += n;
        }
        match kind.role {
            Role::Server => self.server += n,
            Role::Client => self.client += n,
            Role::Partial => {}
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Server,
    Client,
    /// The connection began before tlsprof attached (its SSL_set_*_state call was not seen): only part of
    /// its handshake was observed, so it is reported apart and not counted.
    Partial,
}

/// What a handshake was; handshakes alike are counted together.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HandshakeKind {
    pub role: Role,
    pub resumed: bool,
    /// "RSA-2048", "ECDSA P-256": from the signature's length; None when no signature was seen (resumed).
    pub certificate_key: Option<String>,
    /// "x25519", "ffdhe2048" from the ServerHello flight; else "ECDHE (X25519 or P-256)", "DHE-2048", "RSA key
    /// transport" from the shared secret's length.
    pub key_exchange: Option<String>,
    /// From the ServerHello flight; None when it was not captured (outside capture windows).
    pub version: Option<String>,
    pub cipher: Option<String>,
    /// How a resumed handshake resumed: "TLS 1.3 PSK", "TLS 1.2 session ID or ticket"; None when unknown.
    pub resumption: Option<String>,
    /// Completed, or abandoned after the handshake did work. After the fields above, so the mix keeps its
    /// order.
    #[serde(default)]
    pub outcome: Outcome,
    /// What the ClientHello offered to resume with; None when the ServerHello was not captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer: Option<Offer>,
    /// Why an offered session was not resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
    /// Made over QUIC: its hellos crossed in Initial packets.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quic: bool,
}

impl HandshakeKind {
    /// A completed handshake, in a known role, whose ClientHello was read and parsed: the handshakes the
    /// resumption figures (offers, acceptances, refusals) are counted among.
    pub fn hello_read(&self) -> bool {
        self.outcome == Outcome::Completed
            && self.role != Role::Partial
            && matches!(self.offer, Some(o) if o != Offer::Unparsed)
    }
}

/// How a handshake ended (bpf/tlsprof.h, enum tlsprof_outcome).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    #[default]
    Completed,
    /// It did work (keygen, sign, ...) but its connection ended before it completed: the peer went away
    /// after the server's flight, or the handshake failed.
    Abandoned,
}

/// Handshakes of one kind (and outcome) in one process, with a histogram of their CPU.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HandshakeGroup {
    /// None in groups that add up several processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(flatten)]
    pub kind: HandshakeKind,
    /// Their CPU; counted from the wire (from_wire), only their number (CPU unknown).
    pub cpu: CpuHistogram,
    /// Counted from the process's sockets alone (a process whose TLS code tlsprof cannot probe).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_wire: bool,
}
