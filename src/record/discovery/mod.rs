// SPDX-License-Identifier: Apache-2.0
//! Discovery: the target processes, the files they map, and the TLS code in those files (which family,
//! which functions, where each probe goes).

pub mod error_sites;
pub(super) mod gobin;
pub(super) mod names;
pub(super) mod objects;
pub(super) mod prologue;
pub(super) mod ssl_layout;
pub mod targets;
