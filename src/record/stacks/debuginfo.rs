// SPDX-License-Identifier: Apache-2.0
//! Debug information for stripped files, so that their frames get names: a file under the debug directories
//! (by build id, or by its .gnu_debuglink name), a debuginfod server's (DEBUGINFOD_URLS, else
//! /etc/debuginfod/*.urls) into the local debuginfod cache, or else the file's own MiniDebugInfo
//! (.gnu_debugdata, Fedora/RHEL; blazesym reads it). Looked up on a thread of its own from attach time, each
//! server with a short timeout, so that a server that does not answer never holds up a recording.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use debuginfod::{BuildId, CachingClient, Client, HttpClient, HttpClientError, Readable};
use object::{Object, ObjectSegment, ObjectSymbol};

/// A debuginfod server that has not answered in this long is given up for the rest of the recording
/// (DEBUGINFOD_TIMEOUT, in seconds, overrides it as it does for elfutils' client).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Most a download may take once the server answered.
const DOWNLOAD_LIMIT: Duration = Duration::from_secs(60);
/// Largest debug file accepted: a server is untrusted input.
const MAX_DEBUG_BYTES: u64 = 1 << 30;
/// The debug directories, as gdb and elfutils search them.
const DEBUG_DIRS: [&str; 2] = ["/usr/lib/debug", "/lib/debug"];

/// Where a file's names come from once it was looked at.
#[derive(Debug)]
pub enum Lookup {
    /// It has a symbol table of its own.
    Symbols,
    /// A debug file with its symbols, at the same addresses.
    Found(DebugFile),
    /// Stripped, but it carries MiniDebugInfo: the symbol table of its functions, compressed.
    MiniDebugInfo,
    /// Stripped, and no debug information was found.
    Missing {
        build_id: Option<String>,
        asked_servers: bool,
    },
}

#[derive(Debug)]
pub struct DebugFile {
    pub path: PathBuf,
    /// What it was found through: "/usr/lib/debug", or the debuginfod server's URL.
    pub source: String,
    /// The original file's loadable segments: (file offset, size in the file, address), to turn a sampled
    /// file offset into the address the debug file's symbols are at.
    loads: Vec<(u64, u64, u64)>,
}

impl DebugFile {
    /// The address in the debug file of a file offset of the original file.
    pub fn address(&self, file_offset: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|(off, size, _)| (*off..off + size).contains(&file_offset))
            .map(|(off, _, addr)| addr + (file_offset - off))
    }
}

/// Looks files up on a thread of its own; answers what is known so far.
pub struct DebugFinder {
    requests: Option<Sender<(String, PathBuf)>>,
    results: Receiver<(String, Lookup)>,
    known: HashMap<String, Lookup>,
    asked: HashSet<String>,
    /// After this, files still being looked up are named without their debug information.
    deadline: Instant,
}

impl DebugFinder {
    /// Starts the lookup thread with the servers named by the environment.
    pub fn start() -> DebugFinder {
        let servers = server_urls();
        let timeout = std::env::var("DEBUGINFOD_TIMEOUT")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
        Self::with_servers(servers, timeout)
    }

    fn with_servers(servers: Vec<String>, timeout: Duration) -> DebugFinder {
        let (req_tx, req_rx) = mpsc::channel::<(String, PathBuf)>();
        let (res_tx, res_rx) = mpsc::channel();
        let clients = clients(&servers, timeout);
        std::thread::Builder::new()
            .name("tlsprof-debuginfo".into())
            .spawn(move || {
                let mut looker = Looker {
                    clients,
                    dead: HashSet::new(),
                };
                for (name, path) in req_rx {
                    if res_tx.send((name, looker.look(&path))).is_err() {
                        return;
                    }
                }
            })
            .expect("spawn the debug information thread");
        DebugFinder {
            requests: Some(req_tx),
            results: res_rx,
            known: HashMap::new(),
            asked: HashSet::new(),
            // Each server can take the timeout once before it is given up, then a download its limit.
            deadline: Instant::now() + timeout * (servers.len() as u32 + 1) + DOWNLOAD_LIMIT,
        }
    }

    /// Looks up the file a target mapped as `name` (its path in the target), read through `path`.
    pub fn ask(&mut self, name: &str, path: PathBuf) {
        if self.asked.insert(name.to_string()) {
            if let Some(tx) = &self.requests {
                let _ = tx.send((name.to_string(), path));
            }
        }
    }

    fn collect(&mut self) {
        while let Ok((name, lookup)) = self.results.try_recv() {
            self.known.insert(name, lookup);
        }
    }

    /// Some file asked about is still being looked up, before the deadline.
    pub fn busy(&mut self) -> bool {
        self.collect();
        self.known.len() < self.asked.len() && Instant::now() < self.deadline
    }

