// SPDX-License-Identifier: Apache-2.0
//! The report's last section: how the figures were made. Targets and libraries, each process, the probe
//! windows, handshakes and TLS CPU with their intervals, samples, the probes' cost and its measurement,
//! connection reuse, what was lost, what stayed unnamed and how to name it, steal time.

use std::collections::BTreeMap;

use super::{cpu_line, families_of, interval, pct};
use crate::analyze::{Summary, TargetSummary, UnnamedFileSummary};
use crate::catalogue::families;
use crate::catalogue::Stage;
use crate::model::lost::Kind as LostKind;
use crate::model::untrusted::Printable;
use crate::model::{CallGraph, UnnamedReason, CALIBRATION_AS_SAMPLES};
use crate::output::styled::{Line, Tone};

pub fn lines(s: &Summary) -> Vec<Line> {
    let mut out = vec![Line::prose(format!("Targets: {}", targets_line(s)))];
    out.extend(library_lines(s));
    out.extend(process_lines(s).into_iter().map(Line::prose));
    out.extend(io_driven_lines(s).into_iter().map(Line::prose));
    out.extend(probing_line(s).map(Line::prose));
    out.push(Line::prose(handshakes_line(s)));
    out.extend(abandoned_line(s).map(Line::prose));
    out.extend(wire_check_line(s).map(Line::prose));
    out.push(Line::prose(tls_cpu_line(s)));
    out.push(Line::prose(samples_line(s)));
    out.extend(interpreted_line(s).map(Line::prose));
    out.extend(probe_cost_lines(s).into_iter().map(Line::prose));
    out.extend(own_programs_line(s).map(Line::prose));
    out.push(Line::prose(connection_reuse_line(s)));
    out.extend(lost_lines(s));
    out.extend(naming_lines(s).into_iter().map(Line::prose));
    out.extend(steal_line(s).map(Line::prose));
    out
}

