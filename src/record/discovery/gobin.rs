// SPDX-License-Identifier: Apache-2.0
//! Go executables: the Go release they were built with (.go.buildinfo), their function table (the runtime's
//! pclntab, kept by stripped builds too) and the return sites of a function's machine code. The file is
//! the target's: every offset read from it is bounds-checked, and a malformed table is an error, not a panic.

use std::collections::{HashMap, HashSet};

use iced_x86::{Decoder, DecoderOptions, FlowControl, InstructionInfo, Mnemonic, OpAccess, OpKind, Register};
use object::{Object, ObjectKind, ObjectSection, ObjectSegment, SectionFlags};

use super::prologue;

/// A function of the Go function table: its name and code range (virtual addresses of the file).
#[derive(Clone, Debug, PartialEq)]
pub struct GoFunc {
    pub name: String,
    pub entry: u64,
    pub end: u64,
}

/// What tlsprof reads from a Go executable.
#[derive(Clone, Debug)]
pub struct GoBinary {
    /// "go1.26.8"; None when the build info is missing or in the pre-1.18 layout.
    pub version: Option<String>,
    /// Sorted by entry address.
    pub functions: Vec<GoFunc>,
    /// (virtual address, file offset, size) of each PT_LOAD segment: uprobes take file offsets.
    segments: Vec<(u64, u64, u64)>,
    /// The start of .text: a method table names code by its offset from there.
    text_start: u64,
    /// (file offset, size) of the sections loaded with the program that hold data, not code, the function
    /// table aside: where the addresses of function values, interface method tables and methods are.
    data_sections: Vec<(u64, u64)>,
    /// A position-independent executable: the addresses in its data are relocated at load.
    position_independent: bool,
}

/// Why a file that looks like Go cannot be read.
#[derive(Debug, PartialEq)]
pub enum GoError {
    /// The function table's header names a layout before Go 1.18.
    UnsupportedTable(u32),
    /// An offset or count points outside the table.
    Truncated(&'static str),
}

impl std::fmt::Display for GoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GoError::UnsupportedTable(magic) => {
                write!(
                    f,
                    "Go function table of an unsupported release (magic {magic:#x}; Go 1.18 and later are read)"
                )
            }
            GoError::Truncated(what) => write!(f, "malformed Go function table: {what} out of bounds"),
        }
    }
}

impl std::error::Error for GoError {}

/// pclntab header magics: Go 1.18-1.19 and Go 1.20 and later share the layout read here.
/// Largest Go executable read whole (it is the target's file: a bound, not a guess at its size; Kubernetes'
/// largest binaries are a few hundred MB).
pub const MAX_EXECUTABLE_BYTES: u64 = 1 << 30;
const MAGIC_GO118: u32 = 0xffff_fff0;
const MAGIC_GO120: u32 = 0xffff_fff1;
const BUILDINFO_MAGIC: &[u8] = b"\xff Go buildinf:";

/// Whether the ELF file at `path` has a Go function table, read from its section headers only: the
/// executables of other targets (Node.js) are large.
pub fn is_go(path: &std::path::Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let cache = object::ReadCache::new(file);
    object::File::parse(&cache).is_ok_and(|f| f.section_by_name(".gopclntab").is_some())
}

/// Whether a process runs Go code: its executable, or a library it maps (a Go c-shared object).
pub fn runs_go(p: &super::targets::Process) -> bool {
    let Ok(maps) = p.maps() else { return false };
    let mut seen = std::collections::HashSet::new();
    maps.iter()
        .filter(|m| m.executable && m.inode != 0 && seen.insert((m.dev.clone(), m.inode)))
        .any(|m| is_go(&m.open_path(p.pid)))
}

