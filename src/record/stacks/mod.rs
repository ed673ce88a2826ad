// SPDX-License-Identifier: Apache-2.0
//! Stacks: CPU samples unwound, named (symbols, debug information, PLT stubs) and kept as a bounded tree.

pub(super) mod debuginfo;
pub(super) mod jvm;
pub(super) mod plt;
pub(super) mod samples;
pub(super) mod stack_tree;
pub(super) mod symbolize;
pub(super) mod unwind;
