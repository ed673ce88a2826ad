// SPDX-License-Identifier: Apache-2.0
//! tlsprof: attach to running processes, attribute their TLS CPU to handshake stages, report it.
//!
//! The layers, each reading only the ones above it:
//! - [`catalogue`]: which library function marks which stage, as data, one table per TLS library family, and
//!   which frames name the causes within a stage;
//! - [`model`]: what a recording holds and its file format (pure data);
//! - [`record`]: the kernel-facing part that attaches to processes and produces a recording;
//! - [`analyze`]: every figure derived from a recording, computed once into a [`analyze::Summary`];
//! - [`output`]: renderers of summaries and recordings (text, JSON, flame graphs, diffs).

mod boundary;

pub mod analyze;
pub mod catalogue;
pub mod model;
pub mod output;
pub mod record;
