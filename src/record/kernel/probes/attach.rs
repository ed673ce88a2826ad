// SPDX-License-Identifier: Apache-2.0
//! Attaching a file's probes: which program each of its functions' probes run (entry, return, session, Go's
//! entry-style ones), as uprobe_multi links in one process or in every process that maps the file.

use std::os::fd::AsRawFd;

use anyhow::{bail, Context, Result};
use libbpf_rs::{Link, MapCore, MapFlags, UprobeMultiOpts};

use super::{detach, Kind, Learning, ProbeSpec, Probes, Scope, TargetSet, Wide};
use crate::catalogue::families::Calls;
use crate::catalogue::{self, Site};
use crate::model::untrusted::Printable;
use crate::record::discovery::objects::TlsObject;
use crate::record::discovery::ssl_layout::SslLayout;
use crate::record::discovery::targets::{self, Mapping, Process};
use crate::record::kernel::bpf::types::{ssl_layout, target_state, tlsprof_target_flags as target_flags};
use crate::record::kernel::bpf::TlsprofSkel;
use crate::record::AttachOptions;

/// Tells the programs where function `id`'s library keeps a connection's handshake state (map ssl_layouts).
fn set_ssl_layout(skel: &TlsprofSkel, id: u16, layout: SslLayout) -> Result<()> {
    let value = ssl_layout {
        state: layout.state as i32,
        version: layout.version as i32,
        guard: layout.guard.map_or(-1, |g| g as i32),
        pad: 0,
    };
    // SAFETY: ssl_layout is Plain.
    let bytes = unsafe { plain::as_bytes(&value) };
    skel.maps
        .ssl_layouts
        .update(&u32::from(id).to_ne_bytes(), bytes, MapFlags::ANY)
        .context("set a library's handshake state layout")
}

/// Whether the library's own state machine, taking the SSL *, is probed (OpenSSL's ossl_statem_accept): a
/// handshake driven from SSL_read/SSL_write is seen there.
fn state_machine_probed(obj: &TlsObject) -> bool {
    obj.functions.iter().any(|f| {
        f.row.origin == catalogue::Origin::Internal
            && f.row.stage == Some(catalogue::Stage::Handshake)
            && f.row.flags & catalogue::SSL_ARG != 0
    })
}

impl TargetSet {
    /// Probes the TLS code `obj` of file m in process p (its mapping there), or in every process that maps it
    /// (Wide; not `mapped`: a file of the machine no target maps yet, p being tlsprof).
    pub(super) fn attach_object(
        &mut self,
        skel: &TlsprofSkel,
        p: &Process,
        m: &Mapping,
        obj: &TlsObject,
        opts: &AttachOptions,
        mapped: bool,
    ) -> Result<()> {
        let lib = self.library(m, obj);
        if mapped {
            self.maps_library(lib, p.pid);
        }
        let path = m.display_path().to_string();
        let file = (m.dev.clone(), m.inode);
        let wide = obj.family.calls() == Calls::Native && self.wide_for(p);
        let stages = |r: &catalogue::Row| opts.all_probes || !r.frequent;
        // The handshake drivers are a process's own: they are attached only where its handshakes need them.
        if mapped && !opts.all_probes && !state_machine_probed(obj) {
            let drivers = self.probe_spec(
                skel,
                m,
                obj,
                lib,
                &|r| r.frequent && r.flags & catalogue::IO_DRIVER != 0,
                Scope::Process(p.clone()),
            )?;
            if !(drivers.entry.offsets.is_empty() && drivers.session.offsets.is_empty()) {
                self.io_drivers.push(drivers);
            }
        }
        // A file probed in every process already covers this one (a child of a target, which shares its files).
        if self.specs.iter().any(|s| s.file == file && s.scope.pid().is_none()) {
            return Ok(());
        }
        if !wide {
            let probed = self.probe_spec(skel, m, obj, lib, &stages, Scope::Process(p.clone()))?;
            return self.start(skel, probed);
        }
        let held = std::fs::File::open(m.open_path(p.pid))
            .with_context(|| format!("cannot open {} of process {}", Printable(&path), p.pid))?;
        let probed = self.probe_spec(skel, m, obj, lib, &stages, Scope::AnyProcess(held))?;
        self.start(skel, probed)
    }