impl GoBinary {
    /// Reads a Go executable. Ok(None) when the file is not a Go program (no function table).
    pub fn parse(data: &[u8]) -> Result<Option<GoBinary>, Box<dyn std::error::Error + Send + Sync>> {
        let Ok(file) = object::File::parse(data) else {
            return Ok(None);
        };
        let Some(table) = file.section_by_name(".gopclntab") else {
            return Ok(None);
        };
        let table_data = table.data()?;
        let text_start = file.section_by_name(".text").map_or(0, |s| s.address());
        let functions = parse_pclntab(table_data, text_start)?;
        let version = file
            .section_by_name(".go.buildinfo")
            .and_then(|s| s.data().ok())
            .and_then(buildinfo_version);
        let segments = file
            .segments()
            .filter_map(|s| {
                let (offset, size) = s.file_range();
                (size > 0).then(|| (s.address(), offset, size.min(s.size())))
            })
            .collect();
        let data_sections = file
            .sections()
            .filter(|s| {
                let SectionFlags::Elf { sh_flags } = s.flags() else {
                    return false;
                };
                let (alloc, exec) = (u64::from(object::elf::SHF_ALLOC), u64::from(object::elf::SHF_EXECINSTR));
                sh_flags & alloc != 0 && sh_flags & exec == 0 && s.name() != Ok(".gopclntab")
            })
            .filter_map(|s| s.file_range())
            .collect();
        Ok(Some(GoBinary {
            version,
            functions,
            segments,
            text_start,
            data_sections,
            position_independent: file.kind() != ObjectKind::Executable,
        }))
    }

    /// The machine code of a function, from the file.
    pub fn code<'d>(&self, data: &'d [u8], f: &GoFunc) -> Option<&'d [u8]> {
        let (start, end) = (self.file_offset(f.entry)?, self.file_offset(f.end.checked_sub(1)?)?);
        data.get(usize::try_from(start).ok()?..=usize::try_from(end).ok()?)
    }

    /// For each of `targets` (functions' entry addresses) that only direct calls reach, where its calls
    /// return to. Left out: a function the code jumps into from elsewhere or takes the address of, whose
    /// address or offset in the code is in the program's data (a function value, an interface's method
    /// table, a method reflection can call), or any of a position-independent executable's (its data's
    /// addresses are relocated at load, not read here).
    pub fn direct_calls(&self, data: &[u8], targets: &[u64]) -> HashMap<u64, Vec<u64>> {
        if self.position_independent {
            return HashMap::new();
        }
        let mut calls: HashMap<u64, Vec<u64>> = targets.iter().map(|&t| (t, Vec::new())).collect();
        let mut taken = HashSet::new();
        for f in &self.functions {
            let Some(code) = self.code(data, f) else { continue };
            for instr in Decoder::with_ip(64, code, f.entry, DecoderOptions::NONE) {
                if instr.is_invalid() {
                    continue;
                }
                if matches!(
                    instr.flow_control(),
                    FlowControl::Call | FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch
                ) {
                    let target = instr.near_branch_target();
                    match calls.get_mut(&target) {
                        Some(returns) if instr.flow_control() == FlowControl::Call => returns.push(instr.next_ip()),
                        // A function's own stack-growth path jumps back to its start.
                        Some(_) if target != f.entry => {
                            taken.insert(target);
                        }
                        _ => {}
                    }
                }
                if instr.is_ip_rel_memory_operand() && calls.contains_key(&instr.ip_rel_memory_address()) {
                    taken.insert(instr.ip_rel_memory_address());
                }
                for i in 0..instr.op_count() {
                    if matches!(
                        instr.op_kind(i),
                        OpKind::Immediate32to64 | OpKind::Immediate64 | OpKind::Immediate32
                    ) && calls.contains_key(&instr.immediate(i))
                    {
                        taken.insert(instr.immediate(i));
                    }
                }
            }
        }
        for &(start, size) in &self.data_sections {
            let bytes = usize::try_from(start)
                .ok()
                .zip(usize::try_from(size).ok())
                .and_then(|(s, n)| data.get(s..s.checked_add(n)?))
                .unwrap_or_default();
            for word in bytes.chunks_exact(8) {
                let addr = u64::from_le_bytes(word.try_into().expect("8 bytes"));
                if calls.contains_key(&addr) {
                    taken.insert(addr);
                }
            }
            for word in bytes.chunks_exact(4) {
                let offset = u64::from(u32::from_le_bytes(word.try_into().expect("4 bytes")));
                if let Some(addr) = self.text_start.checked_add(offset).filter(|a| calls.contains_key(a)) {
                    taken.insert(addr);
                }
            }
        }
        calls.retain(|target, _| !taken.contains(target));
        calls
    }

    /// The code from a call's return address to the end of the function that made the call.
    pub fn code_after_call<'d>(&self, data: &'d [u8], ret_addr: u64) -> Option<&'d [u8]> {
        let f = self.function_at(ret_addr.checked_sub(1)?)?;
        let code = self.code(data, f)?;
        code.get(usize::try_from(ret_addr - f.entry).ok()?..)
    }

    /// The function whose code holds a file offset.
    pub fn function_at_offset(&self, offset: u64) -> Option<&GoFunc> {
        self.function_at(self.address_of(offset)?)
    }

    /// Where a call that returns to file offset `ret_offset` (a return address a probed function found on
    /// its stack, the target's word) is seen returned with its results untouched (`returned_site`), as a file
    /// offset; where the caller returns at once (`return f(...)`), where its own call, returning to
    /// `outer_offset`, is. None unless a call instruction of a function ends there.
    pub fn resumed_site(&self, data: &[u8], ret_offset: u64, outer_offset: Option<u64>) -> Option<u64> {
        let ret = self.address_of(ret_offset)?;
        let f = self.function_at(ret.checked_sub(1)?)?;
        let code = self.code(data, f)?;
        let after_call = Decoder::with_ip(64, code, f.entry, DecoderOptions::NONE)
            .into_iter()
            .take_while(|i| i.ip() < ret)
            .any(|i| i.next_ip() == ret && matches!(i.flow_control(), FlowControl::Call | FlowControl::IndirectCall));
        if !after_call {
            return None;
        }
        let after = code.get(usize::try_from(ret - f.entry).ok()?..)?;
        if returns_at_once(after) {
            return self.resumed_site(data, outer_offset?, None);
        }
        self.file_offset(returned_site(after, ret, true)?)
    }

    /// The virtual address a file offset is loaded at, if a segment maps it.
    fn address_of(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(_, off, size)| off <= offset && offset - off < size)
            .map(|&(va, off, _)| va + (offset - off))
    }

    /// The function whose code holds a virtual address.
    fn function_at(&self, addr: u64) -> Option<&GoFunc> {
        let i = self.functions.partition_point(|f| f.entry <= addr);
        let f = self.functions.get(i.checked_sub(1)?)?;
        (addr < f.end).then_some(f)
    }

    /// The file offset of a virtual address of the file, if a segment maps it from the file.
    pub fn file_offset(&self, addr: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(va, _, size)| va <= addr && addr - va < size)
            .map(|&(va, off, _)| off + (addr - va))
    }
}

