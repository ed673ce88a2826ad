// SPDX-License-Identifier: Apache-2.0
//! Turning sampled user addresses into function names with blazesym, through the target's mappings.

use std::collections::HashMap;
use std::path::PathBuf;

use blazesym::symbolize::{source::Elf, source::Source, Input, Symbolizer};

use crate::targets::{self, Mapping, Process};

pub struct LeafSymbolizer {
    maps: HashMap<u32, Vec<Mapping>>,
    symbolizer: Symbolizer,
    cache: HashMap<(u32, u64), String>,
}

impl LeafSymbolizer {
    /// Uses each target's current mappings when it is still running, else those seen at attach time.
    pub fn new(attach_maps: &HashMap<u32, Vec<Mapping>>) -> Self {
        let maps = attach_maps
            .iter()
            .map(|(&pid, old)| {
                let fresh = Process::from_pid(pid).and_then(|p| p.maps().ok());
                (pid, fresh.unwrap_or_else(|| old.clone()))
            })
            .collect();
        LeafSymbolizer {
            maps,
            symbolizer: Symbolizer::new(),
            cache: HashMap::new(),
        }
    }

    /// A function name; `file+0xOFFSET` when the file has no symbol there (never a neighbour's name);
    /// `[anon]` for code outside any file (JIT).
    pub fn leaf(&mut self, pid: u32, addr: u64) -> String {
        if let Some(name) = self.cache.get(&(pid, addr)) {
            return name.clone();
        }
        let name = self.resolve(pid, addr);
        self.cache.insert((pid, addr), name.clone());
        name
    }

    fn resolve(&self, pid: u32, addr: u64) -> String {
        if addr == 0 {
            return "[unknown]".into();
        }
        let Some(m) = self
            .maps
            .get(&pid)
            .and_then(|maps| targets::mapping_for(maps, addr))
        else {
            return "[anon]".into();
        };
        let file_offset = addr - m.start + m.offset;
        let live_path = m.open_path(pid);
        let path: PathBuf = if live_path.exists() {
            live_path
        } else {
            m.display_path().into()
        };
        let src = Source::Elf(Elf::new(path));
        let found = self
            .symbolizer
            .symbolize_single(&src, Input::FileOffset(file_offset))
            .ok()
            .and_then(|s| s.into_sym().map(|sym| sym.name.into_owned()));
        found.unwrap_or_else(|| {
            let base = m.display_path().rsplit('/').next().unwrap_or("?");
            format!("{base}+{file_offset:#x}")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Symbolizes this test binary's own function through its live mappings.
    #[test]
    fn own_function_resolves_by_name_and_unmapped_is_anon() {
        let pid = std::process::id();
        let me = Process::from_pid(pid).unwrap();
        let maps = HashMap::from([(pid, me.maps().unwrap())]);
        let mut s = LeafSymbolizer::new(&maps);
        let addr = own_function_resolves_by_name_and_unmapped_is_anon as *const () as usize as u64;
        let name = s.leaf(pid, addr);
        assert!(
            name.contains("own_function_resolves_by_name_and_unmapped_is_anon"),
            "{name}"
        );
        assert_eq!(s.leaf(pid, 8), "[anon]");
        assert_eq!(s.leaf(pid, 0), "[unknown]");
    }
}
