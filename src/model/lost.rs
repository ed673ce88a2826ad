// SPDX-License-Identifier: Apache-2.0
//! What tlsprof could not count or keep. The counters are listed once, below: the struct, its file format,
//! sums, differences, checks, the report's Lost line and the metrics all follow that list.

use serde::{Deserialize, Serialize};

/// What a counter counts, which says where the report shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Not a loss: what the sample losses are out of.
    Taken,
    /// Events there was no room to keep: the figures undercount.
    Dropped,
    /// Samples kept with less of their stack than was there.
    Damaged,
    /// Frames dropped once found stale: shown apart, the figures stand.
    Stale,
    /// Work whose handshakes were not counted: the report explains it on a line of its own.
    Unframed,
}

/// One counter of [`Lost`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The field's name: its key in recordings and its label in the metrics.
    pub name: &'static str,
    pub kind: Kind,
    /// The report's words for it ("too deep").
    pub label: &'static str,
}

/// Defines [`Lost`] from one list: each field with its kind and the report's words for it. The list's
/// order is the file format's.
macro_rules! lost_counters {
    ($($(#[$attr:meta])* $name:ident: $kind:ident $label:literal,)*) => {
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        pub struct Lost {
            $($(#[$attr])* pub $name: u64,)*
        }

        impl Lost {
            pub const COUNTERS: [Counter; [$(stringify!($name)),*].len()] =
                [$(Counter { name: stringify!($name), kind: Kind::$kind, label: $label }),*];

            /// The counters' values, in the order of [`Lost::COUNTERS`].
            pub fn values(&self) -> [u64; Self::COUNTERS.len()] {
                [$(self.$name),*]
            }

            fn values_mut(&mut self) -> [&mut u64; Self::COUNTERS.len()] {
                [$(&mut self.$name),*]
            }
        }
    };
}

lost_counters! {
    /// CPU samples taken on target processes, and those the sample map had no room for.
    samples_taken: Taken "samples taken",
    samples: Dropped "samples",
    /// Samples whose user stack could not be copied.
    unreadable_stacks: Damaged "unreadable stacks",
    /// Samples whose stack was cut at the limit of tlsprof's stack tree (under a "[stacks beyond ...]" frame).
    cut_stacks: Damaged "cut stacks",
    handshake_events: Dropped "handshake events",
    tree_nodes: Dropped "tree nodes",
    depth_overflow: Dropped "too deep",
    /// Frames whose return was never seen (longjmp, or entered before attach), dropped when found stale.
    missed_returns: Stale "missed returns",
    threads: Dropped "threads",
    connections: Dropped "connections",
    /// Handshake stage calls (key exchange, signature, ...) outside any handshake call, before their
    /// process's SSL_read/SSL_write were probed as drivers (Target::io_driven_from_s): their handshakes
    /// were not counted.
    #[serde(default)]
    unframed_work: Unframed "unframed work",
    /// Processes that started during the recording and joined it in the kernel, but that tlsprof was not told
    /// of (or the targets map had no room for): their figures are missing.
    #[serde(default)]
    processes: Dropped "processes",
    /// Handshakes followed on the wire that were given up (a record header split across socket calls, more
    /// records in one call than are framed) or whose event found no room: the wire's counts miss them.
    #[serde(default)]
    wire_handshakes: Dropped "wire handshakes",
}

impl Lost {
    /// Each counter with its value, in the file's order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static Counter, u64)> {
        Self::COUNTERS.iter().zip(self.values())
    }

    /// Adds `other`'s counts into these.
    pub fn add(&mut self, other: &Lost) {
        for (sum, n) in self.values_mut().into_iter().zip(other.values()) {
            *sum += n;
        }
    }

    /// What was counted since `before`, counts of counters that went back (a reset) as none.
    pub fn since(&self, before: &Lost) -> Lost {
        let mut out = self.clone();
        for (n, b) in out.values_mut().into_iter().zip(before.values()) {
            *n = n.saturating_sub(b);
        }
        out
    }

    /// Whether any events were dropped: figures made from the rest undercount.
    pub fn undercounts(&self) -> bool {
        self.iter().any(|(c, n)| c.kind == Kind::Dropped && n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Lost whose counters are `first`, `first + 1`, ... in order.
    fn counting_from(first: u64) -> Lost {
        let mut l = Lost::default();
        for (i, n) in l.values_mut().into_iter().enumerate() {
            *n = first + i as u64;
        }
        l
    }

    #[test]
    fn add_and_since_cover_every_counter() {
        let (a, b) = (counting_from(1), counting_from(100));
        let mut sum = a.clone();
        sum.add(&b);
        for (i, n) in sum.values().into_iter().enumerate() {
            assert_eq!(n, 101 + 2 * i as u64, "{}", Lost::COUNTERS[i].name);
        }
        assert_eq!(sum.since(&a), b);
        assert_eq!(a.since(&b), Lost::default(), "a counter that went back counts none");
    }

    #[test]
    fn the_file_format_names_every_counter_in_order() {
        let names: Vec<String> = Lost::COUNTERS.iter().map(|c| format!("\"{}\":0", c.name)).collect();
        let json = serde_json::to_string(&Lost::default()).unwrap();
        assert_eq!(json, format!("{{{}}}", names.join(",")));
        assert_eq!(
            json,
            r#"{"samples_taken":0,"samples":0,"unreadable_stacks":0,"cut_stacks":0,"handshake_events":0,"tree_nodes":0,"depth_overflow":0,"missed_returns":0,"threads":0,"connections":0,"unframed_work":0,"processes":0,"wire_handshakes":0}"#
        );
        let back: Lost = serde_json::from_str(&serde_json::to_string(&counting_from(1)).unwrap()).unwrap();
        assert_eq!(back, counting_from(1));
    }
}
