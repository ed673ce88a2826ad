// SPDX-License-Identifier: Apache-2.0
//! The kernel side: what it must provide, the BPF programs and their maps, the stage probes attached to the
//! targets, and what a probe hit costs.

pub(super) mod bpf;
pub(super) mod calibrate;
pub(super) mod privileges;
pub(super) mod probes;
pub(super) mod programs;
