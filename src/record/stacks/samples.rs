// SPDX-License-Identifier: Apache-2.0
//! CPU samples: each unwound as it arrives, identical stacks counted together, named every half minute.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use super::debuginfo::DebugFinder;
use super::jvm::{self, PerfMapRequests};
use super::stack_tree::{self, StackTree};
use super::symbolize::FrameSymbolizer;
use super::unwind::{self, ProcessUnwinder, SectionCache};
use crate::model::{Function, Sample, UnnamedFile};
use crate::record::discovery::targets::Mapping;
use crate::record::duty::traps::ProbeTraps;
use crate::record::kernel::bpf::types::{stack_sample, tlsprof_call_graph, trap_sample};

/// (pid, stage path, whole stack): a root of the named stacks' tree. Below it, frames are indexes into the
/// frame names, the user frames then the kernel ones: thousands of distinct stacks of a few hundred names.
type StackRoot = (u32, Vec<u16>, bool);

/// Kernel frames in the tree: their name index with this bit set.
const KERNEL_FRAME: u32 = 1 << 31;

/// Nodes of the named stacks' tree: 3 MB at most, far above what a busy server's recording uses
/// (BENCHMARKS.md, long recording).
const MAX_STACK_NODES: usize = 1 << 17;

/// Names the frames of a stack cut at the tree's limit.
const CUT_NAME: &str = "[stacks beyond tlsprof's limit]";

/// Each distinct frame name once, with its index.
#[derive(Default)]
struct FrameNames {
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

impl FrameNames {
    fn id(&mut self, name: String) -> u32 {
        if let Some(&id) = self.ids.get(&name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.clone());
        self.ids.insert(name, id);
        id
    }

    fn ids(&mut self, names: impl IntoIterator<Item = String>) -> Vec<u32> {
        names.into_iter().map(|n| self.id(n)).collect()
    }