fn u32_at(data: &[u8], at: usize, what: &'static str) -> Result<u32, GoError> {
    let bytes = data.get(at..at.checked_add(4).ok_or(GoError::Truncated(what))?);
    Ok(u32::from_le_bytes(
        bytes.ok_or(GoError::Truncated(what))?.try_into().expect("4 bytes"),
    ))
}

fn u64_at(data: &[u8], at: usize, what: &'static str) -> Result<u64, GoError> {
    let bytes = data.get(at..at.checked_add(8).ok_or(GoError::Truncated(what))?);
    Ok(u64::from_le_bytes(
        bytes.ok_or(GoError::Truncated(what))?.try_into().expect("8 bytes"),
    ))
}

fn usize_at(data: &[u8], at: usize, what: &'static str) -> Result<usize, GoError> {
    usize::try_from(u64_at(data, at, what)?).map_err(|_| GoError::Truncated(what))
}

/// The functions of a pclntab (runtime/symtab.go: pcHeader, then functab entries {entryoff, funcoff} and
/// _func records {entryOff, nameOff, ...}). `text_start`: the .text address, used when the header's own is
/// left to a relocation (position-independent builds).
pub fn parse_pclntab(data: &[u8], text_start: u64) -> Result<Vec<GoFunc>, GoError> {
    let magic = u32_at(data, 0, "header")?;
    if magic != MAGIC_GO118 && magic != MAGIC_GO120 {
        return Err(GoError::UnsupportedTable(magic));
    }
    if data.get(7) != Some(&8) {
        return Err(GoError::Truncated("pointer size"));
    }
    let nfunc = usize_at(data, 8, "function count")?;
    let text = match u64_at(data, 24, "text start")? {
        0 => text_start,
        t => t,
    };
    let names = usize_at(data, 32, "name table")?;
    let ftab = usize_at(data, 64, "function table")?;
    // nfunc + 1 entries of 8 bytes: the last one holds the end of the last function.
    let ftab_len = nfunc
        .checked_add(1)
        .and_then(|n| n.checked_mul(8))
        .ok_or(GoError::Truncated("function count"))?;
    if ftab.checked_add(ftab_len).is_none_or(|end| end > data.len()) {
        return Err(GoError::Truncated("function count"));
    }
    let mut out = Vec::with_capacity(nfunc);
    for i in 0..nfunc {
        let entry_off = u32_at(data, ftab + i * 8, "function entry")?;
        let func_off = u32_at(data, ftab + i * 8 + 4, "function record")? as usize;
        let next_off = u32_at(data, ftab + (i + 1) * 8, "function end")?;
        let record = ftab
            .checked_add(func_off)
            .ok_or(GoError::Truncated("function record"))?;
        let name_off = u32_at(data, record + 4, "function record")? as usize;
        let name_at = names.checked_add(name_off).ok_or(GoError::Truncated("function name"))?;
        let rest = data.get(name_at..).ok_or(GoError::Truncated("function name"))?;
        let len = memchr::memchr(0, rest).ok_or(GoError::Truncated("function name"))?;
        let name = String::from_utf8_lossy(&rest[..len]).into_owned();
        if next_off < entry_off {
            return Err(GoError::Truncated("function end"));
        }
        out.push(GoFunc {
            name,
            entry: text + u64::from(entry_off),
            end: text + u64::from(next_off),
        });
    }
    out.sort_by_key(|f| f.entry);
    Ok(out)
}

