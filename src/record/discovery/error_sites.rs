// SPDX-License-Identifier: Apache-2.0
//! Where a build without symbols raises BoringSSL's errors. BoringSSL's error macro passes ERR_put_error the
//! source file as a string and the line as a constant: `mov r8d, LINE` and `lea rcx, [rip + ".../ssl/
//! ssl_privkey.cc"]` just before the call, which survive stripping. Each such call is an error site; the
//! function it lies in is bounded by its .eh_frame entry (FDE), which C++ code keeps for exceptions. A table
//! made from a build of the same BoringSSL with its symbols names the function of each (file, line)
//! (Family::site_tables). The file is the target's: everything read from it is bounds-checked, and the code
//! is read a piece at a time.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use gimli::{BaseAddresses, CieOrFde, EhFrame, LittleEndian, UnwindSection};
use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register};
use object::{Object, ObjectSection, ObjectSymbol, SectionKind};

use crate::catalogue::families::SiteTable;

/// A source file name only BoringSSL and the libraries made from it have: a file without it has no error
/// sites to read.
pub const MARKER: &[u8] = b"ssl/ssl_privkey.cc\0";

/// Instructions before a call that may set its arguments: compilers put the file's `lea` and the line's
/// `mov` among the last few.
const WINDOW: usize = 8;

/// The longest source path read.
const MAX_PATH: usize = 256;

/// The machine code read at a time: whole functions, about this much.
const CHUNK: u64 = 4 << 20;

/// A call whose file and line arguments are constants: at `addr`, to `target`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Candidate {
    addr: u64,
    target: u64,
    string: u64,
    line: u32,
}

/// An error site: where it is, and the (file, line) it names.
#[derive(Clone, Debug, PartialEq)]
pub struct Site {
    pub addr: u64,
    /// Relative to BoringSSL's tree: "ssl/ssl_privkey.cc".
    pub file: String,
    pub line: u32,
}

/// A file's error sites and function bounds.
pub struct ErrorSites {
    /// The calls to the function most of them call (ERR_put_error), by address.
    pub sites: Vec<Site>,
    /// Functions' (start, end) from .eh_frame, sorted by start.
    functions: Vec<(u64, u64)>,
    /// (address, file offset, size) of the code.
    text: (u64, u64, u64),
}

impl ErrorSites {
    /// Reads the error sites of the ELF file at `path`; None when it has no code, no .eh_frame, or no
    /// call with a BoringSSL source path and a line.
    pub fn read(path: &Path) -> Option<ErrorSites> {
        let file = File::open(path).ok()?;
        let file_len = file.metadata().ok()?.len();
        let cache = object::ReadCache::new(&file);
        let elf = object::File::parse(&cache).ok()?;
        let text = elf.section_by_name(".text")?;
        let (text_offset, text_size) = text.file_range()?;
        // The code is read from the file: a header that says more than the file holds is not believed.
        if text_offset.checked_add(text_size)? > file_len {
            return None;
        }
        let text = (text.address(), text_offset, text_size);
        let eh_frame = elf.section_by_name(".eh_frame")?;
        let functions = fde_ranges(eh_frame.data().ok()?, eh_frame.address(), text.0);
        let strings: Vec<(u64, u64, u64)> = elf
            .sections()
            .filter(|s| matches!(s.kind(), SectionKind::ReadOnlyData | SectionKind::ReadOnlyString))
            .filter_map(|s| Some((s.address(), s.file_range()?.0, s.size())))
            .collect();
        let mut candidates = Vec::new();
        for (start, end) in chunks(&functions, text) {
            let mut code = vec![0u8; (end - start) as usize];
            file.read_exact_at(&mut code, text.1 + (start - text.0)).ok()?;
            for &(f_start, f_end) in functions_in(&functions, start, end) {
                if let Some(code) = code.get((f_start - start) as usize..(f_end - start) as usize) {
                    call_candidates(code, f_start, &mut candidates);
                }
            }
        }
        let mut paths: HashMap<u64, Option<String>> = HashMap::new();
        let mut with_path: Vec<(Candidate, String)> = Vec::new();
        for c in candidates {
            let path = paths
                .entry(c.string)
                .or_insert_with(|| read_string(&file, &strings, c.string).and_then(|s| relative_path(&s)))
                .clone();
            if let Some(path) = path {
                with_path.push((c, path));
            }
        }
        // The error function is what most of them call: other calls can pass a constant path and number.
        let mut targets: HashMap<u64, usize> = HashMap::new();
        for (c, _) in &with_path {
            *targets.entry(c.target).or_default() += 1;
        }
        let error_function = targets.into_iter().max_by_key(|&(t, n)| (n, t))?.0;
        let mut sites: Vec<Site> = with_path
            .into_iter()
            .filter(|(c, _)| c.target == error_function)
            .map(|(c, file)| Site {
                addr: c.addr,
                file,
                line: c.line,
            })
            .collect();
        sites.sort_by_key(|s| s.addr);
        Some(ErrorSites { sites, functions, text })
    }

