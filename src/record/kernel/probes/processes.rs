// SPDX-License-Identifier: Apache-2.0
//! The targets: the processes looked at (found in /proc, joined as they started, that ran exec or mapped more
//! code), probed where they run TLS code, and forgotten as they go.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::{Link, MapCore, MapFlags};

use super::found::{fill_library_versions, unfound, unsupported_in};
use super::go_returns::forget_callers;
use super::{detach, Change, Examined, TargetSet, Wide};
use crate::catalogue::families::{self, Flavor};
use crate::model::untrusted::Printable;
use crate::record::discovery::objects::{self, TlsObject};
use crate::record::discovery::targets::{self, Mapping, Process, Selection};
use crate::record::kernel::bpf::types::{file_key, target_state, tlsprof_target_flags as target_flags};
use crate::record::kernel::bpf::TlsprofSkel;
use crate::record::status;
use crate::record::{AttachOptions, HelloCapture};

/// Why a process is looked at (TargetSet::look_at).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Look {
    /// From scratch: found in /proc, or looked at again there. It is a target only if it runs TLS code.
    Anew,
    /// As Anew, a process that started or mapped code just now (--all): it may not have mapped all its TLS code.
    Loading,
    /// It joined in the kernel as it started (fork, exec), or a target ran a new program.
    Started,
    /// A target mapped more code.
    MoreCode,
}

/// A device as the kernel encodes it (MKDEV: major << 20 | minor), from /proc/PID/maps's "major:minor" (hex).
fn kernel_dev(maps_dev: &str) -> Option<u32> {
    let (major, minor) = maps_dev.split_once(':')?;
    let (major, minor) = (
        u32::from_str_radix(major, 16).ok()?,
        u32::from_str_radix(minor, 16).ok()?,
    );
    (major < 1 << 12 && minor < 1 << 20).then_some(major << 20 | minor)
}

/// A process without TLS code is looked at again this often (--all, --comm): it may load libssl later.
const RECHECK: Duration = Duration::from_secs(10);