    /// The names of a stack's user frames and kernel frames. A cut ends the stack: it goes with the frames
    /// it follows.
    fn split_kernel(&self, ids: &[u32]) -> (Vec<String>, Vec<String>) {
        let (mut user, mut kernel) = (Vec::new(), Vec::new());
        for &id in ids {
            if id == stack_tree::CUT {
                if kernel.is_empty() { &mut user } else { &mut kernel }.push(CUT_NAME.to_string());
            } else if id & KERNEL_FRAME != 0 {
                kernel.push(self.names[(id & !KERNEL_FRAME) as usize].clone());
            } else {
                user.push(self.names[id as usize].clone());
            }
        }
        (user, kernel)
    }
}

/// Marks the outer end of a stack whose root the unwinder did not reach.
const TRUNCATED: &str = "[truncated]";

/// Stands for frames lost between the trusted inner frames and a restarted unwind.
const GAP: u64 = u64::MAX;
/// Inner frames kept from an unwind that went wrong: the first ones, inside file-backed code.
const MAX_TRUSTED_INNER: usize = 3;

/// Size of a stack_sample before its variable-length stack bytes.
pub const HEADER_LEN: usize = std::mem::offset_of!(stack_sample, stack);
/// TLSPROF_MAX_STACK_BYTES in bpf/tlsprof.h: the size of the stack field, the last of a sample.
pub const MAX_STACK_BYTES: u32 = (std::mem::size_of::<stack_sample>() - HEADER_LEN) as u32;

#[derive(Clone, PartialEq, Eq, Hash)]
struct StackKey {
    pid: u32,
    path: Vec<u16>,
    /// User addresses, innermost first.
    user: Vec<u64>,
    /// Kernel addresses, innermost first.
    kernel: Vec<u64>,
    /// Per stage frame: index in `user` of the frame it returns to (found by its saved return address).
    callers: Vec<Option<u16>>,
    complete: bool,
}

/// Distinct address stacks are named and merged at least this often, and sooner once there are this many:
/// every sampled instruction address is new, so unmerged stacks would grow with the recording's length.
const NAME_EVERY: Duration = Duration::from_secs(30);
const NAME_AFTER: usize = 4_096;
/// Room for the distinct stacks of one poll beyond a batch: 64 CPUs sampling at the default 99 Hz for 0.1 s
/// take about 640.
const STACKS_PER_POLL: usize = 1_024;

pub struct SampleAggregator {
    call_graph: tlsprof_call_graph,
    maps: HashMap<u32, Vec<Mapping>>,
    unwinders: HashMap<u32, ProcessUnwinder>,
    sections: SectionCache,
    stacks: HashMap<StackKey, u64>,
    /// Stacks already named, merged by name.
    named: StackTree<StackRoot>,
    frame_names: FrameNames,
    symbolizer: Option<FrameSymbolizer>,
    /// Looks up debug information for the targets' stripped files until the symbolizer takes it.
    debug: Option<DebugFinder>,
    last_named: Instant,
    /// The header of the record being taken, reused: a stack_sample is 66 KiB.
    header: Box<stack_sample>,
    /// Samples whose stack copy was empty (the read faulted) or that arrived malformed.
    unreadable: u64,
    /// Kernel frames stay in the profile (--kernel); without, only those of samples in the probes' traps do.
    kernel_frames: bool,
    /// Tells the samples taken in the probes' traps and counts the trap sampler's; None when the kernel hides
    /// its symbols.
    pub traps: Option<ProbeTraps>,
    /// The JVMs asked for their perf maps before each batch of stacks is named; None when not to ask.
    jvms: Option<PerfMapRequests>,
}

/// The processes among `maps` that run HotSpot.
fn hotspot_pids(maps: &HashMap<u32, Vec<Mapping>>) -> Vec<u32> {
    maps.iter()
        .filter(|(_, m)| jvm::is_hotspot(m))
        .map(|(&pid, _)| pid)
        .collect()
}

impl SampleAggregator {
    /// `ask_jvms`: ask the HotSpot JVMs among the targets for names of their JIT-compiled code (jvm.rs).
    pub fn new(
        call_graph: tlsprof_call_graph,
        kernel_frames: bool,
        traps: Option<ProbeTraps>,
        maps: HashMap<u32, Vec<Mapping>>,
        ask_jvms: bool,
    ) -> Self {
        let mut debug = DebugFinder::start();
        for (&pid, maps) in &maps {
            ask_for_files(&mut debug, pid, maps);
        }
        let mut jvms = ask_jvms.then(PerfMapRequests::default);
        if let Some(j) = &mut jvms {
            j.refresh(&hotspot_pids(&maps));
        }
        SampleAggregator {
            jvms,
            debug: Some(debug),
            call_graph,
            maps,
            unwinders: HashMap::new(),
            sections: SectionCache::default(),
            // Sized once for a batch and the samples of a poll beyond it: a table that doubled the first time a
            // batch ran long would keep its larger size, a step up in memory late in a recording.
            stacks: HashMap::with_capacity(NAME_AFTER + STACKS_PER_POLL),
            named: StackTree::new(MAX_STACK_NODES),
            frame_names: FrameNames::default(),
            symbolizer: None,
            last_named: Instant::now(),
            header: Box::default(),
            unreadable: 0,
            kernel_frames,
            traps,
        }
    }

    /// A process that joined the recording: its mappings, to unwind and name its samples.
    pub fn add_process(&mut self, pid: u32, maps: Vec<Mapping>) {
        if let Some(d) = self.finder() {
            ask_for_files(d, pid, &maps);
        }
        if let Some(j) = self.jvms.as_mut().filter(|_| jvm::is_hotspot(&maps)) {
            j.refresh(&[pid]);
        }
        if let Some(sym) = &mut self.symbolizer {
            sym.add_process(pid, maps.clone());
        }
        self.maps.insert(pid, maps);
    }

    /// A process that started during the recording, or mapped more code since (a library it loaded): its
    /// stacks are unwound against all of it, with unwind tables read now, while its files can be opened (a
    /// short process may be gone before its samples are unwound).
    pub fn update_process(&mut self, pid: u32, maps: Vec<Mapping>) {
        self.unwinders.remove(&pid);
        self.add_process(pid, maps);
        if self.call_graph == tlsprof_call_graph::CALL_GRAPH_DWARF {
            let maps = &self.maps[&pid];
            let unwinder = ProcessUnwinder::new(maps, |m| m.open_path(pid), &mut self.sections);
            self.unwinders.insert(pid, unwinder);
        }
    }

    /// Forgets a process that exited, unless stacks of it still wait to be named. True when forgotten.
    pub fn forget(&mut self, pid: u32) -> bool {
        if self.stacks.keys().any(|k| k.pid == pid) {
            return false;
        }
        self.maps.remove(&pid);
        self.unwinders.remove(&pid);
        if let Some(sym) = &mut self.symbolizer {
            sym.forget(pid);
        }
        true
    }

