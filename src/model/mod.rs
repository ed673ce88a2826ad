// SPDX-License-Identifier: Apache-2.0
//! The profile model: what a recording holds and its file format. Pure data: nothing here touches the
//! kernel, the targets or the command line.

pub mod file;
mod format;
mod handshakes;
mod histogram;
mod libraries;
pub mod lost;
mod merge;
mod placement;
mod probe_cost;
mod resumption;
mod stacks;
pub mod untrusted;
mod windows;

pub use format::{FORMAT, FORMAT_VERSION, MAX_RECORDING_BYTES};
pub use handshakes::{HandshakeCounts, HandshakeGroup, HandshakeKind, Outcome, Role};
pub use histogram::CpuHistogram;
pub use libraries::{Function, Library, UnnamedFile, UnnamedReason};
pub use lost::Lost;
pub use placement::Placement;
pub use probe_cost::{
    corrected_tree, Hits, OwnPrograms, ProbeCost, ProgramRuns, RawNode, SamplerRan, TrapSamples, CALIBRATION_AS_SAMPLES,
};
pub use resumption::{Offer, Refusal, TicketKey};
pub use stacks::{CallGraph, Sample, TreeNode};
pub use windows::{HelloCounts, ProbeWindow, Probing, WindowPart};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::catalogue::families::{Flavor, Symbols};
use crate::catalogue::Stage;

