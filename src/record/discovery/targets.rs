// SPDX-License-Identifier: Apache-2.0
//! Target processes: resolving --pid/--comm, their memory maps, and the files that may hold TLS code.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

use crate::model::Placement;

#[derive(Clone, Debug)]
pub struct Process {
    pub pid: u32,
    pub comm: String,
    /// Start time in clock ticks since boot: tells a live process from a new one that reused its pid.
    pub start_ticks: u64,
}

/// One file-backed mapping from /proc/PID/maps.
#[derive(Clone, Debug, PartialEq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub executable: bool,
    pub dev: String,
    pub inode: u64,
    /// The path as the target sees it; may end in " (deleted)" when the file was replaced.
    pub path: String,
}

/// Files of targets held open (by their device and inode): a process's /proc/PID/map_files entries go with it,
/// and a short process is often gone before its libraries are looked at or its samples unwound. Bounded; held
/// until tlsprof exits.
static HELD: Mutex<BTreeMap<(String, u64), File>> = Mutex::new(BTreeMap::new());
const MAX_HELD: usize = 4096;

impl Mapping {
    /// A path to the mapped file that works from our mount namespace, even when the file was deleted or replaced,
    /// and once the process is gone if the file is held (`hold`).
    pub fn open_path(&self, pid: u32) -> PathBuf {
        let held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        match held.get(&(self.dev.clone(), self.inode)) {
            Some(f) => PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())),
            None => PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", self.start, self.end)),
        }
    }

    /// Holds the mapped file open (through process pid's map_files), so that `open_path` reaches it for as long
    /// as tlsprof runs. False when it could not be (the process is gone, or too many are held).
    pub fn hold(&self, pid: u32) -> bool {
        let path = format!("/proc/{pid}/map_files/{:x}-{:x}", self.start, self.end);
        self.held() || File::open(path).is_ok_and(|f| self.keep(f))
    }

    fn held(&self) -> bool {
        let held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        held.contains_key(&(self.dev.clone(), self.inode))
    }

    fn keep(&self, file: File) -> bool {
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        if held.len() >= MAX_HELD {
            return false;
        }
        held.entry((self.dev.clone(), self.inode)).or_insert(file);
        true
    }

    /// A whole file as a mapping of no process's (for its probes in processes that have not mapped it yet),
    /// held open; None where it cannot be held.
    fn of_file(path: &std::path::Path, file: File) -> Option<Mapping> {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata().ok()?;
        let dev = meta.dev();
        let m = Mapping {
            start: 0,
            end: 0,
            offset: 0,
            executable: true,
            // As /proc/PID/maps writes it.
            dev: format!("{:02x}:{:02x}", libc::major(dev), libc::minor(dev)),
            inode: meta.ino(),
            path: path.to_string_lossy().into_owned(),
        };
        m.keep(file).then_some(m)
    }

    pub fn display_path(&self) -> &str {
        self.path.strip_suffix(" (deleted)").unwrap_or(&self.path)
    }

    /// Where in the file a virtual address inside the mapping is (what uprobes and symbolizers take).
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr - self.start + self.offset
    }
}

/// CPU time a process has used so far (user + system, all threads, exited ones included), in milliseconds.
/// Read from its CPU-time clock, in nanoseconds: /proc/PID/stat counts 10 ms ticks, which would put ±10% on
/// the CPU of a 0.2 s probe window. None once the process has exited.
pub fn cpu_ms(pid: u32) -> Option<f64> {
    let mut clock: libc::clockid_t = 0;
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: both are plain out-parameters, valid for the calls.
    let ok = unsafe {
        libc::clock_getcpuclockid(i32::try_from(pid).ok()?, &mut clock) == 0 && libc::clock_gettime(clock, &mut ts) == 0
    };
    ok.then(|| ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6)
}

