// SPDX-License-Identifier: Apache-2.0
//! The processes the session takes in as it runs: those the kernel tells of (started, ran exec, mapped code),
//! those a rescan of /proc finds, the targets that exited, and those whose handshakes SSL_read/SSL_write drive.

use anyhow::Result;

use super::{assemble, Session, Tracked};
use crate::model::untrusted::Printable;
use crate::record::discovery::targets::{self, Process};
use crate::record::kernel::bpf::types::{process_event, tlsprof_event_kind, tlsprof_process_how};
use crate::record::kernel::probes::Change;
use crate::record::status;

/// Processes that joined as they started said by name on stderr, at most: a shell loop starts hundreds.
const FOLLOWED_SAID: usize = 5;

/// What is left to do for a process the kernel told of, once the probes of all that came together are attached.
enum Looked {
    /// It joined (the target that forked it, if one did): tracked from now on.
    Joined(Process, Option<u32>),
    /// A target ran a new program (whether it has TLS code).
    RanExec(Process, bool),
    /// A target's mappings changed: its stacks are unwound against them.
    MoreCode(u32),
}

impl Session<'_, '_> {
    /// Processes whose handshakes run inside SSL_read/SSL_write get those probed too.
    pub(super) fn drive_from_io(&mut self) -> Result<()> {
        let elapsed = self.started.elapsed().as_secs_f64();
        for pid in self.targets.drive_from_io(&self.programs.skel)? {
            eprintln!(
                "{}tlsprof: process {pid} runs its handshakes inside SSL_read/SSL_write: probing those too",
                self.status.clear()
            );
            if let Some(t) = self.tracked.get_mut(&pid) {
                t.io_driven_from_s = Some(elapsed);
            }
        }
        Ok(())
    }

    /// New processes of the selection are probed; targets that ran a new program have their probes moved.
    pub(super) fn rescan(&mut self) {
        for (p, change) in self.targets.changes(&self.opts.selection) {
            // One the kernel made a target as it started, whose event is still to be taken in.
            if change == Change::New && !self.tracked.contains_key(&p.pid) && self.programs.is_target(p.pid) {
                continue;
            }
            let name = format!("{} ({})", p.pid, Printable(&p.comm));
            let was_target = change == Change::Exec
                && self
                    .tracked
                    .get(&p.pid)
                    .is_some_and(|t| t.process.start_ticks == p.start_ticks);
            // A target that ran exec may not have mapped its libraries yet: it stays one, and what it maps
            // next is looked at as it comes (taken in anew, it would be dropped before its loader ran).
            let looked = if was_target {
                self.targets.take_in(&self.programs.skel, &p, &self.opts.attach, false)
            } else {
                self.targets.add(&self.programs.skel, &p, &self.opts.attach)
            };
            match looked {
                Ok(probed) if was_target => self.ran_exec(p, probed, &name),
                Ok(true) => {
                    eprintln!("{}tlsprof: attached to new process {name}", self.status.clear());
                    self.samples.add_process(p.pid, self.targets.maps[&p.pid].clone());
                    self.cpu.start(p.pid);
                    self.tracked.insert(p.pid, Tracked::new(p));
                }
                Ok(false) => {}
                // It exited while being looked at.
                Err(_) if !p.alive() => {}
                Err(e) => status::warn_once(
                    &format!("attach {} {}", p.pid, p.start_ticks),
                    &format!("cannot attach to process {} ({}): {e:#}", p.pid, p.comm),
                ),
            }
        }
    }

