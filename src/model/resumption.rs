// SPDX-License-Identifier: Apache-2.0
//! Resumption as the wire shows it: what each ClientHello offered, and why an offered session was not
//! resumed; the ticket key names offered to a server, with when they were accepted.

use serde::{Deserialize, Serialize};

/// What the client offered to resume with, from its ClientHello.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Offer {
    /// Nothing: a first visit, or a client that does not keep sessions.
    Nothing,
    /// A TLS 1.2 session ID (from a client that does not offer TLS 1.3: those send a random one).
    SessionId,
    /// A TLS 1.2 session ticket.
    Ticket,
    /// A TLS 1.3 pre-shared key (a ticket, or a cache entry's ID).
    Psk,
    /// The ServerHello was captured but its ClientHello was not read whole (cut short, malformed, or missed).
    Unparsed,
}

impl Offer {
    /// The client offered a session.
    pub fn offered(self) -> bool {
        matches!(self, Offer::SessionId | Offer::Ticket | Offer::Psk)
    }
}

/// Why an offered session was not resumed, as far as the wire shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// A session ID (or a TLS 1.3 identity the size of one) the server's session cache did not hold.
    SessionNotCached,
    /// A TLS 1.2 session offered and TLS 1.3 agreed, or the reverse: the session could not be used.
    VersionChanged,
    /// A ticket a server refused: its key name (TicketKey) tells whether the server held its key.
    Ticket,
    /// Neither the wire nor the library shows why (a client's view, a ticket without a key name).
    Unknown,
}

/// Tickets offered to a server under one key name (the first 16 bytes of the tickets OpenSSL makes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TicketKey {
    pub pid: u32,
    /// Hex; None for the names past the number kept per process, counted together.
    pub name: Option<String>,
    pub accepted: u64,
    /// Refused while the server still accepted other tickets under this name: those sessions were unusable
    /// (expired, another cipher), not their key.
    pub refused_in_use: u64,
    /// Refused after the last ticket under this name was accepted, or under a name never accepted: the
    /// server no longer held (or never had) this key.
    pub refused_unknown_key: u64,
    /// Seconds into the recording it was first offered, and last accepted.
    pub first_offered_s: f64,
    pub last_accepted_s: Option<f64>,
}

impl TicketKey {
    pub fn new(pid: u32, name: Option<String>, at_s: f64) -> TicketKey {
        TicketKey {
            pid,
            name,
            accepted: 0,
            refused_in_use: 0,
            refused_unknown_key: 0,
            first_offered_s: at_s,
            last_accepted_s: None,
        }
    }

    /// One more ticket under this name, accepted or not, `at_s` into the recording.
    pub fn add(&mut self, accepted: bool, at_s: f64) {
        if accepted {
            self.accepted += 1;
            self.last_accepted_s = Some(at_s);
            // Refused while the key was still accepted after them.
            self.refused_in_use += std::mem::take(&mut self.refused_unknown_key);
        } else {
            self.refused_unknown_key += 1;
        }
    }

    /// Adds the figures of the same name from a later part of a recording (`later`).
    pub fn merge_later(&mut self, later: &TicketKey) {
        if later.accepted > 0 {
            self.refused_in_use += std::mem::take(&mut self.refused_unknown_key);
            self.last_accepted_s = later.last_accepted_s;
        }
        self.accepted += later.accepted;
        self.refused_in_use += later.refused_in_use;
        self.refused_unknown_key += later.refused_unknown_key;
        self.first_offered_s = self.first_offered_s.min(later.first_offered_s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_before_an_acceptance_are_of_a_key_still_held() {
        let mut k = TicketKey::new(1, Some("ab".into()), 0.5);
        k.add(false, 1.0);
        k.add(true, 2.0);
        k.add(true, 3.0);
        k.add(false, 4.0);
        k.add(false, 5.0);
        assert_eq!((k.accepted, k.refused_in_use, k.refused_unknown_key), (2, 1, 2));
        assert_eq!(k.last_accepted_s, Some(3.0));
        // The same in two parts, merged.
        let mut first = TicketKey::new(1, Some("ab".into()), 0.5);
        first.add(false, 1.0);
        let mut later = TicketKey::new(1, Some("ab".into()), 2.0);
        [(true, 2.0), (true, 3.0), (false, 4.0), (false, 5.0)]
            .iter()
            .for_each(|&(a, t)| later.add(a, t));
        first.merge_later(&later);
        assert_eq!(first, k);
    }
}
