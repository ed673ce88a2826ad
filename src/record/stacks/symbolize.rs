// SPDX-License-Identifier: Apache-2.0
//! Naming sampled addresses: blazesym for code in files (their symbol tables; for a stripped file, those of
//! the debug file debuginfo found for it), Go's own function table for Go executables without
//! a symbol table (stripped), the /tmp/perf-PID.map that JIT runtimes write (Node.js --perf-basic-prof) for
//! code outside files.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use blazesym::symbolize::{source::Elf, source::Kernel, source::Source, Input, Symbolizer};

use super::debuginfo::{DebugFinder, Lookup};
use super::unwind::SectionCache;
use crate::model::{file, UnnamedFile, UnnamedReason};
use crate::record::discovery::gobin::{self, GoBinary};
use crate::record::discovery::targets::{self, Mapping, Process};
use crate::record::status;

/// A file to name addresses in from its symbol tables (.symtab, .dynsym), not its DWARF. blazesym parses DWARF
/// lazily, a unit at a time as addresses land in it, and keeps what it parsed: a recording's memory would step
/// up whenever a sample first lands in another part of a file with debug information, for as long as it runs.
/// Symbol tables name every function, static ones too; inline frames are what is not named.
fn elf_symbols(path: PathBuf) -> Source<'static> {
    let mut elf = Elf::new(path);
    elf.debug_syms = false;
    Source::Elf(elf)
}

/// Names for code outside any file, as a JIT runtime published them.
struct PerfMap {
    /// (start, end, name), sorted by start.
    entries: Vec<(u64, u64, String)>,
}

impl PerfMap {
    fn parse(text: &str) -> PerfMap {
        let mut entries: Vec<(u64, u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut parts = l.splitn(3, ' ');
                let start = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
                let size = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
                Some((start, start.checked_add(size)?, parts.next()?.trim().to_string()))
            })
            .collect();
        entries.sort_by_key(|e| e.0);
        PerfMap { entries }
    }

    fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.0 <= addr).checked_sub(1)?;
        let (start, end, name) = &self.entries[i];
        (*start <= addr && addr < *end).then_some(name.as_str())
    }
}

/// Largest perf map read: a JIT runtime appends to it for as long as it runs, and a bigger one is refused
/// rather than held in memory.
const PERF_MAP_LIMIT: u64 = 256 << 20;

/// The perf map a process wrote, looked up inside its own mount and pid namespace first. A map that is there
/// but not to be trusted is skipped with a warning (`open_perf_map`).
fn read_perf_map(pid: u32) -> Option<PerfMap> {
    let status = fs::read(format!("/proc/{pid}/status")).unwrap_or_default();
    let status = String::from_utf8_lossy(&status);
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).unwrap_or("");
    let ns_pid = field("NSpid:")
        .split_whitespace()
        .last()
        .map_or_else(|| pid.to_string(), str::to_string);
    // Real, effective, saved and filesystem uid: any of them is the target's own user.
    let owners: Vec<u32> = field("Uid:")
        .split_whitespace()
        .filter_map(|u| u.parse().ok())
        .collect();
    for (root, name) in [
        (format!("/proc/{pid}/root"), format!("tmp/perf-{ns_pid}.map")),
        ("/".to_string(), format!("tmp/perf-{pid}.map")),
    ] {
        let path = format!("{}/{name}", root.trim_end_matches('/'));
        match open_perf_map(Path::new(&root), &name, &owners, PERF_MAP_LIMIT) {
            Ok(Some(text)) => return Some(PerfMap::parse(&text)),
            Ok(None) => {}
            Err(why) => status::warn_once(&path, &format!("skipping perf map {path} of process {pid}: {why}")),
        }
    }
    None
}

/// Reads a perf map as perf does: a regular file, not reached through a symlink, owned by the target's user
/// (`owners`) or root, at most `limit` bytes; a target must not make a root process read and print a file
/// it could not read itself. `name` is looked up inside `root` (the target's root directory): its
/// directories' symlinks, absolute ones included, are followed as the target would see them, never out
/// of it. Ok(None) when there is none; Err says why one is refused.
fn open_perf_map(root: &Path, name: &str, owners: &[u32], limit: u64) -> Result<Option<String>, String> {
    let file = match open_in_root(root, name) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err("it is a symbolic link".into()),
        Err(e) => return Err(e.to_string()),
    };
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.file_type().is_file() {
        return Err("not a regular file".into());
    }
    if meta.uid() != 0 && !owners.contains(&meta.uid()) {
        return Err(format!(
            "owned by uid {}, not by the process's user or root",
            meta.uid()
        ));
    }
    if meta.len() > limit {
        return Err(format!("{} bytes, more than the {limit} read", meta.len()));
    }
    let mut bytes = Vec::new();
    // It may grow between fstat and the read.
    file.take(limit).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// openat2(RESOLVE_IN_ROOT): `name` resolved with `root` as its "/", the last component not a symlink.
