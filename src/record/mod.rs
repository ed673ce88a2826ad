// SPDX-License-Identifier: Apache-2.0
//! Recording: the kernel-facing layer. It finds TLS code in target processes, loads and attaches the BPF
//! programs, runs the recording session and turns what the kernel side counted into a model::Recording.

pub mod anatomy;
mod attach;
mod bpf;
mod calibrate;
mod collect;
mod governor;
mod objects;
mod prologue;
mod samples;
pub mod speed;
mod stack_tree;
mod symbolize;
pub mod targets;
mod unwind;
mod wire;

pub use attach::{AttachOptions, HelloCapture};
pub use collect::{record, RecordOptions};
pub use samples::MAX_STACK_BYTES;
