// SPDX-License-Identifier: Apache-2.0
//! Inspecting a mapped file: which TLS library family's functions it defines, where, and which version.
//! Each family is tried in turn, by the way it names its functions (catalogue::families::Naming).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::error_sites::{self, ErrorSites};
use super::gobin::{self, GoBinary, GoFunc};
use super::ssl_layout::{self, SslLayout};
use super::{names, prologue};
use crate::catalogue::families::unsupported::{self, UNSUPPORTED};
use crate::catalogue::families::{go, Family, Flavor, Naming, Symbols};
use crate::catalogue::{self, Origin, Row, Stage};
use anyhow::{Context, Result};
use blazesym::inspect::{source::Elf, Inspector, SymInfo};
use blazesym::SymType;

/// A catalogue function found in a file, and where its probes go, as a file offset (what uprobes take): its
/// start or, past a first instruction that only reads, its second (prologue.rs).
#[derive(Clone, Debug)]
pub struct FoundFunction {
    pub row: &'static Row,
    pub file_offset: u64,
    /// The kernel single-steps the instruction there: every entry costs a second trap.
    pub stepped: bool,
    /// Go code: where calls leave it, probed instead of its return.
    pub exits: Vec<ExitSite>,
}

/// Where a probe sees a call of Go code end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitSite {
    pub file_offset: u64,
    /// The kernel single-steps the instruction there.
    pub stepped: bool,
    /// In a caller, after the call returned (gobin::returned_site), not in the function itself.
    pub in_caller: bool,
}

#[derive(Clone)]
pub struct TlsObject {
    pub family: &'static dyn Family,
    pub flavor: Flavor,
    pub symbols: Symbols,
    pub version: Option<String>,
    pub functions: Vec<FoundFunction>,
    /// Where its connections' handshake state is kept, read off its accessors (Family::state_accessors).
    pub ssl_layout: Option<SslLayout>,
}

