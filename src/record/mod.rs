// SPDX-License-Identifier: Apache-2.0
//! Recording: the kernel-facing layer. It finds TLS code in target processes, loads and attaches the BPF
//! programs, runs the recording session and turns what the kernel side counted into a model::Recording.

pub mod anatomy;
mod bpf;
mod calibrate;
mod cpu;
mod debuginfo;
mod gobin;
mod governor;
mod handshakes;
mod hello;
mod objects;
mod plt;
mod privileges;
mod probes;
mod programs;
mod prologue;
mod samples;
mod session;
pub mod speed;
mod stack_tree;
mod status;
mod steal;
mod symbolize;
pub mod targets;
mod traps;
mod unwind;
mod windows;
mod wire;

use std::time::Duration;

pub use hello::HelloCapture;
pub use samples::MAX_STACK_BYTES;
pub use session::{record, serve, Snapshots};

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
}

pub struct RecordOptions {
    pub duration: Option<Duration>,
    /// Which processes: those started later that --comm or --all takes join the recording.
    pub selection: targets::Selection,
    pub attach: AttachOptions,
    /// --max-overhead: percent of the targets' CPU the stage probes may cost.
    pub max_overhead_pct: f64,
}