    /// Waits for the files asked about, until the deadline at most.
    pub fn wait(&mut self) {
        while self.known.len() < self.asked.len() {
            let left = self.deadline.saturating_duration_since(Instant::now());
            match self.results.recv_timeout(left) {
                Ok((name, lookup)) => {
                    self.known.insert(name, lookup);
                }
                Err(_) => return,
            }
        }
    }

    /// What is known of the file mapped as `name`; None while it is being looked up or was not asked about.
    pub fn get(&mut self, name: &str) -> Option<&Lookup> {
        self.collect();
        self.known.get(name)
    }
}

impl Drop for DebugFinder {
    fn drop(&mut self) {
        // Ends the thread once it is done with the file in hand.
        self.requests.take();
    }
}

/// DEBUGINFOD_URLS when set (empty: none), else the URLs in /etc/debuginfod/*.urls, which a daemon that did
/// not inherit the variable from a login shell still has.
fn server_urls() -> Vec<String> {
    let text = match std::env::var("DEBUGINFOD_URLS") {
        Ok(v) => v,
        Err(_) => {
            let mut files: Vec<PathBuf> = fs::read_dir("/etc/debuginfod")
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "urls"))
                .collect();
            files.sort();
            files
                .iter()
                .filter_map(|p| fs::read_to_string(p).ok())
                .flat_map(|t| {
                    t.lines()
                        .filter(|l| !l.trim_start().starts_with('#'))
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
                .join(" ")
        }
    };
    parse_urls(&text)
}

/// The URLs in a DEBUGINFOD_URLS-style list: separated by spaces or commas.
fn parse_urls(text: &str) -> Vec<String> {
    text.split([' ', ',', '\n', '\t'])
        .map(str::trim)
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        .map(str::to_string)
        .collect()
}

/// One caching client per server, so that each can be given up on its own.
fn clients(servers: &[String], timeout: Duration) -> Vec<(String, CachingClient)> {
    let cache = debuginfod_cache();
    servers
        .iter()
        .filter_map(|url| {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_resolve(Some(timeout))
                .timeout_connect(Some(timeout))
                .timeout_recv_response(Some(timeout))
                .timeout_per_read(Some(timeout))
                .timeout_global(Some(timeout + DOWNLOAD_LIMIT))
                .build()
                .into();
            let client = Client::builder()
                .http_client(Http(agent))
                .build([url.as_str()])
                .ok()??;
            let caching = CachingClient::new(client, cache.as_ref()?).ok()?;
            Some((url.clone(), caching))
        })
        .collect()
}

/// Where elfutils' client keeps what it fetched: DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME or
/// ~/.cache, under debuginfod_client.
fn debuginfod_cache() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DEBUGINFOD_CACHE_PATH") {
        return Some(PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("debuginfod_client"))
}

/// debuginfod's HTTP client, over ureq with the timeouts above.
struct Http(ureq::Agent);

impl fmt::Debug for Http {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ureq agent")
    }
}

/// A response body, cut at MAX_DEBUG_BYTES.
struct Body(io::Take<ureq::BodyReader<'static>>);

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("response body")
    }
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl HttpClient for Http {
    fn get(&self, url: &str) -> Result<Box<dyn Readable>, HttpClientError> {
        match self.0.get(url).call() {
            Ok(resp) => Ok(Box::new(Body(
                resp.into_body()
                    .into_with_config()
                    .limit(MAX_DEBUG_BYTES)
                    .reader()
                    .take(MAX_DEBUG_BYTES),
            ))),
            Err(ureq::Error::StatusCode(code)) => Err(HttpClientError::StatusCode(
                ureq::http::StatusCode::from_u16(code).unwrap_or(ureq::http::StatusCode::BAD_GATEWAY),
            )),
            Err(e) => Err(HttpClientError::Other(Box::new(e))),
        }
    }
}

/// The lookup thread's state.
struct Looker {
    clients: Vec<(String, CachingClient)>,
    /// Servers that failed (no answer in time, an error): not asked again in this recording.
    dead: HashSet<String>,
}

