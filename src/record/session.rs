// SPDX-License-Identifier: Apache-2.0
//! A recording session: the steps in order (preflight, load, calibrate, attach, record, read the maps) and
//! the poll loop, which only asks each part to do its job: drain the ring buffers into handshakes and
//! samples, read the CPU meters, let the governor open or close a probe window, keep the hello windows,
//! pick up new processes (--comm, --all) and targets that ran exec, draw the status line, and stop. In
//! continuous mode (`serve`) it also hands over each interval as a recording of its own.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, RingBufferBuilder};

use super::bpf::types::{tlsprof_stat, tree_key, tree_val};
use super::calibrate;
use super::cpu::CpuMeters;
use super::governor::{Action, Governor};
use super::handshakes::Handshakes;
use super::hello::HelloWindows;
use super::privileges;
use super::probes::{self, Change, TargetSet};
use super::programs::{self, Programs};
use super::samples::NamedSamples;
use super::samples::SampleAggregator;
use super::status::{self, StatusLine};
use super::steal::{self, Slices};
use super::targets::{self, Process};
use super::traps::ProbeTraps;
use super::windows::{Reading, TreeSeen, WindowLog};
use super::RecordOptions;
use crate::model::untrusted::Printable;
use crate::model::{
    self, corrected_tree, HandshakeGroup, Hits, Lost, ProbeWindow, Probing, RawNode, Recording, Target, TrapSamples,
};

/// How often the ring buffers are drained (they hold several seconds of events at the highest rates).
const POLL: Duration = Duration::from_millis(100);
/// How often /proc is read for new processes (--comm, --all) and targets that ran exec.
const RESCAN: Duration = Duration::from_millis(500);

/// Continuous mode: every `every`, the interval since the last one is handed to `take` as a recording.
pub struct Snapshots<'a> {
    pub every: Duration,
    pub take: &'a mut dyn FnMut(Recording),
}

/// Records until the duration, a stop, or every target has exited.
pub fn record(procs: &[Process], opts: &RecordOptions, stop: Arc<AtomicBool>) -> Result<Recording> {
    run(procs, opts, stop, None)
}

/// Records until a stop, handing over each interval (continuous mode). With --comm it waits for new
/// processes when every target has exited.
pub fn serve(procs: &[Process], opts: &RecordOptions, stop: Arc<AtomicBool>, snapshots: Snapshots) -> Result<()> {
    run(procs, opts, stop, Some(snapshots)).map(drop)
}