fn open_in_root(root: &Path, name: &str) -> std::io::Result<fs::File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let dir = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(root)?;
    let name = std::ffi::CString::new(name).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // O_NONBLOCK: a FIFO planted under the name must not hang the recording before fstat refuses it.
    // SAFETY: open_how is plain integers; all zero is its default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: a valid directory descriptor, NUL-terminated name and open_how of the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor openat2 just returned, owned by nothing else.
    Ok(unsafe { fs::File::from_raw_fd(fd as i32) })
}

/// Ranges of the kernel's uprobe page (uretprobe trampoline, out-of-line single-step slots) in a process.
fn uprobe_pages(pid: u32) -> Vec<(u64, u64)> {
    let text = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    text.lines()
        .filter(|l| l.ends_with("[uprobes]"))
        .filter_map(|l| {
            let (a, b) = l.split_whitespace().next()?.split_once('-')?;
            Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(b, 16).ok()?))
        })
        .collect()
}

/// Addresses named since the last forget_addresses(), at most: most batches of stacks need fewer.
const CACHE_LIMIT: usize = 8_192;

pub struct FrameSymbolizer {
    maps: HashMap<u32, Vec<Mapping>>,
    uprobe_pages: HashMap<u32, Vec<(u64, u64)>>,
    perf_maps: HashMap<u32, Option<PerfMap>>,
    symbolizer: Symbolizer,
    cache: HashMap<(u32, u64), String>,
    /// Go function tables by file (device, inode), read when a file's symbols name nothing; None: not Go.
    go_tables: HashMap<(String, u64), Option<GoBinary>>,
    /// Processes with code outside files but no perf map: their JIT frames have no names.
    pub unnamed_jit: Vec<u32>,
    /// The file each name given to a frame in a file was found in.
    pub files: HashMap<String, String>,
    /// Debug information for stripped files, looked up since attach.
    pub debug: Option<DebugFinder>,
    /// Files some frames had no name in.
    unnamed: BTreeSet<String>,
    /// The Debian package of each file that had unnamed frames: dpkg's lists are read once per file, not at
    /// each interval of continuous mode, where reading them all was a large part of its CPU.
    packages: HashMap<String, Option<String>>,
    /// Files named from separate debug information, and where it was found.
    pub debug_files: BTreeMap<String, String>,
}

impl FrameSymbolizer {
    /// Uses each target's current mappings when it is still running, else those seen at attach time.
    pub fn new(attach_maps: &HashMap<u32, Vec<Mapping>>) -> Self {
        let maps = attach_maps
            .iter()
            .map(|(&pid, old)| {
                // An exited process (or a zombie) shows no mappings: keep those seen at attach time.
                let fresh = Process::from_pid(pid)
                    .filter(Process::alive)
                    .and_then(|p| p.maps().ok());
                (pid, fresh.filter(|m| !m.is_empty()).unwrap_or_else(|| old.clone()))
            })
            .collect();
        let uprobe_pages = attach_maps.keys().map(|&pid| (pid, uprobe_pages(pid))).collect();
        FrameSymbolizer {
            maps,
            uprobe_pages,
            perf_maps: HashMap::new(),
            symbolizer: Symbolizer::new(),
            // Sized once: a cache that doubled the first time a batch needed more room would keep that size.
            cache: HashMap::with_capacity(CACHE_LIMIT),
            go_tables: HashMap::new(),
            unnamed_jit: Vec::new(),
            files: HashMap::new(),
            debug: None,
            unnamed: BTreeSet::new(),
            packages: HashMap::new(),
            debug_files: BTreeMap::new(),
        }
    }

    /// A process that joined the recording.
    pub fn add_process(&mut self, pid: u32, maps: Vec<Mapping>) {
        self.uprobe_pages.insert(pid, uprobe_pages(pid));
        self.maps.insert(pid, maps);
    }

    /// Forgets a process that exited.
    pub fn forget(&mut self, pid: u32) {
        self.maps.remove(&pid);
        self.uprobe_pages.remove(&pid);
        self.perf_maps.remove(&pid);
        self.unnamed_jit.retain(|&p| p != pid);
    }

