// SPDX-License-Identifier: Apache-2.0
//! Analysis: every figure derived from a recording, computed once into a [`Summary`], and the advice drawn
//! from them.

pub mod advice;
pub mod causes;
mod estimate;
mod summary;

pub use estimate::Estimate;
pub use summary::{
    sample_stages, summarize, Basis, CallTree, CallTreeRow, CpuStats, FunctionSummary, HandshakeSummary, KindSummary,
    LibrarySummary, ProbingSummary, RecordLayerShares, RowKind, StackSummary, StageSummary, Summary, TargetSummary,
    UnnamedFileSummary,
};