    /// The function (start, end) that holds `addr`, by its FDE.
    pub fn function_at(&self, addr: u64) -> Option<(u64, u64)> {
        let i = self
            .functions
            .partition_point(|&(start, _)| start <= addr)
            .checked_sub(1)?;
        let (start, end) = self.functions[i];
        (addr < end).then_some((start, end))
    }

    /// The file offset of code at `addr` (what uprobes take).
    pub fn file_offset(&self, addr: u64) -> Option<u64> {
        let (text_addr, offset, size) = self.text;
        (text_addr..text_addr + size)
            .contains(&addr)
            .then(|| offset + (addr - text_addr))
    }
}

/// Of the error sites a file's BoringSSL raises, at least this share must be in a table for the table to be
/// its revision's: another revision's lines have moved.
const SAME_REVISION: f64 = 0.9;

/// A catalogue function located by its error sites.
#[derive(Clone, Debug, PartialEq)]
pub struct Located {
    pub name: &'static str,
    /// Its start (the FDE's) and file offset.
    pub addr: u64,
    pub file_offset: u64,
}

/// The functions of `wanted` that `table` locates in `sites`: each function whose (file, line) pairs unique
/// to it in the table all fall in one function of the file, a function no other was located in. None when
/// the file's error sites are not the table's revision.
pub fn locate(table: &SiteTable, sites: &ErrorSites, wanted: &[&str]) -> Option<Vec<Located>> {
    let mut functions_of: HashMap<(&str, u32), Vec<&'static str>> = HashMap::new();
    for (file, line, function) in table.rows() {
        functions_of.entry((file, line)).or_default().push(function);
    }
    let mut keys: Vec<(&str, u32)> = sites.sites.iter().map(|s| (s.file.as_str(), s.line)).collect();
    keys.sort_unstable();
    keys.dedup();
    let known = keys.iter().filter(|k| functions_of.contains_key(*k)).count();
    if keys.is_empty() || (known as f64) < SAME_REVISION * keys.len() as f64 {
        return None;
    }
    // Where each wanted function's own sites fall; None once they disagree.
    let mut starts: HashMap<&'static str, Option<u64>> = HashMap::new();
    for site in &sites.sites {
        let Some([function]) = functions_of.get(&(site.file.as_str(), site.line)).map(Vec::as_slice) else {
            continue;
        };
        if !wanted.contains(function) {
            continue;
        }
        let start = sites.function_at(site.addr).map(|(start, _)| start);
        let entry = starts.entry(function).or_insert(start);
        if *entry != start {
            *entry = None;
        }
    }
    let mut located: Vec<Located> = starts
        .into_iter()
        .filter_map(|(name, start)| {
            let addr = start?;
            Some(Located {
                name,
                addr,
                file_offset: sites.file_offset(addr)?,
            })
        })
        .collect();
    located.sort_by_key(|l| (l.addr, l.name));
    let shared: Vec<u64> = located
        .windows(2)
        .filter(|w| w[0].addr == w[1].addr)
        .map(|w| w[0].addr)
        .collect();
    located.retain(|l| !shared.contains(&l.addr));
    Some(located)
}

/// A site table's rows from a build with its symbols: each error site's (file, line) and the function
/// its symbol names, sorted and without repeats (scripts/bssl_sites.rs writes them).
pub fn table_rows(path: &Path) -> Option<Vec<(String, u32, String)>> {
    let sites = ErrorSites::read(path)?;
    let data = std::fs::read(path).ok()?;
    let elf = object::File::parse(&*data).ok()?;
    let mut symbols: Vec<(u64, u64, String)> = elf
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
        .collect();
    symbols.sort_unstable();
    let mut rows: Vec<(String, u32, String)> = sites
        .sites
        .iter()
        .filter_map(|site| {
            let i = symbols.partition_point(|&(a, _, _)| a <= site.addr).checked_sub(1)?;
            let (addr, size, name) = &symbols[i];
            (site.addr < addr + size).then(|| {
                let name = super::names::plain_name(name, &[]).into_owned();
                (site.file.clone(), site.line, name)
            })
        })
        .collect();
    rows.sort_unstable();
    rows.dedup();
    Some(rows)
}

