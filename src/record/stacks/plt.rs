// SPDX-License-Identifier: Apache-2.0
//! Names for PLT stubs (`memset@plt`, as objdump and perf print them). Symbol tables do not list the stubs; each
//! one jumps through a GOT slot, and the slot's dynamic relocation names the function it reaches.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;

use iced_x86::{Decoder, DecoderOptions, FlowControl};
use object::elf::R_X86_64_IRELATIVE;
use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, ReadCache, RelocationFlags, RelocationTarget};

/// The longest x86-64 PLT stub: endbr64, then a jump through its slot (bnd-prefixed with IBT).
const STUB_BYTES: usize = 16;

/// A file's PLT sections: (address range, size of one stub).
pub type StubSections = Vec<(Range<u64>, u64)>;

/// The PLT sections of a parsed file. Stub sizes are the x86-64 ABI's: 16 bytes in .plt and .plt.sec; 8 in
/// .plt.got, or 16 when the file is built for IBT (it then has .plt.sec).
pub fn stub_sections<'data, R: object::ReadRef<'data>>(obj: &object::File<'data, R>) -> StubSections {
    let ibt = obj.section_by_name(".plt.sec").is_some();
    [(".plt", 16), (".plt.sec", 16), (".plt.got", if ibt { 16 } else { 8 })]
        .into_iter()
        .filter_map(|(name, stub)| {
            let s = obj.section_by_name(name)?;
            Some((s.address()..s.address().saturating_add(s.size()), stub))
        })
        .collect()
}

/// The start of the stub that holds virtual address `addr`, if a PLT section holds it.
pub fn stub_start(sections: &StubSections, addr: u64) -> Option<u64> {
    let (range, stub) = sections.iter().find(|(r, _)| r.contains(&addr))?;
    Some(range.start + (addr - range.start) / stub * stub)
}

/// The GOT slot a stub jumps through, from its first bytes (`ip`: the stub's address). PLT0 and the lazy
/// stubs of an IBT .plt jump elsewhere and give None.
pub fn slot_of(code: &[u8], ip: u64) -> Option<u64> {
    Decoder::with_ip(64, code, ip, DecoderOptions::NONE)
        .into_iter()
        .take(3)
        .find(|i| i.flow_control() == FlowControl::IndirectBranch && i.is_ip_rel_memory_operand())
        .map(|i| i.ip_rel_memory_address())
}

/// A stub's first bytes, read from the file at its file offset.
pub fn read_stub(path: &Path, file_offset: u64) -> Option<Vec<u8>> {
    let mut code = vec![0; STUB_BYTES];
    let n = File::open(path).ok()?.read_at(&mut code, file_offset).ok()?;
    code.truncate(n);
    Some(code)
}

/// The function each GOT slot of a file is bound to, by the slot's address, from its dynamic relocations: the
/// symbol a relocation names, or for an IFUNC's slot (an IRELATIVE relocation: libc's memcpy, strlen and the
/// like) the symbol of its resolver.
pub fn slot_names(path: &Path) -> Option<HashMap<u64, String>> {
    let cache = ReadCache::new(File::open(path).ok()?);
    let obj = object::File::parse(&cache).ok()?;
    let symbols = obj.dynamic_symbol_table()?;
    let mut slots = HashMap::new();
    let mut by_resolver: HashMap<u64, Vec<u64>> = HashMap::new();
    for (slot, reloc) in obj.dynamic_relocations()? {
        match reloc.target() {
            RelocationTarget::Symbol(index) => {
                if let Some(name) = symbols.symbol_by_index(index).ok().and_then(|s| s.name().ok()) {
                    if !name.is_empty() {
                        slots.insert(slot, name.to_string());
                    }
                }
            }
            _ if reloc.flags()
                == (RelocationFlags::Elf {
                    r_type: R_X86_64_IRELATIVE,
                }) =>
            {
                by_resolver.entry(reloc.addend() as u64).or_default().push(slot);
            }
            _ => {}
        }
    }
    if !by_resolver.is_empty() {
        // Aliases share a resolver (strrchr and rindex): the shortest name, the same one every time.
        let mut resolvers: HashMap<u64, &str> = HashMap::new();
        for symbol in symbols.symbols() {
            let (Ok(name), true) = (symbol.name(), by_resolver.contains_key(&symbol.address())) else {
                continue;
            };
            let best = resolvers.entry(symbol.address()).or_insert(name);
            if (name.len(), name) < (best.len(), *best) {
                *best = name;
            }
        }
        for (resolver, name) in resolvers {
            for slot in &by_resolver[&resolver] {
                slots.insert(*slot, name.to_string());
            }
        }
    }
    Some(slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stubs_are_found_by_address_and_decoded_to_their_slot() {
        let sections = vec![(0x1000..0x1040, 16), (0x2000..0x2010, 8)];
        assert_eq!(stub_start(&sections, 0x1000), Some(0x1000));
        assert_eq!(stub_start(&sections, 0x101f), Some(0x1010));
        assert_eq!(stub_start(&sections, 0x200c), Some(0x2008));
        assert_eq!(stub_start(&sections, 0x1040), None);
        // jmp *0x2fe2(%rip); push $0; jmp PLT0, at 0x401030 (objdump's exit@plt): slot 0x404018.
        let lazy = [
            0xff, 0x25, 0xe2, 0x2f, 0x00, 0x00, 0x68, 0, 0, 0, 0, 0xe9, 0xe0, 0xff, 0xff, 0xff,
        ];
        assert_eq!(slot_of(&lazy, 0x401030), Some(0x404018));
        // endbr64; bnd jmp *0x2fe2(%rip) (IBT's .plt.sec).
        let ibt = [
            0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0xe2, 0x2f, 0x00, 0x00, 0x0f, 0x1f, 0x44, 0, 0,
        ];
        assert_eq!(slot_of(&ibt, 0x1000), Some(0x1000 + 11 + 0x2fe2));
        // endbr64; push $0; bnd jmp PLT0 (IBT's lazy .plt): no slot.
        let ibt_lazy = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x68, 0, 0, 0, 0, 0xf2, 0xe9, 0xe1, 0xff, 0xff, 0xff, 0x90,
        ];
        assert_eq!(slot_of(&ibt_lazy, 0x1000), None);
        assert_eq!(slot_of(&[], 0x1000), None);
    }

    /// This test binary's own libc calls go through stubs whose slots name libc's functions.
    #[test]
    fn a_real_files_slots_name_the_functions_they_reach() {
        let exe = std::env::current_exe().unwrap();
        let libc = std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
            .map(std::path::PathBuf::from)
            .unwrap();
        let names = slot_names(&libc).unwrap();
        assert!(names.values().any(|n| n == "malloc" || n == "free"), "{names:?}");
        // The test binary itself links libc dynamically: some slot of it names a libc function.
        let names = slot_names(&exe).unwrap();
        assert!(
            names.values().any(|n| n == "malloc" || n == "write" || n == "free"),
            "{names:?}"
        );
    }
}
