// SPDX-License-Identifier: Apache-2.0
//! The Go return probes: a Go function's returns are seen at its return instructions, single-stepped (no
//! return probe ever touches a Go stack), until it has learned where its callers resume, probed there
//! instead; then it settles.

use anyhow::Result;
use libbpf_rs::{Link, MapCore, MapFlags};

use super::{detach, Kind, ProbeSpec, Probes, TargetSet};
use crate::catalogue;
use crate::record::discovery::{objects, targets};
use crate::record::kernel::bpf::{types::go_calls_key, TlsprofSkel};
use crate::record::status;

/// What a spec's Go functions learned of their callers while recording.
#[derive(Default)]
pub(super) struct Learning {
    /// Functions not settled yet that reported a caller, by id.
    pending: std::collections::HashSet<u16>,
    /// Functions whose every caller so far is probed where it resumes and that reported none new in
    /// SETTLE_CALLS calls: their return instructions are no longer probed.
    settled: std::collections::HashSet<u16>,
    /// Functions a caller of which could not be probed (no call ends at the return address, no emulated
    /// instruction soon after it, or too many callers): their return instructions stay probed.
    unsettled: std::collections::HashSet<u16>,
    /// Callers reported: each costs a read of the executable.
    reported: usize,
    /// `settled` lost a function since the return-instruction probes were last attached.
    exits_changed: bool,
}

/// A function whose callers are all probed where they resume loses its return instructions' probes once it
/// has been called this many times since it last reported a new caller: the handful of call paths a TLS
/// handshake takes show in its first handshakes. A caller seen later costs its first call's end (a missed
/// return) until it is probed.
const SETTLE_CALLS: u64 = 64;

/// Callers probed and reported at most per file and process (the target's code chooses how many there are,
/// and each report is a read of its executable).
const MAX_LEARNED_SITES: usize = 64;
const MAX_REPORTED_CALLERS: usize = 256;

impl TargetSet {
    /// Probes where the callers that Go functions reported (EVENT_GO_RETURN: process, function id, return
    /// address and the caller's) resume. A caller that cannot be probed keeps its function's return
    /// instructions probed.
    pub fn learn_callers(&mut self, skel: &TlsprofSkel, reported: &[(u32, u16, [u64; 2])]) {
        for i in 0..self.specs.len() {
            let spec = &self.specs[i];
            let Some(pid) = spec.scope.pid() else { continue };
            let Some(maps) = self.maps.get(&pid) else { continue };
            // Return addresses in this spec's file, as file offsets.
            let in_file = |addr: u64| {
                targets::mapping_for(maps, addr)
                    .filter(|m| (m.dev.as_str(), m.inode) == (spec.file.0.as_str(), spec.file.1))
                    .map(|m| m.file_offset(addr))
            };
            let mut mine: Vec<(u16, (u64, Option<u64>))> = reported
                .iter()
                .filter(|&&(p, func, _)| p == pid && spec.go_exit_funcs.contains(&func))
                .filter_map(|&(_, func, [addr, outer])| Some((func, (in_file(addr)?, in_file(outer)))))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let over = mine.split_off(
                mine.len()
                    .min(MAX_REPORTED_CALLERS.saturating_sub(spec.learning.reported)),
            );
            let offsets: Vec<(u64, Option<u64>)> = mine.iter().map(|&(_, o)| o).collect();
            let sites = if offsets.is_empty() {
                Vec::new()
            } else {
                objects::go_resumed_sites(&spec.open_path, &offsets).unwrap_or_else(|e| {
                    status::warn_once(
                        &format!("learn {pid} {}", spec.path),
                        &format!("{e:#}: callers of its Go functions not probed where they resume"),
                    );
                    vec![None; offsets.len()]
                })
            };
            let spec = &mut self.specs[i];
            spec.learning.reported += mine.len();
            spec.learning.unsettled.extend(over.iter().map(|&(f, _)| f));
            let mut learned = Probes::default();
            for (&(func, _), site) in mine.iter().zip(sites) {
                let l = &mut spec.learning;
                // A function settled before this caller showed: its return instructions are probed again
                // until it settles anew (the calls from here until then end unseen: missed returns).
                if l.settled.remove(&func) {
                    l.exits_changed = true;
                }
                l.pending.insert(func);
                let learned_cookie = catalogue::learned_site_cookie();
                let probed_at = |offset: u64| spec.go.offsets.iter().position(|&o| o as u64 == offset);
                let learned_sites = spec.go.cookies.iter().filter(|&&c| c == learned_cookie).count();
                match site.map(|s| (s, probed_at(s))) {
                    // Another function's call from the same place: probed already.
                    Some((_, Some(i))) if spec.go.cookies[i] == learned_cookie => {}
                    Some((s, None))
                        if learned_sites < MAX_LEARNED_SITES && !spec.go_exits.offsets.contains(&(s as usize)) =>
                    {
                        spec.go.push(s, catalogue::learned_site_cookie());
                        learned.push(s, catalogue::learned_site_cookie());
                    }
                    _ => {
                        l.unsettled.insert(func);
                    }
                }
            }
            self.probes += learned.offsets.len();
            if self.paused || learned.offsets.is_empty() {
                continue;
            }
            match spec.attach_probes(&learned, Kind::Entry, &skel.progs.go_probe) {
                Ok(link) => self.links.push((pid, link)),
                Err(e) => {
                    status::warn_once(&format!("learned {pid} {}", spec.path), &format!("{e:#}"));
                    spec.learning.unsettled.extend(mine.iter().map(|&(f, _)| f));
                }
            }
        }
    }