    /// The processes the kernel told of (EVENT_PROCESS), each looked at now: one that joined as it started (a
    /// target's new process, one running a program --comm names, one that ran TLS code under --all), one that
    /// ran a new program, one that mapped code tlsprof has not looked at (a library it loads). Their probes
    /// first, all of them (a process that starts may handshake within milliseconds); then the rest.
    pub(super) fn take_in_processes(&mut self) {
        use tlsprof_process_how as how;
        let mut events: Vec<process_event> = Vec::new();
        for data in self.events.processes.try_iter() {
            let mut e = process_event::default();
            if plain::copy_from_bytes(&mut e, &data).is_err() || e.kind != tlsprof_event_kind::EVENT_PROCESS.0 {
                continue;
            }
            // One look per process, however many of its events came (a program's loader maps its libraries
            // one after another): the one that says most, a start or an exec before more code.
            match events.iter_mut().find(|m| m.tgid == e.tgid) {
                Some(m) if m.how == how::PROCESS_MAPPED_CODE.0 => *m = e,
                Some(_) => {}
                None => events.push(e),
            }
        }
        let looked: Vec<Looked> = events.iter().filter_map(|e| self.probe_process(e)).collect();
        for l in looked {
            match l {
                Looked::Joined(p, parent) => self.join(p, parent),
                Looked::RanExec(p, probed) => {
                    let name = format!("{} ({})", p.pid, Printable(&p.comm));
                    self.ran_exec(p, probed, &name);
                }
                Looked::MoreCode(pid) => {
                    if let Some(maps) = self.targets.maps.get(&pid) {
                        self.samples.update_process(pid, maps.clone());
                    }
                }
            }
        }
    }

    /// Probes a process the kernel told of (take_in_processes); what is left to do once all are probed.
    fn probe_process(&mut self, e: &process_event) -> Option<Looked> {
        use tlsprof_process_how as how;
        let told = Process {
            pid: e.tgid,
            comm: comm_text(&e.comm),
            start_ticks: targets::boot_ns_to_ticks(e.start_ns),
        };
        // The process as /proc shows it, if it still runs (a fork's start is the kernel's clock at the fork:
        // within a tick of the process's own).
        let p = Process::from_pid(e.tgid)
            .filter(|p| p.start_ticks.abs_diff(told.start_ticks) <= 1 && p.alive())
            .unwrap_or(told);
        let tracked = self
            .tracked
            .get(&p.pid)
            .is_some_and(|t| t.process.start_ticks.abs_diff(p.start_ticks) <= 1);
        let skel = &self.programs.skel;
        let attach = &self.opts.attach;
        match e.how {
            h if h == how::PROCESS_EXECED.0 && tracked => {
                if !self.opts.selection.takes_program(&p.comm) {
                    self.targets.drop_target(skel, p.pid);
                    eprintln!(
                        "{}tlsprof: process {} ({}) ran a program --comm does not name: no longer probed",
                        self.status.clear(),
                        p.pid,
                        Printable(&p.comm)
                    );
                    return None;
                }
                let probed = self.targets.take_in(skel, &p, attach, false).unwrap_or(false);
                // A process that joined as it started is said once, when it did.
                if self.tracked.get(&p.pid).is_some_and(|t| t.joined_at_s.is_none()) {
                    Some(Looked::RanExec(p, probed))
                } else {
                    Some(Looked::MoreCode(p.pid))
                }
            }
            h if h == how::PROCESS_MAPPED_CODE.0 && tracked => {
                let _ = self.targets.take_in(skel, &p, attach, true);
                Some(Looked::MoreCode(p.pid))
            }
            // Under --all, a process that is no target yet: its program, or the library it mapped, may hold TLS
            // code of its own (its probes then make it one).
            h if (h == how::PROCESS_EXECED.0 || h == how::PROCESS_MAPPED_CODE.0) && !self.programs.is_target(p.pid) => {
                self.targets
                    .add_loading(skel, &p, attach)
                    .unwrap_or(false)
                    .then_some(Looked::Joined(p, None))
            }
            _ if tracked => None,
            // It joined in the kernel: a target from now on, with or without TLS code mapped so far.
            _ => {
                if let Err(err) = self.targets.take_in(skel, &p, attach, false) {
                    if p.alive() {
                        status::warn_once(
                            &format!("take in {} {}", p.pid, p.start_ticks),
                            &format!("cannot attach to process {} ({}): {err:#}", p.pid, Printable(&p.comm)),
                        );
                    }
                }
                let parent = (e.how == how::PROCESS_FORKED.0).then_some(e.parent);
                Some(Looked::Joined(p, parent))
            }
        }
    }

