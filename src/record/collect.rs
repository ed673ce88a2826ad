// SPDX-License-Identifier: Apache-2.0
//! A recording session: the poll loop (handshake events, live status, process CPU, stop conditions) and
//! reading the BPF maps into a Recording once at the end.

use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, RingBufferBuilder};

use super::anatomy;
use super::attach::{self, AttachOptions, Attached, HelloCapture};
use super::bpf;
use super::bpf::types::{
    handshake_event, hello_event, tlsprof_event_kind, tlsprof_func_flags as ff, tlsprof_stat, tree_key, tree_val,
};

use super::governor::{Action, Governor};
use super::samples::SampleAggregator;
use super::targets::{self, Process};
use super::wire;
use crate::model::{
    self, corrected_tree, CpuHistogram, HandshakeGroup, Hits, Lost, Probing, RawNode, Recording, Role, Target,
};

pub struct RecordOptions {
    pub duration: Option<Duration>,
    /// The --comm names: processes started later under these names join the recording.
    pub comms: Vec<String>,
    pub attach: AttachOptions,
    /// --max-overhead: percent of the targets' CPU the stage probes may cost.
    pub max_overhead_pct: f64,
}

/// How often the ring buffers are drained (they hold several seconds of events at the highest rates).
const POLL: Duration = Duration::from_millis(100);
/// --hello-capture sampled: watch socket calls for this long, every period (while the stage probes are
/// attached: a ServerHello is matched to its connection through them), if handshakes completed since the
/// last window: every read and write of every process runs the capture programs, which keep-alive traffic
/// with no handshakes would pay for nothing.
const HELLO_WINDOW: Duration = Duration::from_secs(1);
const HELLO_PERIOD: Duration = Duration::from_secs(10);
/// How often --comm looks for new processes.
const RESCAN: Duration = Duration::from_millis(500);

/// Per target: process CPU at attach time and at the last successful read, and the part of it used while
/// the stage probes were attached.
struct CpuMeter {
    start_ms: f64,
    last_ms: f64,
    probed_ms: f64,
}

/// What a handshake was; handshakes alike are counted together.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct HandshakeKind {
    role: Role,
    resumed: bool,
    certificate_key: Option<String>,
    key_exchange: Option<String>,
    version: Option<String>,
    cipher: Option<String>,
    resumption: Option<String>,
}

type HandshakeGroups = BTreeMap<HandshakeKind, CpuHistogram>;

/// ServerHellos captured for connections whose handshakes have not completed yet; bounded, as some never do.
const MAX_PENDING_HELLOS: usize = 16384;

