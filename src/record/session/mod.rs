// SPDX-License-Identifier: Apache-2.0
//! A recording session: `Session::start` (preflight, load, calibrate, attach, the first probe window),
//! `tick` once per poll (drain the ring buffers, read the CPU meters, let the governor open or close a probe
//! window, keep the hello windows, pick up new processes and targets that ran exec), and `finish` (the last
//! window closed, the recording assembled). `record` runs the loop to the end; continuous mode (`serve`)
//! consumes the session's intervals as it goes (interval.rs). The ring buffers are drained in events.rs,
//! processes taken in in processes.rs, probe windows closed and opened in windows.rs.

mod assemble;
mod events;
mod interval;
mod processes;
mod windows;

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use libbpf_rs::OpenObject;

use super::discovery::gobin;
use super::discovery::targets::{self, Process};
use super::duty::cpu::CpuMeters;
use super::duty::governor::{Action, Governor};
use super::duty::steal::{self, Slices};
use super::duty::traps::ProbeTraps;
use super::duty::windows::{Reading, WindowLog};
use super::handshakes::events::Handshakes;
use super::handshakes::hello::{HelloCapture, HelloWindows};
use super::kernel::bpf::types::tlsprof_stat;
use super::kernel::probes::{self, TargetSet};
use super::kernel::programs::{self, Programs, TargetCounters};
use super::kernel::{calibrate, privileges};
use super::stacks::jvm;
use super::stacks::samples::SampleAggregator;
use super::status::StatusLine;
use super::RecordOptions;
use crate::model::{Placement, Probing, Recording, Target};
use assemble::{counted_losses, read_tree, Parts};
use events::Events;
use interval::Interval;
use windows::{probe_ms, probed_ms, reading};

/// How often /proc is read for new processes (--comm, --all) and targets that ran exec (the kernel tells of
/// most as they start: this finds those it could not, a process renamed, one started as tlsprof did).
const RESCAN: Duration = Duration::from_millis(500);
/// Continuous mode: every `every`, and whenever `cut` says so, the interval since the last one is handed to
/// `take` as a recording.
pub struct Snapshots<'a> {
    pub every: Duration,
    /// Asked at every poll: whether an interval should end now (a boundary someone asked for).
    pub cut: &'a dyn Fn() -> bool,
    pub take: &'a mut dyn FnMut(Recording),
}

/// Records until the duration, a stop, or every target has exited.
pub fn record(procs: &[Process], opts: &RecordOptions, stop: Arc<AtomicBool>) -> Result<Recording> {
    let mut object = MaybeUninit::uninit();
    let mut session = Session::start(&mut object, procs, opts)?;
    while !session.done(&stop) {
        session.tick()?;
    }
    session.finish()
}

/// Records until a stop, handing over each interval (continuous mode). With --comm it waits for new
/// processes when every target has exited.
pub fn serve(procs: &[Process], opts: &RecordOptions, stop: Arc<AtomicBool>, snapshots: Snapshots) -> Result<()> {
    let mut object = MaybeUninit::uninit();
    let mut session = Session::start(&mut object, procs, opts)?;
    let mut interval = Interval::start(&session);
    while !session.done(&stop) {
        session.tick()?;
        if interval.elapsed() >= snapshots.every || (snapshots.cut)() {
            (snapshots.take)(interval.take(&mut session)?);
        }
    }
    session.finish().map(drop)
}

/// What the session keeps of each target; a process that exits (continuous mode) is one removal.
struct Tracked {
    process: Process,
    /// Where it lives, by its cgroup.
    placement: Placement,
    /// When its SSL_read/SSL_write started to be probed as handshake drivers (s into the recording).
    io_driven_from_s: Option<f64>,
    /// When it ran a new program (s into the recording).
    execs_at_s: Vec<f64>,
    /// Its counters as last read: kept once it is no longer a target.
    counters: TargetCounters,
    /// It started during the recording: when it was taken in (s into the recording), and who forked it.
    joined_at_s: Option<f64>,
    parent: Option<u32>,
    /// It exited, and its last counters were read: its entry in the targets map is gone.
    retired: bool,
}

impl Tracked {
    fn new(process: Process) -> Tracked {
        Tracked {
            placement: targets::placement_of(process.pid),
            process,
            io_driven_from_s: None,
            execs_at_s: Vec::new(),
            counters: TargetCounters::default(),
            joined_at_s: None,
            parent: None,
            retired: false,
        }
    }
}

/// One recording session over its targets.
pub struct Session<'obj, 'o> {
    opts: &'o RecordOptions,
    programs: Programs<'obj>,
    events: Events,
    targets: TargetSet,
    tracked: BTreeMap<u32, Tracked>,
    hello: HelloWindows,
    cpu: CpuMeters,
    governor: Governor,
    windows: WindowLog,
    handshakes: Handshakes,
    samples: SampleAggregator,
    status: StatusLine,
    started: Instant,
    started_unix_ns: Option<u64>,
    /// The counters when the first window opened.
    first: Reading,
    last_rescan: Instant,
    /// Callers of Go functions reported since the last tick (EVENT_GO_RETURN: process, function id, return
    /// address and the caller's), to probe where they resume.
    callers: Vec<(u32, u16, [u64; 2])>,
    /// Processes that joined as they started, so far.
    followed: usize,
}