/// The Go release in a .go.buildinfo section (Go 1.18 and later: the version string inline after the
/// 32-byte header, length as a uvarint).
pub fn buildinfo_version(data: &[u8]) -> Option<String> {
    if !data.starts_with(BUILDINFO_MAGIC) || data.get(15)? & 2 == 0 {
        return None;
    }
    let mut len = 0usize;
    let mut at = 32;
    for shift in (0..35).step_by(7) {
        let b = *data.get(at)?;
        at += 1;
        len |= usize::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            let text = std::str::from_utf8(data.get(at..at.checked_add(len)?)?).ok()?;
            return (text.starts_with("go") && len < 64).then(|| text.to_string());
        }
    }
    None
}

/// Where the code of an ABI wrapper (the few instructions Go generates to call a function across its two
/// calling conventions) jumps: a function that only sets registers and jumps out. None for anything else.
pub fn wrapper_target(code: &[u8], entry: u64) -> Option<u64> {
    let end = entry.saturating_add(code.len() as u64);
    for instr in Decoder::with_ip(64, code, entry, DecoderOptions::NONE)
        .into_iter()
        .take(MAX_WRAPPER)
    {
        match instr.flow_control() {
            FlowControl::Next if !instr.is_invalid() => continue,
            FlowControl::UnconditionalBranch => {
                let target = instr.near_branch_target();
                return (target < entry || target >= end).then_some(target);
            }
            _ => return None,
        }
    }
    None
}

/// Instructions an ABI wrapper runs at most before its jump.
const MAX_WRAPPER: usize = 4;

/// Where a call of the function leaves it: each return instruction, and each jump out of its code (a tail
/// call: the callee returns to our caller). Addresses are virtual, like `entry`. At each of them the stack
/// pointer is back where it was at entry. Indirect jumps are taken for the switch tables they usually are.
pub fn exit_sites(code: &[u8], entry: u64) -> Vec<u64> {
    let end = entry + code.len() as u64;
    let mut decoder = Decoder::with_ip(64, code, entry, DecoderOptions::NONE);
    let mut out = Vec::new();
    for instr in &mut decoder {
        if instr.is_invalid() {
            continue;
        }
        match instr.flow_control() {
            FlowControl::Return => out.push(instr.ip()),
            FlowControl::UnconditionalBranch => {
                let target = instr.near_branch_target();
                if target < entry || target >= end {
                    out.push(instr.ip());
                }
            }
            _ => {}
        }
    }
    out
}

/// Where a probe sees a call that returned to `code` (at `ret_addr`) done without a single step: the first
/// instruction from there on that the kernel emulates, if those before it only run on and leave the stack
/// pointer alone (there it is one slot above where it was at the call's entry) and, with `results`, the
/// callee's result registers RAX and RBX too (an exit reads them).
pub fn returned_site(code: &[u8], ret_addr: u64, results: bool) -> Option<u64> {
    let keeps = |info: &InstructionInfo| {
        info.used_registers().iter().all(|r| {
            let kept = match r.register().full_register() {
                Register::RSP => true,
                Register::RAX | Register::RBX => results,
                _ => false,
            };
            !kept || matches!(r.access(), OpAccess::Read | OpAccess::CondRead)
        })
    };
    prologue::first_emulated(code, MAX_AFTER_RETURN, keeps).map(|at| ret_addr + at as u64)
}