pub fn record(procs: &[Process], opts: &RecordOptions, stop: Arc<AtomicBool>) -> Result<Recording> {
    attach::preflight()?;
    let mut open_object = MaybeUninit::uninit();
    let t0 = Instant::now();
    let mut att = attach::attach(&mut open_object, procs, &opts.attach)?;
    // Before announcing the probes: a handshake right after the announcement must not miss its ServerHello.
    let mut hello_links = match opts.attach.hello_capture {
        HelloCapture::Off => None,
        _ => Some(attach::attach_hello_capture(&att.skel)?),
    };
    let mut hello_window = Instant::now();
    let mut completed_at_hello_window = 0;
    let mut live: Vec<Process> = procs
        .iter()
        .filter(|p| att.targets.maps.contains_key(&p.pid))
        .cloned()
        .collect();
    let t = &att.targets;
    eprintln!(
        "tlsprof: probes live: {} functions ({} uprobes) in {} files of {} processes ({:.0} ms); sampling at {} Hz",
        t.functions.len(),
        t.probes,
        t.libraries.len(),
        live.len(),
        t0.elapsed().as_secs_f64() * 1e3,
        opts.attach.freq_hz
    );
    let started = Instant::now();
    let mut cpu: HashMap<u32, CpuMeter> = HashMap::new();
    for p in &live {
        start_cpu_meter(p.pid, &mut cpu);
    }
    let mut governor = Governor::new(
        opts.max_overhead_pct,
        started,
        att.target_probe_ms(),
        total_cpu_ms(&cpu),
    );

    let groups = std::cell::RefCell::new(HandshakeGroups::new());
    let samples = std::cell::RefCell::new(SampleAggregator::new(
        opts.attach.call_graph_id(),
        att.targets.maps.clone(),
    ));
    let completed = AtomicU64::new(0);
    let cost = att.probe_cost;
    let mut hellos: HashMap<(u32, u64), wire::Hello> = HashMap::new();
    let mut rb = RingBufferBuilder::new();
    rb.add(&att.skel.maps.handshakes, |data: &[u8]| {
        match data
            .get(..4)
            .map(|k| u32::from_ne_bytes(k.try_into().expect("4 bytes")))
        {
            Some(k) if k == tlsprof_event_kind::EVENT_HELLO.0 => {
                if let Some(h) = parse_hello(data) {
                    if hellos.len() >= MAX_PENDING_HELLOS {
                        hellos.clear();
                    }
                    hellos.insert(h.0, h.1);
                }
            }
            _ => {
                let mut e = handshake_event::default();
                if plain::copy_from_bytes(&mut e, data).is_ok() {
                    let nested = Hits {
                        all: e.nested_hits.into(),
                        stepped: e.nested_stepped.into(),
                    };
                    let cpu_ns = cost.correct(e.cpu_ns, u64::from(e.calls), nested);
                    let hello = hellos.remove(&(e.tgid, e.ssl));
                    groups.borrow_mut().entry(classify(&e, hello)).or_default().add(cpu_ns);
                    completed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        0
    })?;
    rb.add(&att.skel.maps.stacks, |data: &[u8]| {
        samples.borrow_mut().add(data);
        0
    })?;
    let rb = rb.build()?;

    let status = std::io::stderr().is_terminal();
    let clear = if status { "\r\x1b[K" } else { "" };
    let mut last_poll = Instant::now();
    let mut last_status = Instant::now();
    loop {
        // The BPF side never wakes us (BPF_RB_NO_WAKEUP): drain on our own clock.
        std::thread::sleep(POLL);
        rb.consume().context("drain the ring buffers")?;
        samples.borrow_mut().name_when_due(&att.targets.functions);
        let elapsed = started.elapsed();
        // Every round: a target that exits keeps the CPU it had at its last reading.
        poll_cpu(&live, &mut cpu, governor.live());
        match governor.tick(Instant::now(), att.target_probe_ms(), total_cpu_ms(&cpu)) {
            // The epoch flips when the window starts and ends; attaching and detaching happen outside it.
            Action::Pause => {
                next_probe_epoch(&mut att)?;
                hello_links = None;
                att.targets.pause();
            }
            Action::Resume => {
                att.targets.resume(&att.skel)?;
                next_probe_epoch(&mut att)?;
                poll_cpu(&live, &mut cpu, false);
                governor.resumed(Instant::now(), att.target_probe_ms(), total_cpu_ms(&cpu));
            }
            Action::Stay => {}
        }
        let hello_due = match opts.attach.hello_capture {
            HelloCapture::Off => false,
            HelloCapture::Always => governor.live(),
            HelloCapture::Sampled => {
                governor.live()
                    && if hello_links.is_some() {
                        hello_window.elapsed() < HELLO_WINDOW
                    } else {
                        hello_window.elapsed() >= HELLO_PERIOD
                            && completed.load(Ordering::Relaxed) > completed_at_hello_window
                    }
            }
        };
        if !hello_due {
            hello_links = None;
        } else if hello_links.is_none() {
            hello_links = Some(attach::attach_hello_capture(&att.skel)?);
            hello_window = Instant::now();
            completed_at_hello_window = completed.load(Ordering::Relaxed);
        }
        if last_poll.elapsed() >= RESCAN {
            last_poll = Instant::now();
            // --comm follows the name: processes started since (new nginx workers after a reload) join.
            for p in opts.comms.iter().flat_map(|c| targets::processes_named(c)) {
                if att.targets.maps.contains_key(&p.pid) || !p.alive() {
                    continue;
                }
                match att.targets.add(&att.skel, &p, &opts.attach) {
                    Ok(true) => {
                        eprintln!("{clear}tlsprof: attached to new process {} ({})", p.pid, p.comm);
                        samples
                            .borrow_mut()
                            .add_process(p.pid, att.targets.maps[&p.pid].clone());
                        start_cpu_meter(p.pid, &mut cpu);
                        live.push(p);
                    }
                    Ok(false) => {}
                    Err(e) => eprintln!(
                        "{clear}tlsprof: cannot attach to new process {} ({}): {e:#}",
                        p.pid, p.comm
                    ),
                }
            }
        }
        if status && last_status.elapsed() >= Duration::from_millis(500) {
            last_status = Instant::now();
            print_status(
                elapsed,
                completed.load(Ordering::Relaxed),
                att.stat(tlsprof_stat::STAT_SAMPLES),
            );
        }
        let all_exited = live.iter().all(|p| !p.alive());
        if stop.load(Ordering::Relaxed) || opts.duration.is_some_and(|d| elapsed >= d) || all_exited {
            if all_exited {
                eprintln!("{clear}tlsprof: every target has exited");
            }
            break;
        }
    }
    let end = Instant::now();
    let duration_s = (end - started).as_secs_f64();
    rb.consume().context("drain the ring buffers")?;
    poll_cpu(&live, &mut cpu, governor.live());
    let probing = Probing {
        max_overhead_pct: opts.max_overhead_pct,
        live_s: governor.probed(end).as_secs_f64(),
        windows: governor.windows,
        peak_overhead: governor.peak_overhead,
    };
    eprint!("{clear}");
    drop(hello_links);
    drop(rb);
    let groups = groups.into_inner();
    let targets = live
        .iter()
        .map(|p| Target {
            pid: p.pid,
            comm: p.comm.clone(),
            process_cpu_ms: cpu.get(&p.pid).map_or(0.0, |m| m.last_ms - m.start_ms),
            probed_cpu_ms: cpu.get(&p.pid).map_or(0.0, |m| m.probed_ms),
        })
        .collect();
    build_recording(&att, targets, groups, samples.into_inner(), duration_s, probing, opts)
}

/// Flips the stage probes between live (even epoch) and paused (odd) for the BPF programs (probe_epoch).
fn next_probe_epoch(att: &mut Attached) -> Result<()> {
    let bss = att.skel.maps.bss_data.as_deref_mut().context("BPF .bss")?;
    // SAFETY: an aligned u32 in the BPF map's shared mapping; volatile, as the BPF programs read it meanwhile.
    unsafe { std::ptr::write_volatile(&mut bss.probe_epoch, bss.probe_epoch.wrapping_add(1)) };
    Ok(())
}

fn start_cpu_meter(pid: u32, cpu: &mut HashMap<u32, CpuMeter>) {
    if let Some(ms) = targets::cpu_ms(pid) {
        cpu.insert(
            pid,
            CpuMeter {
                start_ms: ms,
                last_ms: ms,
                probed_ms: 0.0,
            },
        );
    }
}

fn parse_hello(data: &[u8]) -> Option<((u32, u64), wire::Hello)> {
    let header = std::mem::offset_of!(hello_event, data);
    let mut e = hello_event::default();
    if !bpf::copy_head(&mut e, data, header) {
        return None;
    }
    let bytes = data.get(header..header + e.len as usize)?;
    Some(((e.tgid, e.ssl), wire::parse(bytes, e.body_only != 0)?))
}

/// A handshake is full when it used the certificate (a private-key operation or a peer chain check);
/// resumed ones authenticate with the session's secret instead (a TLS 1.3 server says so: pre_shared_key).
/// A full server handshake that used the private key but made no signature decrypted an RSA-encrypted
/// premaster secret.
fn classify(e: &handshake_event, hello: Option<wire::Hello>) -> HandshakeKind {
    let cert_ops = u32::from(e.cert_ops);
    let role = match u32::from(e.role) {
        r if r == ff::FF_ROLE_SERVER.0 => Role::Server,
        r if r == ff::FF_ROLE_CLIENT.0 => Role::Client,
        _ => Role::Partial,
    };
    let resumed = cert_ops & (ff::FF_PRIVATE_KEY_OP.0 | ff::FF_PEER_CERT_CHECK.0) == 0;
    let rsa_transport = cert_ops & ff::FF_PRIVATE_KEY_OP.0 != 0 && u32::from(e.sig_made) != ff::FF_SIG_LEN_PTR.0;
    let hello = hello.unwrap_or_default();
    // TLS 1.3 resumes with a pre-shared key; TLS 1.2's ServerHello does not say whether by ID or ticket.
    let resumption = match (resumed, hello.version) {
        (true, Some("TLSv1.3")) if hello.psk => Some("TLS 1.3 PSK".to_string()),
        (true, Some("TLSv1.2")) => Some("TLS 1.2 session ID or ticket".to_string()),
        _ => None,
    };
    HandshakeKind {
        resumption,
        role,
        resumed,
        certificate_key: if resumed {
            None
        } else {
            anatomy::certificate_key(e.sig_len)
        },
        key_exchange: hello
            .group
            .or_else(|| anatomy::key_exchange(e.secret_len, rsa_transport)),
        version: hello.version.map(str::to_string),
        cipher: hello.cipher,
    }
}

/// `probing`: the stage probes were attached since the last reading.
fn poll_cpu(live: &[Process], cpu: &mut HashMap<u32, CpuMeter>, probing: bool) {
    for p in live {
        // A dead process's last reading stands: /proc has nothing newer.
        if let (Some(m), true) = (cpu.get_mut(&p.pid), p.alive()) {
            if let Some(ms) = targets::cpu_ms(p.pid) {
                if probing {
                    m.probed_ms += ms - m.last_ms;
                }
                m.last_ms = ms;
            }
        }
    }
}

fn total_cpu_ms(cpu: &HashMap<u32, CpuMeter>) -> f64 {
    cpu.values().map(|m| m.last_ms).sum()
}

fn print_status(elapsed: Duration, handshakes: u64, samples: u64) {
    let secs = elapsed.as_secs_f64().max(1e-3);
    eprint!(
        "\r\x1b[K[{:>6.1}s] {} handshakes ({:.0}/s), {} samples",
        secs,
        handshakes,
        handshakes as f64 / secs,
        samples
    );
    let _ = std::io::stderr().flush();
}

fn build_recording(
    att: &Attached,
    targets: Vec<Target>,
    groups: HandshakeGroups,
    samples: SampleAggregator,
    duration_s: f64,
    probing: Probing,
    opts: &RecordOptions,
) -> Result<Recording> {
    let hits = att.target_probe_hits();
    let mut raw_tree = Vec::new();
    for key in att.skel.maps.tree.keys() {
        let Some(value) = att.skel.maps.tree.lookup(&key, libbpf_rs::MapFlags::ANY)? else {
            continue;
        };
        let (mut k, mut v) = (tree_key::default(), tree_val::default());
        plain::copy_from_bytes(&mut k, &key).ok().context("tree key size")?;
        plain::copy_from_bytes(&mut v, &value).ok().context("tree value size")?;
        let depth = usize::from(k.depth).min(k.funcs.len());
        raw_tree.push(RawNode {
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
    let tree = corrected_tree(raw_tree, &att.probe_cost);

    let named = samples.finish(&att.targets.functions);

    let lost = Lost {
        samples_taken: att.stat(tlsprof_stat::STAT_SAMPLES),
        samples: att.stat(tlsprof_stat::STAT_SAMPLE_DROPS),
        unreadable_stacks: named.unreadable,
        cut_stacks: named.cut,
        handshake_events: att.stat(tlsprof_stat::STAT_HANDSHAKE_DROPS),
        tree_nodes: att.stat(tlsprof_stat::STAT_TREE_DROPS),
        depth_overflow: att.stat(tlsprof_stat::STAT_DEPTH_OVERFLOW),
        missed_returns: att.stat(tlsprof_stat::STAT_MISSED_RETURNS),
        threads: att.stat(tlsprof_stat::STAT_THREAD_DROPS),
        connections: att.stat(tlsprof_stat::STAT_CONN_DROPS),
    };

    Ok(Recording {
        format: model::FORMAT.into(),
        format_version: model::FORMAT_VERSION,
        tlsprof_version: env!("CARGO_PKG_VERSION").into(),
        duration_s,
        sample_freq_hz: opts.attach.freq_hz,
        call_graph: opts.attach.call_graph,
        stack_bytes: opts.attach.stack_bytes,
        unnamed_jit_pids: named.unnamed_jit_pids,
        all_probes: opts.attach.all_probes,
        targets,
        libraries: att.targets.libraries.clone(),
        functions: att.targets.functions.clone(),
        tree,
        samples: named.samples,
        handshakes: groups
            .into_iter()
            .map(|(k, cpu)| HandshakeGroup {
                role: k.role,
                resumed: k.resumed,
                certificate_key: k.certificate_key,
                key_exchange: k.key_exchange,
                version: k.version,
                cipher: k.cipher,
                resumption: k.resumption,
                cpu,
            })
            .collect(),
        lost,
        probe_cost: att.probe_cost,
        probe_hits: hits.all,
        probe_stepped_hits: hits.stepped,
        probing,
        // Measured by the caller once the recording is over (speed::measure).
        openssl_speed: BTreeMap::new(),
    })
}