    /// A process that ran a new program (exec): the stacks taken so far are named against the mappings of the
    /// program they ran in, then its samples are unwound and named against the new ones.
    pub fn replace_process(&mut self, pid: u32, maps: Vec<Mapping>, functions: &[Function]) {
        if let Some(old) = self.maps.get(&pid).cloned() {
            self.name_stacks_with(functions, Some((pid, old)));
        }
        self.unwinders.remove(&pid);
        self.add_process(pid, maps);
    }

    /// Takes one record of the trap sampler (a trap_sample).
    pub fn add_trap_sample(&mut self, data: &[u8]) {
        let mut t = trap_sample::default();
        if plain::copy_from_bytes(&mut t, data).is_err() {
            self.unreadable += 1;
            return;
        }
        if let Some(traps) = &mut self.traps {
            let frames = (t.frames as usize).min(t.kernel_ips.len());
            traps.trapped += u64::from(traps.is_trap(&t.kernel_ips[..frames]));
        }
    }

    /// Takes one ring-buffer record: the stack_sample header followed by `stack_len` stack bytes.
    pub fn add(&mut self, data: &[u8]) {
        if !crate::record::kernel::bpf::copy_head(&mut *self.header, data, HEADER_LEN) {
            self.unreadable += 1;
            return;
        }
        let s = &*self.header;
        let kernel = &s.kernel_ips[..usize::from(s.kernel_frames).min(s.kernel_ips.len())];
        let trapped = self.traps.as_ref().is_some_and(|t| t.is_trap(kernel));
        let kernel = if self.kernel_frames || trapped {
            kernel.to_vec()
        } else {
            Vec::new()
        };
        let stack = data.get(HEADER_LEN..HEADER_LEN + s.stack_len as usize).unwrap_or(&[]);
        let depth = usize::from(s.depth).min(s.funcs.len());
        let (user, complete) = if self.call_graph == tlsprof_call_graph::CALL_GRAPH_FP {
            let ips: Vec<u64> = stack
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
                .collect();
            let u = unwind::from_return_addresses(&ips);
            (u.addrs, u.complete)
        } else {
            if stack.is_empty() {
                self.unreadable += 1;
            }
            let Some(maps) = self.maps.get(&s.tgid) else { return };
            let sections = &mut self.sections;
            let unwinder = self
                .unwinders
                .entry(s.tgid)
                .or_insert_with(|| ProcessUnwinder::new(maps, |m| m.open_path(s.tgid), sections));
            let restored: Vec<(u64, u64)> = s.ret_slots[..depth]
                .iter()
                .copied()
                .zip(s.ret_addrs[..depth].iter().copied())
                .collect();
            let u = unwinder.unwind(s.ip, s.sp, s.bp, stack, &restored);
            if depth == 0
                || caller_positions(&u.addrs, &s.ret_slots[..depth], &s.ret_addrs[..depth])
                    .iter()
                    .all(Option::is_some)
            {
                (u.addrs, u.complete)
            } else {
                // Unwinding went wrong inside the stage (assembly without correct unwind tables): restart it
                // from the innermost stage's entry registers, and keep the inner frames that can be trusted.
                let i = depth - 1;
                let outer = unwinder.unwind(
                    s.entry_ips[i],
                    s.ret_slots[i],
                    s.entry_bps[i],
                    stack_from(stack, s.sp, s.ret_slots[i]),
                    &restored,
                );
                let mut addrs: Vec<u64> = u
                    .addrs
                    .iter()
                    .copied()
                    .take_while(|&a| maps_contain(maps, a))
                    .take(MAX_TRUSTED_INNER)
                    .collect();
                addrs.push(GAP);
                addrs.extend(outer.addrs);
                (addrs, outer.complete)
            }
        };
        let callers = caller_positions(&user, &s.ret_slots[..depth], &s.ret_addrs[..depth]);
        let key = StackKey {
            pid: s.tgid,
            path: s.funcs[..depth].to_vec(),
            user,
            kernel,
            callers,
            complete,
        };
        *self.stacks.entry(key).or_default() += 1;
    }