struct Stat {
    comm: String,
    /// 'R', 'S', ... 'Z' for a zombie: exited, waiting for its parent to reap it.
    state: char,
    ppid: u32,
    start_ticks: u64,
}

fn read_stat(pid: u32) -> Option<Stat> {
    // A target names itself: any bytes but NUL, not always UTF-8.
    let bytes = fs::read(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&String::from_utf8_lossy(&bytes))
}

fn parse_stat(text: &str) -> Option<Stat> {
    // comm is in parentheses and may itself contain spaces and parentheses: split at the last ')'.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 2..)?.split_whitespace().collect();
    // Field numbers in proc(5) start at 1 with pid; fields[0] here is field 3 (state).
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let state = fields.first()?.chars().next()?;
    Some(Stat {
        comm,
        state,
        ppid: u32::try_from(field(4)?).ok()?,
        start_ticks: field(22)?,
    })
}

impl Process {
    pub fn from_pid(pid: u32) -> Option<Process> {
        let stat = read_stat(pid)?;
        Some(Process {
            pid,
            comm: stat.comm,
            start_ticks: stat.start_ticks,
        })
    }

    /// Running (not exited, not a zombie) and not a new process that reused the pid.
    pub fn alive(&self) -> bool {
        read_stat(self.pid).is_some_and(|s| s.start_ticks == self.start_ticks && !matches!(s.state, 'Z' | 'X'))
    }

    pub fn maps(&self) -> Result<Vec<Mapping>> {
        let bytes = fs::read(format!("/proc/{}/maps", self.pid))
            .with_context(|| format!("cannot read /proc/{}/maps", self.pid))?;
        // File names are any bytes: shown lossily, opened through map_files (Mapping::open_path).
        Ok(parse_maps(&String::from_utf8_lossy(&bytes)))
    }
}

/// Which processes to profile (--pid, --comm, --all): shared by every command that attaches.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub pids: Vec<u32>,
    pub comms: Vec<String>,
    /// Every process on the machine that runs TLS code tlsprof knows, but tlsprof itself.
    pub all: bool,
}

impl Selection {
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty() && self.comms.is_empty() && !self.all
    }

    /// Processes started later join the recording (--comm, --all); --pid names processes that exist (their
    /// new processes join too, as every target's do).
    pub fn follows_new(&self) -> bool {
        self.all || !self.comms.is_empty()
    }

    /// Whether a target that ran the program named `comm` is still one: always but under --comm alone, where
    /// the name is what selects it.
    pub fn takes_program(&self, comm: &str) -> bool {
        self.all || !self.pids.is_empty() || self.comms.iter().any(|c| comm_prefix(c) == comm)
    }

    /// The live processes selected now.
    pub fn resolve(&self) -> Result<Vec<Process>> {
        let mut found = Vec::new();
        for &pid in &self.pids {
            match Process::from_pid(pid) {
                Some(p) => found.push(p),
                None => bail!("no process with pid {pid}: check the pid with `ps -p {pid}`"),
            }
        }
        // --comm waits for processes of that name that are not running yet.
        for comm in &self.comms {
            found.extend(processes_named(comm));
        }
        if self.all {
            found.extend(self.followed());
        }
        found.sort_by_key(|p| p.pid);
        found.dedup_by_key(|p| p.pid);
        Ok(found)
    }

    /// The processes running now that --comm or --all take.
    pub fn followed(&self) -> Vec<Process> {
        let me = std::process::id();
        let mut out: Vec<Process> = all_processes()
            .into_iter()
            .filter(|p| p.pid != me && (self.all || self.comms.iter().any(|c| p.comm == comm_prefix(c))))
            .collect();
        out.sort_by_key(|p| p.pid);
        out
    }
}

/// What the kernel keeps of a name: comm is truncated to 15 bytes.
fn comm_prefix(name: &str) -> String {
    name.chars().take(15).collect()
}