    /// Drops the names of addresses seen so far (the kernel's and files' symbol tables stay loaded) and the
    /// perf maps read so far, which JIT runtimes keep appending to.
    pub fn forget_addresses(&mut self) {
        self.cache.clear();
        self.perf_maps.clear();
    }

    /// The name of the function at an address. A file without a symbol there gives `file+0xOFFSET` of the
    /// function's start (from its unwind table; `[file]` without one), never a neighbour's name; code outside
    /// files gives its perf-map name or `[anon]`.
    pub fn name(&mut self, pid: u32, addr: u64, sections: &mut SectionCache) -> &str {
        if !self.cache.contains_key(&(pid, addr)) {
            // Bounded: sampled addresses keep coming over a long recording.
            if self.cache.len() >= CACHE_LIMIT {
                self.cache.clear();
            }
            let name = self.resolve(pid, addr, sections);
            self.cache.insert((pid, addr), name);
        }
        &self.cache[&(pid, addr)]
    }

    /// A kernel function name, from /proc/kallsyms.
    pub fn kernel_name(&mut self, addr: u64) -> String {
        let src = Source::Kernel(Kernel::default());
        self.symbolizer
            .symbolize_single(&src, Input::AbsAddr(addr))
            .ok()
            .and_then(|s| s.into_sym().map(|sym| sym.name.to_string()))
            .unwrap_or_else(|| format!("[kernel {addr:#x}]"))
    }

    fn resolve(&mut self, pid: u32, addr: u64, sections: &mut SectionCache) -> String {
        if addr == 0 {
            return "[unknown]".into();
        }
        if addr == u64::MAX {
            return "[unwind gap]".into();
        }
        let Some(m) = self
            .maps
            .get(&pid)
            .and_then(|maps| targets::mapping_for(maps, addr))
            .cloned()
        else {
            if self
                .uprobe_pages
                .get(&pid)
                .is_some_and(|r| r.iter().any(|(a, b)| (*a..*b).contains(&addr)))
            {
                // A probed instruction being single-stepped, or a return through the uretprobe trampoline.
                return "[uprobes]".into();
            }
            let perf_map = self.perf_maps.entry(pid).or_insert_with(|| read_perf_map(pid));
            return match perf_map.as_ref().and_then(|p| p.lookup(addr)) {
                Some(name) => name.to_string(),
                None => {
                    // The hint is about JIT runtimes: anonymous code elsewhere (vDSO, trampolines) is not JIT.
                    let jit_runtime = Process::from_pid(pid).is_some_and(|p| p.comm == "node")
                        || self
                            .maps
                            .get(&pid)
                            .is_some_and(|m| m.iter().any(|m| m.display_path().ends_with("/node")));
                    if jit_runtime && perf_map.is_none() && !self.unnamed_jit.contains(&pid) {
                        self.unnamed_jit.push(pid);
                    }
                    "[anon]".into()
                }
            };
        };
        let file_offset = m.file_offset(addr);
        let live_path = m.open_path(pid);
        let path: PathBuf = if live_path.exists() {
            live_path
        } else {
            m.display_path().into()
        };
        let debug_file = match self.debug.as_mut().and_then(|d| d.get(m.display_path())) {
            Some(Lookup::Found(f)) => f.address(file_offset).map(|a| (f.path.clone(), f.source.clone(), a)),
            _ => None,
        };
        let from_debug_file = debug_file.and_then(|(debug_path, source, addr)| {
            let src = elf_symbols(debug_path);
            let sym = self
                .symbolizer
                .symbolize_single(&src, Input::VirtOffset(addr))
                .ok()?
                .into_sym()?;
            if !self.debug_files.contains_key(m.display_path()) {
                self.debug_files.insert(m.display_path().to_string(), source);
            }
            Some(sym)
        });
        let sym = from_debug_file.or_else(|| {
            let src = elf_symbols(path.clone());
            let sym = self
                .symbolizer
                .symbolize_single(&src, Input::FileOffset(file_offset))
                .ok()?
                .into_sym()?;
            let mini = matches!(
                self.debug.as_mut().and_then(|d| d.get(m.display_path())),
                Some(Lookup::MiniDebugInfo)
            );
            if mini && !self.debug_files.contains_key(m.display_path()) {
                self.debug_files
                    .insert(m.display_path().to_string(), ".gnu_debugdata".to_string());
            }
            Some(sym)
        });
        let name = match sym {
            Some(sym) => function_name(&sym.name).to_string(),
            None => {
                let go = self.go_tables.entry((m.dev.clone(), m.inode)).or_insert_with(|| {
                    let data = gobin::is_go(&path)
                        .then(|| file::read_bounded(&path, gobin::MAX_EXECUTABLE_BYTES, "Go executable").ok())
                        .flatten()?;
                    GoBinary::parse(&data).ok().flatten()
                });
                let named = go
                    .as_ref()
                    .and_then(|g| g.function_at_offset(file_offset))
                    .map(|f| f.name.clone())
                    .or_else(|| sections.plt_stub_name(&m, &path, file_offset));
                match named {
                    Some(name) => name,
                    None => {
                        self.unnamed.insert(m.display_path().to_string());
                        // Per function, not per instruction: one flame-graph frame, and a bounded set of names.
                        let base = m.display_path().rsplit('/').next().unwrap_or("?");
                        match sections.function_start(&m, &path, file_offset) {
                            Some(start) => format!("{base}+{start:#x}"),
                            None => format!("[{base}]"),
                        }
                    }
                }
            }
        };
        if !self.files.contains_key(&name) {
            self.files.insert(name.clone(), m.display_path().to_string());
        }
        name
    }
}

