// SPDX-License-Identifier: Apache-2.0
//! Analysis: every figure derived from a recording, computed once into a [`Summary`], then the advice drawn
//! from it: [`analyze`] gives both.

pub mod advice;
pub mod attribution;
pub mod causes;
mod estimate;
pub mod groups;
mod summary;

use crate::model::Recording;
pub use advice::Advice;
pub use estimate::Estimate;
pub use summary::{
    summarize, CallTree, CallTreeRow, CpuStats, FunctionSummary, HandshakeSummary, KindSummary, LibrarySummary,
    ObservedStage, ProbingSummary, Reason, ReasonCount, RecordLayerShares, ResumptionSummary, RowKind, StackSummary,
    StageSummary, Summary, TargetSummary, TicketKeySummary, TrapsMeasured, UnnamedFileSummary, WindowPoint, WindowSpan,
    WireCheck,
};

/// A recording's summary and the advice drawn from it: what the reports render.
#[derive(Clone, Debug)]
pub struct Analysis {
    pub summary: Summary,
    pub advice: Vec<Advice>,
}

/// The summary of a recording, then the advice on it. The processes of a program that started during the
/// recording are reported as one (Recording::fold_started).
pub fn analyze(rec: &Recording) -> Analysis {
    let rec = rec.fold_started();
    let summary = summarize(&rec);
    let advice = advice::advise(&rec, &summary);
    Analysis { summary, advice }
}
