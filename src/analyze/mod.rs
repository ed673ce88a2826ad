// SPDX-License-Identifier: Apache-2.0
//! Analysis: every figure derived from a recording, computed once into a [`Summary`], then the advice drawn
//! from it: [`analyze`] gives both.

pub mod advice;
pub mod causes;
mod estimate;
mod summary;

use serde::Serialize;

use crate::model::Recording;
pub use advice::Advice;
pub use estimate::Estimate;
pub use summary::{
    sample_stages, summarize, CallTree, CallTreeRow, CpuStats, FunctionSummary, HandshakeSummary, KindSummary,
    LibrarySummary, ProbingSummary, RecordLayerShares, RowKind, StackSummary, StageSummary, Summary, TargetSummary,
    UnnamedFileSummary,
};

/// A recording's summary and the advice drawn from it: what the reports render. Serialized as the summary
/// with an `advice` list beside its figures.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    #[serde(flatten)]
    pub summary: Summary,
    pub advice: Vec<Advice>,
}

/// The summary of a recording, then the advice on it.
pub fn analyze(rec: &Recording) -> Analysis {
    let summary = summarize(rec);
    let advice = advice::advise(rec, &summary);
    Analysis { summary, advice }
}