impl FrameSymbolizer {
    /// The files some frames had no name in, and why.
    pub fn unnamed_files(&mut self) -> Vec<UnnamedFile> {
        let unnamed = std::mem::take(&mut self.unnamed);
        unnamed
            .into_iter()
            .map(|path| {
                let (build_id, reason) = match self.debug.as_mut().and_then(|d| d.get(&path)) {
                    Some(Lookup::Missing {
                        build_id,
                        asked_servers,
                    }) => (
                        build_id.clone(),
                        if *asked_servers {
                            UnnamedReason::NotOnServers
                        } else {
                            UnnamedReason::NoDebugInfo
                        },
                    ),
                    Some(Lookup::Found(_) | Lookup::Symbols | Lookup::MiniDebugInfo) => {
                        (None, UnnamedReason::NotCovered)
                    }
                    None => (None, UnnamedReason::LookupUnfinished),
                };
                let package = self
                    .packages
                    .entry(path.clone())
                    .or_insert_with(|| super::debuginfo::package_of(&path))
                    .clone();
                UnnamedFile {
                    package,
                    path,
                    build_id,
                    reason,
                }
            })
            .collect()
    }
}

/// A symbol table's name for a function as its tools print it, so that one function has one name wherever
/// it was named from.
fn function_name(symbol: &str) -> &str {
    // Go's linker names its assembly functions' symbols with their ABI (runtime.goexit.abi0); Go's function
    // table, its tools and its debug information name them without it.
    let symbol = symbol.strip_suffix(".abi0").unwrap_or(symbol);
    // A debug file's .symtab spells versioned symbols with their version (pthread_rwlock_rdlock@@GLIBC_2.34);
    // .dynsym keeps versions apart, and perf and gdb print the bare name.
    let Some((name, version)) = symbol.split_once('@') else {
        return symbol;
    };
    let version = version.strip_prefix('@').unwrap_or(version);
    let is_version = !version.is_empty()
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if !name.is_empty() && is_version {
        name
    } else {
        symbol
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_versions_and_go_abi_suffixes_are_not_part_of_the_name() {
        assert_eq!(
            function_name("pthread_rwlock_rdlock@@GLIBC_2.34"),
            "pthread_rwlock_rdlock"
        );
        assert_eq!(function_name("pthread_once@GLIBC_2.2.5"), "pthread_once");
        assert_eq!(function_name("runtime.goexit.abi0"), "runtime.goexit");
        assert_eq!(function_name("SSL_do_handshake"), "SSL_do_handshake");
        // Not a version: kept whole.
        assert_eq!(function_name("operator@ (x)"), "operator@ (x)");
        assert_eq!(function_name("@@GLIBC_2.34"), "@@GLIBC_2.34");
        assert_eq!(function_name("name@"), "name@");
    }

    /// Symbolizes this test binary's own function through its live mappings.
    #[test]
    fn own_function_resolves_by_name_and_unmapped_is_anon() {
        let pid = std::process::id();
        let me = Process::from_pid(pid).unwrap();
        let maps = HashMap::from([(pid, me.maps().unwrap())]);
        let mut s = FrameSymbolizer::new(&maps);
        let sections = &mut SectionCache::default();
        let addr = own_function_resolves_by_name_and_unmapped_is_anon as *const () as usize as u64;
        let name = s.name(pid, addr, sections);
        assert!(
            name.contains("own_function_resolves_by_name_and_unmapped_is_anon"),
            "{name}"
        );
        assert_eq!(s.name(pid, 8, sections), "[anon]");
        assert_eq!(s.name(pid, 0, sections), "[unknown]");
    }

    #[test]
    fn perf_map_names_jit_code() {
        let map = PerfMap::parse("7f00001000 40 JS:*afterConnect node:net:1400\n7f00000100 10 Builtin:ArgumentsAdaptorTrampoline\nbad line\n");
        assert_eq!(map.lookup(0x7f00001000), Some("JS:*afterConnect node:net:1400"));
        assert_eq!(map.lookup(0x7f0000103f), Some("JS:*afterConnect node:net:1400"));
        assert_eq!(map.lookup(0x7f00001040), None);
        assert_eq!(map.lookup(0x7f00000105), Some("Builtin:ArgumentsAdaptorTrampoline"));
        assert_eq!(map.lookup(0x10), None);
        let hostile = PerfMap::parse("ffffffffffffffff 10 wraps\n0x10 0x10 \x1b[2Jname\n");
        assert_eq!(hostile.lookup(0x15), Some("\x1b[2Jname"));
        assert_eq!(hostile.lookup(0x5), None);
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzz_config(1))]

        /// A perf map's lines are the target's to write.
        #[test]
        fn fuzz_perf_map(text in "([0-9a-fx]{0,18} [0-9a-fx]{0,18} \\PC{0,40}\n|\\PC{0,60}\n){0,20}", addrs in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..8)) {
            let map = PerfMap::parse(&text);
            proptest::prop_assert!(map.entries.iter().all(|(start, end, _)| start <= end));
            for a in addrs.into_iter().chain(map.entries.iter().map(|e| e.0)) {
                map.lookup(a);
            }
        }
    }

    /// Opened as perf opens it: a regular file of the target's user or root, never through a symlink, bounded.
    #[test]
    fn perf_map_is_refused_through_a_symlink_foreign_owner_fifo_or_size() {
        let dir = std::env::temp_dir().join(format!("tlsprof-perfmap-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let me = fs::metadata(&dir).unwrap().uid();
        let map = dir.join("perf-1.map");
        fs::write(&map, "1000 10 JS:*handler\n").unwrap();
        let read = |p: &Path, owners: &[u32], limit| {
            open_perf_map(&dir, p.file_name().unwrap().to_str().unwrap(), owners, limit)
        };
        assert_eq!(
            read(&map, &[me], 1 << 20).unwrap().as_deref(),
            Some("1000 10 JS:*handler\n")
        );
        assert_eq!(read(&dir.join("perf-2.map"), &[me], 1 << 20), Ok(None));

        // A target pointing its map at a file it cannot read itself.
        let secret = dir.join("secret");
        fs::write(&secret, "root only\n").unwrap();
        let link = dir.join("perf-3.map");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        assert_eq!(read(&link, &[me], 1 << 20), Err("it is a symbolic link".to_string()));

        // A directory symlink to an absolute path: followed inside the root it is looked up in, never out.
        let outside = std::env::temp_dir().join(format!("tlsprof-perfmap-out-{}", std::process::id()));
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("perf-5.map"), "2000 10 outside\n").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("run")).unwrap();
        assert_eq!(open_perf_map(&dir, "run/perf-5.map", &[me], 1 << 20), Ok(None));
        assert!(open_perf_map(
            Path::new("/"),
            outside.join("perf-5.map").to_str().unwrap(),
            &[me],
            1 << 20
        )
        .unwrap()
        .is_some());
        fs::remove_dir_all(&outside).unwrap();

        // Owned by someone else than the target's user: as root, hand it to nobody; otherwise the file is ours
        // and the target is someone else.
        let (owner, target) = if me == 0 {
            std::os::unix::fs::chown(&map, Some(65534), Some(65534)).unwrap();
            (65534, 4242)
        } else {
            (me, me + 1)
        };
        let err = read(&map, &[target], 1 << 20).unwrap_err();
        assert_eq!(err, format!("owned by uid {owner}, not by the process's user or root"));
        assert!(read(&map, &[owner], 1 << 20).unwrap().is_some());

        let fifo = dir.join("perf-4.map");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(read(&fifo, &[me], 1 << 20), Err("not a regular file".to_string()));

        assert_eq!(
            read(&map, &[owner], 8),
            Err("20 bytes, more than the 8 read".to_string())
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
