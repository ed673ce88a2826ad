// SPDX-License-Identifier: Apache-2.0
//! Unwinding sampled user stacks in user space with framehop: DWARF CFI (.eh_frame, .debug_frame) for code in
//! files, frame pointers for code with no unwind information (JIT).

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};
use gimli::{BaseAddresses, EhFrame, EhFrameHdr, LittleEndian, UnwindSection};
use object::{Object, ObjectSection, ObjectSegment, ReadCache};

use super::plt;
use crate::record::discovery::targets::Mapping;
use crate::record::status;

/// Frames past this many are dropped (runaway frame-pointer chains).
const MAX_FRAMES: usize = 256;

/// Unwind sections of one file, shared by every process that maps it.
#[derive(Clone)]
struct UnwindSections {
    /// Virtual address of the segment that contains each file offset, as (file range, vaddr) pairs.
    segments: Vec<(Range<u64>, u64)>,
    eh_frame: Option<(Range<u64>, Arc<[u8]>)>,
    eh_frame_hdr: Option<(Range<u64>, Arc<[u8]>)>,
    debug_frame: Option<Arc<[u8]>>,
    plt: plt::StubSections,
}

/// The unwind sections of a mapped file, or why it cannot be read as an object file.
fn read_sections(path: &std::path::Path) -> Result<UnwindSections, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let cache = ReadCache::new(file);
    let obj = object::File::parse(&cache).map_err(|e| e.to_string())?;
    let section = |name: &str| {
        let s = obj.section_by_name(name)?;
        // A section header may claim any size: nothing larger than the file is read.
        if s.size() > len {
            return None;
        }
        let data: Arc<[u8]> = Arc::from(s.data().ok()?);
        Some((s.address()..s.address() + s.size(), data))
    };
    let segments = obj
        .segments()
        .map(|s| {
            let (offset, size) = s.file_range();
            (offset..offset + size, s.address())
        })
        .collect();
    Ok(UnwindSections {
        segments,
        eh_frame: section(".eh_frame"),
        eh_frame_hdr: section(".eh_frame_hdr"),
        debug_frame: section(".debug_frame").map(|(_, d)| d),
        plt: plt::stub_sections(&obj),
    })
}

impl UnwindSections {
    /// The address the file's virtual address 0 is mapped at in a process, from one of its mappings.
    fn load_bias(&self, m: &Mapping) -> Option<u64> {
        let (range, vaddr) = self.segments.iter().find(|(r, _)| r.contains(&m.offset))?;
        let svma = vaddr + (m.offset - range.start);
        m.start.checked_sub(svma)
    }

    /// The virtual address of a file offset.
    fn address(&self, file_offset: u64) -> Option<u64> {
        let (range, vaddr) = self.segments.iter().find(|(r, _)| r.contains(&file_offset))?;
        vaddr.checked_add(file_offset - range.start)
    }

    /// The file offset where the function containing `file_offset` starts, from the .eh_frame_hdr table.
    fn function_start(&self, file_offset: u64) -> Option<u64> {
        let addr = self.address(file_offset)?;
        let (hdr_range, hdr) = self.eh_frame_hdr.as_ref()?;
        let (eh_range, eh) = self.eh_frame.as_ref()?;
        let bases = BaseAddresses::default()
            .set_eh_frame_hdr(hdr_range.start)
            .set_eh_frame(eh_range.start);
        let fde = EhFrameHdr::new(hdr, LittleEndian)
            .parse(&bases, 8)
            .ok()?
            .table()?
            .fde_for_address(&EhFrame::new(eh, LittleEndian), &bases, addr, EhFrame::cie_from_offset)
            .ok()?;
        // The function's start lies in the same segment, at the same distance between address and offset.
        fde.initial_address().checked_add(file_offset)?.checked_sub(addr)
    }
}

/// The unwinder of one process, with a module per mapped file.
pub struct ProcessUnwinder {
    unwinder: UnwinderX86_64<Arc<[u8]>>,
    cache: CacheX86_64,
}

/// Result of unwinding one sample.
pub struct Unwound {
    /// Addresses to look up, innermost first (return addresses already moved back into the call).
    pub addrs: Vec<u64>,
    /// The unwinder reached the stack's root (false: it stopped early, the outer frames are missing).
    pub complete: bool,
}