impl<'obj, 'o> Session<'obj, 'o> {
    /// Loads the programs, attaches to `procs` and opens the first probe window.
    pub fn start(
        object: &'obj mut MaybeUninit<OpenObject>,
        procs: &[Process],
        opts: &'o RecordOptions,
    ) -> Result<Session<'obj, 'o>> {
        privileges::preflight()?;
        let t0 = Instant::now();
        // Processes that start later may run Go only if --comm or --all takes them by what they run.
        let go = opts.selection.follows_new() || procs.iter().any(gobin::runs_go);
        let skel = programs::load(object, &opts.attach, &opts.selection, go)?;
        // Read while the calibration runs and the probes attach: the kernel writes out its whole symbol
        // table. Not while the maps are made: in a memory cgroup they fill, its memory would get tlsprof
        // killed where the maps' failure says why.
        let traps = std::thread::spawn(ProbeTraps::new);
        let probe_cost = calibrate::measure(&skel)?;
        let mut programs = Programs::new(skel, probe_cost);
        programs.follow_processes()?;
        // The first window opens as every later one does, once all the probes are attached and with the
        // readings it starts from: until then the programs ignore their hits (the governor owes their cost).
        probes::hold_window(&mut programs.skel)?;
        let targets = TargetSet::attach(&programs.skel, procs, &opts.selection, &opts.attach)?;
        programs.start_sampling(opts.attach.freq_hz)?;
        // Handshakes counted from the wire alone are counted whenever the probes would be live.
        let capture = match opts.attach.hello_capture {
            HelloCapture::Sampled if !targets.wire_only.is_empty() => HelloCapture::Always,
            mode => mode,
        };
        let hello = HelloWindows::start(capture, &mut programs)?;
        let mut tracked: BTreeMap<u32, Tracked> = procs
            .iter()
            .filter(|p| targets.maps.contains_key(&p.pid))
            .map(|p| (p.pid, Tracked::new(p.clone())))
            .collect();
        let traps = traps.join().unwrap_or_else(|_| {
            eprintln!(
                "tlsprof: reading /proc/kallsyms failed: the probes' cost is not measured in the targets' traps, only calibrated"
            );
            None
        });
        let samples = SampleAggregator::new(
            programs::call_graph_id(opts.attach.call_graph),
            opts.attach.kernel_stacks,
            traps,
            targets.maps.clone(),
            opts.attach.jvm_perf_maps,
        );
        let events = Events::new(&programs)?;
        probes::open_window(&mut programs.skel)?;
        let started = Instant::now();
        let started_unix_ns = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_nanos() as u64);
        let mut cpu = CpuMeters::default();
        for &pid in tracked.keys() {
            cpu.start(pid);
        }
        programs.step_trap_sampler(true, probed_ms(&cpu))?;
        let governor = Governor::new(
            opts.max_overhead_pct,
            started,
            probe_ms(&programs, &samples, &cpu) + programs.other_process_ms(),
            cpu.total_ms(),
        );
        let first = reading(started, &programs, &samples, &cpu, &mut tracked);
        eprintln!(
            "tlsprof: probes live: {} functions ({} uprobes) in {} files of {} processes ({:.0} ms); sampling at {} Hz",
            targets.functions.len(),
            targets.probes,
            targets.libraries.len(),
            tracked.len(),
            t0.elapsed().as_secs_f64() * 1e3,
            opts.attach.freq_hz
        );
        let mut windows = WindowLog::dated_from(started, started_unix_ns);
        windows.open(first.clone());
        Ok(Session {
            opts,
            governor,
            cpu,
            handshakes: Handshakes::new(probe_cost, capture == HelloCapture::Always),
            programs,
            events,
            targets,
            tracked,
            hello,
            windows,
            samples,
            status: StatusLine::new(),
            started,
            started_unix_ns,
            first,
            last_rescan: Instant::now(),
            callers: Vec::new(),
            followed: 0,
        })
    }

    /// One poll: drain the events, read the meters, open or close a probe window, keep the hello windows,
    /// and look for new processes when due.
    pub fn tick(&mut self) -> Result<()> {
        self.wait_poll()?;
        self.drain()?;
        self.learn_callers()?;
        self.samples.name_when_due(&self.targets.functions);
        self.poll_cpu();
        self.step_trap_sampler(self.governor.live())?;
        let now = Instant::now();
        let budget_ms = self.budgeted_ms(self.probe_ms());
        match self.governor.tick(now, budget_ms, self.cpu.total_ms()) {
            Action::Pause => self.pause()?,
            Action::Resume => self.resume()?,
            Action::Stay => {}
        }
        let connections: u64 = self.programs.target_counters().values().map(|c| c.connections).sum();
        let hello_opened = self.hello.update(
            &mut self.programs,
            self.governor.live(),
            connections + self.handshakes.completed,
        )?;
        // A probe window holds one hello window's ClientHellos at most: the hello windows are the clusters
        // resumption is sampled in (a long window, as in exact mode, is cut where the next one opens).
        if hello_opened && self.handshakes.window_read_hellos() {
            let at = self.reading(Instant::now());
            self.close_window(&at, read_tree(&self.programs)?);
            self.windows.reopen(at);
        }
        self.drive_from_io()?;
        self.take_in_processes();
        if self.last_rescan.elapsed() >= RESCAN {
            self.last_rescan = Instant::now();
            self.rescan();
            self.retire_exited();
        }
        self.status.show(
            self.started.elapsed(),
            self.handshakes.completed,
            self.programs.stat(tlsprof_stat::STAT_SAMPLES),
        );
        Ok(())
    }

    /// Whether the recording is over: a stop, the duration, or every target exited, their new processes too
    /// (unless others may come: --all, --comm).
    pub fn done(&self, stop: &AtomicBool) -> bool {
        let selection = &self.opts.selection;
        let waits_for_newcomers = selection.follows_new();
        let all_exited = !waits_for_newcomers && self.tracked.values().all(|t| !t.process.alive());
        if all_exited {
            eprintln!("{}tlsprof: every target has exited", self.status.clear());
        }
        stop.load(Ordering::Relaxed) || self.opts.duration.is_some_and(|d| self.started.elapsed() >= d) || all_exited
    }

    /// Ends the recording: the last window closes, and everything counted becomes the recording.
    pub fn finish(mut self) -> Result<Recording> {
        // A window still open ends as the epoch flips, as at a pause: nothing its probes count after its date.
        if self.governor.live() {
            self.targets.end_window(&mut self.programs.skel)?;
        }
        let end = Instant::now();
        self.drain()?;
        self.take_in_processes();
        self.poll_cpu();
        self.retire_exited();
        self.step_trap_sampler(false)?;
        let at = self.reading(end);
        if self.governor.live() {
            self.close_window(&at, read_tree(&self.programs)?);
        }
        eprint!("{}", self.status.clear());
        self.hello.close();
        let probing = Probing {
            max_overhead_pct: self.opts.max_overhead_pct,
            live_s: self.governor.probed(end).as_secs_f64(),
            windows: self.governor.windows,
            peak_overhead: self.governor.peak_overhead,
            window_figures: std::mem::take(&mut self.windows.closed),
        };
        let slices = steal::between(&self.first.slices, &at.slices);
        let recorded = std::mem::take(&mut self.tracked)
            .into_values()
            .map(|t| {
                let pid = t.process.pid;
                let exited = !t.process.alive();
                let (process_cpu_ms, probed_cpu_ms) = self.cpu.of(pid);
                let (stage_slices_ms, stage_slices_cpu_ms) = slice_ms(slices.get(&pid));
                Target {
                    pid,
                    comm: t.process.comm,
                    process_cpu_ms,
                    probed_cpu_ms,
                    io_driven_from_s: t.io_driven_from_s,
                    container: t.placement.display(),
                    placement: t.placement,
                    connections: at.connections.get(&pid).copied().unwrap_or(0),
                    execs_at_s: t.execs_at_s,
                    stage_slices_ms,
                    stage_slices_cpu_ms,
                    own_programs: at.own.get(&pid).copied().unwrap_or_default(),
                    joined_at_s: t.joined_at_s,
                    parent: t.parent,
                    exited,
                    wire_only: self.targets.wire_only.contains(&pid),
                    jit_stacks_cut: self
                        .targets
                        .maps
                        .get(&pid)
                        .is_some_and(|maps| jvm::jit_stacks_cut(pid, maps)),
                    processes: 1,
                }
            })
            .collect();
        let traps = self.trap_samples();
        let parts = Parts {
            recorded,
            handshakes: self.handshakes.take_groups(),
            ticket_keys: self.handshakes.take_ticket_keys(),
            traps,
            named: self.samples.finish(&self.targets.functions),
            tree: read_tree(&self.programs)?,
            lost: counted_losses(&self.programs),
            hits: self.programs.target_probe_hits(),
            start_unix_ns: self.started_unix_ns,
            duration_s: (end - self.started).as_secs_f64(),
            probing,
        };
        parts.into_recording(&self.programs, &self.targets, self.opts)
    }
}

/// A target's stage threads' slices by the wall clock and by the task clock, in ms (Target::stage_slices_ms,
/// stage_slices_cpu_ms).
fn slice_ms(slices: Option<&Slices>) -> (f64, f64) {
    let s = slices.copied().unwrap_or_default();
    (s.wall_ns as f64 / 1e6, s.task_ns as f64 / 1e6)
}