    /// The probes of file m's functions (its TLS code `obj`, library `lib`) that `keep` takes, in `scope`, by
    /// the program they run: entries, returns, sessions, connection returns, Go's entry-style probes.
    fn probe_spec(
        &mut self,
        skel: &TlsprofSkel,
        m: &Mapping,
        obj: &TlsObject,
        lib: usize,
        keep: &dyn Fn(&catalogue::Row) -> bool,
        scope: Scope,
    ) -> Result<ProbeSpec> {
        let calls = obj.family.calls();
        let state_machine_probed = state_machine_probed(obj);
        let (mut entry, mut ret, mut go) = (Probes::default(), Probes::default(), Probes::default());
        let (mut session, mut connection_ret) = (Probes::default(), Probes::default());
        let sessions = skel.progs.stage_session.autoload();
        let (mut go_exits, mut go_exit_funcs) = (Probes::default(), Vec::new());
        for f in obj.functions.iter().filter(|f| keep(f.row)) {
            let id = self.function_id(lib, f.row)?;
            if let Some(layout) = obj.ssl_layout.filter(|_| f.row.flags & catalogue::SSL_ARG != 0) {
                set_ssl_layout(skel, id, layout)?;
            }
            let cookie = |stepped, at| catalogue::cookie(id, f.row, calls, stepped, state_machine_probed, at);
            if calls == Calls::GoRegisters {
                // A stage function that ends at a return instruction learns where its callers resume.
                let learns = f.row.stage.is_some() && f.exits.iter().any(|e| e.stepped && !e.in_caller);
                let entry_cookie = cookie(f.stepped, Site::Entry);
                go.push(
                    f.file_offset,
                    if learns {
                        catalogue::learning_returns(entry_cookie)
                    } else {
                        entry_cookie
                    },
                );
                for exit in &f.exits {
                    if exit.in_caller {
                        go.push(exit.file_offset, cookie(exit.stepped, Site::Returned));
                    } else if learns {
                        go_exits.push(exit.file_offset, cookie(exit.stepped, Site::Exit));
                        go_exit_funcs.push(id);
                    } else {
                        go.push(exit.file_offset, cookie(exit.stepped, Site::Exit));
                    }
                }
                continue;
            }
            let cookie = match scope {
                Scope::AnyProcess(_) => catalogue::any_process(cookie(f.stepped, Site::Entry)),
                Scope::Process(_) => cookie(f.stepped, Site::Entry),
            };
            // A function whose result is the connection has nothing to tell at entry.
            if f.row.flags & catalogue::SSL_RET != 0 {
                connection_ret.push(f.file_offset, cookie);
            } else if f.row.stage.is_none() {
                entry.push(f.file_offset, cookie);
            } else if sessions {
                session.push(f.file_offset, cookie);
            } else {
                entry.push(f.file_offset, cookie);
                ret.push(f.file_offset, cookie);
            }
        }
        self.next_spec_id += 1;
        let open_path = match &scope {
            Scope::AnyProcess(file) => std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd())),
            Scope::Process(p) => m.open_path(p.pid),
        };
        Ok(ProbeSpec {
            id: self.next_spec_id,
            scope,
            path: m.display_path().to_string(),
            open_path,
            file: (m.dev.clone(), m.inode),
            entry,
            ret,
            connection_ret,
            session,
            go,
            go_exits,
            go_exit_funcs,
            learning: Learning::default(),
        })
    }

    /// Probes file m's TLS code `obj` in every process that maps it, where it is not yet (a library of the
    /// machine, before any target maps it).
    pub(super) fn attach_everywhere(
        &mut self,
        skel: &TlsprofSkel,
        m: &Mapping,
        obj: &TlsObject,
        opts: &AttachOptions,
    ) -> Result<()> {
        let me = Process::from_pid(std::process::id()).context("read tlsprof's own process")?;
        self.attach_object(skel, &me, m, obj, opts, false)
    }

    /// Whether process p's native TLS files are probed in every process that maps them (Wide).
    fn wide_for(&self, p: &Process) -> bool {
        self.wide == Wide::Every || targets::has_children(p.pid)
    }

    /// Attaches a spec unless the probes are paused, and keeps it for the next windows.
    fn start(&mut self, skel: &TlsprofSkel, spec: ProbeSpec) -> Result<()> {
        self.probes += spec.entry.offsets.len() + spec.ret.offsets.len() + spec.go.offsets.len();
        self.probes += spec.session.offsets.len() + spec.connection_ret.offsets.len();
        self.probes += spec.go_exits.offsets.len();
        if !self.paused {
            self.attach_spec(skel, &spec)?;
        }
        self.specs.push(spec);
        Ok(())
    }

    pub(super) fn attach_spec(&mut self, skel: &TlsprofSkel, spec: &ProbeSpec) -> Result<()> {
        // Exits first: a call entered between the two attachments would otherwise never be seen to end.
        let exits = self.exit_links.entry(spec.id).or_default();
        let gone = spec.sync_exits(skel, exits)?;
        // A file's links in every process are no process's: 0.
        let pid = spec.scope.pid().unwrap_or(0);
        detach(gone.into_iter().map(|l| (pid, l)).collect());
        self.links.extend(spec.attach(skel)?.into_iter().map(|l| (pid, l)));
        Ok(())
    }

    /// Processes whose handshake stages ran outside any handshake call (TARGET_UNFRAMED_WORK): the
    /// application leaves its handshakes to SSL_read/SSL_write, so those are probed in it from now on, as
    /// handshake drivers. Returns the processes that got them.
    pub fn drive_from_io(&mut self, skel: &TlsprofSkel) -> Result<Vec<u32>> {
        if self.io_drivers.is_empty() {
            return Ok(Vec::new());
        }
        let flagged: Vec<u32> = skel
            .maps
            .targets
            .keys()
            .filter_map(|k| Some(u32::from_ne_bytes(k.try_into().ok()?)))
            .filter(|pid| {
                let mut state = target_state::default();
                matches!(skel.maps.targets.lookup(&pid.to_ne_bytes(), MapFlags::ANY), Ok(Some(v))
                    if plain::copy_from_bytes(&mut state, &v).is_ok()
                        && u32::from(state.flags) & target_flags::TARGET_UNFRAMED_WORK.0 != 0)
            })
            .collect();
        let mut started = Vec::new();
        for pid in flagged {
            while let Some(i) = self.io_drivers.iter().position(|s| s.scope.pid() == Some(pid)) {
                let spec = self.io_drivers.swap_remove(i);
                self.start(skel, spec)?;
                if !started.contains(&pid) {
                    started.push(pid);
                }
            }
        }
        Ok(started)
    }
}

