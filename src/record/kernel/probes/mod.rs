// SPDX-License-Identifier: Apache-2.0
//! The stage probes: the catalogue functions found in each target, their uprobes, and the probe windows
//! of the --max-overhead duty cycle (the epoch rule: a window starts once every probe is attached and ends
//! before any is detached). Here, what is kept of the targets and of each file's probes; in the submodules,
//! the processes looked at and forgotten (processes), what their files hold (found), a file's probes
//! attached (attach), Go's return probes (go_returns), and the windows (windows).

mod attach;
mod found;
mod go_returns;
mod processes;
mod windows;

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use libbpf_rs::Link;

use crate::model::{Function, Library};
use crate::record::discovery::objects::TlsObject;
use crate::record::discovery::targets::{Mapping, Process};
use go_returns::{ExitLinks, Learning};
pub use windows::{hold_window, open_window};

/// The processes probed so far, what was found in them, and their probes. Processes can join while recording.
#[derive(Default)]
pub struct TargetSet {
    pub libraries: Vec<Library>,
    pub functions: Vec<Function>,
    /// Each target's file mappings at attach time, to unwind and symbolize samples after it exits.
    pub maps: HashMap<u32, Vec<Mapping>>,
    pub probes: usize,
    /// Files already inspected, by (device, inode): nginx's master and workers share them.
    inspected: HashMap<(String, u64), Option<TlsObject>>,
    /// Files of no TLS library's name given a first look (objects::may_hold_tls), by (device, inode): whether
    /// they may hold TLS code, and so are inspected.
    first_looks: HashMap<(String, u64), bool>,
    /// Each TLS file's entry in `libraries`, by (device, inode): a library replaced on disk keeps its path.
    library_of: HashMap<(String, u64), usize>,
    /// Every process looked at, with or without TLS code: what it ran then, to see it exec.
    examined: HashMap<u32, Examined>,
    /// What to attach in each (process, file), or each file in every process (Scope), kept to attach again
    /// after a pause (--max-overhead).
    specs: Vec<ProbeSpec>,
    /// Which processes' files are probed in every process that maps them.
    wide: Wide,
    /// SSL_read/SSL_write of libraries probed through their public API only, per process: attached once
    /// that process's handshakes are seen to run inside them (`drive_from_io`).
    io_drivers: Vec<ProbeSpec>,
    /// The stage probes' links, by process: empty while they are paused.
    links: Vec<(u32, Link)>,
    /// Each spec's return-instruction probes (ProbeSpec::go_exits) while they are attached, by spec id: a link
    /// per function, so that one settling detaches its own probes alone.
    exit_links: HashMap<u64, ExitLinks>,
    next_spec_id: u64,
    paused: bool,
    /// Targets without TLS code tlsprof can probe: their handshakes are counted from their sockets alone.
    pub wire_only: BTreeSet<u32>,
}

/// A process as it was when looked at.
struct Examined {
    start_ticks: u64,
    exe: Option<(u64, u64)>,
    tls: bool,
    at: Instant,
}

/// Which files are probed in every process that maps them, with one link each (Scope::AnyProcess), rather than
/// in each target with links of its own: the files of processes whose new processes join the recording, which
/// may handshake before tlsprof could attach to them (a PostgreSQL backend within a millisecond of its fork).
/// Other processes mapping such a file take a trap on each probed call (counted: STAT_OTHER_HITS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Wide {
    /// Per target: those with child processes when looked at (a target's new processes join).
    #[default]
    Parents,
    /// Every target's, and the machine's TLS libraries (--comm, --all: processes that start join).
    Every,
}

/// Why a process is looked at during the recording.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Change {
    /// New to the recording (started, or selected, since the last look).
    New,
    /// A target that ran a new program (exec): its probes and mappings are replaced.
    Exec,
    /// Looked at before without TLS code; may have loaded a TLS library since.
    Recheck,
}

/// Where a spec's probes apply.
enum Scope {
    /// In one process.
    Process(Process),
    /// In every process that maps the file (FF_ANY_PROCESS), held open here: its path is /proc/self/fd/N.
    AnyProcess(std::fs::File),
}

impl Scope {
    /// The process, for one process's probes.
    fn pid(&self) -> Option<u32> {
        match self {
            Scope::Process(p) => Some(p.pid),
            Scope::AnyProcess(_) => None,
        }
    }

    /// Whether its probes can still be attached: a file's always can.
    fn alive(&self) -> bool {
        match self {
            Scope::Process(p) => p.alive(),
            Scope::AnyProcess(_) => true,
        }
    }

    /// What a uprobe_multi link takes for it: the process, or -1 for every process.
    fn attach_pid(&self) -> i32 {
        match self {
            Scope::Process(p) => p.pid as i32,
            Scope::AnyProcess(_) => -1,
        }
    }
}

/// The uprobes of one file in one process, or in every process that maps it.
struct ProbeSpec {
    id: u64,
    scope: Scope,
    path: String,
    open_path: std::path::PathBuf,
    /// The file's (device, inode).
    file: (String, u64),
    entry: Probes,
    /// Stage functions' returns, where the kernel has no uprobe sessions.
    ret: Probes,
    /// Functions whose result is the connection: their return alone (connection_return).
    connection_ret: Probes,
    /// Functions with both an entry and a return probe, where the kernel has uprobe sessions: one program
    /// whose entry declines the return of a call that opened no frame.
    session: Probes,
    /// Go code: entries and exit sites, all entry-style (no return probe ever touches a Go stack), and the
    /// sites learned where callers resume.
    go: Probes,
    /// Go code: the return instructions (and jumps out) of the functions that learn their callers
    /// (FF_GO_LEARN_RETURN), of the function ids in `go_exit_funcs`: single-stepped, and probed only until
    /// their function settles (Learning).
    go_exits: Probes,
    go_exit_funcs: Vec<u16>,
    learning: Learning,
}

impl Drop for TargetSet {
    fn drop(&mut self) {
        self.detach_all();
    }
}

/// Detaches the targets' links at once (a second per few dozen uprobe_multi links, one after the other).
fn detach(links: Vec<(u32, Link)>) {
    super::detach(links.into_iter().map(|(_, l)| l).collect());
}

/// What a uprobe_multi link's program runs at: entries, returns, or both as one session.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Entry,
    Return,
    Session,
}

#[derive(Default)]
struct Probes {
    offsets: Vec<usize>,
    cookies: Vec<u64>,
}

impl Probes {
    fn push(&mut self, offset: u64, cookie: u64) {
        self.offsets.push(offset as usize);
        self.cookies.push(cookie);
    }
}