/// Every process in /proc (our pid namespace's view: the host's, for tlsprof runs there).
fn all_processes() -> Vec<Process> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(Process::from_pid)
        .collect()
}

/// Every process whose comm is `name`.
pub fn processes_named(name: &str) -> Vec<Process> {
    let want = comm_prefix(name);
    let mut out: Vec<Process> = all_processes().into_iter().filter(|p| p.comm == want).collect();
    out.sort_by_key(|p| p.pid);
    out
}

/// A start time in CLOCK_BOOTTIME ns as /proc/PID/stat gives it: in clock ticks.
pub fn boot_ns_to_ticks(ns: u64) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as u64 } else { 100 };
    ns / (1_000_000_000 / hz)
}

/// Whether process pid has child processes now: its threads' children lists (Linux 4.2+ with
/// CONFIG_PROC_CHILDREN), else every process's parent.
pub fn has_children(pid: u32) -> bool {
    if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
        let lists: Vec<String> = tasks
            .flatten()
            .filter_map(|t| fs::read_to_string(t.path().join("children")).ok())
            .collect();
        if !lists.is_empty() {
            return lists.iter().any(|l| !l.trim().is_empty());
        }
    }
    let Ok(dir) = fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .any(|p| read_stat(p).is_some_and(|s| s.ppid == pid))
}

/// Which program a process runs, as (device, inode) of /proc/PID/exe: changes when it execs. None for
/// kernel threads and processes that have exited.
pub fn exe_id(pid: u32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(format!("/proc/{pid}/exe"))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Where a process lives, as its cgroup path names it (model::Placement): the unified hierarchy's path, or
/// on a host that still mounts the v1 hierarchies, systemd's or the first controller's that is not the root.
pub fn placement_of(pid: u32) -> Placement {
    let Ok(bytes) = fs::read(format!("/proc/{pid}/cgroup")) else {
        return Placement::default();
    };
    let text = String::from_utf8_lossy(&bytes);
    let paths: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(':')?;
            rest.split_once(':')
        })
        .filter(|(_, path)| *path != "/")
        .collect();
    let path = paths
        .iter()
        .find(|(controllers, _)| controllers.is_empty())
        .or_else(|| paths.iter().find(|(controllers, _)| *controllers == "name=systemd"))
        .or_else(|| paths.first())
        .map_or("/", |(_, path)| path);
    Placement::of_cgroup(path)
}

pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_maps_line).collect()
}

fn parse_maps_line(line: &str) -> Option<Mapping> {
    let mut parts = line.splitn(6, ' ');
    let range = parts.next()?;
    let perms = parts.next()?;
    let offset = u64::from_str_radix(parts.next()?, 16).ok()?;
    let dev = parts.next()?.to_string();
    let inode = parts.next()?.parse::<u64>().ok()?;
    let path = parts.next().unwrap_or("").trim_start().to_string();
    if inode == 0 || !path.starts_with('/') {
        return None;
    }
    let (start, end) = range.split_once('-')?;
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset,
        executable: perms.as_bytes().get(2) == Some(&b'x'),
        dev,
        inode,
        path,
    })
}

/// Files worth inspecting for TLS code: the executable itself (static OpenSSL, app glue, Go), the shared
/// libraries whose file names start with one of `library_names` (the families' Family::library_names), and
/// any other file mapped executable that `other` takes (objects::may_hold_tls: netty-tcnative's BoringSSL,
/// extracted under a name of its own). One mapping per file, the one at the lowest file offset.
pub fn candidate_objects(
    maps: &[Mapping],
    exe_inode: Option<u64>,
    library_names: &[&str],
    mut other: impl FnMut(&Mapping) -> bool,
) -> Vec<Mapping> {
    let mut files: Vec<(&str, u64)> = Vec::new();
    for m in maps {
        if files.contains(&(m.dev.as_str(), m.inode)) {
            continue;
        }
        let name = m.display_path().rsplit('/').next().unwrap_or("");
        let tls_lib = library_names.iter().any(|prefix| name.starts_with(prefix));
        if tls_lib || Some(m.inode) == exe_inode || (m.executable && other(m)) {
            files.push((m.dev.as_str(), m.inode));
        }
    }
    let mut out: Vec<Mapping> = Vec::new();
    for m in maps.iter().filter(|m| files.contains(&(m.dev.as_str(), m.inode))) {
        match out.iter_mut().find(|o| o.inode == m.inode && o.dev == m.dev) {
            Some(o) if m.offset < o.offset => *o = m.clone(),
            Some(_) => {}
            None => out.push(m.clone()),
        }
    }
    out
}