impl ProbeSpec {
    fn attach(&self, skel: &TlsprofSkel) -> Result<Vec<Link>> {
        let mut links = Vec::new();
        // Returns first: a call entered between the two attachments would otherwise never see its return.
        let sets = [
            (&self.ret, Kind::Return, &skel.progs.stage_exit),
            (&self.connection_ret, Kind::Return, &skel.progs.connection_return),
            (&self.session, Kind::Session, &skel.progs.stage_session),
            (&self.entry, Kind::Entry, &skel.progs.stage_enter),
            (&self.go, Kind::Entry, &skel.progs.go_probe),
        ];
        for (probes, kind, prog) in sets {
            if probes.offsets.is_empty() {
                continue;
            }
            if !prog.autoload() {
                bail!(
                    "it runs Go, and tlsprof loaded its Go programs only for Go targets at its start or those \
                     --comm and --all take: record it with --pid {}",
                    self.scope.pid().map_or("PID".to_string(), |p| p.to_string())
                );
            }
            links.push(self.attach_probes(probes, kind, prog)?);
        }
        Ok(links)
    }

    pub(super) fn attach_probes(&self, probes: &Probes, kind: Kind, prog: &libbpf_rs::ProgramMut) -> Result<Link> {
        prog.attach_uprobe_multi_with_opts(
            self.scope.attach_pid(),
            &self.open_path,
            "",
            UprobeMultiOpts {
                offsets: probes.offsets.clone(),
                cookies: probes.cookies.clone(),
                retprobe: kind == Kind::Return,
                session: kind == Kind::Session,
                ..Default::default()
            },
        )
        .with_context(|| {
            format!(
                "attach {} uprobes in {} of {}",
                match kind {
                    Kind::Entry => "entry",
                    Kind::Return => "return",
                    Kind::Session => "session",
                },
                Printable(&self.path),
                match self.scope.pid() {
                    Some(pid) => format!("process {pid}"),
                    None => "every process".to_string(),
                }
            )
        })
    }
}
