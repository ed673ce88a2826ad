// SPDX-License-Identifier: Apache-2.0
//! Shared pieces of the tests, one module per concern; `use common::*` brings them all.
// Each test binary uses only some of these helpers: the rest would be dead code in it.
#![allow(dead_code)]

mod apache;
mod fixture;
mod go;
mod haproxy;
mod installed;
mod java;
mod load;
mod nginx;
mod node;
mod postgres;
mod process;
mod profiler;
mod rust;
mod skip;

// A binary that uses none of a module's helpers would warn that its re-export is unused.
#[allow(unused_imports)]
pub use {
    apache::*, fixture::*, go::*, haproxy::*, installed::*, java::*, load::*, nginx::*, node::*, postgres::*,
    process::*, profiler::*, rust::*, skip::*,
};