    /// The debug information finder, wherever it is now.
    fn finder(&mut self) -> Option<&mut DebugFinder> {
        match &mut self.symbolizer {
            Some(sym) => sym.debug.as_mut(),
            None => self.debug.as_mut(),
        }
    }

    /// Names and merges the stacks held so far when due: memory stays flat over long recordings. Not while
    /// debug information is still being looked up (for a bounded time): names would change from one batch
    /// to the next.
    pub fn name_when_due(&mut self, functions: &[Function]) {
        // Fresh JIT maps as the recording goes, not only when a batch is named: a JVM that exits before
        // the end leaves the last one it wrote, which names the code it compiled until then.
        if let Some(j) = self.jvms.as_mut().filter(|j| j.due()) {
            j.refresh(&hotspot_pids(&self.maps));
        }
        if self.finder().is_some_and(|d| d.busy()) {
            return;
        }
        if self.stacks.len() >= NAME_AFTER || (!self.stacks.is_empty() && self.last_named.elapsed() >= NAME_EVERY) {
            self.name_stacks(functions);
        }
    }

    fn name_stacks(&mut self, functions: &[Function]) {
        self.name_stacks_with(functions, None);
    }

    /// `before_exec`: a process's mappings to name its stacks against, whatever it maps now.
    fn name_stacks_with(&mut self, functions: &[Function], before_exec: Option<(u32, Vec<Mapping>)>) {
        self.last_named = Instant::now();
        // This batch is named with the JVMs' maps as they are; the next, with the fresher ones asked for now.
        if let Some(j) = &mut self.jvms {
            j.refresh(&hotspot_pids(&self.maps));
        }
        let debug = &mut self.debug;
        let sym = self.symbolizer.get_or_insert_with(|| {
            let mut sym = FrameSymbolizer::new(&self.maps);
            sym.debug = debug.take();
            sym
        });
        if let Some((pid, maps)) = before_exec {
            sym.add_process(pid, maps);
        }
        // Names of one batch's addresses only: new instruction addresses keep coming, so a cache kept across
        // batches would grow with the recording.
        sym.forget_addresses();
        for (k, count) in self.stacks.drain() {
            let counted = crate::catalogue::path_stages(k.path.iter().map(|&f| functions[usize::from(f)].stage));
            let stages: Vec<(&str, String)> = k
                .path
                .iter()
                .zip(counted)
                .map(|(&f, stage)| {
                    (
                        functions[usize::from(f)].name.as_str(),
                        stage.map_or(String::new(), |s| format!(" [{}]", s.name())),
                    )
                })
                .collect();
            let (frames, placed) = compose(&k, &stages, |a| sym.name(k.pid, a, &mut self.sections).to_string());
            let mut ids = self.frame_names.ids(frames);
            ids.extend(
                k.kernel
                    .iter()
                    .rev()
                    .map(|&a| self.frame_names.id(sym.kernel_name(a)) | KERNEL_FRAME),
            );
            self.named.add(&(k.pid, k.path, k.complete && placed), ids, count);
        }
    }

    /// Names every frame: the samples, heaviest first, and what could not be named or kept.
    pub fn finish(mut self, functions: &[Function]) -> NamedSamples {
        if let Some(d) = self.finder() {
            d.wait();
        }
        // The last batch with the JVMs' last maps: the code compiled until the end.
        if let Some(j) = &mut self.jvms {
            j.ask_now(&hotspot_pids(&self.maps));
        }
        self.take_named(functions)
    }

    /// The samples named so far, heaviest first, and what could not be named or kept since the last call;
    /// the aggregator starts again from none (continuous mode: each interval's samples on their own). The
    /// stacks of a batch whose debug information is still being looked up wait for the next call.
    pub fn take_named(&mut self, functions: &[Function]) -> NamedSamples {
        if !self.finder().is_some_and(|d| d.busy()) {
            self.name_stacks(functions);
        }
        // Frame ids only index the stacks' tree taken here.
        let names = std::mem::take(&mut self.frame_names);
        let mut samples: Vec<Sample> = self
            .named
            .stacks()
            .map(|((pid, path, complete), ids, count)| {
                let (frames, kernel) = names.split_kernel(&ids);
                Sample {
                    pid: *pid,
                    path: path.clone(),
                    frames,
                    kernel,
                    complete: *complete,
                    count,
                }
            })
            .collect();
        let cut = self.named.cut_samples;
        self.named.clear();
        samples.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| (a.pid, &a.frames).cmp(&(b.pid, &b.frames)))
        });
        let (unnamed_jit_pids, frame_files, unnamed_files, debug_files) = self
            .symbolizer
            .as_mut()
            .map(|s| {
                (
                    s.unnamed_jit.clone(),
                    // Refilled as each batch is named: kept, it would hold every name ever seen.
                    std::mem::take(&mut s.files).into_iter().collect(),
                    s.unnamed_files(),
                    s.debug_files.clone(),
                )
            })
            .unwrap_or_default();
        NamedSamples {
            samples,
            unnamed_jit_pids,
            frame_files,
            unnamed_files,
            debug_files,
            unreadable: std::mem::take(&mut self.unreadable),
            cut,
        }
    }
}

