// SPDX-License-Identifier: Apache-2.0
//! Names for a JVM's JIT-compiled code. HotSpot writes them to /tmp/perf-<pid>.map (in its own namespaces) when
//! asked by the diagnostic command Compiler.perfmap (JDK 16 and later) through its attach mechanism: the UNIX
//! socket /tmp/.java_pid<pid> that jcmd speaks to, which the JVM opens once it finds a file .attach_pid<pid> in
//! its working directory and receives SIGQUIT. The map is a snapshot of the code compiled so far: it is asked
//! for again before each batch of stacks is named (at most every PERIOD), on a thread of its own, so that the
//! session never waits on a JVM. What the JVM writes is read as every perf map is (symbolize.rs: owned by the
//! target's user or root, bounded, never through a symlink).

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::record::discovery::targets::Mapping;

/// A JVM's map is asked for at most this often.
const PERIOD: Duration = Duration::from_secs(5);
/// How long a JVM gets to open its attach socket after SIGQUIT, and to answer.
const ATTACH_WAIT: Duration = Duration::from_secs(5);
/// An answer longer than this is no answer (Compiler.perfmap answers with nothing but its status).
const MAX_ANSWER: u64 = 64 << 10;

/// Whether a process runs HotSpot: it maps libjvm.so.
pub fn is_hotspot(maps: &[Mapping]) -> bool {
    maps.iter()
        .any(|m| m.executable && m.display_path().rsplit('/').next() == Some("libjvm.so"))
}

/// Whether process pid is a HotSpot JVM whose JIT-compiled code keeps no frame pointers: its stacks stop at
/// their first Java frame. Told by -XX:+PreserveFramePointer (or its negation) on its command line or in the
/// options the JVM reads from its environment; the last one given wins, as in the JVM.
pub fn jit_stacks_cut(pid: u32, maps: &[Mapping]) -> bool {
    if !is_hotspot(maps) {
        return false;
    }
    let read = |file: &str| std::fs::read(format!("/proc/{pid}/{file}")).unwrap_or_default();
    let environ = read("environ");
    let options = environ
        .split(|&b| b == 0)
        .filter_map(|var| {
            let var = std::str::from_utf8(var).ok()?;
            let (name, value) = var.split_once('=')?;
            ["JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"]
                .contains(&name)
                .then(|| value.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        })
        .flatten();
    let cmdline = read("cmdline");
    let args = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned());
    let last = options.chain(args).rfind(|a| a.ends_with("PreserveFramePointer"));
    last.as_deref() != Some("-XX:+PreserveFramePointer")
}

/// What asking the JVMs came to, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    /// Maps written at the JVMs' hands.
    pub written: u64,
    /// Requests that failed, with the last reason.
    pub failed: u64,
    pub last_error: Option<String>,
}

/// The JVMs among the targets, and their requests under way.
#[derive(Default)]
pub struct PerfMapRequests {
    last: HashMap<u32, Instant>,
    /// When `refresh` last looked at the targets.
    looked: Option<Instant>,
    /// The JVMs told of on stderr.
    announced: HashSet<u32>,
    running: Option<JoinHandle<()>>,
    pub asked: Arc<Mutex<Asked>>,
}

impl PerfMapRequests {
    /// Whether PERIOD has passed since the targets were last looked over for JVMs to ask.
    pub fn due(&self) -> bool {
        self.looked.is_none_or(|t| t.elapsed() >= PERIOD)
    }