impl TargetSet {
    /// Probes every TLS function of the given processes; an error when none of them runs TLS code we know
    /// (with --all or --comm, recording starts anyway: such processes may start later).
    pub fn attach(
        skel: &TlsprofSkel,
        procs: &[Process],
        selection: &Selection,
        opts: &AttachOptions,
    ) -> Result<TargetSet> {
        let mut set = TargetSet::default();
        // A process that starts may handshake within milliseconds, and attaching probes can take longer (the
        // first uprobe registered after a while waits for an RCU grace period): the machine's TLS libraries are
        // probed in every process from the start, so those that start are probed from their first instruction.
        if selection.follows_new() && !opts.wire_only {
            set.wide = Wide::Every;
            let names: Vec<&str> = opts.families.iter().flat_map(|f| f.library_names()).copied().collect();
            for m in targets::system_libraries(&names) {
                if let Some(obj) = set.inspect(&m, std::process::id(), false, opts) {
                    set.attach_everywhere(skel, &m, &obj, opts)?;
                }
            }
        }
        let mut without_tls = Vec::new();
        for p in procs {
            match set.add(skel, p, opts) {
                Ok(true) => {}
                Ok(false) => without_tls.push(p),
                // A process that exited while being looked at is no target.
                Err(_) if !p.alive() => {}
                // --all takes whatever runs: one process that cannot be probed does not stop the rest.
                Err(e) if selection.all => status::warn_once(
                    &format!("attach {} {}", p.pid, p.start_ticks),
                    &format!("cannot attach to process {} ({}): {e:#}", p.pid, p.comm),
                ),
                Err(e) => return Err(e),
            }
        }
        let known = families::names(&opts.families);
        if selection.all {
            if set.maps.is_empty() {
                eprintln!("tlsprof: no process runs {known} code yet: waiting for one");
            }
            return Ok(set);
        }
        if set.maps.is_empty() && !selection.comms.is_empty() {
            let names: Vec<String> = selection.comms.iter().map(|c| format!("'{}'", Printable(c))).collect();
            let with = if procs.is_empty() { "" } else { " with TLS code" };
            eprintln!(
                "tlsprof: no process named {}{with} runs yet: waiting for one",
                names.join(" or ")
            );
        }
        // A process named on the command line whose TLS code cannot be probed is counted from its sockets; one
        // taken by --comm beside processes of its name that are probed is their helper (a cache manager), skipped.
        if opts.hello_capture != HelloCapture::Off {
            let probed: Vec<&str> = procs
                .iter()
                .filter(|p| set.maps.contains_key(&p.pid))
                .map(|p| p.comm.as_str())
                .collect();
            let (wire, helpers): (Vec<&Process>, Vec<&Process>) = std::mem::take(&mut without_tls)
                .into_iter()
                .partition(|p| selection.pids.contains(&p.pid) || !probed.contains(&p.comm.as_str()));
            for p in wire {
                set.watch_wire_only(skel, p, opts)?;
            }
            without_tls = helpers;
        }
        if set.maps.is_empty() && selection.comms.is_empty() {
            let p = without_tls.first().expect("at least one target");
            match unsupported_in(p) {
                Some(found) => bail!(
                    "process {} ({}) runs {found} (in its executable) without the function names tlsprof finds it by \
                     (a stripped build): not supported yet (tlsprof profiles {known} by their functions' names, Go's \
                     from its function table, and a stripped BoringSSL by the source lines of its errors where it \
                     has them for its revision: {})",
                    p.pid,
                    Printable(&p.comm),
                    families::site_table_names(&opts.families)
                ),
                None => bail!(
                    "process {} ({}) has no {known} code (none mapped, none linked in), and --hello-capture off \
                     leaves its sockets unread: profile the process that terminates TLS, or count its handshakes \
                     from the wire (drop --hello-capture off)",
                    p.pid,
                    Printable(&p.comm)
                ),
            }
        }
        for p in without_tls {
            let runs = unsupported_in(p).map_or(String::new(), |found| {
                format!(": it runs {found} without the function names tlsprof finds it by (a stripped build)")
            });
            eprintln!(
                "tlsprof: skipping process {} ({}): no {known} code{runs}",
                p.pid,
                Printable(&p.comm)
            );
        }
        Ok(set)
    }

    /// Processes to look at now: the selection's new ones (new nginx workers after a reload, anything
    /// started under --all), targets that ran a new program (exec), and, now and then, processes that had no
    /// TLS code when looked at.
    pub fn changes(&self, selection: &Selection) -> Vec<(Process, Change)> {
        let mut out = Vec::new();
        let followed = if selection.follows_new() {
            selection.followed()
        } else {
            Vec::new()
        };
        let targets: Vec<Process> = self
            .maps
            .keys()
            .filter(|pid| !followed.iter().any(|p| p.pid == **pid))
            .filter_map(|&pid| Process::from_pid(pid))
            .collect();
        for p in followed.into_iter().chain(targets) {
            let change = match self.examined.get(&p.pid) {
                None => Change::New,
                Some(e) if e.start_ticks != p.start_ticks => Change::New,
                Some(e) if e.exe != targets::exe_id(p.pid) => Change::Exec,
                Some(e) if !e.tls && e.at.elapsed() >= RECHECK => Change::Recheck,
                Some(_) => continue,
            };
            if p.alive() {
                out.push((p, change));
            }
        }
        out
    }

    /// Probes every TLS function of one process. Ok(false) when it runs no code of a known family. A
    /// target looked at again (it ran exec, or reused a pid) first loses the probes of what it ran before.
    pub fn add(&mut self, skel: &TlsprofSkel, p: &Process, opts: &AttachOptions) -> Result<bool> {
        self.look_at(skel, p, opts, Look::Anew)
    }

    /// As `add`, for a process that is no target and has just started or mapped code (--all): it may be loading
    /// its TLS code still.
    pub fn add_loading(&mut self, skel: &TlsprofSkel, p: &Process, opts: &AttachOptions) -> Result<bool> {
        self.look_at(skel, p, opts, Look::Loading)
    }