    /// A process that joined is tracked from now on: its CPU from its start, its stacks named against its
    /// mappings (its parent's, if it exited before they could be read).
    fn join(&mut self, p: Process, parent: Option<u32>) {
        let pid = p.pid;
        let maps = self
            .targets
            .maps
            .get(&pid)
            .or_else(|| parent.and_then(|q| self.targets.maps.get(&q)))
            .cloned()
            .or_else(|| p.maps().ok())
            .unwrap_or_default();
        self.samples.update_process(pid, maps);
        self.cpu.join(pid);
        self.followed += 1;
        if self.followed <= FOLLOWED_SAID {
            let from = parent.map_or(String::new(), |q| format!(", forked by {q}"));
            eprintln!(
                "{}tlsprof: attached to new process {} ({}){from}{}",
                self.status.clear(),
                pid,
                Printable(&p.comm),
                if self.followed == FOLLOWED_SAID {
                    " (more are not said: the report lists them)"
                } else {
                    ""
                }
            );
        }
        let mut t = Tracked::new(p);
        t.joined_at_s = Some(self.started.elapsed().as_secs_f64());
        t.parent = parent;
        self.tracked.insert(pid, t);
    }

    /// Targets that exited: their last counters are read (their threads' CPU at exit among them) and their
    /// entries in the targets map are dropped, which a recording of many short processes would fill.
    pub(super) fn retire_exited(&mut self) {
        let counters = self.programs.target_counters();
        let live = self.governor.live();
        for (&pid, t) in self
            .tracked
            .iter_mut()
            .filter(|(_, t)| !t.retired && !t.process.alive())
        {
            if let Some(c) = counters.get(&pid) {
                t.counters = *c;
                self.cpu.exited(pid, c.exited_cpu_ms, live);
            }
            t.retired = true;
            self.targets.retire(&self.programs.skel, pid);
        }
    }

    /// A target ran a new program: its stacks are unwound against the new one from now on.
    fn ran_exec(&mut self, p: Process, probed: bool, name: &str) {
        if let Some(maps) = self.targets.maps.get(&p.pid) {
            self.samples
                .replace_process(p.pid, maps.clone(), &self.targets.functions);
        }
        let now = if probed {
            "probes moved to it"
        } else {
            "no TLS code mapped in it yet: probed if it maps some"
        };
        eprintln!(
            "{}tlsprof: process {name} ran a new program: {now}",
            self.status.clear()
        );
        if let Some(t) = self.tracked.get_mut(&p.pid) {
            t.execs_at_s.push(self.started.elapsed().as_secs_f64());
            t.process.comm = p.comm;
        }
    }

    /// Forgets the targets that exited (continuous mode, once their last figures are handed over): memory
    /// stays bounded however many processes come and go. Returns their pids.
    pub(super) fn forget_exited(&mut self) -> Vec<u32> {
        let exited: Vec<u32> = self
            .tracked
            .values()
            .filter(|t| !t.process.alive() && self.samples.forget(t.process.pid))
            .map(|t| t.process.pid)
            .collect();
        for &pid in &exited {
            self.tracked.remove(&pid);
            self.cpu.forget(pid);
            self.windows.tree_seen.forget(pid);
            self.handshakes.forget(pid);
            self.targets.forget_exited(&self.programs.skel, pid);
        }
        assemble::forget_tree_nodes(&self.programs, &exited);
        self.targets.forget_gone();
        exited
    }
}

/// A comm as the kernel wrote it (NUL-padded, any bytes): as text.
fn comm_text(comm: &[std::ffi::c_char; 16]) -> String {
    let bytes: Vec<u8> = comm.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