impl Looker {
    fn look(&mut self, path: &Path) -> Lookup {
        let missing = |build_id| Lookup::Missing {
            build_id,
            asked_servers: false,
        };
        let Ok(file) = File::open(path) else {
            return missing(None);
        };
        let cache = object::ReadCache::new(file);
        let Ok(obj) = object::File::parse(&cache) else {
            return missing(None);
        };
        if obj
            .symbols()
            .any(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        {
            return Lookup::Symbols;
        }
        let build_id = obj.build_id().ok().flatten().map(<[u8]>::to_vec);
        let hex = build_id
            .as_ref()
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>());
        let loads: Vec<(u64, u64, u64)> = obj
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        let found = |path: PathBuf, source: &str| {
            Lookup::Found(DebugFile {
                path,
                source: source.to_string(),
                loads: loads.clone(),
            })
        };
        for candidate in debug_dir_candidates(path, hex.as_deref(), &obj) {
            if build_id.is_none() || build_id_of(&candidate) == build_id {
                let dir = DEBUG_DIRS
                    .iter()
                    .find(|d| candidate.starts_with(d))
                    .map_or("the file's directory", |d| d);
                return found(candidate, dir);
            }
        }
        let mini = obj.section_by_name(".gnu_debugdata").is_some();
        let (Some(id), false) = (build_id, self.clients.is_empty()) else {
            return if mini { Lookup::MiniDebugInfo } else { missing(hex) };
        };
        let id = BuildId::raw(id);
        for (url, client) in &self.clients {
            if self.dead.contains(url) {
                continue;
            }
            match client.fetch_debug_info(&id) {
                Ok(Some(p)) => return found(p, url),
                Ok(None) => {}
                Err(_) => {
                    self.dead.insert(url.clone());
                }
            }
        }
        if mini {
            return Lookup::MiniDebugInfo;
        }
        Lookup::Missing {
            build_id: hex,
            asked_servers: true,
        }
    }
}

/// Debug files for `path` where gdb and elfutils look: by build id under the debug directories, then by its
/// .gnu_debuglink name beside it, in .debug/ beside it, and under the debug directories.
fn debug_dir_candidates<'d>(
    path: &Path,
    build_id: Option<&str>,
    obj: &object::File<'d, &'d object::ReadCache<File>>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(id) = build_id.filter(|id| id.len() > 2) {
        for dir in DEBUG_DIRS {
            out.push(PathBuf::from(format!(
                "{dir}/.build-id/{}/{}.debug",
                &id[..2],
                &id[2..]
            )));
        }
    }
    let link = obj
        .gnu_debuglink()
        .ok()
        .flatten()
        .and_then(|(name, _crc)| std::str::from_utf8(name).ok().map(str::to_string))
        .filter(|n| !n.contains('/'));
    // The target's path for it (through /proc/PID/map_files), so its directory is the file's.
    let real = fs::canonicalize(path).ok();
    if let (Some(link), Some(real)) = (link, real) {
        if let Some(dir) = real.parent() {
            out.push(dir.join(&link));
            out.push(dir.join(".debug").join(&link));
            for d in DEBUG_DIRS {
                out.push(Path::new(d).join(dir.strip_prefix("/").unwrap_or(dir)).join(&link));
            }
        }
    }
    out.retain(|p| p.is_file() && fs::canonicalize(p).ok() != fs::canonicalize(path).ok());
    out
}

fn build_id_of(path: &Path) -> Option<Vec<u8>> {
    let file = File::open(path).ok()?;
    let cache = object::ReadCache::new(file);
    let obj = object::File::parse(&cache).ok()?;
    obj.build_id().ok().flatten().map(<[u8]>::to_vec)
}

/// The Debian package that installed `path` (dpkg's file lists), whose -dbgsym package has its debug symbols.
pub fn package_of(path: &str) -> Option<String> {
    // Merged /usr: dpkg may list the file under /lib.
    let alias = path.strip_prefix("/usr").map(str::to_string);
    let dir = fs::read_dir("/var/lib/dpkg/info").ok()?;
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(package) = name.strip_suffix(".list") else {
            continue;
        };
        let Ok(list) = fs::read_to_string(entry.path()) else {
            continue;
        };
        if list.lines().any(|l| l == path || Some(l) == alias.as_deref()) {
            return Some(package.split(':').next().unwrap_or(package).to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_on_spaces_and_commas_and_skip_other_words() {
        assert_eq!(
            parse_urls("https://debuginfod.debian.net http://127.0.0.1:8002,ftp://x  junk\n"),
            ["https://debuginfod.debian.net", "http://127.0.0.1:8002"]
        );
        assert!(parse_urls("").is_empty());
    }

    #[test]
    fn file_offsets_map_to_the_debug_files_addresses_through_load_segments() {
        let f = DebugFile {
            path: PathBuf::new(),
            source: String::new(),
            loads: vec![(0, 0x420, 0), (0x1000, 0x155, 0x1000), (0x2e68, 0x1a0, 0x3e68)],
        };
        assert_eq!(f.address(0x1140), Some(0x1140));
        assert_eq!(f.address(0x2e70), Some(0x3e70));
        assert_eq!(f.address(0x1155), None);
    }

    #[test]
    fn a_file_with_its_own_symbols_needs_no_debug_information() {
        // This test binary has a symbol table (release builds keep it).
        let mut looker = Looker {
            clients: Vec::new(),
            dead: HashSet::new(),
        };
        let me = std::env::current_exe().unwrap();
        assert!(matches!(looker.look(&me), Lookup::Symbols));
    }
}