/// The directories a program's shared libraries are found in when nothing says otherwise (glibc's defaults,
/// Debian's multiarch ones first).
const LIBRARY_DIRS: [&str; 6] = [
    "/usr/lib/x86_64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
];

/// The shared libraries of this machine named like TLS libraries (`library_names`: file name prefixes), each
/// once, as mappings of no process, held open: what a process that starts will most likely load.
pub fn system_libraries(library_names: &[&str]) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for dir in LIBRARY_DIRS {
        let Ok(entries) = fs::read_dir(dir) else { continue };
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if !name.contains(".so") || !library_names.iter().any(|p| name.starts_with(p)) {
                continue;
            }
            // The file itself, not a link to it (libssl.so, a development package's, links to libssl.so.3).
            if !e.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let path = e.path();
            let Ok(file) = File::open(&path) else { continue };
            if let Some(m) = Mapping::of_file(&path, file) {
                if !out.iter().any(|o| o.dev == m.dev && o.inode == m.inode) {
                    out.push(m);
                }
            }
        }
    }
    out
}

/// Inode of /proc/PID/exe, to recognise the executable among the mappings.
pub fn exe_inode(pid: u32) -> Option<u64> {
    exe_id(pid).map(|(_, ino)| ino)
}

/// Finds the mapping that contains a virtual address.
pub fn mapping_for(maps: &[Mapping], addr: u64) -> Option<&Mapping> {
    maps.iter().find(|m| m.start <= addr && addr < m.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0a0a00000-55d0a0a2c000 r--p 00000000 fe:01 1311 /usr/sbin/nginx
55d0a0a2c000-55d0a0b1e000 r-xp 0002c000 fe:01 1311 /usr/sbin/nginx
7f1c2c000000-7f1c2c021000 rw-p 00000000 00:00 0 
7f1c2d200000-7f1c2d25e000 r--p 00000000 fe:01 2222 /usr/lib/x86_64-linux-gnu/libssl.so.3
7f1c2d25e000-7f1c2d36f000 r-xp 0005e000 fe:01 2222 /usr/lib/x86_64-linux-gnu/libssl.so.3 (deleted)
7f1c2d400000-7f1c2d460000 r-xp 00000000 fe:01 3333 /usr/lib/x86_64-linux-gnu/libz.so.1
7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0                          [stack]
";

    #[test]
    fn parses_file_backed_mappings_only() {
        let maps = parse_maps(MAPS);
        assert_eq!(maps.len(), 5);
        assert_eq!(maps[1].start, 0x55d0a0a2c000);
        assert_eq!(maps[1].offset, 0x2c000);
        assert!(maps[1].executable);
        assert!(!maps[0].executable);
        assert_eq!(maps[3].display_path(), "/usr/lib/x86_64-linux-gnu/libssl.so.3");
    }

    #[test]
    fn candidates_are_exe_and_tls_libraries_once_each() {
        let maps = parse_maps(MAPS);
        let c = candidate_objects(&maps, Some(1311), &["libssl", "libcrypto"], |_| false);
        let names: Vec<_> = c.iter().map(|m| (m.display_path(), m.offset)).collect();
        assert_eq!(
            names,
            vec![("/usr/sbin/nginx", 0), ("/usr/lib/x86_64-linux-gnu/libssl.so.3", 0)]
        );

        assert_eq!(
            c[0].open_path(7).to_str().unwrap(),
            "/proc/7/map_files/55d0a0a00000-55d0a0a2c000"
        );
        // A file of another name that the first look takes, asked once, for its executable mapping.
        let mut asked = Vec::new();
        let c = candidate_objects(&maps, None, &[], |m| {
            asked.push(m.inode);
            m.inode == 2222
        });
        assert_eq!(asked, vec![1311, 2222, 3333]);
        let names: Vec<_> = c.iter().map(|m| (m.display_path(), m.offset)).collect();
        assert_eq!(names, vec![("/usr/lib/x86_64-linux-gnu/libssl.so.3", 0)]);
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzz_config(1))]

        /// /proc text a target shapes through its name and its mapped files' names.
        #[test]
        fn fuzz_proc_text(text in "\\PC*", comm in "\\PC{0,16}", maps_line in "[0-9a-f]{1,16}-[0-9a-f]{1,16} [rwxp-]{4} [0-9a-f]{1,16} [0-9a-f:]{5} [0-9]{1,20} +\\PC*") {
            parse_maps(&text);
            parse_stat(&text);
            let stat = format!("42 ({comm}) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 123456 0 0");
            let s = parse_stat(&stat);
            proptest::prop_assert!(s.is_some_and(|s| s.start_ticks == 123456 && s.comm == comm));
            for m in parse_maps(&maps_line) {
                mapping_for(std::slice::from_ref(&m), m.start);
                candidate_objects(&[m], Some(0), &["libssl"], |_| false);
            }
        }
    }

    #[test]
    fn stat_with_odd_comm() {
        let text = "42 (a) b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 123456 0 0";
        let s = parse_stat(text).unwrap();
        assert_eq!(s.comm, "a) b) c");
        assert_eq!((s.start_ticks, s.state), (123456, 'S'));
    }

    #[test]
    fn unknown_pid_is_one_clear_error() {
        let selection = Selection {
            pids: vec![u32::MAX - 1],
            ..Selection::default()
        };
        let err = selection.resolve().unwrap_err().to_string();
        assert!(err.starts_with("no process with pid"), "{err}");
    }

    #[test]
    fn a_comm_not_running_yet_is_waited_for() {
        let selection = Selection {
            comms: vec!["no-such-proc-xyz".into()],
            ..Selection::default()
        };
        assert!(selection.resolve().unwrap().is_empty());
    }

    #[test]
    fn comm_alone_drops_a_process_that_runs_another_program() {
        let comm = Selection {
            comms: vec!["a-name-longer-than-15".into()],
            ..Selection::default()
        };
        assert!(
            comm.takes_program("a-name-longer-t"),
            "the kernel keeps 15 bytes of a name"
        );
        assert!(!comm.takes_program("bash"));
        let pid = Selection {
            pids: vec![1],
            ..comm.clone()
        };
        assert!(
            pid.takes_program("bash"),
            "a --pid target's descendants stay, whatever they run"
        );
    }

    #[test]
    fn boot_times_are_read_in_the_ticks_of_proc_stat() {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        assert_eq!(boot_ns_to_ticks(3_000_000_000), 3 * hz);
        let me = Process::from_pid(std::process::id()).unwrap();
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: ts is a valid out-parameter.
        unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
        let now = boot_ns_to_ticks(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
        assert!(me.start_ticks <= now, "{} after {now}", me.start_ticks);
    }

    #[test]
    fn all_takes_every_process_but_tlsprof() {
        let all = Selection {
            all: true,
            ..Selection::default()
        };
        let pids: Vec<u32> = all.resolve().unwrap().iter().map(|p| p.pid).collect();
        assert!(pids.contains(&1), "{pids:?}");
        assert!(!pids.contains(&std::process::id()), "{pids:?}");
    }
}