/// Unwind sections per file (dev, inode), parsed once.
#[derive(Default)]
pub struct SectionCache {
    files: HashMap<(String, u64), Option<UnwindSections>>,
    /// Names of the GOT slots of files where a sample landed in a PLT stub, read then.
    plt_slots: HashMap<(String, u64), Option<HashMap<u64, String>>>,
}

impl SectionCache {
    /// Where the function that contains `file_offset` of a mapped file starts (a file offset): a name for
    /// code without a symbol that is the same wherever in the function a sample lands.
    pub fn function_start(&mut self, m: &Mapping, path: &std::path::Path, file_offset: u64) -> Option<u64> {
        self.files
            .entry((m.dev.clone(), m.inode))
            .or_insert_with(|| read_sections(path).ok())
            .as_ref()?
            .function_start(file_offset)
    }

    /// `function@plt` when `file_offset` of a mapped file is in a PLT stub bound to that function.
    pub fn plt_stub_name(&mut self, m: &Mapping, path: &std::path::Path, file_offset: u64) -> Option<String> {
        let key = (m.dev.clone(), m.inode);
        let sections = self
            .files
            .entry(key.clone())
            .or_insert_with(|| read_sections(path).ok())
            .as_ref()?;
        let addr = sections.address(file_offset)?;
        let stub = plt::stub_start(&sections.plt, addr)?;
        let code = plt::read_stub(path, file_offset.checked_sub(addr - stub)?)?;
        let slot = plt::slot_of(&code, stub)?;
        let names = self
            .plt_slots
            .entry(key)
            .or_insert_with(|| plt::slot_names(path))
            .as_ref()?;
        Some(format!("{}@plt", names.get(&slot)?))
    }
}

impl ProcessUnwinder {
    /// Builds the module list from the process's mappings; `open` gives a readable path for a mapping.
    pub fn new(
        maps: &[Mapping],
        open: impl Fn(&Mapping) -> std::path::PathBuf,
        sections: &mut SectionCache,
    ) -> ProcessUnwinder {
        let mut unwinder = UnwinderX86_64::new();
        let mut ranges: HashMap<(String, u64), (u64, u64, &Mapping, bool)> = HashMap::new();
        for m in maps {
            let key = (m.dev.clone(), m.inode);
            let e = ranges.entry(key).or_insert((m.start, m.end, m, false));
            e.0 = e.0.min(m.start);
            e.1 = e.1.max(m.end);
            if m.offset < e.2.offset {
                e.2 = m;
            }
            e.3 |= m.executable;
        }
        for (key, (start, end, first, executable)) in ranges {
            let Some(s) = sections
                .files
                .entry(key)
                .or_insert_with(|| match read_sections(&open(first)) {
                    Ok(s) => Some(s),
                    Err(why) => {
                        // Data files are mapped too; only code that cannot be unwound through is worth a word.
                        if executable {
                            status::warn_once(
                                &format!("{}:{}", first.dev, first.inode),
                                &format!(
                                    "cannot read unwind tables of {} ({why}): stacks through it end there",
                                    first.display_path()
                                ),
                            );
                        }
                        None
                    }
                })
                .clone()
            else {
                continue;
            };
            let Some(bias) = s.load_bias(first) else { continue };
            let info = ExplicitModuleSectionInfo {
                base_svma: 0,
                eh_frame_svma: s.eh_frame.as_ref().map(|(r, _)| r.clone()),
                eh_frame: s.eh_frame.map(|(_, d)| d),
                eh_frame_hdr_svma: s.eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
                eh_frame_hdr: s.eh_frame_hdr.map(|(_, d)| d),
                debug_frame: s.debug_frame,
                ..Default::default()
            };
            unwinder.add_module(Module::new(first.display_path().to_string(), start..end, bias, info));
        }
        ProcessUnwinder {
            unwinder,
            cache: CacheX86_64::new(),
        }
    }

    /// Unwinds from the sampled registers through `stack`, the bytes copied from `sp` upwards. `restored`
    /// gives (stack address, value) of return addresses that uretprobes replaced with their trampoline.
    pub fn unwind(&mut self, ip: u64, sp: u64, bp: u64, stack: &[u8], restored: &[(u64, u64)]) -> Unwound {
        let mut read_stack = |addr: u64| {
            if let Some(&(_, value)) = restored.iter().find(|(slot, _)| *slot == addr) {
                return Ok(value);
            }
            let off = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let bytes = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
        };
        let mut iter =
            self.unwinder
                .iter_frames(ip, UnwindRegsX86_64::new(ip, sp, bp), &mut self.cache, &mut read_stack);
        let mut addrs = Vec::new();
        loop {
            match iter.next() {
                Ok(Some(frame)) if addrs.len() < MAX_FRAMES => addrs.push(frame.address_for_lookup()),
                Ok(None) => return Unwound { addrs, complete: true },
                _ => return Unwound { addrs, complete: false },
            }
        }
    }
}