fn run(
    procs: &[Process],
    opts: &RecordOptions,
    stop: Arc<AtomicBool>,
    mut snapshots: Option<Snapshots>,
) -> Result<Recording> {
    privileges::preflight()?;
    let t0 = Instant::now();
    let mut open_object = MaybeUninit::uninit();
    let skel = programs::load(&mut open_object, &opts.attach)?;
    let probe_cost = calibrate::measure(&skel)?;
    // Read while the probes attach: the kernel writes out its whole symbol table.
    let traps = std::thread::spawn(ProbeTraps::new);
    let mut programs = Programs::new(skel, probe_cost);
    // The first window opens as every later one does, once all the probes are attached and with the
    // readings it starts from: until then the programs ignore their hits (the governor owes their cost).
    probes::hold_window(&mut programs.skel)?;
    let mut targets = TargetSet::attach(&programs.skel, procs, &opts.selection, &opts.attach)?;
    programs.start_sampling(opts.attach.freq_hz)?;
    let mut hello = HelloWindows::start(opts.attach.hello_capture, &programs)?;
    let mut live: Vec<Process> = procs
        .iter()
        .filter(|p| targets.maps.contains_key(&p.pid))
        .cloned()
        .collect();
    let mut containers: HashMap<u32, Option<String>> =
        live.iter().map(|p| (p.pid, targets::container_of(p.pid))).collect();
    let mut execs: HashMap<u32, Vec<f64>> = HashMap::new();

    let samples = RefCell::new(SampleAggregator::new(
        programs::call_graph_id(opts.attach.call_graph),
        opts.attach.kernel_stacks,
        traps.join().ok().flatten(),
        targets.maps.clone(),
    ));
    // The trap sampler's counts so far: it runs while the probes are attached, over the targets' CPU then.
    let trap_samples = |programs: &Programs| {
        samples
            .borrow()
            .traps
            .as_ref()
            .map(|t| programs.trap_samples(t.trapped))
    };
    let probed_ms = |cpu: &CpuMeters| cpu.probed_ms().values().sum::<f64>();
    let probe_ms =
        |programs: &Programs, cpu: &CpuMeters| programs.target_probe_ms(trap_samples(programs), probed_ms(cpu));
    probes::open_window(&mut programs.skel)?;
    let started = Instant::now();
    let started_unix_ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_nanos() as u64);
    let mut cpu = CpuMeters::default();
    for p in &live {
        cpu.start(p.pid);
    }
    programs.step_trap_sampler(true, probed_ms(&cpu))?;
    let mut governor = Governor::new(
        opts.max_overhead_pct,
        started,
        probe_ms(&programs, &cpu),
        cpu.total_ms(),
    );
    // Each target's connections and slices as last read: a process keeps its counts once it is no longer
    // a target.
    let mut counters: BTreeMap<u32, (u64, Slices)> = BTreeMap::new();
    let reading = |now: Instant, cpu: &CpuMeters, programs: &Programs, counters: &mut BTreeMap<u32, (u64, Slices)>| {
        counters.extend(programs.target_counters());
        Reading {
            now,
            probed_cpu_ms: cpu.probed_ms(),
            probe_ms: probe_ms(programs, cpu),
            connections: counters.iter().map(|(&pid, &(c, _))| (pid, c)).collect(),
            slices: counters.iter().map(|(&pid, &(_, s))| (pid, s)).collect(),
        }
    };
    let first = reading(started, &cpu, &programs, &mut counters);
    eprintln!(
        "tlsprof: probes live: {} functions ({} uprobes) in {} files of {} processes ({:.0} ms); sampling at {} Hz",
        targets.functions.len(),
        targets.probes,
        targets.libraries.len(),
        live.len(),
        t0.elapsed().as_secs_f64() * 1e3,
        opts.attach.freq_hz
    );
    let mut windows = WindowLog::dated_from(started, started_unix_ns);
    windows.open(first.clone());
    let handshakes = RefCell::new(Handshakes::new(probe_cost));
    let mut rb = RingBufferBuilder::new();
    rb.add(&programs.skel.maps.handshakes, |data: &[u8]| {
        handshakes.borrow_mut().add(data);
        0
    })?;
    rb.add(&programs.skel.maps.stacks, |data: &[u8]| {
        samples.borrow_mut().add(data);
        0
    })?;
    rb.add(&programs.skel.maps.trap_samples, |data: &[u8]| {
        samples.borrow_mut().add_trap_sample(data);
        0
    })?;
    let rb = rb.build()?;

    let mut status = StatusLine::new();
    let mut last_rescan = Instant::now();
    let mut io_driven = HashMap::new();
    let mut interval = Interval::start(started, &programs, trap_samples(&programs));
    loop {
        // The BPF side never wakes us (BPF_RB_NO_WAKEUP): drain on our own clock.
        std::thread::sleep(POLL);
        rb.consume().context("drain the ring buffers")?;
        samples.borrow_mut().name_when_due(&targets.functions);
        let elapsed = started.elapsed();
        cpu.poll(&live, governor.live());
        programs.step_trap_sampler(governor.live(), probed_ms(&cpu))?;
        let now = Instant::now();
        match governor.tick(now, probe_ms(&programs, &cpu), cpu.total_ms()) {
            Action::Pause => {
                // The trap sampler stops with the targets' CPU counted as probed, at this reading.
                programs.step_trap_sampler(false, probed_ms(&cpu))?;
                let at = reading(now, &cpu, &programs, &mut counters);
                // The window ends here (the epoch flips first): detaching takes time, during which the
                // stage probes and the hello capture still run.
                targets.pause(&mut programs.skel)?;
                rb.consume().context("drain the ring buffers")?;
                let tree = read_tree(&programs)?;
                let seen = handshakes.borrow_mut().take_window();
                handshakes.borrow_mut().forget_pending_hellos();
                windows.close(&at, seen, tree, &targets.functions, &probe_cost);
                hello.close();
            }
            Action::Resume => {
                targets.resume(&mut programs.skel)?;
                // The window starts as the epoch flips, at the end of resume: it is dated from there.
                let flipped = Instant::now();
                cpu.poll(&live, false);
                programs.step_trap_sampler(true, probed_ms(&cpu))?;
                let now = reading(flipped, &cpu, &programs, &mut counters);
                governor.resumed(now.now, now.probe_ms, cpu.total_ms());
                windows.open(now);
            }
            Action::Stay => {}
        }
        hello.update(&programs, governor.live(), handshakes.borrow().completed)?;
        for pid in targets.drive_from_io(&programs.skel)? {
            eprintln!(
                "{}tlsprof: process {pid} runs its handshakes inside SSL_read/SSL_write: probing those too",
                status.clear()
            );
            io_driven.insert(pid, elapsed.as_secs_f64());
        }
        if last_rescan.elapsed() >= RESCAN {
            last_rescan = Instant::now();
            for (p, change) in targets.changes(&opts.selection) {
                let name = format!("{} ({})", p.pid, Printable(&p.comm));
                let was_target =
                    change == Change::Exec && live.iter().any(|l| l.pid == p.pid && l.start_ticks == p.start_ticks);
                match targets.add(&programs.skel, &p, &opts.attach) {
                    Ok(probed) if was_target => {
                        let maps = targets.maps[&p.pid].clone();
                        samples.borrow_mut().replace_process(p.pid, maps, &targets.functions);
                        execs.entry(p.pid).or_default().push(elapsed.as_secs_f64());
                        let now = if probed {
                            "probes moved to it"
                        } else {
                            "no TLS code in it: not probed from now on"
                        };
                        eprintln!("{}tlsprof: process {name} ran a new program: {now}", status.clear());
                        if let Some(l) = live.iter_mut().find(|l| l.pid == p.pid) {
                            l.comm = p.comm.clone();
                        }
                    }
                    Ok(true) => {
                        eprintln!("{}tlsprof: attached to new process {name}", status.clear());
                        samples.borrow_mut().add_process(p.pid, targets.maps[&p.pid].clone());
                        cpu.start(p.pid);
                        containers.insert(p.pid, targets::container_of(p.pid));
                        live.push(p);
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
        if let Some(s) = snapshots.as_mut().filter(|s| interval.start.elapsed() >= s.every) {
            rb.consume().context("drain the ring buffers")?;
            cpu.poll(&live, governor.live());
            programs.step_trap_sampler(governor.live(), probed_ms(&cpu))?;
            let at = reading(Instant::now(), &cpu, &programs, &mut counters);
            let tree = read_tree(&programs)?;
            if governor.live() {
                // The live window is cut here: its two parts go with the intervals they fall in.
                let seen = handshakes.borrow_mut().take_window();
                windows.close(&at, seen, tree.clone(), &targets.functions, &probe_cost);
                windows.reopen(at.clone());
            }
            let slices = steal::between(&std::mem::replace(&mut interval.slices, at.slices.clone()), &at.slices);
            let handshake_groups = handshakes.borrow_mut().take_groups();
            let tree = interval.tree.delta(tree);
            // A process that exited after its last CPU reading still has what the probes saw of it here.
            let seen_pids: BTreeSet<u32> = handshake_groups
                .iter()
                .filter_map(|g| g.pid)
                .chain(tree.iter().map(|n| n.pid))
                .collect();
            let mut recorded = interval.targets(&live, &cpu, &at.connections, &slices, &seen_pids);
            for t in &mut recorded {
                t.io_driven_from_s = io_driven.get(&t.pid).copied();
                t.container = containers.get(&t.pid).cloned().flatten();
            }
            let interval_connections: u64 = recorded.iter().map(|t| t.connections).sum();
            let mut window_figures = std::mem::take(&mut windows.closed);
            let saw_connections = |w: &ProbeWindow| w.processes.iter().any(|p| p.connections > 0);
            match window_figures.iter().rfind(|w| saw_connections(w)) {
                Some(w) => interval.last_seen = Some(w.clone()),
                // The probes were detached while this interval's connections came (the duty cycle paused
                // through it, or a burst came and went between windows): the last window that saw
                // connections stands for it, as handshakes per connection and stage CPU per CPU ms hold.
                None if interval_connections > 0 || window_figures.is_empty() => {
                    window_figures.extend(interval.last_seen.clone())
                }
                None => {}
            }
            // Before the parts: taking the named samples holds the aggregator until the statement ends.
            let traps = interval.traps(trap_samples(&programs));
            let parts = Parts {
                recorded,
                handshakes: handshake_groups,
                named: samples.borrow_mut().take_named(&targets.functions),
                tree,
                lost: interval.lost(&programs),
                hits: interval.hits(&programs),
                traps,
                start_unix_ns: started_unix_ns.map(|ns| ns + (interval.start - started).as_nanos() as u64),
                duration_s: (at.now - interval.start).as_secs_f64(),
                probing: Probing {
                    max_overhead_pct: opts.max_overhead_pct,
                    live_s: interval.probed(governor.probed(at.now)).as_secs_f64(),
                    windows: window_figures.len() as u32,
                    peak_overhead: governor.peak_overhead,
                    window_figures,
                },
            };
            (s.take)(parts.into_recording(&programs, &targets, opts)?);
            interval.start = at.now;
            // Nothing is kept of a target that exited once its last figures are handed over: memory stays
            // bounded however many processes come and go.
            let exited: Vec<u32> = live
                .iter()
                .filter(|p| !p.alive() && samples.borrow_mut().forget(p.pid))
                .map(|p| p.pid)
                .collect();
            for &pid in &exited {
                live.retain(|p| p.pid != pid);
                cpu.forget(pid);
                containers.remove(&pid);
                io_driven.remove(&pid);
                execs.remove(&pid);
                counters.remove(&pid);
                interval.cpu.remove(&pid);
                interval.tree.forget(pid);
                windows.tree_seen.forget(pid);
                handshakes.borrow_mut().forget(pid);
                targets.forget_exited(&programs.skel, pid);
            }
            forget_tree_nodes(&programs, &exited);
            targets.forget_gone();
        }
        status.show(
            elapsed,
            handshakes.borrow().completed,
            programs.stat(tlsprof_stat::STAT_SAMPLES),
        );
        // --all runs until stopped, as continuous mode with --comm or --all does: targets may come and go.
        let waits_for_newcomers = opts.selection.all || (snapshots.is_some() && !opts.selection.comms.is_empty());
        let all_exited = !waits_for_newcomers && live.iter().all(|p| !p.alive());
        if stop.load(Ordering::Relaxed) || opts.duration.is_some_and(|d| elapsed >= d) || all_exited {
            if all_exited {
                eprintln!("{}tlsprof: every target has exited", status.clear());
            }
            break;
        }
    }
    let end = Instant::now();
    rb.consume().context("drain the ring buffers")?;
    cpu.poll(&live, governor.live());
    programs.step_trap_sampler(false, probed_ms(&cpu))?;
    let at = reading(end, &cpu, &programs, &mut counters);
    if governor.live() {
        let tree = read_tree(&programs)?;
        let seen = handshakes.borrow_mut().take_window();
        windows.close(&at, seen, tree, &targets.functions, &probe_cost);
    }
    eprint!("{}", status.clear());
    hello.close();
    drop(rb);
    let probing = Probing {
        max_overhead_pct: opts.max_overhead_pct,
        live_s: governor.probed(end).as_secs_f64(),
        windows: governor.windows,
        peak_overhead: governor.peak_overhead,
        window_figures: windows.closed,
    };
    let slices = steal::between(&first.slices, &at.slices);
    let recorded = live
        .iter()
        .map(|p| {
            let (process_cpu_ms, probed_cpu_ms) = cpu.of(p.pid);
            let (stage_slices_ms, stage_slices_cpu_ms) = slice_ms(slices.get(&p.pid));
            Target {
                pid: p.pid,
                comm: p.comm.clone(),
                process_cpu_ms,
                probed_cpu_ms,
                io_driven_from_s: io_driven.get(&p.pid).copied(),
                container: containers.remove(&p.pid).flatten(),
                connections: at.connections.get(&p.pid).copied().unwrap_or(0),
                execs_at_s: execs.remove(&p.pid).unwrap_or_default(),
                stage_slices_ms,
                stage_slices_cpu_ms,
            }
        })
        .collect();
    let samples = samples.into_inner();
    let parts = Parts {
        recorded,
        handshakes: handshakes.into_inner().take_groups(),
        traps: samples.traps.as_ref().map(|t| programs.trap_samples(t.trapped)),
        named: samples.finish(&targets.functions),
        tree: read_tree(&programs)?,
        lost: counted_losses(&programs),
        hits: programs.target_probe_hits(),
        start_unix_ns: started_unix_ns,
        duration_s: (end - started).as_secs_f64(),
        probing,
    };
    parts.into_recording(&programs, &targets, opts)
}

/// What the counters at the start of the current interval were (continuous mode): the interval's figures
/// are the differences.
struct Interval {
    start: Instant,
    probed: Duration,
    hits: Hits,
    traps: Option<TrapSamples>,
    lost: Lost,
    /// Per target: CPU, CPU while probed, and connections.
    cpu: HashMap<u32, (f64, f64, u64)>,
    tree: TreeSeen,
    /// Each target's stage threads' slices when the interval started.
    slices: BTreeMap<u32, Slices>,
    /// The last probe window that saw connections.
    last_seen: Option<ProbeWindow>,
}

impl Interval {
    fn start(now: Instant, programs: &Programs, traps: Option<TrapSamples>) -> Interval {
        Interval {
            start: now,
            probed: Duration::ZERO,
            hits: programs.target_probe_hits(),
            traps,
            lost: counted_losses(programs),
            cpu: HashMap::new(),
            tree: TreeSeen::default(),
            slices: BTreeMap::new(),
            last_seen: None,
        }
    }

    fn probed(&mut self, now: Duration) -> Duration {
        now.saturating_sub(std::mem::replace(&mut self.probed, now))
    }

    fn hits(&mut self, programs: &Programs) -> Hits {
        let now = programs.target_probe_hits();
        now.minus(&std::mem::replace(&mut self.hits, now))
    }

    fn traps(&mut self, now: Option<TrapSamples>) -> Option<TrapSamples> {
        let before = std::mem::replace(&mut self.traps, now)?;
        now.map(|n| n.since(&before))
    }

    fn lost(&mut self, programs: &Programs) -> Lost {
        let now = counted_losses(programs);
        now.since(&std::mem::replace(&mut self.lost, now.clone()))
    }

    /// The targets with their CPU and connections over the interval; those that exited before it are left
    /// out, unless the probes saw something of them in it (`seen`). What else is known of them is the
    /// caller's to fill.
    fn targets(
        &mut self,
        live: &[Process],
        cpu: &CpuMeters,
        connections: &BTreeMap<u32, u64>,
        slices: &BTreeMap<u32, Slices>,
        seen: &BTreeSet<u32>,
    ) -> Vec<Target> {
        let mut out = Vec::new();
        for p in live {
            let (total, probed) = cpu.of(p.pid);
            let conns = connections.get(&p.pid).copied().unwrap_or(0);
            let (t0, p0, c0) = self.cpu.insert(p.pid, (total, probed, conns)).unwrap_or_default();
            let (stage_slices_ms, stage_slices_cpu_ms) = slice_ms(slices.get(&p.pid));
            if !p.alive() && total == t0 && conns == c0 && !seen.contains(&p.pid) {
                continue;
            }
            out.push(Target {
                pid: p.pid,
                comm: p.comm.clone(),
                process_cpu_ms: (total - t0).max(0.0),
                probed_cpu_ms: (probed - p0).max(0.0),
                io_driven_from_s: None,
                container: None,
                connections: conns.saturating_sub(c0),
                execs_at_s: Vec::new(),
                stage_slices_ms,
                stage_slices_cpu_ms,
            });
        }
        out
    }
}

/// A target's stage threads' slices by the wall clock and by the task clock, in ms (Target::stage_slices_ms,
/// stage_slices_cpu_ms).
fn slice_ms(slices: Option<&Slices>) -> (f64, f64) {
    let s = slices.copied().unwrap_or_default();
    (s.wall_ns as f64 / 1e6, s.task_ns as f64 / 1e6)
}

/// What the BPF side counted as lost so far (the stacks' losses are counted as they are named).
fn counted_losses(programs: &Programs) -> Lost {
    Lost {
        samples_taken: programs.stat(tlsprof_stat::STAT_SAMPLES),
        samples: programs.stat(tlsprof_stat::STAT_SAMPLE_DROPS),
        handshake_events: programs.stat(tlsprof_stat::STAT_HANDSHAKE_DROPS),
        tree_nodes: programs.stat(tlsprof_stat::STAT_TREE_DROPS),
        depth_overflow: programs.stat(tlsprof_stat::STAT_DEPTH_OVERFLOW),
        missed_returns: programs.stat(tlsprof_stat::STAT_MISSED_RETURNS),
        threads: programs.stat(tlsprof_stat::STAT_THREAD_DROPS),
        connections: programs.stat(tlsprof_stat::STAT_CONN_DROPS),
        unframed_work: programs.stat(tlsprof_stat::STAT_UNFRAMED_WORK),
        ..Lost::default()
    }
}

/// What a recording (or an interval of one) is read from.
struct Parts {
    recorded: Vec<Target>,
    handshakes: Vec<HandshakeGroup>,
    named: NamedSamples,
    /// The kernel's call tree, before the probes' cost is taken out.
    tree: Vec<RawNode>,
    /// The BPF side's losses (counted_losses).
    lost: Lost,
    hits: Hits,
    traps: Option<TrapSamples>,
    start_unix_ns: Option<u64>,
    duration_s: f64,
    probing: Probing,
}

impl Parts {
    fn into_recording(self, programs: &Programs, targets: &TargetSet, opts: &RecordOptions) -> Result<Recording> {
        let hits = self.hits;
        let tree = corrected_tree(self.tree, &programs.probe_cost);
        let named = self.named;
        let lost = Lost {
            unreadable_stacks: named.unreadable,
            cut_stacks: named.cut,
            ..self.lost
        };
        Ok(Recording {
            format: model::FORMAT.into(),
            format_version: model::FORMAT_VERSION,
            tlsprof_version: env!("CARGO_PKG_VERSION").into(),
            start_unix_ns: self.start_unix_ns,
            duration_s: self.duration_s,
            sample_freq_hz: opts.attach.freq_hz,
            call_graph: opts.attach.call_graph,
            stack_bytes: opts.attach.stack_bytes,
            unnamed_jit_pids: named.unnamed_jit_pids,
            all_probes: opts.attach.all_probes,
            targets: self.recorded,
            libraries: targets.libraries.clone(),
            functions: targets.functions.clone(),
            tree,
            samples: named.samples,
            frame_files: named.frame_files,
            unnamed_files: named.unnamed_files,
            debug_files: named.debug_files,
            handshakes: self.handshakes,
            lost,
            probe_cost: programs.probe_cost,
            probe_hits: hits.all,
            probe_stepped_hits: hits.stepped,
            probe_traps: self.traps,
            probing: self.probing,
            // Measured by the caller once the recording is over (speed::measure).
            openssl_speed: BTreeMap::new(),
        })
    }
}

/// Deletes the call-tree nodes of processes that exited: the map is bounded, and its nodes would count
/// against new processes' room.
fn forget_tree_nodes(programs: &Programs, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let map = &programs.skel.maps.tree;
    let gone: Vec<Vec<u8>> = map
        .keys()
        .filter(|key| {
            key.get(..4)
                .is_some_and(|tgid| pids.contains(&u32::from_ne_bytes(tgid.try_into().expect("4 bytes"))))
        })
        .collect();
    for key in gone {
        let _ = map.delete(&key);
    }
}

/// The call tree as the BPF side counted it so far.
fn read_tree(programs: &Programs) -> Result<Vec<RawNode>> {
    let map = &programs.skel.maps.tree;
    let mut raw = Vec::new();
    for key in map.keys() {
        let Some(value) = map.lookup(&key, libbpf_rs::MapFlags::ANY)? else {
            continue;
        };
        let (mut k, mut v) = (tree_key::default(), tree_val::default());
        plain::copy_from_bytes(&mut k, &key).ok().context("tree key size")?;
        plain::copy_from_bytes(&mut v, &value).ok().context("tree value size")?;
        let depth = usize::from(k.depth).min(k.funcs.len());
        raw.push(RawNode {
            pid: k.tgid,
            path: k.funcs[..depth].to_vec(),
            calls: v.calls,
            cpu_ns: v.cpu_ns,
            nested: Hits {
                all: v.nested_hits,
                stepped: v.nested_stepped,
            },
        });
    }
    Ok(raw)
}