/// Whether `code` is only an epilogue: the frame released (`add rsp,N; pop rbp`) and a return.
fn returns_at_once(code: &[u8]) -> bool {
    for instr in Decoder::new(64, code, DecoderOptions::NONE).into_iter().take(3) {
        match (instr.mnemonic(), instr.op0_register()) {
            (Mnemonic::Ret, _) => return true,
            (Mnemonic::Add, Register::RSP) | (Mnemonic::Pop, Register::RBP) => {}
            _ => return false,
        }
    }
    false
}

/// Instructions looked past at most after a return, to the first one the kernel emulates.
const MAX_AFTER_RETURN: usize = 8;

/// Where an entry probe can sit past a Go function's stack check (`cmp rsp,16(r14)`, or for a big frame
/// `lea -N(rsp),r12; cmp r12,16(r14)`, or for a huge one `mov rsp,r12; sub N,r12; jb`) on the branch that
/// follows, which the kernel emulates rather than single-steps (`single_stepped`): the argument registers and
/// the stack pointer are as at entry there. Returns the offset from the function's start, 0 when the code
/// does not begin that way.
pub fn past_stack_check(code: &[u8], single_stepped: impl Fn(&[u8]) -> bool) -> usize {
    let mut decoder = Decoder::new(64, code, DecoderOptions::NONE);
    let mut at = 0usize;
    for _ in 0..3 {
        if !single_stepped(&code[at..]) {
            return at;
        }
        let instr = decoder.decode();
        let flags_only = instr.mnemonic() == Mnemonic::Cmp;
        // R12 and R13 are scratch registers in Go's register ABI: no argument is in them.
        let scratch = matches!(instr.mnemonic(), Mnemonic::Lea | Mnemonic::Mov | Mnemonic::Sub)
            && matches!(instr.op0_register(), Register::R12 | Register::R13);
        if instr.is_invalid() || !(flags_only || scratch) {
            return 0;
        }
        at += instr.len();
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pclntab of the Go 1.20+ layout holding the given (entry offset, name) functions, ending at `end`.
    fn table(funcs: &[(u32, &str)], end: u32) -> Vec<u8> {
        let nfunc = funcs.len();
        let names_at = 72usize;
        let mut names = Vec::new();
        let mut name_offs = Vec::new();
        for (_, n) in funcs {
            name_offs.push(names.len() as u32);
            names.extend_from_slice(n.as_bytes());
            names.push(0);
        }
        let ftab_at = names_at + names.len();
        let records_at = (nfunc + 1) * 8;
        let mut t = Vec::new();
        t.extend_from_slice(&MAGIC_GO120.to_le_bytes());
        t.extend_from_slice(&[0, 0, 1, 8]);
        t.extend_from_slice(&(nfunc as u64).to_le_bytes());
        t.extend_from_slice(&0u64.to_le_bytes());
        t.extend_from_slice(&0x401000u64.to_le_bytes());
        t.extend_from_slice(&(names_at as u64).to_le_bytes());
        t.extend_from_slice(&[0; 24]);
        t.extend_from_slice(&(ftab_at as u64).to_le_bytes());
        t.extend_from_slice(&names);
        for (i, (entry, _)) in funcs.iter().enumerate() {
            t.extend_from_slice(&entry.to_le_bytes());
            t.extend_from_slice(&((records_at + i * 8) as u32).to_le_bytes());
        }
        t.extend_from_slice(&end.to_le_bytes());
        t.extend_from_slice(&[0; 4]);
        for (i, (entry, _)) in funcs.iter().enumerate() {
            t.extend_from_slice(&entry.to_le_bytes());
            t.extend_from_slice(&name_offs[i].to_le_bytes());
        }
        t
    }

    #[test]
    fn pclntab_functions_with_names_and_ranges() {
        let t = table(&[(0, "main.main"), (0x40, "crypto/tls.(*Conn).serverHandshake")], 0x100);
        let funcs = parse_pclntab(&t, 0).unwrap();
        assert_eq!(
            funcs,
            vec![
                GoFunc {
                    name: "main.main".into(),
                    entry: 0x401000,
                    end: 0x401040
                },
                GoFunc {
                    name: "crypto/tls.(*Conn).serverHandshake".into(),
                    entry: 0x401040,
                    end: 0x401100
                },
            ]
        );
    }

    #[test]
    fn malformed_pclntab_is_an_error_never_a_panic() {
        let t = table(&[(0, "main.main"), (0x40, "main.f")], 0x100);
        // Every truncation, and every byte of the header and table corrupted in turn.
        for len in 0..t.len() {
            let _ = parse_pclntab(&t[..len], 0);
        }
        for i in 0..t.len() {
            for v in [0x00, 0x7f, 0xff] {
                let mut bad = t.clone();
                bad[i] = v;
                let _ = parse_pclntab(&bad, 0);
            }
        }
        let mut huge = t.clone();
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(parse_pclntab(&huge, 0), Err(GoError::Truncated("function count")));
        assert_eq!(
            parse_pclntab(&[0xfb, 0xff, 0xff, 0xff, 0, 0, 1, 8], 0),
            Err(GoError::UnsupportedTable(0xffff_fffb))
        );
    }

    #[test]
    fn buildinfo_version_inline_layout() {
        let mut b = BUILDINFO_MAGIC.to_vec();
        b.extend_from_slice(&[8, 2]);
        b.resize(32, 0);
        b.push(9);
        b.extend_from_slice(b"go1.21.13");
        assert_eq!(buildinfo_version(&b).as_deref(), Some("go1.21.13"));
        b[15] = 0;
        assert_eq!(buildinfo_version(&b), None);
        assert_eq!(buildinfo_version(&b[..20]), None);
    }

    #[test]
    fn entry_probes_sit_past_the_stack_check() {
        let stepped = |c: &[u8]| !matches!(c, [0x76, ..] | [0x0f, 0x86, ..] | [0x55, ..]);
        // cmp rsp,[r14+0x10]; jbe
        assert_eq!(past_stack_check(&[0x49, 0x3b, 0x66, 0x10, 0x76, 0x30], stepped), 4);
        // lea r12,[rsp-0x208]; cmp r12,[r14+0x10]; jbe rel32
        let big = [
            0x4c, 0x8d, 0xa4, 0x24, 0xf8, 0xfd, 0xff, 0xff, 0x4d, 0x3b, 0x66, 0x10, 0x0f, 0x86, 0, 0, 0, 0,
        ];
        assert_eq!(past_stack_check(&big, stepped), 12);
        // push rbp first: emulated where it is.
        assert_eq!(past_stack_check(&[0x55, 0x48], stepped), 0);
        // mov rax,rbx then anything: stays at the start.
        assert_eq!(past_stack_check(&[0x48, 0x89, 0xd8, 0x76, 0x30], stepped), 0);
        assert_eq!(past_stack_check(&[0x49, 0x3b], stepped), 0);
    }

    #[test]
    fn exits_are_returns_and_jumps_out() {
        // cmp rsp,[r14+0x10]; jbe +N (to the morestack call below); ret; jmp rel32 out (tail call);
        // call morestack; jmp back to the entry.
        let code = [
            0x49, 0x3b, 0x66, 0x10, // cmp rsp,[r14+0x10]
            0x76, 0x06, // jbe +6
            0xc3, // ret
            0xe9, 0x00, 0x10, 0x00, 0x00, // jmp far away
            0xe8, 0x00, 0x00, 0x00, 0x00, // call
            0xeb, 0xed, // jmp to entry
        ];
        assert_eq!(exit_sites(&code, 0x1000), vec![0x1006, 0x1007]);
    }

    use crate::record::discovery::prologue::stepped as kernel_steps;

    #[test]
    fn a_huge_frames_stack_check_is_passed_too() {
        // Go 1.26's mlkem.kemKeyGen: mov r12,rsp; sub r12,0x30f0; jb rel32; cmp r12,[r14+0x10]; jbe rel32.
        let code = [
            0x49, 0x89, 0xe4, 0x49, 0x81, 0xec, 0xf0, 0x30, 0, 0, 0x0f, 0x82, 0x4a, 0x0b, 0, 0, 0x4d, 0x3b, 0x66, 0x10,
        ];
        assert_eq!(past_stack_check(&code, kernel_steps), 10);
        // The stack pointer itself moved first: stays at the start.
        assert_eq!(
            past_stack_check(&[0x48, 0x83, 0xec, 0x18, 0x0f, 0x82, 0, 0, 0, 0], kernel_steps),
            0
        );
    }

    #[test]
    fn a_call_is_seen_returned_on_the_first_emulated_instruction_after_it() {
        // Go 1.26, after calling checkForResumption: nopl 0(rax,rax,1); test rax,rax; jne rel32.
        let after = [
            0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, 0x48, 0x85, 0xc0, 0x0f, 0x85, 0xca, 0, 0, 0,
        ];
        assert_eq!(returned_site(&after, 0x5000, false), Some(0x500b));
        // After tls13.extract: results stored, a pointer loaded, then call runtime.newobject.
        let after = [
            0x48, 0x89, 0x5c, 0x24, 0x50, 0x48, 0x89, 0x4c, 0x24, 0x48, 0x48, 0x89, 0x44, 0x24, 0x58, 0x48, 0x8d, 0x05,
            0xba, 0x7c, 0x05, 0x00, 0xe8, 0xb5, 0x5c, 0xd5, 0xff,
        ];
        assert_eq!(returned_site(&after, 0x5000, false), Some(0x5016));
        // Emulated at once: push rbx.
        assert_eq!(returned_site(&[0x53], 0x5000, false), Some(0x5000));
        // Where the callee's results are read, past nothing that writes them: the lea above writes RAX.
        assert_eq!(returned_site(&after, 0x5000, true), None);
        assert_eq!(returned_site(&after[..10], 0x5000, true), None);
        let stored = [0x48, 0x89, 0x5c, 0x24, 0x50, 0x48, 0x89, 0x44, 0x24, 0x58, 0x53];
        assert_eq!(returned_site(&stored, 0x5000, true), Some(0x500a));
    }

    #[test]
    fn a_reported_caller_is_probed_where_it_resumes_or_where_its_own_caller_does() {
        let pad = |mut v: Vec<u8>| {
            v.resize(0x20, 0xcc);
            v
        };
        let funcs = [
            // call rcx; test rax,rax; jne +0: resumes at the jne.
            ("main.outer", pad(vec![0xff, 0xd1, 0x48, 0x85, 0xc0, 0x75, 0x00])),
            // call rdx; add rsp,0x58; pop rbp; ret: returns at once (`return signer.Sign(...)`).
            (
                "main.wrapper",
                pad(vec![0xff, 0xd2, 0x48, 0x83, 0xc4, 0x58, 0x5d, 0xc3]),
            ),
            // call rcx; lea rax,[rip]; jne +0: the result is gone before anything emulated.
            (
                "main.clobber",
                pad(vec![0xff, 0xd1, 0x48, 0x8d, 0x05, 0, 0, 0, 0, 0x75, 0x00]),
            ),
            // nop; nop; ret: no call ends at 0x1061.
            ("main.nocall", pad(vec![0x90, 0x90, 0xc3])),
        ];
        let (bin, file) = executable(&funcs, &[]);
        // File offsets are the addresses less 0x1000.
        assert_eq!(bin.resumed_site(&file, 0x2, None), Some(0x5));
        assert_eq!(bin.resumed_site(&file, 0x22, Some(0x2)), Some(0x5));
        assert_eq!(bin.resumed_site(&file, 0x22, None), None);
        // One caller that returns at once is looked past, not two.
        assert_eq!(bin.resumed_site(&file, 0x22, Some(0x22)), None);
        assert_eq!(bin.resumed_site(&file, 0x42, None), None);
        assert_eq!(bin.resumed_site(&file, 0x61, None), None);
        assert_eq!(bin.resumed_site(&file, 0x5000, None), None);
    }

    #[test]
    fn no_return_site_past_a_stack_move_a_return_or_too_far() {
        // The caller's epilogue: add rsp,0x30; pop rbp; ret.
        assert_eq!(
            returned_site(&[0x48, 0x83, 0xc4, 0x30, 0x5d, 0xc3], 0x5000, false),
            None
        );
        assert_eq!(returned_site(&[0xc3], 0x5000, false), None);
        // An indirect jump, then nothing decodable, then nothing at all.
        assert_eq!(returned_site(&[0xff, 0xe0, 0x53], 0x5000, false), None);
        assert_eq!(returned_site(&[0x0f, 0xff], 0x5000, false), None);
        assert_eq!(returned_site(&[], 0x5000, false), None);
        // More plain instructions than are looked past (mov rax,rbx).
        let movs: Vec<u8> = [0x48, 0x89, 0xd8]
            .repeat(MAX_AFTER_RETURN + 1)
            .into_iter()
            .chain([0x53])
            .collect();
        assert_eq!(returned_site(&movs, 0x5000, false), None);
    }

    #[test]
    fn an_abi_wrapper_is_told_by_its_jump_out() {
        // runtime.goexit1's ABI0 wrapper: xorps xmm15,xmm15; mov r14,fs:[-8]; jmp rel32 (back 0x35192).
        let code = [
            0x45, 0x0f, 0x57, 0xff, 0x64, 0x4c, 0x8b, 0x34, 0x25, 0xf8, 0xff, 0xff, 0xff, 0xe9, 0x0e, 0xae, 0xfc, 0xff,
        ];
        assert_eq!(wrapper_target(&code, 0x48ca60), Some(0x457880));
        // A function that calls first, or jumps within itself, is no wrapper.
        assert_eq!(wrapper_target(&[0xe8, 0, 0, 0, 0, 0xe9, 0, 0x10, 0, 0], 0x1000), None);
        assert_eq!(wrapper_target(&[0xeb, 0xfe], 0x1000), None);
    }

    /// A non-PIE executable laid out as one segment from file offset 0 at 0x1000, whose functions are
    /// `funcs` (name, code), one after the other from 0x1000, and whose data (at file offset 0x800) is `data`.
    fn executable(funcs: &[(&str, Vec<u8>)], data: &[u8]) -> (GoBinary, Vec<u8>) {
        let mut file = vec![0xcc; 0x800];
        let mut functions = Vec::new();
        let mut at = 0usize;
        for (name, code) in funcs {
            file[at..at + code.len()].copy_from_slice(code);
            functions.push(GoFunc {
                name: name.to_string(),
                entry: 0x1000 + at as u64,
                end: 0x1000 + (at + code.len()) as u64,
            });
            at += code.len();
        }
        file.extend_from_slice(data);
        let bin = GoBinary {
            version: None,
            functions,
            segments: vec![(0x1000, 0, file.len() as u64)],
            text_start: 0x1000,
            data_sections: vec![(0x800, data.len() as u64)],
            position_independent: false,
        };
        (bin, file)
    }

    /// call rel32 from `at` to `target`.
    fn call(at: u64, target: u64) -> Vec<u8> {
        let rel = (target as i64 - (at as i64 + 5)) as i32;
        [&[0xe8][..], &rel.to_le_bytes()].concat()
    }

    #[test]
    fn direct_calls_are_found_unless_the_function_is_reached_otherwise() {
        // Functions of 0x20 bytes each from 0x1000: caller, t (called twice), u (called; its address in data),
        // v (called; jumped into by the caller too), w (called; its address taken by a lea).
        let pad = |mut v: Vec<u8>| {
            v.resize(0x20, 0xcc);
            v
        };
        let (t, u, v, w) = (0x1020, 0x1040, 0x1060, 0x1080);
        let mut caller = Vec::new();
        for target in [t, t, u, v, w] {
            caller.extend(call(0x1000 + caller.len() as u64, target));
        }
        // jmp rel8 into v: from 0x1019, +0x45.
        caller.extend([0xeb, 0x45]);
        caller.resize(0x20, 0xcc);
        // lea rax,[rip+disp] at 0x10a0 naming w.
        let lea_at = 0x10a0u64;
        let disp = (w as i64 - (lea_at as i64 + 7)) as i32;
        let referrer = pad([&[0x48, 0x8d, 0x05][..], &disp.to_le_bytes(), &[0xc3]].concat());
        let ret = || pad(vec![0xc3]);
        let funcs = [
            ("main.caller", caller),
            ("t", ret()),
            ("u", ret()),
            ("v", ret()),
            ("w", ret()),
            ("main.referrer", referrer),
        ];
        let (bin, file) = executable(&funcs, &u.to_le_bytes());
        let calls = bin.direct_calls(&file, &[t, u, v, w]);
        assert_eq!(calls.keys().copied().collect::<Vec<_>>(), vec![t]);
        assert_eq!(calls[&t], vec![0x1005, 0x100a]);
        // A method named by its offset in the code (a method table) is left out too.
        let (bin, file) = executable(&funcs, &((t - 0x1000) as u32).to_le_bytes());
        assert!(bin.direct_calls(&file, &[t]).is_empty());
        // So is everything of a position-independent executable.
        let (mut bin, file) = executable(&funcs, &[]);
        bin.position_independent = true;
        assert!(bin.direct_calls(&file, &[t]).is_empty());
        // The code after a call, to the end of its caller.
        let (bin, file) = executable(&funcs, &[]);
        assert_eq!(bin.code_after_call(&file, 0x1005).map(<[u8]>::len), Some(0x1b));
        assert_eq!(bin.code_after_call(&file, 0x1020).map(<[u8]>::len), Some(0));
    }
}
