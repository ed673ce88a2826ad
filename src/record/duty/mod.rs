// SPDX-License-Identifier: Apache-2.0
//! Probe duty: the --max-overhead governor that opens and closes probe windows, what each window saw, and
//! the meters it is judged by (the targets' CPU, steal time, the probes' traps).

pub(super) mod cpu;
pub(super) mod governor;
pub(super) mod steal;
pub(super) mod traps;
pub(super) mod windows;
