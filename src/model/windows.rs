// SPDX-License-Identifier: Apache-2.0
//! The probe windows: when the stage probes were attached, and what each window saw in each target.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{HandshakeCounts, Role};
use crate::catalogue::Stage;

/// When the stage probes were attached (--max-overhead): handshakes, the call tree and stage CPU come from
/// these windows; CPU samples cover the whole recording.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Probing {
    /// The budget, in percent of the targets' CPU; 100: attached throughout.
    pub max_overhead_pct: f64,
    pub live_s: f64,
    pub windows: u32,
    /// The probes' cost over the costliest chunk (0.2 s) they were attached, as a fraction of the targets' CPU.
    pub peak_overhead: f64,
    /// What each window saw: what estimates for the whole recording, and their error, are made from. Empty
    /// in recordings made before windows were kept one by one.
    #[serde(default)]
    pub window_figures: Vec<ProbeWindow>,
}

/// One probe window: what the probes saw in each target during it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProbeWindow {
    /// When it opened, by the wall clock (ns since the Unix epoch); None in recordings made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_unix_ns: Option<u64>,
    pub live_s: f64,
    pub processes: Vec<WindowPart>,
    /// An earlier continuous-mode interval's window, standing for an interval whose connections all came
    /// while the probes were detached: its ratios (handshakes per connection, stage CPU per CPU ms) hold
    /// for it, but it sampled none of it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stands_in: bool,
}

/// What a probe window saw in one target (pid), or in several added together.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WindowPart {
    pub pid: u32,
    /// The process's CPU during the window, without the probes' estimated cost (the probes' hits are counted
    /// for all targets together: each process's share of their cost is its share of the window's CPU).
    pub own_cpu_ms: f64,
    /// Connections it accepted or opened during the window.
    pub connections: u64,
    pub handshakes: HandshakeCounts,
    /// The abandoned handshakes, each weighted by the inverse of its chance to be seen: one is seen when its
    /// work and its end both fall inside the probes' attachment, so one that ends D after its work began is
    /// seen in an attachment of length S with chance (S - D) / S. None in recordings made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abandoned_weighted: Option<f64>,
    /// Self CPU per stage in the window, the probes' cost taken out, in ns.
    pub stage_self_ns: BTreeMap<Stage, u64>,
    /// Its completed handshakes by role whose ClientHello was read, and how many of those refused a session:
    /// the windows are the clusters resumption is sampled in. Empty in recordings made before it was kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hellos: BTreeMap<Role, HelloCounts>,
    /// A probed process's handshakes as its sockets showed them (where the socket programs ran with the
    /// probes: --hello-capture always), to check the probes' counts with.
    #[serde(default, skip_serializing_if = "HandshakeCounts::is_zero")]
    pub wire: HandshakeCounts,
    /// A process counted from the wire alone: the completed handshakes its window stands for but could not
    /// follow to their end, under way when it closed (each followed one weighted by the inverse of its chance
    /// to be followed whole, less one). The wire's counterpart of the probes' `partial` at a window's
    /// opening: it sees no handshake begun before the window, nor the end of one under way at its close.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wire_unseen_at_close: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Completed handshakes whose ClientHello was read whole, and those of them that refused the session it
/// offered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HelloCounts {
    pub read: u64,
    pub refused: u64,
}

impl WindowPart {
    /// The abandoned handshakes the window stands for: weighted for their chance to be seen where that was
    /// kept, else as counted.
    pub fn abandoned_seen(&self) -> f64 {
        self.abandoned_weighted.unwrap_or(self.handshakes.abandoned as f64)
    }

    pub(crate) fn add(&mut self, other: &WindowPart) {
        self.own_cpu_ms += other.own_cpu_ms;
        self.connections += other.connections;
        if self.abandoned_weighted.is_some() || other.abandoned_weighted.is_some() {
            self.abandoned_weighted = Some(self.abandoned_seen() + other.abandoned_seen());
        }
        self.handshakes.add_counts(&other.handshakes);
        self.wire.add_counts(&other.wire);
        self.wire_unseen_at_close += other.wire_unseen_at_close;
        for (stage, ns) in &other.stage_self_ns {
            *self.stage_self_ns.entry(*stage).or_default() += ns;
        }
        for (role, h) in &other.hellos {
            let mine = self.hellos.entry(*role).or_default();
            mine.read += h.read;
            mine.refused += h.refused;
        }
    }
}

impl ProbeWindow {
    /// What the window saw in all its processes together (pid 0).
    pub fn whole(&self) -> WindowPart {
        let mut whole = WindowPart::default();
        for p in &self.processes {
            whole.add(p);
        }
        whole
    }

    /// Whether any of its processes accepted or opened a connection during it.
    pub fn saw_connections(&self) -> bool {
        self.processes.iter().any(|p| p.connections > 0)
    }
}