fn join_pids(pids: &[u32]) -> String {
    pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

fn targets_line(s: &Summary) -> String {
    let mut by_comm: BTreeMap<&str, (Vec<u32>, u32)> = BTreeMap::new();
    for t in &s.targets {
        let (pids, folded) = by_comm.entry(&t.target.comm).or_default();
        if t.target.processes > 1 {
            *folded += t.target.processes;
        } else {
            pids.push(t.target.pid);
        }
    }
    by_comm
        .iter()
        .map(|(comm, (pids, folded))| {
            let started = (*folded > 0).then(|| format!("{folded} processes that started during the recording"));
            let listed = (!pids.is_empty()).then(|| format!("pid {}", join_pids(pids)));
            let which: Vec<String> = listed.into_iter().chain(started).collect();
            format!("{} ({})", Printable(comm), which.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The TLS code found, file by file.
fn library_lines(s: &Summary) -> Vec<Line> {
    s.libraries
        .iter()
        .map(|l| {
            // A family this tlsprof does not know (added through the library) is named by its id.
            let how = match families::named(&l.family) {
                Some(f) => format!("{}; {}", f.describe(l.flavor), f.describe_symbols(l.symbols)),
                None => Printable(&l.family).to_string(),
            };
            let replaced = if l.replaced {
                format!(
                    "; replaced on disk while mapped: pid {} ran the old file",
                    join_pids(&l.pids)
                )
            } else {
                String::new()
            };
            let state = if l.handshake_state {
                "; handshake state read where a handshake call fails"
            } else {
                ""
            };
            Line::prose(format!(
                "  {}: {} ({how}; {} catalogue functions{state}){replaced}",
                Printable(l.version.as_deref().unwrap_or("TLS code")),
                Printable(&l.path),
                l.functions_found,
            ))
        })
        .collect()
}

/// One line per process when there are several, or when one ran in a container or ran exec: where it ran,
/// its handshakes and TLS CPU over the recording, its CPU, what happened to it.
fn process_lines(s: &Summary) -> Vec<String> {
    let notable = |t: &TargetSummary| t.target.container.is_some() || !t.target.execs_at_s.is_empty();
    if s.targets.len() < 2 && !s.targets.iter().any(notable) {
        return Vec::new();
    }
    let header = "Processes (over the whole recording: handshakes completed and TLS CPU, ≈ estimated from the \
                  probe windows with 95% intervals; CPU from its CPU clock):";
    std::iter::once(header.to_string())
        .chain(s.targets.iter().map(process_line))
        .collect()
}

/// A target's name on its line: its pid, or how many processes it stands for.
fn target_label(ts: &TargetSummary) -> String {
    let t = &ts.target;
    if t.processes > 1 {
        format!(
            "{} ({} processes that started during the recording)",
            Printable(&t.comm),
            t.processes
        )
    } else {
        format!("{} (pid {})", Printable(&t.comm), t.pid)
    }
}

fn process_line(ts: &TargetSummary) -> String {
    let t = &ts.target;
    let mut line = format!("  {}", target_label(ts));
    if let Some(c) = &t.container {
        line.push_str(&format!(" in {}", Printable(c)));
    }
    line.push(':');
    if t.wire_only {
        line.push_str(" from the wire alone,");
    }
    if let (Some(n), Some(ci), Some(seen)) = (ts.handshakes, ts.handshakes_ci95, ts.observed_handshakes) {
        if ci[0] == ci[1] {
            line.push_str(&format!(" {n} handshakes,"));
        } else {
            line.push_str(&format!(" ≈ {n} [{}–{}] handshakes ({seen} seen),", ci[0], ci[1]));
        }
    }
    if let (Some(ms), Some(ci)) = (ts.tls_cpu_ms, ts.tls_cpu_ms_ci95) {
        if ci[0] == ci[1] {
            line.push_str(&format!(" {ms:.1} ms TLS CPU,"));
        } else {
            line.push_str(&format!(" ≈ {} ms TLS CPU,", interval(ms, ci, 1)));
        }
    }
    line.push_str(&format!(" {:.1} ms CPU", t.process_cpu_ms));
    for at in &t.execs_at_s {
        line.push_str(&format!("; ran a new program (exec), probed anew from {at:.1} s"));
    }
    line
}

/// Targets whose handshakes are driven from SSL_read/SSL_write, and since when those are probed.
fn io_driven_lines(s: &Summary) -> Vec<String> {
    s.targets
        .iter()
        .map(|t| &t.target)
        .filter_map(|t| {
            t.io_driven_from_s.map(|from| {
                format!(
                    "{} (pid {}) leaves its handshakes to SSL_read/SSL_write: probed there from {from:.1} s into the recording",
                    Printable(&t.comm),
                    t.pid
                )
            })
        })
        .collect()
}

/// When the probes were attached only part of the time: for how long, why, and what the counts scale to.
fn probing_line(s: &Summary) -> Option<String> {
    let p = &s.probing;
    p.part_time.then(|| {
        format!(
            "Probes attached {:.1} s of {:.1} s ({:.0}%, {} windows, {:.0}% of the targets' CPU): they cost up to {:.1}% of the targets' CPU while attached (estimated), over the --max-overhead {}% budget. Counts and stage CPU (≈) are estimated for the whole recording from those windows, with 95% intervals; the mix, per-call costs and the call tree are what the windows saw; CPU samples cover all of it",
            p.live_s,
            s.duration_s,
            100.0 * p.fraction,
            p.windows,
            100.0 * p.cpu_share,
            100.0 * p.peak_overhead,
            p.max_overhead_pct
        )
    })
}

/// Handshakes over the whole recording: exact, or estimated with their intervals and what was seen.
fn handshakes_line(s: &Summary) -> String {
    let hs = &s.handshakes;
    let o = &hs.observed;
    let partial = if o.partial > 0 {
        format!(" ({} under way when the probes attached, not counted)", o.partial)
    } else {
        String::new()
    };
    if !hs.estimated {
        return format!(
            "Handshakes: {} ({:.1}/s): {} full, {} resumed; {} server, {} client{partial}",
            hs.total, hs.rate_per_s, hs.full, hs.resumed, hs.server, hs.client
        );
    }
    let n = |v: u64, ci: [u64; 2]| format!("≈ {v} [{}–{}]", ci[0], ci[1]);
    format!(
        "Handshakes: {} (≈ {} /s): {} full, {} resumed; {} server, {} client (95% intervals; seen in the probe windows: {} full, {} resumed, {} more under way when a window opened)",
        n(hs.total, hs.total_ci95),
        interval(hs.rate_per_s, hs.rate_ci95, 1),
        n(hs.full, hs.full_ci95),
        n(hs.resumed, hs.resumed_ci95),
        n(hs.server, hs.server_ci95),
        n(hs.client, hs.client_ci95),
        o.full,
        o.resumed,
        o.partial
    )
}

/// The probed processes' handshakes as their sockets showed them, beside what the probes counted.
fn wire_check_line(s: &Summary) -> Option<String> {
    let w = s.handshakes.wire.as_ref()?;
    let total = match w.total_ci95 {
        [lo, hi] if lo == hi => w.total.to_string(),
        [lo, hi] => format!("≈ {} [{lo}–{hi}] ({} seen)", w.total, w.observed.total),
    };
    Some(format!(
        "From the wire (the probed processes' sockets, read beside the probes): {total} handshakes completed, {} \
         full, {} resumed; {} abandoned",
        w.full, w.resumed, w.abandoned
    ))
}

fn abandoned_line(s: &Summary) -> Option<String> {
    let hs = &s.handshakes;
    (hs.observed.abandoned > 0).then(|| {
        format!(
            "Abandoned handshakes: {} did work but their connection ended before they completed (the peer went away after the server's flight, or they failed): {}",
            if hs.estimated {
                format!("≈ {} [{}–{}] ({} seen)", hs.abandoned, hs.abandoned_ci95[0], hs.abandoned_ci95[1], hs.observed.abandoned)
            } else {
                hs.abandoned.to_string()
            },
            match hs.abandoned_cpu.count {
                0 => "their CPU not seen (from the wire)".to_string(),
                _ => cpu_line(&hs.abandoned_cpu_ms),
            }
        )
    })
}

fn tls_cpu_line(s: &Summary) -> String {
    let (tls_ms, proc_ms) = (s.tls_cpu_ms, s.probed_cpu_ms);
    // A process counted from the wire alone: its TLS CPU as its frames place its samples (JSSE), if they do.
    let wire_only: Vec<String> = s
        .wire_only()
        .map(|t| match (t.tls_cpu_ms, t.tls_cpu_ms_ci95) {
            (Some(ms), Some(ci)) => format!(
                "{} (≈ {} ms by the frames of its samples)",
                target_label(t),
                interval(ms, ci, 1)
            ),
            _ => format!("{} (not seen)", target_label(t)),
        })
        .collect();
    if !wire_only.is_empty() && wire_only.len() == s.targets.len() {
        return wire_only_tls_cpu_line(s);
    }
    let unseen = match wire_only.len() {
        0 => String::new(),
        _ => format!(
            "; not in it: the TLS CPU of {}, whose handshakes were counted from the wire alone (no stage probes)",
            wire_only.join(", ")
        ),
    };
    let line = tls_cpu_figures(s, tls_ms, proc_ms);
    format!("{line}{unseen}")
}

/// Every target counted from the wire alone: the TLS CPU is what their frames show.
fn wire_only_tls_cpu_line(s: &Summary) -> String {
    let labels: Vec<String> = s.wire_only().map(target_label).collect();
    let seen: Vec<_> = s
        .wire_only()
        .filter_map(|t| t.tls_cpu_ms.zip(t.tls_cpu_ms_ci95))
        .collect();
    if seen.is_empty() {
        return format!(
            "TLS CPU: not seen: {}, counted from the wire alone (no stage probes), showed no TLS frames",
            labels.join(", ")
        );
    }
    let ms: f64 = seen.iter().map(|(ms, _)| ms).sum();
    let ci = [
        seen.iter().map(|(_, ci)| ci[0]).sum(),
        seen.iter().map(|(_, ci)| ci[1]).sum(),
    ];
    format!(
        "TLS CPU: ≈ {} ms = {:.1}% of the targets' CPU ({:.1} ms, from their CPU clocks), by the frames of \
         their samples: {}, counted from the wire alone (no stage probes)",
        interval(ms, ci, 1),
        pct(ms, s.process_cpu_ms),
        s.process_cpu_ms,
        labels.join(", ")
    )
}

fn tls_cpu_figures(s: &Summary, tls_ms: f64, proc_ms: f64) -> String {
    if s.probing.part_time {
        format!(
            "TLS CPU: ≈ {} ms over the recording; in the probe windows {:.1} ms = {:.1}% of the targets' CPU ({:.1} ms while probed, from their CPU clocks)",
            interval(tls_ms, s.tls_cpu_ms_ci95, 1),
            s.observed_tls_cpu_ms,
            pct(s.observed_tls_cpu_ms, proc_ms),
            proc_ms
        )
    } else {
        format!(
            "TLS CPU: {:.1} ms = {:.1}% of process CPU ({:.1} ms, from its CPU clock)",
            tls_ms,
            pct(tls_ms, proc_ms),
            proc_ms
        )
    }
}

fn steal_line(s: &Summary) -> Option<String> {
    s.stolen_share.filter(|&share| share >= 0.001).map(|share| {
        format!(
            "Steal time: {:.1}% of the stage threads' time on a CPU was the hypervisor's (or interrupts', where the kernel accounts them), which their task clock leaves out; stage and handshake CPU leave it out, as the CPU clocks do",
            share * 100.0
        )
    })
}

/// What the probes cost the targets, and how that was measured; what they cost other processes, if any.
fn probe_cost_lines(s: &Summary) -> Vec<String> {
    let mut of_them = Vec::new();
    if s.probe_stepped_hits > 0 {
        of_them.push(format!(
            "{} of them on instructions the kernel single-steps, {:.1} µs more each",
            s.probe_stepped_hits, s.probe_cost_cold_us_per_step
        ));
    }
    if s.probe_scheduler_hits > 0 {
        of_them.push(format!(
            "{} at Go's goroutine switches, which come with or without handshakes",
            s.probe_scheduler_hits
        ));
    }
    let stepped = match of_them.is_empty() {
        true => String::new(),
        false => format!(" ({})", of_them.join("; ")),
    };
    let cost = format!(
        "Probe cost: {} hits{} ≈ {:.1} ms = {:.2}% of the targets' CPU over the recording (estimated; --max-overhead {}%); removed from the figures above and below",
        s.probe_hits,
        stepped,
        s.probe_overhead_ms,
        pct(s.probe_overhead_ms, s.process_cpu_ms),
        s.probing.max_overhead_pct
    );
    let calibrated = format!(
        "calibrated in tlsprof's own process at attach: {:.1} µs per hit with cold caches, {:.1} µs back to back ≈ {:.1} ms",
        s.probe_cost_cold_us_per_hit, s.probe_cost_us_per_hit, s.probe_overhead_calibrated_ms
    );
    let measured = match &s.probe_traps {
        Some(t) => format!(
            "  measured in the targets: {} of the trap sampler's {} samples (at {} Hz, while the probes were attached and hit, over {:.1} ms of the targets' CPU) were in their traps ≈ {} ms for the {} hits made meanwhile{}; {calibrated}; the estimate scales the calibrated cost of all hits by the measured, the calibration weighing as {CALIBRATION_AS_SAMPLES} samples, never below it",
            t.samples,
            t.of_samples,
            t.freq_hz,
            t.sampled_cpu_ms,
            interval(t.cpu_ms, t.cpu_ms_ci95, 1),
            t.hits,
            if t.calibrated_ms > 0.0 {
                format!(", ×{:.2} their calibrated cost", t.cpu_ms / t.calibrated_ms)
            } else {
                String::new()
            },
        ),
        None => format!(
            "  {calibrated} (not measured in the targets: the kernel hid its symbols' addresses, or the recording was made before tlsprof measured it)"
        ),
    };
    let mut out = vec![cost, measured];
    if s.other_process_hits > 0 {
        out.push(format!(
            "  other processes that map the files probed in every process: {} hits ≈ {:.1} ms of their CPU (calibrated; counted against --max-overhead)",
            s.other_process_hits, s.other_process_ms
        ));
    }
    out
}

/// What tlsprof's programs other than the probes cost the targets, as measured in their runs there, and the
/// whole cost with the probes'. None for recordings made before it was measured.
fn own_programs_line(s: &Summary) -> Option<String> {
    let own = &s.own_programs;
    let kinds = own.kinds();
    if kinds.iter().all(|(_, r)| r.runs == 0) {
        return None;
    }
    let parts: Vec<String> = kinds
        .iter()
        .map(|(name, r)| format!("{name} {:.1} ms ({} runs)", r.ms, r.runs))
        .collect();
    let all = s.probe_overhead_ms + own.ms();
    Some(format!(
        "Other programs: tlsprof's programs besides the probes ran {:.1} ms = {:.2}% of the targets' CPU (measured in each run by the BPF clock: {}; not in it: their interrupts' and tracepoints' own entry; the kernel charges a switch's run to the thread switched in); with the probes ≈ {:.1} ms = {:.2}% in all",
        own.ms(),
        pct(own.ms(), s.process_cpu_ms),
        parts.join(", "),
        all,
        pct(all, s.process_cpu_ms)
    ))
}

/// How much record-layer work each handshake carries: calls per handshake when the record layer was
/// probed, else its share of the CPU samples.
fn connection_reuse_line(s: &Summary) -> String {
    let families = families_of(s);
    let (read_fn, write_fn) = (
        families::record_layer_name(&families, Stage::Read),
        families::record_layer_name(&families, Stage::Write),
    );
    let (read, write) = (s.record_layer_sampled.read, s.record_layer_sampled.write);
    let sampled = format!(
        "record layer in {:.1}% of samples ({read_fn} {:.1}%, {write_fn} {:.1}%)",
        100.0 * (read + write),
        100.0 * read,
        100.0 * write
    );
    if !s.all_probes {
        return format!("Connection reuse: {sampled}; add --all-probes to count {read_fn}/{write_fn} calls per handshake (each call then costs the target a probe hit)");
    }
    let calls = |stage: Stage| {
        s.stages
            .iter()
            .find(|st| st.name == stage)
            .and_then(|st| st.calls)
            .unwrap_or(0)
    };
    let per = s.handshakes.total.max(1) as f64;
    format!(
        "Connection reuse: {:.1} {write_fn} and {:.1} {read_fn} calls per handshake; {sampled}",
        calls(Stage::Write) as f64 / per,
        calls(Stage::Read) as f64 / per
    )
}

fn samples_line(s: &Summary) -> String {
    let total = s.samples;
    let st = &s.stacks;
    format!(
        "Samples: {} at {} Hz ({:.0}% of the targets' CPU time), {} in TLS stages ({:.1}%), {} ({} call graph, {}-byte stack copies)",
        total,
        s.sample_freq_hz,
        pct(
            total as f64 * 1e3 / s.sample_freq_hz.max(1) as f64,
            s.process_cpu_ms
        ),
        st.in_tls,
        pct(st.in_tls as f64, total as f64),
        if st.call_graph == Some(CallGraph::Fp) {
            "whole stacks not checked (a frame-pointer walk cannot tell)".to_string()
        } else {
            format!("{:.1}% with whole stacks", pct(st.whole as f64, total as f64))
        },
        st.call_graph.map_or("?".to_string(), |c| format!("{c:?}")),
        st.stack_bytes,
    )
}

/// How many of the samples placed by their Java frames ran through interpreted ones, which nothing names.
fn interpreted_line(s: &Summary) -> Option<String> {
    let st = &s.stacks;
    (st.framed_interpreted > 0).then(|| {
        format!(
            "Interpreted: {} of those samples ({:.1}%) ran through Java methods the JIT had not compiled yet, which \
             its perf map cannot name: each counts in the stage of the nearest named frame around it, a broader \
             one where the interpreted method was the stage's own (a signature in the handshake's); a JVM that \
             has run its handshakes longer has compiled more of them",
            st.framed_interpreted,
            pct(st.framed_interpreted as f64, st.in_tls as f64)
        )
    })
}

/// What could not be counted or kept; a warning where figures undercount.
fn lost_lines(s: &Summary) -> Vec<Line> {
    let l = &s.lost;
    let counts = |kinds: &[LostKind]| {
        l.iter()
            .filter(|(c, _)| kinds.contains(&c.kind))
            .map(|(c, n)| format!("{n} {}", c.label))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let lost = format!(
        "Lost: {}; {}{}",
        counts(&[LostKind::Dropped, LostKind::Damaged]),
        counts(&[LostKind::Stale]),
        if l.undercounts() { " (figures undercount)" } else { "" }
    );
    let tone = if l.undercounts() { Tone::Warning } else { Tone::Plain };
    let mut out = vec![Line::toned(tone, lost)];
    if l.unframed_work > 0 {
        out.push(Line::toned(
            Tone::Warning,
            format!(
                "Handshake work outside any handshake call: {} stage calls before SSL_read/SSL_write were probed; their handshakes are not counted",
                l.unframed_work
            ),
        ));
    }
    out
}

/// Where frames were named from, and the files and JIT code left unnamed with what would name them.
fn naming_lines(s: &Summary) -> Vec<String> {
    let named = s.debug_files.iter().map(|(path, source)| {
        format!(
            "Names in {} from its debug information ({})",
            Printable(path),
            Printable(source)
        )
    });
    let unnamed = s.unnamed_files.iter().map(|u| unnamed_file_line(u, s.samples));
    let jit = s.stacks.unnamed_jit.iter().map(|(pid, comm)| {
        format!(
            "JIT frames of {} (pid {pid}) have no names: start it with --perf-basic-prof (Node.js) to see JavaScript functions; a JVM is asked for them unless --no-jvm-perf-map",
            Printable(comm)
        )
    });
    let cut = s.targets.iter().filter(|t| t.target.jit_stacks_cut).map(|t| {
        format!(
            "{}: its JIT-compiled code keeps no frame pointers, so its stacks stop at their first Java frame and \
             a sample is placed by that frame alone: start it with -XX:+PreserveFramePointer for whole stacks",
            target_label(t)
        )
    });
    named.chain(unnamed).chain(jit).chain(cut).collect()
}

/// A file frames stayed unnamed in: how many samples it leaves unnamed, why, and what would name them.
fn unnamed_file_line(u: &UnnamedFileSummary, samples: u64) -> String {
    let f = &u.file;
    let build_id = f
        .build_id
        .as_deref()
        .map_or(String::new(), |id| format!(", build id {id}"));
    let install = match &f.package {
        Some(p) => {
            format!("install {p}-dbgsym (Debian's debian-debug archive) or its distribution's debug symbols for it")
        }
        None => "install its debug symbols under /usr/lib/debug".to_string(),
    };
    let why = match f.reason {
        UnnamedReason::NoDebugInfo => format!(
            "stripped, and no debug information was found: {install}, or set DEBUGINFOD_URLS to a debuginfod server (https://debuginfod.debian.net, https://debuginfod.fedoraproject.org)"
        ),
        UnnamedReason::NotOnServers => format!(
            "stripped; the debuginfod servers (DEBUGINFOD_URLS) had no debug information for it or did not answer: {install}"
        ),
        UnnamedReason::LookupUnfinished => "its debug information was still being fetched when the recording ended: record again (what was fetched is cached) or raise DEBUGINFOD_TIMEOUT".to_string(),
        UnnamedReason::NotCovered => "its symbols do not cover that code".to_string(),
    };
    format!(
        "Unnamed frames in {}{build_id}: {} samples ({:.1}%) show it as file+offset, {} ({:.1}%) ran in that \
         code; {why}",
        Printable(&f.path),
        u.samples,
        pct(u.samples as f64, samples as f64),
        u.leaf_samples,
        pct(u.leaf_samples as f64, samples as f64)
    )
}