/// The code's functions by their FDEs, inside `text` only, sorted and not overlapping (a later one that
/// overlaps an earlier one is dropped).
fn fde_ranges(data: &[u8], eh_frame_addr: u64, text_addr: u64) -> Vec<(u64, u64)> {
    let eh_frame = EhFrame::new(data, LittleEndian);
    let bases = BaseAddresses::default().set_eh_frame(eh_frame_addr).set_text(text_addr);
    let mut ranges = Vec::new();
    let mut entries = eh_frame.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        if let CieOrFde::Fde(partial) = entry {
            if let Ok(fde) = partial.parse(|section, bases, offset| section.cie_from_offset(bases, offset)) {
                let start = fde.initial_address();
                if let Some(end) = start.checked_add(fde.len()).filter(|&end| end > start) {
                    ranges.push((start, end));
                }
            }
        }
    }
    ranges.sort_unstable();
    let mut kept: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for r in ranges {
        if kept.last().is_none_or(|&(_, end)| r.0 >= end) {
            kept.push(r);
        }
    }
    kept
}

/// Spans of `text` of about CHUNK bytes each, made of whole functions.
fn chunks(functions: &[(u64, u64)], (text_addr, _, text_size): (u64, u64, u64)) -> Vec<(u64, u64)> {
    let text_end = text_addr + text_size;
    let inside = functions
        .iter()
        .filter(|&&(start, end)| start >= text_addr && end <= text_end);
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for &(start, end) in inside {
        match spans.last_mut() {
            Some(span) if end - span.0 <= CHUNK => span.1 = end,
            _ => spans.push((start, end)),
        }
    }
    spans
}

fn functions_in(functions: &[(u64, u64)], start: u64, end: u64) -> &[(u64, u64)] {
    let from = functions.partition_point(|&(s, _)| s < start);
    let to = functions.partition_point(|&(s, _)| s < end);
    &functions[from..to]
}

/// What an instruction before a call did to the error function's file (rcx) and line (r8d) arguments.
#[derive(Clone, Copy)]
enum Arg {
    File(u64),
    Line(u32),
    ClobberedFile,
    ClobberedLine,
    Other,
}

/// Registers that keep a value across calls: a path loaded into one early is moved into rcx later.
const SAVED: [Register; 6] = [
    Register::RBX,
    Register::RBP,
    Register::R12,
    Register::R13,
    Register::R14,
    Register::R15,
];

/// The calls in one function's code (`ip`: its address) whose file argument is a RIP-relative address and
/// line argument a constant.
fn call_candidates(code: &[u8], ip: u64, out: &mut Vec<Candidate>) {
    let mut decoder = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut i = Instruction::default();
    let mut window: VecDeque<Arg> = VecDeque::with_capacity(WINDOW + 1);
    let mut saved: [Option<u64>; SAVED.len()] = [None; SAVED.len()];
    while decoder.can_decode() {
        decoder.decode_out(&mut i);
        let direct = i.op0_kind() == OpKind::NearBranch64;
        match i.flow_control() {
            FlowControl::Call | FlowControl::UnconditionalBranch if direct => {
                if let Some((string, line)) = arguments(&window) {
                    out.push(Candidate {
                        addr: i.ip(),
                        target: i.near_branch_target(),
                        string,
                        line,
                    });
                }
                window.clear();
            }
            FlowControl::Next | FlowControl::ConditionalBranch => {
                window.push_back(argument(&i, &mut saved));
                if window.len() > WINDOW {
                    window.pop_front();
                }
            }
            _ => {
                window.clear();
                if i.flow_control() == FlowControl::Return || i.is_invalid() {
                    saved = [None; SAVED.len()];
                }
            }
        }
    }
}

/// The file and line a call made now would pass: the latest writes to rcx and r8d in the window.
fn arguments(window: &VecDeque<Arg>) -> Option<(u64, u32)> {
    let file = window.iter().rev().find_map(|a| match a {
        Arg::File(addr) => Some(Some(*addr)),
        Arg::ClobberedFile => Some(None),
        _ => None,
    })??;
    let line = window.iter().rev().find_map(|a| match a {
        Arg::Line(line) => Some(Some(*line)),
        Arg::ClobberedLine => Some(None),
        _ => None,
    })??;
    Some((file, line))
}