pub struct NamedSamples {
    pub samples: Vec<Sample>,
    /// Processes whose JIT code had no names.
    pub unnamed_jit_pids: Vec<u32>,
    /// The file each frame name was found in.
    pub frame_files: BTreeMap<String, String>,
    /// Files some frames had no name in, and why.
    pub unnamed_files: Vec<UnnamedFile>,
    /// Files named from separate debug information, and where it was found.
    pub debug_files: BTreeMap<String, String>,
    /// Samples whose stack copy was empty (the read faulted) or that arrived malformed.
    pub unreadable: u64,
    /// Samples whose stack was cut at the limit of the stacks' tree.
    pub cut: u64,
}

/// Asks for the debug information of each file a process runs code from.
fn ask_for_files(debug: &mut DebugFinder, pid: u32, maps: &[Mapping]) {
    for m in maps.iter().filter(|m| m.executable) {
        debug.ask(m.display_path(), m.open_path(pid));
    }
}

fn maps_contain(maps: &[Mapping], addr: u64) -> bool {
    crate::record::discovery::targets::mapping_for(maps, addr).is_some_and(|m| m.executable)
}

/// The part of the copied stack that starts at `from` (a higher address than `sp`).
fn stack_from(stack: &[u8], sp: u64, from: u64) -> &[u8] {
    let skip = from.saturating_sub(sp) as usize;
    stack.get(skip..).unwrap_or(&[])
}

/// Where each stage frame returns to in the unwound stack: the frame whose lookup address is the call
/// before its saved return address. Stages nest, so each is searched inside (innermost of) the previous.
/// A frame entered by a tail call shares its caller's return slot (and saw only the uretprobe trampoline
/// there): it returns to the same frame.
fn caller_positions(addrs: &[u64], slots: &[u64], ret_addrs: &[u64]) -> Vec<Option<u16>> {
    let mut limit = addrs.len();
    let mut out: Vec<Option<u16>> = Vec::with_capacity(ret_addrs.len());
    for (i, &ra) in ret_addrs.iter().enumerate() {
        if i > 0 && slots[i] == slots[i - 1] {
            out.push(out[i - 1]);
            continue;
        }
        let found = (ra != 0)
            .then(|| addrs[..limit].iter().rposition(|&a| a == ra - 1))
            .flatten();
        if let Some(j) = found {
            limit = j + 1;
        }
        out.push(found.and_then(|j| u16::try_from(j).ok()));
    }
    out
}

