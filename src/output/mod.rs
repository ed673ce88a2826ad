// SPDX-License-Identifier: Apache-2.0
//! Outputs: what a user reads, rendered from recordings and their summaries.

pub mod diff;
pub mod flame;
pub mod json;
pub mod pprof;
pub mod text;