/// Frame-pointer stacks from the kernel: the first entry is the sampled IP, the rest are return addresses.
pub fn from_return_addresses(ips: &[u64]) -> Unwound {
    let addrs = ips
        .iter()
        .enumerate()
        .take_while(|(_, &a)| a != 0)
        .map(|(i, &a)| if i == 0 { a } else { a - 1 })
        .collect();
    Unwound { addrs, complete: true }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::discovery::targets::Process;

    /// Captures this thread's registers and stack at a known call depth.
    #[inline(never)]
    fn capture(buf: &mut Vec<u8>) -> (u64, u64, u64) {
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: reads three registers, touches no memory.
        unsafe {
            std::arch::asm!("lea {ip}, [rip]", "mov {sp}, rsp", "mov {bp}, rbp", ip = out(reg) ip, sp = out(reg) sp, bp = out(reg) bp);
        }
        // SAFETY: [sp, top of this thread's stack) is this thread's live stack.
        let stack = unsafe { std::slice::from_raw_parts(sp as *const u8, (stack_top() - sp).min(16384) as usize) };
        buf.extend_from_slice(stack);
        (ip, sp, bp)
    }

    fn stack_top() -> u64 {
        // SAFETY: pthread_getattr_np fills attr for the calling thread; it is destroyed after use.
        unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            assert_eq!(libc::pthread_getattr_np(libc::pthread_self(), &mut attr), 0);
            let (mut addr, mut size) = (std::ptr::null_mut(), 0);
            libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
            libc::pthread_attr_destroy(&mut attr);
            addr as u64 + size as u64
        }
    }

    #[inline(never)]
    fn recorded_caller(buf: &mut Vec<u8>) -> (u64, u64, u64) {
        let r = capture(buf);
        std::hint::black_box(r)
    }

    /// The names of a recorded sample's frames, innermost first. Not inlined, so that it is a frame of its own
    /// (frames are named from symbol tables, which have no inlined functions; a test function may be inlined).
    #[inline(never)]
    fn names_of_a_recorded_sample() -> Vec<String> {
        let mut stack = Vec::new();
        let (ip, sp, bp) = recorded_caller(&mut stack);
        let me = Process::from_pid(std::process::id()).unwrap();
        let maps = me.maps().unwrap();
        let mut cache = SectionCache::default();
        let mut unwinder = ProcessUnwinder::new(&maps, |m| m.display_path().into(), &mut cache);
        let unwound = unwinder.unwind(ip, sp, bp, &stack, &[]);
        let mut sym =
            crate::record::stacks::symbolize::FrameSymbolizer::new(&std::collections::HashMap::from([(me.pid, maps)]));
        let names: Vec<String> = unwound
            .addrs
            .iter()
            .map(|&a| sym.name(me.pid, a, &mut cache).to_string())
            .collect();
        std::hint::black_box(names)
    }

    #[test]
    fn unwinds_a_recorded_sample_of_this_process_through_its_callers() {
        let names = names_of_a_recorded_sample();
        let pos = |needle: &str| names.iter().position(|n| n.contains(needle));
        let (c, r, t) = (
            pos("capture"),
            pos("recorded_caller"),
            pos("names_of_a_recorded_sample"),
        );
        assert!(c.is_some() && r.is_some() && t.is_some(), "{names:#?}");
        assert!(c < r && r < t, "innermost first: {names:#?}");
    }

    /// libc's own calls to its exported functions go through PLT stubs; each is named `function@plt`.
    #[test]
    fn plt_stubs_of_this_process_are_named_by_the_function_they_reach() {
        let me = Process::from_pid(std::process::id()).unwrap();
        let maps = me.maps().unwrap();
        let libc = maps
            .iter()
            .find(|m| m.executable && m.display_path().contains("/libc.so"))
            .unwrap();
        let data = std::fs::read(libc.display_path()).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let plt = obj.section_by_name(".plt").unwrap();
        let (plt_offset, plt_size) = plt.file_range().unwrap();
        let mut cache = SectionCache::default();
        let mut sym = crate::record::stacks::symbolize::FrameSymbolizer::new(&std::collections::HashMap::from([(
            me.pid,
            maps.clone(),
        )]));
        // Every byte of a stub has its name; PLT0 (the first 16 bytes: 4 of these addresses) binds lazily and
        // has none.
        let names: Vec<String> = (plt_offset..plt_offset + plt_size)
            .step_by(5)
            .map(|offset| libc.start + offset - libc.offset)
            .map(|addr| sym.name(me.pid, addr, &mut cache).to_string())
            .collect();
        let stubs: Vec<&String> = names.iter().filter(|n| n.ends_with("@plt")).collect();
        assert!(!names[0].ends_with("@plt"), "{names:?}");
        assert!(
            stubs.len() as f64 >= 0.9 * (names.len() - 4) as f64,
            "{} of {} named as stubs: {names:?}",
            stubs.len(),
            names.len()
        );
    }

    #[test]
    fn truncated_stack_is_reported_incomplete() {
        let mut stack = Vec::new();
        let (ip, sp, bp) = recorded_caller(&mut stack);
        stack.truncate(64);
        let me = Process::from_pid(std::process::id()).unwrap();
        let maps = me.maps().unwrap();
        let mut unwinder = ProcessUnwinder::new(&maps, |m| m.display_path().into(), &mut SectionCache::default());
        let unwound = unwinder.unwind(ip, sp, bp, &stack, &[]);
        assert!(!unwound.complete);
        assert!(!unwound.addrs.is_empty());
    }

    #[test]
    fn function_start_is_found_from_inside_the_function() {
        let me = Process::from_pid(std::process::id()).unwrap();
        let maps = me.maps().unwrap();
        let start = recorded_caller as *const () as usize as u64;
        let m = crate::record::discovery::targets::mapping_for(&maps, start).unwrap();
        let offset = m.file_offset(start);
        let path = std::path::PathBuf::from(m.display_path());
        let mut cache = SectionCache::default();
        assert_eq!(cache.function_start(m, &path, offset + 7), Some(offset));
        assert_eq!(cache.function_start(m, &path, offset), Some(offset));
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzz_config(4))]

        /// A target controls its stack's bytes and registers: unwinding any of them ends, within MAX_FRAMES.
        #[test]
        fn fuzz_unwinding_hostile_stacks(
            ip_pick in 0usize..4, ip in proptest::prelude::any::<u64>(),
            sp in proptest::prelude::any::<u64>(), bp_off in 0u64..4096,
            stack in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..4096),
            restored in proptest::collection::vec(proptest::prelude::any::<(u64, u64)>(), 0..4),
        ) {
            let me = Process::from_pid(std::process::id()).unwrap();
            let maps = me.maps().unwrap();
            let code: Vec<&Mapping> = maps.iter().filter(|m| m.executable).collect();
            // An address inside this process's code half the time, anywhere otherwise.
            let ip = match code.get(ip_pick) {
                Some(m) if ip_pick % 2 == 0 => m.start + ip % (m.end - m.start),
                _ => ip,
            };
            let mut unwinder = ProcessUnwinder::new(&maps, |m| m.display_path().into(), &mut SectionCache::default());
            let u = unwinder.unwind(ip, sp, sp.wrapping_add(bp_off), &stack, &restored);
            proptest::prop_assert!(u.addrs.len() <= MAX_FRAMES);
            let ips: Vec<u64> = stack.chunks_exact(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect();
            from_return_addresses(&ips);
        }

        /// Any bytes under a mapped file's name: its unwind tables are read or refused, never a panic.
        #[test]
        fn fuzz_unwind_tables_of_damaged_files(
            edits in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()), 1..64),
            keep in proptest::prelude::any::<proptest::sample::Index>(),
            offset in proptest::prelude::any::<u64>(),
        ) {
            let path = crate::record::discovery::objects::tests::damaged_copy("unwind", std::path::Path::new("/bin/true"), &edits, keep);
            if let Ok(s) = read_sections(&path) {
                s.function_start(offset % 65536);
            }
            std::fs::remove_file(&path).unwrap();
        }
    }

    #[test]
    fn return_addresses_are_moved_into_the_call() {
        let u = from_return_addresses(&[0x1000, 0x2005, 0x3009, 0, 0]);
        assert_eq!(u.addrs, vec![0x1000, 0x2004, 0x3008]);
    }
}