fn argument(i: &Instruction, saved: &mut [Option<u64>; SAVED.len()]) -> Arg {
    let written = if i.op0_kind() == OpKind::Register {
        i.op0_register().full_register()
    } else {
        Register::None
    };
    let slot = SAVED.iter().position(|&r| r == written);
    if i.mnemonic() == Mnemonic::Lea && i.is_ip_rel_memory_operand() {
        let addr = i.ip_rel_memory_address();
        if written == Register::RCX {
            return Arg::File(addr);
        }
        if let Some(s) = slot {
            saved[s] = Some(addr);
            return Arg::Other;
        }
    }
    if let Some(s) = slot {
        saved[s] = None;
    }
    match written {
        Register::RCX if i.mnemonic() == Mnemonic::Mov && i.op1_kind() == OpKind::Register => {
            let from = SAVED.iter().position(|&r| r == i.op1_register());
            from.and_then(|s| saved[s]).map_or(Arg::ClobberedFile, Arg::File)
        }
        Register::RCX => Arg::ClobberedFile,
        Register::R8
            if i.mnemonic() == Mnemonic::Mov
                && i.op0_register() == Register::R8D
                && i.op1_kind() == OpKind::Immediate32 =>
        {
            Arg::Line(i.immediate32())
        }
        Register::R8 => Arg::ClobberedLine,
        _ => Arg::Other,
    }
}

/// The NUL-terminated string at `addr` in one of the read-only sections `strings` ((address, file offset,
/// size) each), if it ends within MAX_PATH bytes and inside its section.
fn read_string(file: &File, strings: &[(u64, u64, u64)], addr: u64) -> Option<Vec<u8>> {
    let &(sec_addr, offset, size) = strings
        .iter()
        .find(|&&(a, _, s)| (a..a.saturating_add(s)).contains(&addr))?;
    let len = (sec_addr + size - addr).min(MAX_PATH as u64) as usize;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, offset + (addr - sec_addr)).ok()?;
    let end = buf.iter().position(|&b| b == 0)?;
    buf.truncate(end);
    Some(buf)
}