/// The sample's frames, outermost first, with each stage function tagged ` [stage]` where the probes say it
/// was: on the unwound frame just inside its caller, or inserted there when the call was a tail call that left
/// no frame. When unwinding did not reach a stage's caller, the stage frames stand in for the lost part,
/// under `[truncated]`. Returns the frames and whether every stage found its place.
fn compose(k: &StackKey, stages: &[(&str, String)], mut name: impl FnMut(u64) -> String) -> (Vec<String>, bool) {
    let placed = k.callers.iter().all(Option::is_some);
    let mut frames = Vec::new();
    if !placed {
        frames.push(TRUNCATED.to_string());
        frames.extend(stages.iter().map(|(name, tag)| format!("{name}{tag}")));
        // Keep what was unwound inside the deepest stage that was found, or just the leaf.
        let inner_from = k.callers.iter().rev().find_map(|c| *c).map_or(1, usize::from);
        for &a in k.user[..inner_from.min(k.user.len())].iter().rev() {
            frames.push(name(a));
        }
        return (frames, false);
    }
    if !k.complete {
        frames.push(TRUNCATED.to_string());
    }
    let mut pending: Vec<&(&str, String)> = Vec::new();
    for idx in (0..k.user.len()).rev() {
        let mut here = name(k.user[idx]);
        // A stage entered from the frame above: this is its frame if the names match, else it left none.
        for stage in pending.drain(..) {
            if here == stage.0 {
                here.push_str(&stage.1);
            } else {
                frames.push(format!("{}{}", stage.0, stage.1));
            }
        }
        frames.push(here);
        pending.extend(
            stages
                .iter()
                .zip(&k.callers)
                .filter(|(_, c)| **c == Some(idx as u16))
                .map(|(s, _)| s),
        );
    }
    frames.extend(pending.into_iter().map(|(name, tag)| format!("{name}{tag}")));
    (frames, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(user: Vec<u64>, callers: Vec<Option<u16>>, complete: bool) -> StackKey {
        StackKey {
            pid: 1,
            path: vec![0, 1],
            user,
            kernel: Vec::new(),
            callers,
            complete,
        }
    }

    fn name(a: u64) -> String {
        match a {
            0x10 => "main",
            0x20 => "ngx_ssl_handshake",
            0x30 => "state_machine",
            0x40 => "EVP_DigestSign",
            0x50 => "bn_mul",
            _ => "?",
        }
        .to_string()
    }

    fn stages() -> Vec<(&'static str, String)> {
        vec![
            ("SSL_do_handshake", " [handshake]".into()),
            ("EVP_DigestSign", " [sign]".into()),
        ]
    }

    #[test]
    fn tree_frames_split_into_user_and_kernel_and_a_cut_follows_its_frames() {
        let mut names = FrameNames::default();
        let ids = names.ids(["main", "write", "ksys_write"].map(String::from));
        let (main, write, ksys) = (ids[0], ids[1], ids[2] | KERNEL_FRAME);
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            names.split_kernel(&[main, write, ksys]),
            (strings(&["main", "write"]), strings(&["ksys_write"]))
        );
        assert_eq!(
            names.split_kernel(&[main, stack_tree::CUT]),
            (strings(&["main", CUT_NAME]), vec![])
        );
        assert_eq!(
            names.split_kernel(&[main, write, ksys, stack_tree::CUT]),
            (strings(&["main", "write"]), strings(&["ksys_write", CUT_NAME]))
        );
    }

    #[test]
    fn caller_positions_follow_saved_return_addresses() {
        // Innermost first: bn_mul, EVP_DigestSign, state_machine, ngx_ssl_handshake, main.
        let addrs = [0x50, 0x40, 0x30, 0x20, 0x10];
        assert_eq!(
            caller_positions(&addrs, &[0x900, 0x800], &[0x21, 0x31]),
            vec![Some(3), Some(2)]
        );
        assert_eq!(
            caller_positions(&addrs, &[0x900, 0x800], &[0x21, 0x99]),
            vec![Some(3), None]
        );
        assert_eq!(
            caller_positions(&addrs, &[0x900, 0x800], &[0, 0x31]),
            vec![None, Some(2)]
        );
        // A tail call: same return slot, and the trampoline address where the return address was.
        assert_eq!(
            caller_positions(&addrs, &[0x900, 0x900], &[0x21, 0x7fff_f000]),
            vec![Some(3), Some(3)]
        );
    }

    #[test]
    fn tail_called_stage_is_inserted_and_present_stage_is_tagged() {
        // SSL_do_handshake tail-called state_machine (no frame of its own); EVP_DigestSign has a frame.
        let k = key(vec![0x50, 0x40, 0x30, 0x20, 0x10], vec![Some(3), Some(2)], true);
        let (frames, placed) = compose(&k, &stages(), name);
        assert!(placed);
        assert_eq!(
            frames,
            vec![
                "main",
                "ngx_ssl_handshake",
                "SSL_do_handshake [handshake]",
                "state_machine",
                "EVP_DigestSign [sign]",
                "bn_mul"
            ]
        );
    }

    #[test]
    fn lost_stage_caller_falls_back_to_probe_frames() {
        let k = key(vec![0x50, 0x40], vec![None, None], false);
        let (frames, placed) = compose(&k, &stages(), name);
        assert!(!placed);
        assert_eq!(
            frames,
            vec![
                "[truncated]",
                "SSL_do_handshake [handshake]",
                "EVP_DigestSign [sign]",
                "bn_mul"
            ]
        );
    }
}