/// The first of `families` whose functions the file at `path` defines, with the functions found. None when
/// it defines none of any.
pub fn inspect(path: &Path, is_executable: bool, families: &[&'static dyn Family]) -> Result<Option<TlsObject>> {
    let mut go_binary = None;
    let mut demangled = None;
    for &family in families {
        let found = match family.naming() {
            Naming::GoFunctionTable if is_executable && gobin::is_go(path) => {
                if go_binary.is_none() {
                    let data = crate::model::file::read_bounded(path, gobin::MAX_EXECUTABLE_BYTES, "Go executable")?;
                    let bin = GoBinary::parse(&data).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                    go_binary = Some((bin, data));
                }
                match &go_binary {
                    Some((Some(bin), data)) => inspect_go(family, bin, data),
                    _ => None,
                }
            }
            Naming::GoFunctionTable => None,
            Naming::Symbols => inspect_symbols(family, path, is_executable)?,
            Naming::Demangled => {
                if demangled.is_none() {
                    demangled = Some(demangled_functions(path, families)?);
                }
                let functions = demangled.as_deref().unwrap_or_default();
                match inspect_demangled(family, path, is_executable, functions)? {
                    None => inspect_error_sites(family, path, is_executable)?,
                    found => found,
                }
            }
        };
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// The family's functions among the file's ELF symbols.
fn inspect_symbols(family: &'static dyn Family, path: &Path, is_executable: bool) -> Result<Option<TlsObject>> {
    let rows = family.rows();
    let accessors = family.state_accessors();
    let mut names: Vec<&str> = rows.iter().map(|r| r.symbol).collect();
    names.extend(accessors.iter().flat_map(|a| [a.state, a.version]));
    let mut src = Elf::new(path);
    src.debug_syms = false;
    let inspector = Inspector::new();
    let results = inspector
        .lookup(&src.into(), &names)
        .with_context(|| format!("cannot read symbols of {}", path.display()))?;
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut functions = Vec::new();
    for (row, syms) in rows.iter().zip(&results) {
        if let Some(f) = defined(syms)
            .and_then(|s| s.file_offset)
            .and_then(|offset| native_function(&file, row, offset))
        {
            functions.push(f);
        }
    }
    let code = |syms: &[SymInfo]| accessor_code(&file, defined(syms)?);
    let layout = match results.get(rows.len()..) {
        Some([state, version]) => {
            let (state, version) = (code(state), code(version));
            state
                .zip(version)
                .and_then(|(s, v)| ssl_layout::from_accessors((&s.0, s.1), (&v.0, v.1)))
        }
        _ => None,
    };
    Ok(tls_object(family, path, is_executable, functions)?.map(|o| TlsObject {
        ssl_layout: layout,
        ..o
    }))
}

/// The function a symbol lookup found defined, if any.
fn defined<'a>(syms: &'a [SymInfo<'a>]) -> Option<&'a SymInfo<'a>> {
    syms.iter().find(|s| s.sym_type == SymType::Function && s.addr != 0)
}

/// Accessors are a few instructions: one larger than this is not one.
const MAX_ACCESSOR_BYTES: usize = 256;

/// The whole code of a small function, and its address; None where its size is not known.
fn accessor_code(file: &File, sym: &SymInfo) -> Option<(Vec<u8>, u64)> {
    let size = sym.size.filter(|&n| n > 0 && n <= MAX_ACCESSOR_BYTES)?;
    let mut code = vec![0u8; size];
    file.read_exact_at(&mut code, sym.file_offset?).ok()?;
    Some((code, sym.addr))
}

/// The file's functions that a row of the Naming::Demangled families names, once demangled and stripped of
/// version prefixes (names.rs), with their file offsets: the symbol table is read once for all of them.
fn demangled_functions(path: &Path, families: &[&'static dyn Family]) -> Result<Vec<(&'static str, u64)>> {
    let demangled: Vec<&'static dyn Family> = families
        .iter()
        .copied()
        .filter(|f| f.naming() == Naming::Demangled)
        .collect();
    let rows: std::collections::HashSet<&'static str> = demangled
        .iter()
        .flat_map(|f| f.rows().iter().map(|r| r.symbol))
        .collect();
    let prefixes: Vec<&str> = demangled
        .iter()
        .flat_map(|f| f.versioned_prefixes().iter().copied())
        .collect();
    // Only names that carry a row's first namespace (`bssl`, `rustls`) or are plain can match: the rest (a
    // large C++ program's thousands) are not demangled.
    let mut namespaces: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.trim_start_matches('<').split_once("::").map(|(first, _)| first))
        .collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    let may_match =
        |raw: &str| !raw.starts_with("_Z") && !raw.starts_with("_R") || namespaces.iter().any(|n| raw.contains(n));
    let mut src = Elf::new(path);
    src.debug_syms = false;
    let mut found: Vec<(&'static str, u64)> = Vec::new();
    Inspector::new()
        .for_each(&src.into(), |sym| {
            if sym.sym_type == SymType::Function && sym.addr != 0 && may_match(&sym.name) {
                if let (Some(&name), Some(offset)) =
                    (rows.get(&*names::plain_name(&sym.name, &prefixes)), sym.file_offset)
                {
                    found.push((name, offset));
                }
            }
            std::ops::ControlFlow::Continue(())
        })
        .with_context(|| format!("cannot read symbols of {}", path.display()))?;
    // .symtab and .dynsym both list an exported function.
    found.sort_unstable_by_key(|&(name, offset)| (offset, name));
    found.dedup();
    Ok(found)
}

/// The family's functions among `functions` (demangled_functions). Every copy of a function is probed: a
/// compiler may emit a Rust function more than once, each copy called from elsewhere.
fn inspect_demangled(
    family: &'static dyn Family,
    path: &Path,
    is_executable: bool,
    functions: &[(&'static str, u64)],
) -> Result<Option<TlsObject>> {
    let rows: std::collections::HashMap<&str, &'static Row> = family.rows().iter().map(|r| (r.symbol, r)).collect();
    let located_only = family.located_only();
    let found: Vec<(&'static Row, u64)> = functions
        .iter()
        .filter(|(name, _)| !located_only.contains(name))
        .filter_map(|&(name, offset)| rows.get(name).map(|&row| (row, offset)))
        .collect();
    // The C library's names alone (EVP_PKEY_derive) are any OpenSSL's too: the file must define one of the
    // family's own functions.
    if !found.iter().any(|(row, _)| row.origin == Origin::Internal) {
        return Ok(None);
    }
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let functions = found
        .into_iter()
        .filter_map(|(row, offset)| native_function(&file, row, offset))
        .collect();
    tls_object(family, path, is_executable, functions)
}

/// The family's functions in a file without their symbols, located by their error sites with one of the
/// family's site tables (error_sites.rs). None when the file has no error sites of a revision it has a table
/// of.
fn inspect_error_sites(family: &'static dyn Family, path: &Path, is_executable: bool) -> Result<Option<TlsObject>> {
    let tables = family.site_tables();
    // Reading the code takes a while: only a file that names a source file only BoringSSL has is read.
    if tables.is_empty() || !contains(path, error_sites::MARKER) {
        return Ok(None);
    }
    let Some(sites) = ErrorSites::read(path) else {
        return Ok(None);
    };
    let rows = family.rows();
    let names: Vec<&str> = rows.iter().map(|r| r.symbol).collect();
    let Some(located) = tables.iter().find_map(|t| error_sites::locate(t, &sites, &names)) else {
        return Ok(None);
    };
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let functions = located
        .iter()
        .filter_map(|l| {
            let row = rows.iter().find(|r| r.symbol == l.name)?;
            native_function(&file, row, l.file_offset)
        })
        .collect();
    let found = tls_object(family, path, is_executable, functions)?;
    Ok(found.map(|o| TlsObject {
        symbols: Symbols::ErrorSites,
        ..o
    }))
}

/// A function of the platform's C convention at `offset` in `file`, probed where prologue.rs says; None when
/// the symbol points past the end of the file (no code there to probe).
fn native_function(file: &File, row: &'static Row, offset: u64) -> Option<FoundFunction> {
    let mut code = [0u8; 32];
    let read = file.read_at(&mut code, offset).unwrap_or(0);
    if read == 0 {
        return None;
    }
    let site = prologue::probe_site(&code[..read]);
    Some(FoundFunction {
        row,
        file_offset: offset + site.offset as u64,
        stepped: site.stepped,
        exits: Vec::new(),
    })
}

/// What a file holding these functions of the family is: how it links them, which symbols it shows, its
/// version. None when it holds none.
fn tls_object(
    family: &'static dyn Family,
    path: &Path,
    is_executable: bool,
    functions: Vec<FoundFunction>,
) -> Result<Option<TlsObject>> {
    if functions.is_empty() {
        return Ok(None);
    }
    let has = |o: Origin| functions.iter().any(|f| f.row.origin == o);
    let symbols = if has(Origin::Internal) {
        Symbols::Internal
    } else if has(Origin::Public) {
        Symbols::Exported
    } else {
        Symbols::None
    };
    let flavor = match (symbols, is_executable) {
        (Symbols::None, _) => Flavor::App,
        (_, true) => Flavor::Static,
        (_, false) => Flavor::Shared,
    };
    let version = if flavor == Flavor::App {
        None
    } else {
        version(family, path)
    };
    if family.version_required() && version.is_none() {
        return Ok(None);
    }
    Ok(Some(TlsObject {
        family,
        flavor,
        symbols,
        version,
        functions,
        ssl_layout: None,
    }))
}

/// The catalogue's Go functions in a Go executable, named by its function table (stripped builds keep it).
/// A stage function whose code has no exit the decoder finds is left out: its frames would never close.
fn inspect_go(family: &'static dyn Family, bin: &GoBinary, data: &[u8]) -> Option<TlsObject> {
    let rows = family.rows();
    let found: Vec<(&GoFunc, &'static Row)> = bin
        .functions
        .iter()
        .filter_map(|f| {
            let name = go::base_name(&f.name)?;
            Some((f, rows.iter().find(|r| r.symbol == name)?))
        })
        .collect();
    let (mut functions, mut entries) = (Vec::new(), Vec::new());
    for (f, row) in &found {
        let (Some(start), Some(code)) = (bin.file_offset(f.entry), bin.code(data, f)) else {
            continue;
        };
        // An ABI wrapper of a function that is probed itself (runtime.goexit1's, which assembly calls): the
        // function's own probes see the call, and the wrapper would add a hit, a single-stepped one.
        let wrapped = gobin::wrapper_target(code, f.entry);
        if found
            .iter()
            .any(|(g, r)| Some(g.entry) == wrapped && r.symbol == row.symbol)
        {
            continue;
        }
        // The scheduler's functions switch goroutines at entry, and never return to their callers.
        let exits: Vec<ExitSite> = match row.stage {
            Some(_) => gobin::exit_sites(code, f.entry)
                .into_iter()
                .map(|addr| {
                    let at = (addr - f.entry) as usize;
                    ExitSite {
                        file_offset: start + at as u64,
                        stepped: prologue::stepped(&code[at..]),
                        in_caller: false,
                    }
                })
                .collect(),
            None => Vec::new(),
        };
        if row.stage.is_some() && exits.is_empty() {
            continue;
        }
        let skip = gobin::past_stack_check(code, prologue::stepped);
        functions.push(FoundFunction {
            row,
            file_offset: start + skip as u64,
            stepped: prologue::stepped(&code[skip..]),
            exits,
        });
        entries.push(f.entry);
    }
    exit_in_callers(&mut functions, &entries, returned_sites(bin, data, &found));
    // Only the scheduler's functions: a Go program without crypto/tls.
    if !functions.iter().any(|f| f.row.stage.is_some()) {
        return None;
    }
    Some(TlsObject {
        family,
        flavor: Flavor::Static,
        symbols: Symbols::Internal,
        version: bin.version.clone(),
        functions,
        ssl_layout: None,
    })
}

/// Moves the exits of the functions in `returned` (by entry address; `entries`: each function's) to their
/// callers, unless one of those sites is another probe's: two probes of one link at one place are not a case
/// the kernel documents, and nothing needs it.
fn exit_in_callers(functions: &mut [FoundFunction], entries: &[u64], mut returned: HashMap<u64, Vec<ExitSite>>) {
    let mut seen: HashMap<u64, usize> = HashMap::new();
    let sites = functions
        .iter()
        .flat_map(|f| std::iter::once(f.file_offset).chain(f.exits.iter().map(|e| e.file_offset)))
        .chain(returned.values().flatten().map(|e| e.file_offset));
    for offset in sites {
        *seen.entry(offset).or_default() += 1;
    }
    returned.retain(|_, sites| sites.iter().all(|e| seen[&e.file_offset] == 1));
    for (f, entry) in functions.iter_mut().zip(entries) {
        if let Some(sites) = returned.remove(entry) {
            f.exits = sites;
        }
    }
}

/// The exits in their callers of the stage functions that only direct calls reach, by entry address, where
/// every call's return has a site the kernel emulates (a return instruction is single-stepped: a second trap,
/// the dearest part of a Go hit). Not for functions whose result the exit reads (a handshake's error, a
/// signature's length): the caller may have moved it by then.
fn returned_sites(bin: &GoBinary, data: &[u8], found: &[(&GoFunc, &'static Row)]) -> HashMap<u64, Vec<ExitSite>> {
    let candidates: Vec<u64> = found
        .iter()
        .filter(|(_, row)| row.stage.is_some_and(|s| s != Stage::Handshake) && row.flags & catalogue::SIG_RESULT == 0)
        .map(|(f, _)| f.entry)
        .collect();
    if candidates.is_empty() {
        return HashMap::new();
    }
    bin.direct_calls(data, &candidates)
        .into_iter()
        .filter_map(|(entry, returns)| {
            let sites = returns
                .iter()
                .map(|&ret| {
                    let site = gobin::returned_site(bin.code_after_call(data, ret)?, ret, false)?;
                    Some(ExitSite {
                        file_offset: bin.file_offset(site)?,
                        stepped: false,
                        in_caller: true,
                    })
                })
                .collect::<Option<Vec<_>>>()?;
            (!sites.is_empty()).then_some((entry, sites))
        })
        .collect()
}

/// Where the calls that return to `returns` (file offsets in the Go executable at `path`: return addresses a
/// probed function found on its stack, and its caller's) are seen returned (GoBinary::resumed_site), in their
/// order.
pub fn go_resumed_sites(path: &Path, returns: &[(u64, Option<u64>)]) -> Result<Vec<Option<u64>>> {
    let data = crate::model::file::read_bounded(path, gobin::MAX_EXECUTABLE_BYTES, "Go executable")?;
    let bin = GoBinary::parse(&data)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        .with_context(|| format!("{}: not a Go executable", path.display()))?;
    Ok(returns
        .iter()
        .map(|&(r, outer)| bin.resumed_site(&data, r, outer))
        .collect())
}

/// The file is read in chunks this long, each overlapping the last by a whole version string: memory stays
/// bounded whatever the size of a file a target maps (Node.js carries its OpenSSL in a 100 MB executable).
const SCAN_CHUNK: usize = 1 << 20;

/// The family's version string compiled into the file, if any.
pub fn version(family: &dyn Family, path: &Path) -> Option<String> {
    let mut version = None;
    scan(path, family.version_len(), |chunk| {
        version = family.version_in(chunk);
        version.is_some()
    });
    version
}

/// Whether the file holds `marker` anywhere.
fn contains(path: &Path, marker: &[u8]) -> bool {
    let mut found = false;
    scan(path, marker.len(), |chunk| {
        found = memchr::memmem::find(chunk, marker).is_some();
        found
    });
    found
}

/// Names a file that defines TLS functions of a known family carries in its symbol tables: BoringSSL, AWS-LC
/// and OpenSSL export or list SSL_do_handshake; rustls' mangled names carry its crate's.
const TLS_SYMBOL_MARKERS: [&[u8]; 2] = [b"SSL_do_handshake\0", b"rustls"];

/// Whether a mapped file of no TLS library's name may hold TLS code of a known family: its symbol tables
/// (.dynstr, .strtab) name one of TLS_SYMBOL_MARKERS, or its read-only data holds a BoringSSL source file's
/// name (a stripped BoringSSL, located by its error sites). A first look that reads those sections alone, for
/// the many files a process maps (a JVM's dozens of libraries) before the families' own look, which reads every
/// symbol. A file that does not parse as an object holds none.
pub fn may_hold_tls(path: &Path) -> bool {
    use object::{Object, ObjectSection};
    let Ok(file) = File::open(path) else {
        return false;
    };
    let cache = object::ReadCache::new(file);
    let Ok(obj) = object::File::parse(&cache) else {
        return false;
    };
    obj.sections().any(|section| {
        let markers: &[&[u8]] = match section.name() {
            Ok(".dynstr" | ".strtab") => &TLS_SYMBOL_MARKERS,
            Ok(".rodata") => &[error_sites::MARKER],
            _ => return false,
        };
        section
            .data()
            .is_ok_and(|data| markers.iter().any(|m| memchr::memmem::find(data, m).is_some()))
    })
}

/// The TLS libraries tlsprof does not profile yet that the file carries, named with their versions where
/// the file gives them ("rustls 0.23.46").
pub fn unsupported_in(path: &Path) -> Vec<String> {
    let mut found: Vec<Option<String>> = vec![None; UNSUPPORTED.len()];
    scan(path, unsupported::MARKER_LEN, |chunk| {
        for (seen, library) in found.iter_mut().zip(UNSUPPORTED) {
            if seen.is_none() {
                *seen = library.find(chunk);
            }
        }
        found.iter().all(Option::is_some)
    });
    found.into_iter().flatten().collect()
}

/// Reads the file in chunks, each overlapping the last by `overlap` bytes (a whole marker), until `done`
/// says it has what it looks for or the file ends.
fn scan(path: &Path, overlap: usize, mut done: impl FnMut(&[u8]) -> bool) {
    let Ok(file) = File::open(path) else { return };
    let mut buf = vec![0u8; SCAN_CHUNK + overlap];
    let (mut kept, mut offset) = (0, 0u64);
    loop {
        let Ok(read) = file.read_at(&mut buf[kept..], offset) else {
            return;
        };
        if read == 0 {
            return;
        }
        offset += read as u64;
        let filled = kept + read;
        if done(&buf[..filled]) {
            return;
        }
        kept = overlap.min(filled);
        buf.copy_within(filled - kept..filled, 0);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::catalogue::families::{openssl::OpenSsl, BUILT_IN};
    use proptest::prelude::*;
    use proptest::sample::Index;
    use std::fs;
    use std::path::PathBuf;

    /// A copy of `original` with bytes overwritten at `edits` and cut at `keep`, in a file of its own.
    pub fn damaged_copy(tag: &str, original: &Path, edits: &[(Index, u8)], keep: Index) -> PathBuf {
        let mut bytes = fs::read(original).unwrap();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = *value;
        }
        // Whole most of the time: the damage inside matters more than the cut.
        if keep.index(4) == 0 {
            bytes.truncate(keep.index(bytes.len() + 1));
        }
        let dir = std::env::temp_dir().join(format!("tlsprof-fuzz-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("{tag}-{n}-libssl.so.3"));
        fs::write(&path, bytes).unwrap();
        path
    }

    proptest! {
        #![proptest_config(crate::fuzz_config(4))]

        /// A target maps whatever it likes under a TLS library's name: inspecting it gives functions or an
        /// error, never a panic, and every function found lies inside the file.
        #[test]
        fn fuzz_inspect_damaged_objects(
            edits in proptest::collection::vec((any::<Index>(), any::<u8>()), 1..64),
            keep in any::<Index>(),
        ) {
            let path = damaged_copy("inspect", Path::new("/bin/true"), &edits, keep);
            let len = fs::metadata(&path).unwrap().len();
            if let Ok(Some(obj)) = inspect(&path, false, BUILT_IN) {
                prop_assert!(obj.functions.iter().all(|f| f.file_offset < len));
            }
            version(&OpenSsl, &path);
            // Its code and .eh_frame as a stripped BoringSSL's are read.
            error_sites::ErrorSites::read(&path);
            fs::remove_file(&path).unwrap();
        }
    }

    #[test]
    fn version_string_across_a_chunk_boundary_is_found() {
        let dir = std::env::temp_dir().join(format!("tlsprof-version-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("libcrypto.so.3");
        let mut blob = vec![0u8; SCAN_CHUNK - 10];
        blob.extend(b"OpenSSL 3.0.19 27 Jan 2026\0");
        blob.extend(vec![0u8; 4096]);
        fs::write(&path, &blob).unwrap();
        assert_eq!(version(&OpenSsl, &path).as_deref(), Some("OpenSSL 3.0.19 27 Jan 2026"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn system_libcrypto_exports_the_public_api_only() {
        let path = Path::new("/usr/lib/x86_64-linux-gnu/libcrypto.so.3");
        if !path.exists() {
            eprintln!("skipped: {} not installed", path.display());
            return;
        }
        let obj = inspect(path, false, BUILT_IN)
            .unwrap()
            .expect("libcrypto defines EVP_PKEY_derive");
        assert_eq!(obj.flavor, Flavor::Shared);
        assert_eq!(obj.symbols, Symbols::Exported);
        assert!(obj.version.as_deref().unwrap_or("").starts_with("OpenSSL 3."));
        assert!(obj.functions.iter().any(|f| f.row.symbol == "EVP_PKEY_derive"));
        // Its first instructions as Debian builds them: `push %rbx`, and `cmpl $0x4,(%rdi)` with a `jne` after
        // it, where the probe goes.
        let found = |name: &str| obj.functions.iter().find(|f| f.row.symbol == name).unwrap();
        assert!(!found("EVP_PKEY_derive").stepped);
        let keygen = found("EVP_PKEY_keygen");
        assert!(!keygen.stepped, "{keygen:?}");
        let mut code = [0u8; 2];
        std::fs::File::open(path)
            .unwrap()
            .read_exact_at(&mut code, keygen.file_offset)
            .unwrap();
        assert_eq!(code[0], 0x75, "a jne rel8 at {keygen:?}");
        // libcrypto imports nothing from libssl: SSL_do_handshake must not appear.
        assert!(!obj.functions.iter().any(|f| f.row.symbol == "SSL_do_handshake"));
    }

    #[test]
    fn debian_ssl_free_is_probed_on_an_emulated_instruction() {
        let path = Path::new("/usr/lib/x86_64-linux-gnu/libssl.so.3");
        if !path.exists() {
            eprintln!("skipped: {} not installed", path.display());
            return;
        }
        let obj = inspect(path, false, BUILT_IN)
            .unwrap()
            .expect("libssl defines SSL_free");
        let free = obj.functions.iter().find(|f| f.row.symbol == "SSL_free").unwrap();
        assert!(!free.stepped, "{free:?}");
    }
}
