// SPDX-License-Identifier: Apache-2.0
//! The TLS libraries found in the targets, the stage functions in them, and the files whose frames stayed
//! unnamed.

use serde::{Deserialize, Serialize};

use super::{Flavor, Symbols};
use crate::catalogue::Stage;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Library {
    pub path: String,
    /// Its TLS library family (catalogue::families::Family::id).
    pub family: String,
    pub flavor: Flavor,
    pub version: Option<String>,
    pub symbols: Symbols,
    pub functions_found: usize,
    pub pids: Vec<u32>,
    /// The file at `path` was deleted or replaced on disk while this one was mapped (a package upgrade):
    /// the processes in `pids` ran this, the old file.
    #[serde(default)]
    pub replaced: bool,
    /// Where a handshake call fails, its connection's handshake state was read (the library's layout of
    /// it was read off its accessors): a failure after the handshake completed counts it as completed.
    #[serde(default)]
    pub handshake_state: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Function {
    pub name: String,
    /// Index into `libraries`.
    pub library: usize,
    pub stage: Option<Stage>,
}

/// A file that sampled frames had no names in: a stripped file whose debug information was not found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnnamedFile {
    /// The target's path for it.
    pub path: String,
    pub build_id: Option<String>,
    /// The distribution package that installed it, whose debug symbols would name it.
    pub package: Option<String>,
    pub reason: UnnamedReason,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnnamedReason {
    /// Stripped; no debug file under the debug directories, no MiniDebugInfo, no debuginfod server set.
    NoDebugInfo,
    /// Stripped; the debuginfod servers had none or did not answer.
    NotOnServers,
    /// The lookup was still under way when the recording ended.
    LookupUnfinished,
    /// Its symbols (or its debug file's) do not cover the frames' code.
    NotCovered,
}
