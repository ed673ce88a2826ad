// SPDX-License-Identifier: Apache-2.0
//! Stacks: the probes' call tree of stage functions, and the CPU samples' stacks.

use serde::{Deserialize, Serialize};

/// One call-tree node: the path of function ids from the outermost stage function down.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TreeNode {
    pub pid: u32,
    pub path: Vec<u16>,
    pub calls: u64,
    pub cpu_ns: u64,
    pub self_ns: u64,
}

/// How user stacks were captured (--call-graph).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallGraph {
    /// Copy the user stack and unwind it with .eh_frame/.debug_frame (frame pointers for JIT code).
    Dwarf,
    /// Follow frame pointers in the kernel: cheaper, wrong through code built without them.
    Fp,
}

/// CPU samples with the same process, stage path and stack.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    pub pid: u32,
    pub path: Vec<u16>,
    /// User frames, outermost first, stage functions tagged: ("main", ..., "ngx_ssl_handshake",
    /// "SSL_do_handshake [handshake]", ..., "bn_sqrx8x_internal"); "[truncated]" first when unwinding stopped
    /// early (the stage frames the probes recorded then stand in for the lost part).
    pub frames: Vec<String>,
    /// Kernel frames below the user ones, outermost first (with --kernel).
    pub kernel: Vec<String>,
    /// The unwinder reached the root of the stack; false: outer frames are missing.
    pub complete: bool,
    pub count: u64,
}