/// A BoringSSL source path relative to its tree ("ssl/ssl_lib.cc", "crypto/fipsmodule/ec/ec.c"), from one
/// as a build wrote it ("/root/.cargo/.../boringssl/src/ssl/ssl_lib.cc", "external/boringssl+/ssl/...").
pub fn relative_path(path: &[u8]) -> Option<String> {
    let path = std::str::from_utf8(path).ok()?;
    let is_source = [".c", ".cc", ".h"].iter().any(|ext| path.ends_with(ext));
    if !is_source || !path.bytes().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let start = ["ssl/", "crypto/"]
        .iter()
        .filter_map(|dir| {
            if path.starts_with(dir) {
                return Some(0);
            }
            path.rfind(&format!("/{dir}")).map(|at| at + 1)
        })
        .max()?;
    Some(path[start..].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `mov r8d, 261; lea rcx, [rip+0x1000]; call rel32` at 0x1000, and other calls that pass no constant
    /// line or whose rcx was overwritten.
    #[test]
    fn calls_with_a_constant_file_and_line_are_found() {
        let code = [
            0x41, 0xb8, 0x05, 0x01, 0x00, 0x00, // mov r8d, 261
            0x48, 0x8d, 0x0d, 0x00, 0x10, 0x00, 0x00, // lea rcx, [rip+0x1000]
            0xe8, 0x00, 0x01, 0x00, 0x00, // call +0x100
            0x48, 0x8d, 0x0d, 0x00, 0x10, 0x00, 0x00, // lea rcx, [rip+0x1000]
            0xe8, 0x00, 0x01, 0x00, 0x00, // call (no line since the last call)
            0x4c, 0x8d, 0x25, 0x00, 0x20, 0x00, 0x00, // lea r12, [rip+0x2000]
            0x41, 0xb8, 0x07, 0x00, 0x00, 0x00, // mov r8d, 7
            0x4c, 0x89, 0xe1, // mov rcx, r12
            0xe9, 0x00, 0x01, 0x00, 0x00, // jmp +0x100 (a tail call)
            0x41, 0xb8, 0x07, 0x00, 0x00, 0x00, // mov r8d, 7
            0x48, 0x8d, 0x0d, 0x00, 0x10, 0x00, 0x00, // lea rcx, [rip+0x1000]
            0x48, 0x89, 0xc1, // mov rcx, rax
            0xe8, 0x00, 0x01, 0x00, 0x00, // call: rcx is no longer the path
        ];
        let mut found = Vec::new();
        call_candidates(&code, 0x1000, &mut found);
        assert_eq!(
            found,
            [
                Candidate {
                    addr: 0x100d,
                    target: 0x1112,
                    string: 0x100d + 0x1000,
                    line: 261
                },
                Candidate {
                    addr: 0x102e,
                    target: 0x1133,
                    string: 0x1025 + 0x2000,
                    line: 7
                },
            ]
        );
    }

    #[test]
    fn source_paths_are_made_relative_to_boringssl_tree() {
        let rel = |p: &str| relative_path(p.as_bytes());
        assert_eq!(
            rel("/root/.cargo/registry/src/x/boring-sys-4.22.0/deps/boringssl/src/ssl/ssl_lib.cc").as_deref(),
            Some("ssl/ssl_lib.cc")
        );
        assert_eq!(
            rel("external/boringssl+/ssl/handshake_server.cc").as_deref(),
            Some("ssl/handshake_server.cc")
        );
        assert_eq!(
            rel("crypto/fipsmodule/ec/ec.c").as_deref(),
            Some("crypto/fipsmodule/ec/ec.c")
        );
        assert_eq!(
            rel("../../vendor/boringssl/ssl/tls13_server.cc").as_deref(),
            Some("ssl/tls13_server.cc")
        );
        assert_eq!(rel("ssl/x.rs"), None);
        assert_eq!(rel("a/b.cc"), None);
        assert_eq!(rel("ssl/a b.cc"), None);
    }

    /// A table locates the functions whose own lines all fall in one function of the file, and nothing in a
    /// file whose lines are mostly not its (another revision).
    #[test]
    fn a_table_locates_only_its_revision_and_only_where_the_lines_agree() {
        let table = SiteTable {
            name: "test",
            rows: "# a comment\n\
                   ssl/a.cc\t10\tf\nssl/a.cc\t20\tf\nssl/b.cc\t5\tg\nssl/b.cc\t5\th\n\
                   ssl/c.cc\t1\tk\nssl/c.cc\t2\tk\nssl/d.cc\t1\tm\nssl/e.cc\t1\tn\n",
        };
        let site = |addr, file: &str, line| Site {
            addr,
            file: file.to_string(),
            line,
        };
        let sites = ErrorSites {
            sites: vec![
                site(0x110, "ssl/a.cc", 10),
                site(0x120, "ssl/a.cc", 20),
                // g and h share their only line: neither is located.
                site(0x210, "ssl/b.cc", 5),
                // k's lines fall in two functions: not located.
                site(0x310, "ssl/c.cc", 1),
                site(0x410, "ssl/c.cc", 2),
                // m and n both in one function: which is which is not known.
                site(0x510, "ssl/d.cc", 1),
                site(0x520, "ssl/e.cc", 1),
            ],
            functions: vec![
                (0x100, 0x200),
                (0x200, 0x300),
                (0x300, 0x400),
                (0x400, 0x500),
                (0x500, 0x600),
            ],
            text: (0x100, 0x1100, 0x500),
        };
        let all = ["f", "g", "h", "k", "m", "n"];
        let located = locate(&table, &sites, &all).unwrap();
        assert_eq!(
            located,
            [Located {
                name: "f",
                addr: 0x100,
                file_offset: 0x1100
            }]
        );
        assert_eq!(locate(&table, &sites, &["g"]).unwrap(), []);
        // Another revision: its lines have moved.
        let moved = ErrorSites {
            sites: sites.sites.iter().map(|s| site(s.addr, &s.file, s.line + 1)).collect(),
            ..sites
        };
        assert_eq!(locate(&table, &moved, &all), None);
    }

    #[test]
    fn functions_are_bounded_by_their_fdes() {
        let sites = ErrorSites {
            sites: Vec::new(),
            functions: vec![(0x100, 0x180), (0x180, 0x200), (0x300, 0x310)],
            text: (0x100, 0x1100, 0x300),
        };
        assert_eq!(sites.function_at(0x17f), Some((0x100, 0x180)));
        assert_eq!(sites.function_at(0x180), Some((0x180, 0x200)));
        assert_eq!(sites.function_at(0x250), None);
        assert_eq!(sites.function_at(0x50), None);
        assert_eq!(sites.file_offset(0x180), Some(0x1180));
        assert_eq!(sites.file_offset(0x400), None);
    }
}