/// The operations `openssl speed` measures for advice: the keys of [`Recording::openssl_speed`].
pub mod speed_ops {
    pub const ECDSA_P256_SIGN: &str = "ecdsap256_sign";
    pub const X25519_DERIVE: &str = "ecdhx25519_derive";
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Recording {
    pub format: String,
    pub format_version: u32,
    pub tlsprof_version: String,
    /// When the recording started, on the wall clock (Unix time, ns); None in recordings made before it
    /// was kept.
    #[serde(default)]
    pub start_unix_ns: Option<u64>,
    pub duration_s: f64,
    pub sample_freq_hz: u64,
    pub call_graph: CallGraph,
    pub stack_bytes: u32,
    /// Processes whose JIT code ran without a perf map, so its frames have no names.
    pub unnamed_jit_pids: Vec<u32>,
    pub all_probes: bool,
    pub targets: Vec<Target>,
    pub libraries: Vec<Library>,
    /// Indexed by function id (the id in tree paths and sample paths).
    pub functions: Vec<Function>,
    pub tree: Vec<TreeNode>,
    pub samples: Vec<Sample>,
    /// The file each user frame name was found in (the target's path for it): for outputs that name files.
    /// Empty in recordings made before it was kept.
    #[serde(default)]
    pub frame_files: BTreeMap<String, String>,
    /// Files some sampled frames had no names in, and why. Empty in recordings made before it was kept.
    #[serde(default)]
    pub unnamed_files: Vec<UnnamedFile>,
    /// Stripped files named from separate debug information: path -> where it was found (a debug
    /// directory, ".gnu_debugdata", a debuginfod server's URL).
    #[serde(default)]
    pub debug_files: BTreeMap<String, String>,
    pub handshakes: Vec<HandshakeGroup>,
    /// Ticket key names offered to the targets as servers, in the handshakes whose ClientHello was read.
    #[serde(default)]
    pub ticket_keys: Vec<TicketKey>,
    pub lost: Lost,
    /// Measured at attach; tree and handshake CPU figures are already corrected with it.
    pub probe_cost: ProbeCost,
    /// Probe hits on the targets, and the single-stepped ones among them: what their CPU paid for the
    /// probes (probe_overhead_ms).
    pub probe_hits: u64,
    pub probe_stepped_hits: u64,
    /// Hits of the probes placed in every process that maps their file (--comm, --all, a target with
    /// children), in processes that are not targets: what the recording cost processes outside it.
    #[serde(default)]
    pub other_process_hits: u64,
    /// Of probe_hits, those of Go's scheduler probes (goroutine switches), which come whether or not the
    /// targets make handshakes. 0 in recordings made before they were told apart.
    #[serde(default)]
    pub probe_scheduler_hits: u64,
    /// The trap sampler's samples of the targets and those of them in the probes' traps: the probes' cost
    /// measured in the targets. None when the kernel hides its symbols' addresses, and in recordings made
    /// before they were counted.
    #[serde(default)]
    pub probe_traps: Option<TrapSamples>,
    pub probing: Probing,
    /// µs per operation of alternatives advice compares with (`openssl speed` on this machine at record time).
    pub openssl_speed: BTreeMap<String, f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    pub pid: u32,
    pub comm: String,
    /// CPU the whole process used while recorded (all threads, user + system), from its CPU-time clock.
    pub process_cpu_ms: f64,
    /// The part of it used while the stage probes were attached: what stage figures compare with.
    pub probed_cpu_ms: f64,
    /// Seconds into the recording from which its SSL_read/SSL_write were probed as handshake drivers: its
    /// handshake stages ran outside any handshake call (a public-API-only libssl, the handshake left to
    /// SSL_read/SSL_write). None: not needed.
    #[serde(default)]
    pub io_driven_from_s: Option<f64>,
    /// The container or service its cgroup names, for people (`docker 0123456789ab`, `nginx.service`):
    /// `placement`'s display (kept apart for recordings made before placement was).
    #[serde(default)]
    pub container: Option<String>,
    /// Where it lives by its cgroup: container, pod, systemd unit.
    #[serde(default)]
    pub placement: Placement,
    /// Connections it accepted or opened over the recording, counted without probes: what the handshakes
    /// seen in the probe windows scale by.
    #[serde(default)]
    pub connections: u64,
    /// Seconds into the recording at which it was seen to have run a new program (exec): its probes and
    /// mappings were replaced then.
    #[serde(default)]
    pub execs_at_s: Vec<f64>,
    /// The scheduler slices of its threads that ran TLS stages, in ms: with and without what the kernel left
    /// out of their task clock, as of the process's CPU clock (the hypervisor's steal time; record/duty/steal.rs).
    /// Stage and handshake CPU leave it out too.
    #[serde(default)]
    pub stage_slices_ms: f64,
    #[serde(default)]
    pub stage_slices_cpu_ms: f64,
    /// What tlsprof's programs other than the probes cost it. Zero in recordings made before it was measured.
    #[serde(default)]
    pub own_programs: OwnPrograms,
    /// It started during the recording and joined as it did (a target's new process, one named by --comm, one
    /// that ran TLS code under --all): seconds into the recording when tlsprof took it in, and the target
    /// that forked it.
    #[serde(default)]
    pub joined_at_s: Option<f64>,
    #[serde(default)]
    pub parent: Option<u32>,
    /// It had exited when the recording ended.
    #[serde(default)]
    pub exited: bool,
    /// It runs no TLS code tlsprof can probe: its handshakes were counted from its sockets alone.
    #[serde(default)]
    pub wire_only: bool,
    /// A JVM whose JIT-compiled code keeps no frame pointers (no -XX:+PreserveFramePointer): its stacks stop
    /// at their first Java frame.
    #[serde(default)]
    pub jit_stacks_cut: bool,
    /// The processes this target stands for: 1, or more where a report folds those of one program that
    /// started during the recording into one (Recording::fold_started).
    #[serde(default = "one")]
    pub processes: u32,
}

fn one() -> u32 {
    1
}

impl Recording {
    /// Connections the targets accepted or opened over the recording.
    pub fn connections(&self) -> u64 {
        self.targets.iter().map(|t| t.connections).sum()
    }

    /// What tlsprof's programs other than the probes cost the targets over the recording.
    pub fn own_programs(&self) -> OwnPrograms {
        self.targets
            .iter()
            .fold(OwnPrograms::default(), |all, t| all.plus(&t.own_programs))
    }

    pub fn comm_of(&self, pid: u32) -> &str {
        self.targets
            .iter()
            .find(|t| t.pid == pid)
            .map_or("?", |t| t.comm.as_str())
    }

    /// The stage probes were detached for part of the recording (--max-overhead below 100): samples taken
    /// then have no stage path. A millisecond of slack for rounding: always-on probes cover it all.
    pub fn probed_part_time(&self) -> bool {
        self.probing.live_s < self.duration_s - 1e-3
    }

    pub fn stage_of(&self, func: u16) -> Option<Stage> {
        self.functions.get(usize::from(func)).and_then(|f| f.stage)
    }

    /// The stage each function of a stage path counts in, where it was called (catalogue::stage_within).
    pub fn path_stages(&self, path: &[u16]) -> Vec<Option<Stage>> {
        crate::catalogue::path_stages(path.iter().map(|&f| self.stage_of(f)))
    }
}

#[cfg(test)]
pub(crate) mod tests;