    /// Asks each of `pids` (HotSpot processes) for a fresh map, if the last ask is PERIOD old and none is
    /// under way; returns at once.
    pub fn refresh(&mut self, pids: &[u32]) {
        if self.running.as_ref().is_some_and(|r| !r.is_finished()) {
            return;
        }
        let now = Instant::now();
        self.looked = Some(now);
        let due: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|pid| self.last.get(pid).is_none_or(|t| now.duration_since(*t) >= PERIOD))
            .collect();
        if due.is_empty() {
            return;
        }
        for &pid in &due {
            self.last.insert(pid, now);
            if self.announced.insert(pid) {
                eprintln!(
                    "tlsprof: asking the JVM of process {pid} for names of its JIT-compiled code (jcmd's \
                     Compiler.perfmap, through its attach mechanism); --no-jvm-perf-map not to"
                );
            }
        }
        let asked = self.asked.clone();
        self.running = Some(std::thread::spawn(move || {
            for pid in due {
                let result = request_perf_map(pid);
                let mut a = asked.lock().unwrap_or_else(|e| e.into_inner());
                match result {
                    Ok(()) => a.written += 1,
                    Err(e) => {
                        a.failed += 1;
                        a.last_error = Some(format!("process {pid}: {e:#}"));
                    }
                }
            }
        }));
    }

    /// Asks each of `pids` now, once the requests under way are done, and waits for the answers: the last
    /// maps, for the last batch of stacks.
    pub fn ask_now(&mut self, pids: &[u32]) {
        if let Some(r) = self.running.take() {
            let _ = r.join();
        }
        self.last.retain(|pid, _| !pids.contains(pid));
        self.refresh(pids);
        if let Some(r) = self.running.take() {
            let _ = r.join();
        }
    }
}

/// Asks the JVM `pid` to write its perf map (Compiler.perfmap), starting its attach listener first if it has
/// none.
pub fn request_perf_map(pid: u32) -> Result<()> {
    let ns_pid = namespace_pid(pid).context("its pid in its namespace")?;
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let socket = root.join(format!("tmp/.java_pid{ns_pid}"));
    if !is_socket(&socket) {
        start_attach_listener(pid, ns_pid, &socket)?;
    }
    let mut stream = UnixStream::connect(&socket).with_context(|| format!("connect to {}", socket.display()))?;
    stream.set_read_timeout(Some(ATTACH_WAIT))?;
    stream.set_write_timeout(Some(ATTACH_WAIT))?;
    // Protocol 1: the command and three arguments, each NUL-terminated (jcmd's own request).
    stream.write_all(b"1\0jcmd\0Compiler.perfmap\0\0\0")?;
    let mut answer = Vec::new();
    stream.take(MAX_ANSWER).read_to_end(&mut answer)?;
    let text = String::from_utf8_lossy(&answer);
    let mut lines = text.lines();
    match lines.next().map(str::trim) {
        Some("0") => Ok(()),
        Some(code) => bail!(
            "Compiler.perfmap failed ({code}): {}",
            crate::model::untrusted::Printable(lines.next().unwrap_or(""))
        ),
        None => bail!("no answer to Compiler.perfmap"),
    }
}

/// The JVM opens its attach socket when it finds .attach_pid<pid> in its working directory (or /tmp) as it
/// receives SIGQUIT; without that file, SIGQUIT makes it print its threads. The file is removed once the socket
/// is there.
fn start_attach_listener(pid: u32, ns_pid: u32, socket: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let trigger = PathBuf::from(format!("/proc/{pid}/cwd/.attach_pid{ns_pid}"));
    // The target chose its working directory and what is in it: a new file only, never through a symlink
    // (create_new fails on any name that exists).
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(&trigger)
        .with_context(|| format!("create {}", trigger.display()))?;
    // SAFETY: a plain signal to a target process (a HotSpot JVM: it maps libjvm.so).
    let sent = unsafe { libc::kill(pid as i32, libc::SIGQUIT) } == 0;
    let deadline = Instant::now() + ATTACH_WAIT;
    while sent && !is_socket(socket) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_file(&trigger);
    if !is_socket(socket) {
        bail!("its attach listener did not start (-XX:+DisableAttachMechanism?)");
    }
    Ok(())
}

fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// The process's pid as its own pid namespace numbers it (the last NSpid field).
fn namespace_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}