    /// A process the kernel made a target as it started, or that ran a new program (it keeps its probes' files
    /// covered in every process, and gains its own for the rest), or (`more_code`) a target that mapped more
    /// code: its TLS files not probed yet are. It stays a target with or without TLS code so far (its libraries
    /// may not be mapped yet). Ok(true) when it runs code of a known family.
    pub fn take_in(&mut self, skel: &TlsprofSkel, p: &Process, opts: &AttachOptions, more_code: bool) -> Result<bool> {
        self.look_at(skel, p, opts, if more_code { Look::MoreCode } else { Look::Started })
    }

    fn look_at(&mut self, skel: &TlsprofSkel, p: &Process, opts: &AttachOptions, look: Look) -> Result<bool> {
        if opts.wire_only {
            return self.look_at_wire_only(skel, p, opts);
        }
        // A process looked at before: what it ran then is gone (the Go callers' maps are walked whole: only for
        // one that was probed).
        if look != Look::MoreCode && self.examined.contains_key(&p.pid) {
            let go = self.runs_go(p.pid);
            self.forget(p.pid);
            if go {
                forget_callers(skel, p.pid);
            }
        }
        let exe_id = targets::exe_id(p.pid);
        self.examined.insert(
            p.pid,
            Examined {
                start_ticks: p.start_ticks,
                exe: exe_id,
                tls: false,
                at: Instant::now(),
            },
        );
        let maps = p.maps()?;
        // A process that started during the recording may end before its files are read: they are held.
        if look != Look::Anew {
            for m in maps.iter().filter(|m| m.executable) {
                m.hold(p.pid);
            }
        }
        let exe = exe_id.map(|(_, ino)| ino);
        let mut found_any = false;
        let mut attached: Vec<TlsObject> = Vec::new();
        let candidates = self.candidates(&maps, exe, p.pid, opts);
        for m in &candidates {
            let key = (m.dev.clone(), m.inode);
            let Some(obj) = self.inspect(m, p.pid, Some(m.inode) == exe, opts) else {
                continue;
            };
            found_any |= obj.flavor != Flavor::App;
            let covered = self
                .specs
                .iter()
                .any(|s| s.file == key && s.scope.pid().is_none_or(|pid| pid == p.pid));
            if look == Look::MoreCode && covered {
                // Probed before it was mapped (a process that started), or in every process.
                let lib = self.library(m, &obj);
                self.maps_library(lib, p.pid);
            } else {
                self.attach_object(skel, p, m, &obj, opts, true)?;
            }
            attached.push(obj);
        }
        self.know_files(skel, p.pid, &maps);
        // A process that started may not have mapped all its TLS code yet.
        let settled = if look == Look::Anew { attached.as_slice() } else { &[] };
        let fresh = matches!(look, Look::Anew | Look::Loading);
        for (family, what) in unfound(settled) {
            status::warn_once(
                &format!("unfound {exe_id:?} {family} {what}"),
                &format!(
                    "process {} ({}): {what} ({family}: a version or build the catalogue does not list)",
                    p.pid,
                    Printable(&p.comm)
                ),
            );
        }
        if found_any || !fresh {
            // A target that ran exec keeps counting its connections; its flags start again (a process that
            // joined keeps them).
            let key = p.pid.to_ne_bytes();
            let mut state = target_state::default();
            if let Ok(Some(old)) = skel.maps.targets.lookup(&key, MapFlags::ANY) {
                let _ = plain::copy_from_bytes(&mut state, &old);
            }
            state.flags = if fresh {
                target_flags::TARGET_PROBED.0 as u8
            } else {
                state.flags | target_flags::TARGET_PROBED.0 as u8
            };
            // SAFETY: target_state is Plain.
            let bytes = unsafe { plain::as_bytes(&state) };
            skel.maps
                .targets
                .update(&key, bytes, MapFlags::ANY)
                .context("add target")?;
            self.maps.insert(p.pid, maps);
            if found_any {
                self.wire_only.remove(&p.pid);
            }
            fill_library_versions(&mut self.libraries);
            if let Some(e) = self.examined.get_mut(&p.pid) {
                e.tls = found_any;
            }
        } else if self.wire_only.contains(&p.pid) {
            // Looked at again, still without TLS code to probe: still counted from the wire.
            self.watch_wire_only(skel, p, opts)?;
        } else if self.maps.contains_key(&p.pid) {
            // A target that ran a program without TLS code: no longer sampled. Its mappings stay, to name
            // what it ran before.
            let _ = skel.maps.targets.delete(&p.pid.to_ne_bytes());
        }
        Ok(found_any)
    }

