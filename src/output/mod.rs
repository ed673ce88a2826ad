// SPDX-License-Identifier: Apache-2.0
//! Outputs: what a user reads, rendered from recordings and their summaries.

pub mod diff;
pub mod flame;
pub mod json;
pub mod text;

/// How the call tree and the flame graph group what runs inside a stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Group {
    /// By stage function only (the probed call tree; whole stacks in the flame graph).
    #[default]
    Stage,
    /// A cause level under each stage function: stage → lookups / socket I/O / MAC / ... → functions.
    Cause,
}
