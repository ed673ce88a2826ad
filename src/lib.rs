// SPDX-License-Identifier: Apache-2.0
//! tlsprof: attach to running processes, attribute their TLS CPU to handshake stages, report it.
//!
//! The layers, each reading only the ones above it:
//! - [`catalogue`]: which library function marks which stage, as data, one table per TLS library family, and
//!   which frames name the causes within a stage;
//! - [`model`]: what a recording holds and its file format (pure data);
//! - [`record`]: the kernel-facing part that attaches to processes and produces a recording;
//! - [`analyze`]: every figure derived from a recording, computed once into a [`analyze::Summary`], and the
//!   advice drawn from it;
//! - [`output`]: renderers of summaries and recordings (text, JSON, flame graphs, diffs, pprof, Prometheus);
//! - [`serve`]: continuous mode, recording in intervals and serving metrics and profiles over HTTP;
//! - [`top`]: the live view, a session's intervals shown as they come;
//! - [`cli`]: the command line's definition, for the binary, its man pages and completions;
//! - [`commands`]: what each subcommand does with its command line, a function each, for the binary.

mod boundary;

pub mod analyze;
pub mod catalogue;
pub mod cli;
pub mod commands;
pub mod model;
pub mod output;
pub mod record;
pub mod serve;
pub mod top;

/// How many cases each property test (`fuzz_*`) tries: PROPTEST_CASES (256 unless set; `make fuzz` sets it
/// high), divided by `cost` for tests whose cases are dear (a file written and parsed per case).
#[cfg(test)]
pub(crate) fn fuzz_config(cost: u32) -> proptest::test_runner::Config {
    let base = proptest::test_runner::Config::default();
    proptest::test_runner::Config {
        cases: (base.cases / cost).max(1),
        // A failure prints its minimal input; nothing is written into the source tree.
        failure_persistence: None,
        ..base
    }
}