    /// --wire-only: every process looked at is counted from its sockets alone.
    fn look_at_wire_only(&mut self, skel: &TlsprofSkel, p: &Process, opts: &AttachOptions) -> Result<bool> {
        self.examined.insert(
            p.pid,
            Examined {
                start_ticks: p.start_ticks,
                exe: targets::exe_id(p.pid),
                tls: true,
                at: Instant::now(),
            },
        );
        self.watch_wire_only(skel, p, opts)?;
        Ok(true)
    }

    /// The files of process pid's mappings worth inspecting (targets::candidate_objects); those of no TLS
    /// library's name after a first look at each (objects::may_hold_tls), once per file.
    fn candidates(&mut self, maps: &[Mapping], exe: Option<u64>, pid: u32, opts: &AttachOptions) -> Vec<Mapping> {
        let library_names: Vec<&str> = opts.families.iter().flat_map(|f| f.library_names()).copied().collect();
        let (inspected, first_looks) = (&self.inspected, &mut self.first_looks);
        targets::candidate_objects(maps, exe, &library_names, |m| {
            let key = (m.dev.clone(), m.inode);
            match inspected.get(&key) {
                Some(obj) => obj.is_some(),
                None => *first_looks
                    .entry(key)
                    .or_insert_with(|| objects::may_hold_tls(&m.open_path(pid))),
            }
        })
    }

    /// Makes a process without TLS code tlsprof can probe a target whose handshakes are counted from its
    /// sockets alone (TARGET_WIRE_ONLY): its CPU is sampled, its connections counted, its socket calls read
    /// for hellos and records.
    fn watch_wire_only(&mut self, skel: &TlsprofSkel, p: &Process, opts: &AttachOptions) -> Result<()> {
        let key = p.pid.to_ne_bytes();
        let mut state = target_state::default();
        if let Ok(Some(old)) = skel.maps.targets.lookup(&key, MapFlags::ANY) {
            let _ = plain::copy_from_bytes(&mut state, &old);
        }
        state.flags = (target_flags::TARGET_PROBED.0 | target_flags::TARGET_WIRE_ONLY.0) as u8;
        // SAFETY: target_state is Plain.
        let bytes = unsafe { plain::as_bytes(&state) };
        skel.maps
            .targets
            .update(&key, bytes, MapFlags::ANY)
            .context("add target")?;
        if self.wire_only.insert(p.pid) && !opts.wire_only {
            let runs = unsupported_in(p).map_or(String::new(), |found| {
                format!(" (it runs {found} without the function names tlsprof finds it by: a stripped build)")
            });
            eprintln!(
                "tlsprof: process {} ({}) has no TLS code tlsprof can probe{runs}: its handshakes are counted from \
                 its sockets (the wire) alone, without their CPU",
                p.pid,
                Printable(&p.comm)
            );
        }
        if let std::collections::hash_map::Entry::Vacant(e) = self.maps.entry(p.pid) {
            e.insert(p.maps()?);
        }
        Ok(())
    }

    /// Tells the programs which of the files process pid maps code of need no look when another process maps
    /// them (map known_files): those without TLS code, and those probed in every process. A TLS file probed in
    /// each process apart is looked at again in each.
    fn know_files(&self, skel: &TlsprofSkel, pid: u32, maps: &[Mapping]) {
        for m in maps.iter().filter(|m| m.executable) {
            let key = (m.dev.clone(), m.inode);
            let tls = self.inspected.get(&key).is_some_and(Option::is_some);
            let everywhere = self.specs.iter().any(|s| s.file == key && s.scope.pid().is_none());
            if tls && !everywhere {
                continue;
            }
            let Some(dev) = kernel_dev(&m.dev) else { continue };
            let file = file_key {
                ino: m.inode,
                dev,
                ..Default::default()
            };
            // SAFETY: file_key is Plain.
            let bytes = unsafe { plain::as_bytes(&file) };
            if skel.maps.known_files.update(bytes, &[1], MapFlags::ANY).is_err() {
                status::warn_once(
                    &format!("known files {pid}"),
                    "cannot note the files looked at: each process that maps one is looked at again",
                );
            }
        }
    }

