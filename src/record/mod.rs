// SPDX-License-Identifier: Apache-2.0
//! Recording: the kernel-facing layer. It finds TLS code in target processes, loads and attaches the BPF
//! programs, runs the recording session and turns what the kernel side counted into a model::Recording.

mod discovery;
mod duty;
mod handshakes;
mod kernel;
mod session;
pub mod speed;
mod stacks;
mod status;

use std::time::Duration;

pub use discovery::{error_sites, targets};
pub use handshakes::hello::HelloCapture;
pub use kernel::check;
pub use session::{record, serve, Snapshots};
pub use stacks::samples::MAX_STACK_BYTES;

use crate::catalogue::families::Family;
use crate::model::CallGraph;

/// What to attach and how to sample.
pub struct AttachOptions {
    /// The TLS library families to look for, in the order a file is tried against them
    /// (catalogue::families::BUILT_IN, or more through the library).
    pub families: Vec<&'static dyn Family>,
    pub hello_capture: HelloCapture,
    pub freq_hz: u64,
    /// Also probe the catalogue's frequent functions (the record layer, EVP_KDF_derive, session encoding).
    pub all_probes: bool,
    pub call_graph: CallGraph,
    /// Bytes of user stack copied per sample (--call-graph dwarf).
    pub stack_bytes: u32,
    pub kernel_stacks: bool,
    /// Count every target's handshakes from its sockets alone (--wire-only): no stage probes.
    pub wire_only: bool,
    /// Ask the HotSpot JVMs among the targets for their perf maps (not --no-jvm-perf-map).
    pub jvm_perf_maps: bool,
}

pub struct RecordOptions {
    pub duration: Option<Duration>,
    /// Which processes: those started later that --comm or --all takes join the recording.
    pub selection: targets::Selection,
    pub attach: AttachOptions,
    /// --max-overhead: percent of the targets' CPU the stage probes may cost.
    pub max_overhead_pct: f64,
}