    /// Whether a Go function of a running process reported a caller and has not settled yet.
    pub fn learning(&self) -> bool {
        self.specs
            .iter()
            .any(|s| !s.learning.pending.is_empty() && s.scope.alive())
    }

    /// Takes away the return-instruction probes of the Go functions whose callers are all probed where they
    /// resume and that reported no new one in SETTLE_CALLS calls (the calls under way end at either).
    pub fn settle(&mut self, skel: &TlsprofSkel) -> Result<()> {
        if self
            .specs
            .iter()
            .all(|s| s.learning.pending.is_empty() && !s.learning.exits_changed)
        {
            return Ok(());
        }
        let mut gone = Vec::new();
        for spec in &mut self.specs {
            let pid = spec.scope.pid().unwrap_or(0);
            let l = &mut spec.learning;
            let mut ready: Vec<u16> = l
                .pending
                .iter()
                .copied()
                .filter(|&func| calls_since_new_caller(skel, pid, func) >= SETTLE_CALLS)
                .collect();
            for func in &ready {
                l.pending.remove(func);
            }
            ready.retain(|f| !l.unsettled.contains(f));
            if ready.is_empty() && !l.exits_changed {
                continue;
            }
            l.settled.extend(ready);
            l.exits_changed = false;
            if self.paused {
                continue;
            }
            match spec.sync_exits(skel, self.exit_links.entry(spec.id).or_default()) {
                Ok(old) => gone.extend(old.into_iter().map(|l| (pid, l))),
                Err(_) if !spec.scope.alive() => {}
                Err(e) => return Err(e),
            }
        }
        // Detaching a link takes its breakpoints out, then waits for the kernel to let go of them: in a thread
        // of its own, so that other functions' learning need not wait. (Where no thread can be had, the
        // dropped closure detaches them here.)
        if !gone.is_empty() {
            let _ = std::thread::Builder::new().spawn(move || detach(gone));
        }
        Ok(())
    }
}

impl ProbeSpec {
    /// Brings `links` to the return-instruction probes of the functions not settled yet: attaches those
    /// missing, and returns the links of the settled ones, to be detached.
    pub(super) fn sync_exits(&self, skel: &TlsprofSkel, links: &mut ExitLinks) -> Result<Vec<Link>> {
        let mut wanted: Vec<u16> = self
            .go_exit_funcs
            .iter()
            .copied()
            .filter(|f| !self.learning.settled.contains(f))
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let (gone, kept): (ExitLinks, ExitLinks) = std::mem::take(links)
            .into_iter()
            .partition(|(f, _)| wanted.binary_search(f).is_err());
        *links = kept;
        for func in wanted {
            if links.iter().any(|&(f, _)| f == func) {
                continue;
            }
            let mut exits = Probes::default();
            for ((&offset, &cookie), &f) in self
                .go_exits
                .offsets
                .iter()
                .zip(&self.go_exits.cookies)
                .zip(&self.go_exit_funcs)
            {
                if f == func {
                    exits.push(offset as u64, cookie);
                }
            }
            links.push((func, self.attach_probes(&exits, Kind::Entry, &skel.progs.go_probe)?));
        }
        Ok(gone.into_iter().map(|(_, l)| l).collect())
    }
}

/// A Go function's calls since it last reported a new caller (map go_calls).
fn calls_since_new_caller(skel: &TlsprofSkel, pid: u32, func: u16) -> u64 {
    let key = go_calls_key {
        tgid: pid,
        func,
        ..Default::default()
    };
    // SAFETY: go_calls_key is Plain.
    let key = unsafe { plain::as_bytes(&key) };
    match skel.maps.go_calls.lookup(key, MapFlags::ANY) {
        Ok(Some(v)) => <[u8; 8]>::try_from(v.as_slice()).map_or(0, u64::from_ne_bytes),
        _ => 0,
    }
}

/// Forgets the callers a process's Go functions reported: its code may be another program's from now on.
pub(super) fn forget_callers(skel: &TlsprofSkel, pid: u32) {
    // Both maps' keys (go_return_key, go_calls_key) open with the process id.
    let of_pid = |k: &Vec<u8>| k.get(..4) == Some(&pid.to_ne_bytes()[..]);
    for map in [&skel.maps.go_returns, &skel.maps.go_calls] {
        let keys: Vec<Vec<u8>> = map.keys().filter(of_pid).collect();
        for k in keys {
            let _ = map.delete(&k);
        }
    }
}

/// A spec's return-instruction probes, a link per function id.
pub(super) type ExitLinks = Vec<(u16, Link)>;