    /// Forgets everything of a process that exited: its probes, mappings and target entry. Continuous mode
    /// keeps nothing of processes gone, however many come and go.
    pub fn forget_exited(&mut self, skel: &TlsprofSkel, pid: u32) {
        self.forget(pid);
        self.wire_only.remove(&pid);
        forget_callers(skel, pid);
        self.maps.remove(&pid);
        self.examined.remove(&pid);
        for l in &mut self.libraries {
            l.pids.retain(|&p| p != pid);
        }
        let _ = skel.maps.targets.delete(&pid.to_ne_bytes());
    }

    /// A target that is one no longer (it ran a program its selection does not take): its probes go, and its
    /// entry in the targets map. Its mappings stay, to name what it ran before.
    pub fn drop_target(&mut self, skel: &TlsprofSkel, pid: u32) {
        self.wire_only.remove(&pid);
        let go = self.runs_go(pid);
        self.forget(pid);
        if go {
            forget_callers(skel, pid);
        }
        let _ = skel.maps.targets.delete(&pid.to_ne_bytes());
    }

    /// Whether process pid has Go code probed (whose callers the go_returns and go_calls maps keep).
    fn runs_go(&self, pid: u32) -> bool {
        self.specs
            .iter()
            .any(|s| s.scope.pid() == Some(pid) && !s.go.offsets.is_empty())
    }

    /// A target that exited, its last counters read: its entry in the targets map and its probes go (their
    /// links on a thread of their own: the kernel takes a while to let go of each, and new processes may be
    /// starting); what was found in it stays for the recording.
    pub fn retire(&mut self, skel: &TlsprofSkel, pid: u32) {
        if self.runs_go(pid) {
            forget_callers(skel, pid);
        }
        let gone = self.take_links(pid);
        let _ = skel.maps.targets.delete(&pid.to_ne_bytes());
        if !gone.is_empty() {
            let _ = std::thread::Builder::new().spawn(move || detach(gone));
        }
    }

    /// Forgets processes looked at (those without TLS code too, under --all) that are gone.
    pub fn forget_gone(&mut self) {
        self.examined
            .retain(|&pid, e| Process::from_pid(pid).is_some_and(|p| p.start_ticks == e.start_ticks && p.alive()));
    }

    /// Detaches and forgets the probes of a process, to probe what it runs now instead.
    fn forget(&mut self, pid: u32) {
        detach(self.take_links(pid));
    }

    /// Forgets the probes of a process, and returns their links to be detached.
    fn take_links(&mut self, pid: u32) -> Vec<(u32, Link)> {
        let (mut gone, kept) = std::mem::take(&mut self.links)
            .into_iter()
            .partition(|(p, _)| *p == pid);
        self.links = kept;
        for s in self.specs.iter().filter(|s| s.scope.pid() == Some(pid)) {
            gone.extend(
                self.exit_links
                    .remove(&s.id)
                    .into_iter()
                    .flatten()
                    .map(|(_, l)| (pid, l)),
            );
        }
        self.specs.retain(|s| s.scope.pid() != Some(pid));
        self.io_drivers.retain(|s| s.scope.pid() != Some(pid));
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_encoded_as_the_kernel_does() {
        // /proc/PID/maps writes major:minor in hex; the kernel's dev_t is major << 20 | minor.
        assert_eq!(kernel_dev("fe:01"), Some(0xfe << 20 | 1));
        assert_eq!(kernel_dev("103:2a"), Some(0x103 << 20 | 0x2a));
        assert_eq!(kernel_dev("00:1f"), Some(0x1f));
        assert_eq!(kernel_dev("fe"), None);
        assert_eq!(kernel_dev("zz:01"), None);
        assert_eq!(kernel_dev("1000:00"), None, "a major number the kernel cannot hold");
    }
}
