// SPDX-License-Identifier: Apache-2.0
//! The text report: headline, handshake mix, advice, per-stage table and call tree, rendered from a summary.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{first_screen, mix, Group};
use crate::analyze::causes::{Cause, FrameCount};
use crate::analyze::{Analysis, CpuStats, KindSummary, RowKind, Summary, TargetSummary, UnnamedFileSummary};
use crate::catalogue::families::{self, Family};
use crate::catalogue::Stage;
use crate::model::lost::Kind as LostKind;
use crate::model::untrusted::{printable_lines, Printable};
use crate::model::{CallGraph, UnnamedReason, CALIBRATION_AS_SAMPLES};

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

fn cpu_line(c: &CpuStats) -> String {
    format!("mean {:.3} ms, p50 {:.3} ms, p99 {:.3} ms", c.mean, c.p50, c.p99)
}

fn join_pids(pids: &[u32]) -> String {
    pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

fn targets_line(s: &Summary) -> String {
    let mut by_comm: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for t in &s.targets {
        by_comm.entry(&t.target.comm).or_default().push(t.target.pid);
    }
    by_comm
        .iter()
        .map(|(comm, pids)| {
            let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
            format!("{} (pid {})", Printable(comm), pids.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
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
        .chain(s.targets.iter().map(|ts| {
            let t = &ts.target;
            let mut line = format!("  {} (pid {})", Printable(&t.comm), t.pid);
            if let Some(c) = &t.container {
                line.push_str(&format!(" in {}", Printable(c)));
            }
            line.push(':');
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
        }))
        .collect()
}

/// The answer first (first_screen.rs), then everything the recording says.
pub fn text(analysis: &Analysis, group: Group) -> String {
    let s = &analysis.summary;
    let mut out = brief(analysis);
    let _ = writeln!(out, "\nTargets: {}", targets_line(s));
    libraries_section(&mut out, s);
    for line in process_lines(s) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(line) = probing_line(s) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "{}", handshakes_line(s));
    totals_section(&mut out, s);
    mix_section(&mut out, s);
    let _ = writeln!(out, "{}", samples_line(s));
    probe_cost_section(&mut out, s);
    let _ = writeln!(out, "{}", connection_reuse_line(s));
    advice_section(&mut out, analysis);
    stages_section(&mut out, s);
    causes_section(&mut out, s);
    call_tree_section(&mut out, s, group);
    // Names were escaped where they were written; this catches any that a future line forgets.
    printable_lines(&out).into_owned()
}

/// The first screen alone (--brief): who was recorded, and the answer.
pub fn brief(analysis: &Analysis) -> String {
    let mut out = String::new();
    for line in first_screen::lines(analysis) {
        let _ = writeln!(out, "{line}");
    }
    printable_lines(&out).into_owned()
}

/// The TLS code found, file by file.
fn libraries_section(out: &mut String, s: &Summary) {
    for l in &s.libraries {
        // A family this tlsprof does not know (added through the library) is named by its id.
        let how = match families::named(&l.family) {
            Some(f) => format!("{}; {}", f.describe(l.flavor), f.describe_symbols(l.symbols)),
            None => Printable(&l.family).to_string(),
        };
        let _ = writeln!(
            out,
            "  {}: {} ({how}; {} catalogue functions){}",
            Printable(l.version.as_deref().unwrap_or("TLS code")),
            Printable(&l.path),
            l.functions_found,
            if l.replaced {
                format!(
                    "; replaced on disk while mapped: pid {} ran the old file",
                    join_pids(&l.pids)
                )
            } else {
                String::new()
            }
        );
    }
}

/// Abandoned handshakes, TLS CPU and steal time.
fn totals_section(out: &mut String, s: &Summary) {
    let hs = &s.handshakes;
    let (tls_ms, proc_ms) = (s.tls_cpu_ms, s.probed_cpu_ms);
    if hs.observed.abandoned > 0 {
        let _ = writeln!(
            out,
            "Abandoned handshakes: {} did work but their connection ended before they completed (the peer went away after the server's flight, or they failed): {}",
            if hs.estimated {
                format!("≈ {} [{}–{}] ({} seen)", hs.abandoned, hs.abandoned_ci95[0], hs.abandoned_ci95[1], hs.observed.abandoned)
            } else {
                hs.abandoned.to_string()
            },
            cpu_line(&hs.abandoned_cpu_ms)
        );
    }
    if s.probing.part_time {
        let _ = writeln!(
            out,
            "TLS CPU: ≈ {} ms over the recording; in the probe windows {:.1} ms = {:.1}% of the targets' CPU ({:.1} ms while probed, from their CPU clocks)",
            interval(tls_ms, s.tls_cpu_ms_ci95, 1),
            s.observed_tls_cpu_ms,
            pct(s.observed_tls_cpu_ms, proc_ms),
            proc_ms
        );
    } else {
        let _ = writeln!(
            out,
            "TLS CPU: {:.1} ms = {:.1}% of process CPU ({:.1} ms, from its CPU clock)",
            tls_ms,
            pct(tls_ms, proc_ms),
            proc_ms
        );
    }
    if let Some(share) = s.stolen_share.filter(|&share| share >= 0.001) {
        let _ = writeln!(
            out,
            "Steal time: {:.1}% of the stage threads' time on a CPU was the hypervisor's (or interrupts', where the kernel accounts them), which their task clock leaves out; stage and handshake CPU leave it out, as the CPU clocks do",
            share * 100.0
        );
    }
}

/// CPU per handshake and the handshake mix.
fn mix_section(out: &mut String, s: &Summary) {
    let hs = &s.handshakes;
    let paid_for = hs.observed.total + hs.observed.abandoned;
    if hs.observed.total > 0 {
        let _ = writeln!(out, "CPU per handshake: {}", cpu_line(&hs.cpu_ms));
    }
    if paid_for > 0 {
        let _ = writeln!(out, "Handshake mix (version, cipher and group from ServerHellos seen on the sockets; certificate key from signature lengths):");
        // Each process's kinds under its name, its shares of its own handshakes, where there are several.
        let (by_process, mixes) = mix::by_process(s);
        for m in mixes {
            if by_process {
                let name = m
                    .pid
                    .map_or("?".into(), |p| format!("{} (pid {p})", Printable(comm_of(s, p))));
                let _ = writeln!(out, "  {name}: {} handshakes seen", m.of);
            }
            for g in m.kinds {
                let _ = writeln!(
                    out,
                    "{}  {:>5.1}%  {}",
                    if by_process { "  " } else { "" },
                    pct(g.count as f64, m.of as f64),
                    kind_line(g)
                );
            }
        }
        if hs.kinds.iter().any(|g| g.version.is_none()) {
            let _ = writeln!(out, "  (\"?\": the ServerHello was not seen: outside --hello-capture windows, or a library that keeps the handshake off the socket)");
        }
        if hs.kinds.iter().any(|g| !g.resumed && g.certificate_key.is_none()) {
            let _ = writeln!(
                out,
                "  (\"certificate key ?\": no signature made or checked was seen: a signer the probes do not cover)"
            );
        }
    }
}

/// A target's name by its pid.
fn comm_of(s: &Summary, pid: u32) -> &str {
    s.targets
        .iter()
        .find(|t| t.target.pid == pid)
        .map_or("?", |t| t.target.comm.as_str())
}

/// One kind of handshake: what it was made of, how many, and their CPU.
fn kind_line(g: &KindSummary) -> String {
    let w = mix::words(g);
    format!(
        "{}  {} {} ({}): {}",
        w.fields.join(" "),
        w.kind,
        w.role,
        g.count,
        cpu_line(&g.cpu_ms)
    )
}

/// What the probes cost the targets, and how that was measured.
fn probe_cost_section(out: &mut String, s: &Summary) {
    let stepped = if s.probe_stepped_hits > 0 {
        format!(
            " ({} of them entries the kernel single-steps, {:.1} µs more each)",
            s.probe_stepped_hits, s.probe_cost_cold_us_per_step
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
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
    let _ = match &s.probe_traps {
        Some(t) => writeln!(
            out,
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
        None => writeln!(
            out,
            "  {calibrated} (not measured in the targets: the kernel hid its symbols' addresses, or the recording was made before tlsprof measured it)"
        ),
    };
}

fn advice_section(out: &mut String, analysis: &Analysis) {
    if !analysis.advice.is_empty() {
        let _ = writeln!(out, "\nAdvice:");
        for a in &analysis.advice {
            let _ = writeln!(
                out,
                "  [{}] {}\n    evidence: {}\n    saving: {}",
                a.id, a.change, a.evidence, a.estimated_saving
            );
        }
    }
}

/// The stages table.
fn stages_section(out: &mut String, s: &Summary) {
    let tls_ms = s.tls_cpu_ms;
    let estimated = s.probing.part_time;
    if estimated {
        let _ = writeln!(
            out,
            "\nStages over the whole recording (≈: estimated from the probe windows, ±: 95% interval; µs/call as seen):"
        );
    }
    let _ = writeln!(
        out,
        "{}{:<14}{:>11}{:>10}{:>8}{:>12}{:>10}{:>12}",
        if estimated { "" } else { "\n" },
        "stage",
        "self ms",
        "±",
        "% TLS",
        "total ms",
        "calls",
        "µs/call"
    );
    for st in &s.stages {
        let half = (st.self_cpu_ms_ci95[1] - st.self_cpu_ms_ci95[0]) / 2.0;
        match (st.calls, st.cpu_us_per_call) {
            (Some(calls), Some(per_call)) => {
                let _ = writeln!(
                    out,
                    "{:<14}{:>11.1}{:>10}{:>7.1}%{:>12.1}{:>10}{:>12.1}",
                    st.name.name(),
                    st.self_cpu_ms,
                    if estimated {
                        format!("{half:.1}")
                    } else {
                        "exact".into()
                    },
                    pct(st.self_cpu_ms, tls_ms),
                    st.cpu_ms,
                    calls,
                    per_call
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "{:<14}{:>11.1}{:>10.1}   (sampled: record-layer frames in CPU samples; --all-probes counts calls)",
                    st.name.name(),
                    st.cpu_ms,
                    half
                );
            }
        }
    }
}

fn call_tree_section(out: &mut String, s: &Summary, group: Group) {
    let proc_ms = s.probed_cpu_ms;
    let by_cause = group == Group::Cause;
    let _ = writeln!(
        out,
        "\nCall tree (CPU; % of process CPU{})\n{:>11}{:>8}{:>11}{:>10}  frame",
        if by_cause {
            "; [cause] rows and the frames that named them: the function's self CPU shared out by its CPU samples, estimated"
        } else {
            ""
        },
        "total ms",
        "%",
        "self ms",
        "calls"
    );
    for row in &s.call_tree.rows {
        let frame = match row.kind {
            RowKind::Cause(_) | RowKind::CauseFrame if !by_cause => continue,
            RowKind::Cause(c) => format!("{} [cause]", c.name()),
            _ => row.frame.clone(),
        };
        let dash = || "-".to_string();
        let stage = row.stage.map_or(String::new(), |st| format!(" [{}]", st.name()));
        let _ = writeln!(
            out,
            "{:>11.1}{:>7.1}%{:>11}{:>10}  {}{}{}",
            row.total_ms,
            pct(row.total_ms, proc_ms),
            row.self_ms.map_or_else(dash, |v| format!("{v:.1}")),
            row.calls.map_or_else(dash, |v| v.to_string()),
            "  ".repeat(row.depth),
            Printable(&frame),
            stage
        );
    }
    if s.call_tree.hidden > 0 {
        let _ = writeln!(
            out,
            "  ({} nodes under {:.1}% of TLS CPU not shown)",
            s.call_tree.hidden,
            s.call_tree.min_share * 100.0
        );
    }
}

/// Under each stage with samples, what its self CPU went to.
fn causes_section(out: &mut String, s: &Summary) {
    if s.stages.iter().all(|st| st.causes.is_empty()) {
        return;
    }
    // The library families of the targets, each once, whose own code tls_messages names.
    let families = families_of(s);
    let _ = writeln!(
        out,
        "\nCauses within stages (from the CPU samples below each stage frame; CPU estimated: the stage's self CPU × the cause's share of its samples, 95% interval; the frames that named it):"
    );
    for st in s.stages.iter().filter(|st| !st.causes.is_empty()) {
        let samples: u64 = st.causes.iter().map(|c| c.samples).sum();
        let probes = if st.probe_samples > 0 {
            format!(
                ", {} more in tlsprof's probe traps left out (their cost is out of the stage's CPU)",
                st.probe_samples
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {}: {:.1} ms self, {} samples{probes}",
            st.name.name(),
            st.self_cpu_ms,
            samples
        );
        for c in &st.causes {
            let frames: Vec<String> = c
                .top_frames
                .iter()
                .map(|f| format!("{} {}", f.name, f.samples))
                .collect();
            let _ = writeln!(
                out,
                "    {:<15}{:>6.1}%{:>10.1} ms [{:.1}–{:.1}]{:>6}  {}: {}",
                c.name.name(),
                100.0 * c.share,
                c.cpu_ms,
                c.cpu_ms_ci95[0],
                c.cpu_ms_ci95[1],
                c.samples,
                c.name.describe(&families),
                frames.join(", ")
            );
            if c.name == Cause::Unattributed {
                let _ = writeln!(out, "{:>8}{}", "", naming_hint(&c.top_frames));
            }
        }
    }
}

/// How to name the frames of unattributed samples.
fn naming_hint(frames: &[FrameCount]) -> String {
    let mut libraries: Vec<&str> = frames
        .iter()
        .filter_map(|f| f.name.split_once("+0x").map(|(lib, _)| lib))
        .collect();
    libraries.sort_unstable();
    libraries.dedup();
    let mut hints = Vec::new();
    if !libraries.is_empty() {
        hints.push(format!(
            "code of {} without symbols: install their debug symbols (Debian: the -dbgsym packages), which tlsprof finds by build-id",
            libraries.join(", ")
        ));
    }
    if frames
        .iter()
        .any(|f| f.name == "[unwind gap]" || f.name == "[truncated]")
    {
        hints.push("[unwind gap]: frames the unwinder lost in assembly without unwind tables".to_string());
    }
    if frames.iter().any(|f| f.name == "[anon]") {
        hints.push("[anon]: JIT code without a perf map (start Node.js with --perf-basic-prof)".to_string());
    }
    format!("(to name them: {})", hints.join("; "))
}

/// `value [lo–hi]` with `digits` decimals.
fn interval(value: f64, ci: [f64; 2], digits: usize) -> String {
    format!("{value:.digits$} [{:.digits$}–{:.digits$}]", ci[0], ci[1])
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

/// The TLS library families of the recording's libraries, each once.
fn families_of(s: &Summary) -> Vec<&'static dyn Family> {
    families::of_ids(s.libraries.iter().map(|l| l.family.as_str()))
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
    let l = &s.lost;
    let counts = |kinds: &[LostKind]| {
        l.iter()
            .filter(|(c, _)| kinds.contains(&c.kind))
            .map(|(c, n)| format!("{n} {}", c.label))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut line = format!(
        "Samples: {} at {} Hz ({:.0}% of the targets' CPU time), {} in TLS stages ({:.1}%), {} ({} call graph, {}-byte stack copies)\n\
         Lost: {}; {}{}",
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
        counts(&[LostKind::Dropped, LostKind::Damaged]),
        counts(&[LostKind::Stale]),
        if l.undercounts() { " (figures undercount)" } else { "" }
    );
    for t in s.targets.iter().map(|t| &t.target) {
        if let Some(from) = t.io_driven_from_s {
            line.push_str(&format!(
                "\n{} (pid {}) leaves its handshakes to SSL_read/SSL_write: probed there from {from:.1} s into the recording",
                Printable(&t.comm),
                t.pid
            ));
        }
    }
    if l.unframed_work > 0 {
        line.push_str(&format!(
            "\nHandshake work outside any handshake call: {} stage calls before SSL_read/SSL_write were probed; their handshakes are not counted",
            l.unframed_work
        ));
    }
    for (path, source) in &s.debug_files {
        line.push_str(&format!(
            "\nNames in {} from its debug information ({})",
            Printable(path),
            Printable(source)
        ));
    }
    for u in &s.unnamed_files {
        line.push_str(&format!("\n{}", unnamed_file_line(u, total)));
    }
    for (pid, comm) in &st.unnamed_jit {
        line.push_str(&format!(
            "\nJIT frames of {} (pid {pid}) have no names: start it with --perf-basic-prof (Node.js) to see JavaScript functions",
            Printable(comm)
        ));
    }
    line
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
        "Unnamed frames in {}{build_id}: {} samples ({:.1}%) show it as file+offset; {why}",
        Printable(&f.path),
        u.samples,
        pct(u.samples as f64, samples as f64)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::{analyze, summarize};
    use std::collections::BTreeMap;

    use crate::catalogue::Stage;
    use crate::model::tests::sample_recording;
    use crate::model::{HandshakeCounts, ProbeWindow, Recording, WindowPart};

    fn report(rec: &Recording) -> String {
        text(&analyze(rec), Group::Stage)
    }

    #[test]
    fn text_has_headline_stage_table_and_tree() {
        let t = report(&sample_recording());
        assert!(t.contains("nginx (pid 10)"), "{t}");
        assert!(
            t.contains("Handshakes: 4 (2.0/s): 4 full, 0 resumed; 4 server, 0 client"),
            "{t}"
        );
        // TLS CPU 5.17 ms of 10 ms process CPU.
        assert!(t.contains("TLS CPU: 5.2 ms = 51.7% of process CPU"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.starts_with("sign") && l.contains("4.4") && l.contains(" 6 ")),
            "{t}"
        );
        // Indented by depth under the process row: two spaces per level after the calls column.
        assert!(
            t.lines()
                .any(|l| l.ends_with("         4    SSL_do_handshake [handshake]")),
            "{t}"
        );
        assert!(
            t.lines().any(|l| l.ends_with("         4      EVP_DigestSign [sign]")),
            "{t}"
        );
        assert!(t.contains("EVP_DigestSignFinal [sign]"), "{t}");
    }

    #[test]
    fn a_key_exchange_or_certificate_key_not_seen_is_unknown_not_absent() {
        let mut rec = sample_recording();
        let kind = &mut rec.handshakes[0].kind;
        // A full handshake whose ServerHello was not captured and whose signer the probes do not cover.
        (kind.version, kind.cipher, kind.key_exchange, kind.certificate_key) = (None, None, None, None);
        let t = report(&rec);
        assert!(
            t.contains("version ? cipher ? key exchange ? certificate key ?  full server"),
            "{t}"
        );
        assert!(
            t.contains("(\"certificate key ?\": no signature made or checked was seen"),
            "{t}"
        );
        // Resumed, with a ServerHello that names no group (TLS 1.3 psk_ke): nothing was exchanged or signed.
        let kind = &mut rec.handshakes[0].kind;
        (kind.version, kind.resumed) = (Some("TLSv1.3".into()), true);
        let t = report(&rec);
        assert!(
            t.contains("TLSv1.3 cipher ? no key exchange no certificate  resumed server"),
            "{t}"
        );
        assert!(!t.contains("certificate key ?"), "{t}");
        // Full, with a TLS 1.2 ServerHello but no group: its ServerKeyExchange was missed, not absent.
        let kind = &mut rec.handshakes[0].kind;
        (kind.version, kind.resumed) = (Some("TLSv1.2".into()), false);
        let t = report(&rec);
        assert!(
            t.contains("TLSv1.2 cipher ? key exchange ? certificate key ?  full server"),
            "{t}"
        );
    }

    #[test]
    fn steal_time_is_stated_only_when_the_hypervisor_took_some() {
        let mut rec = sample_recording();
        assert!(!report(&rec).contains("Steal time"));
        rec.targets[0].stage_slices_ms = 8.0;
        rec.targets[0].stage_slices_cpu_ms = 7.0;
        let t = report(&rec);
        assert!(
            t.contains("Steal time: 12.5% of the stage threads' time on a CPU was the hypervisor's"),
            "{t}"
        );
        assert_eq!(summarize(&rec).stolen_share, Some(0.125));
    }

    #[test]
    fn causes_show_under_each_stage_and_in_the_tree_grouped_by_cause() {
        let s = analyze(&sample_recording());
        let t = text(&s, Group::Stage);
        assert!(t.contains("Causes within stages"), "{t}");
        assert!(
            t.lines()
                .any(|l| l.starts_with("    public_key") && l.contains("100.0%") && l.contains("bn_mul_mont 5")),
            "{t}"
        );
        assert!(!t.contains("[cause]"), "{t}");
        let grouped = text(&s, Group::Cause);
        assert!(
            grouped.lines().any(|l| l.ends_with("        public_key [cause]")),
            "{grouped}"
        );
        assert!(
            grouped.lines().any(|l| l.ends_with("          bn_mul_mont")),
            "{grouped}"
        );
    }

    #[test]
    fn tls_messages_names_the_library_family_of_the_targets() {
        let mut rec = sample_recording();
        rec.samples[0].frames.push("ossl_statem_accept".into());
        let t = report(&rec);
        assert!(t.contains("tls_messages") && t.contains("libssl's own code"), "{t}");
        rec.libraries[0].family = "go".into();
        rec.samples[0].frames.push("crypto/tls.(*Conn).serverHandshake".into());
        let t = report(&rec);
        assert!(t.contains("Go's crypto/tls package's own code"), "{t}");
        assert!(!t.contains("libssl's own code"), "{t}");
        // The record layer in Go's terms too.
        assert!(
            t.contains("(crypto/tls.(*Conn).Read 0.0%, crypto/tls.(*Conn).Write 0.0%)") && !t.contains("SSL_read"),
            "{t}"
        );
    }

    #[test]
    fn part_time_probing_is_stated_even_with_one_window() {
        let mut rec = sample_recording();
        assert!(!report(&rec).contains("Probes attached"));
        // Paused after the first window and never resumed before the end; half the CPU fell in the window.
        rec.probing.live_s = 0.5;
        rec.probe_hits = 0;
        rec.probe_stepped_hits = 0;
        rec.targets[0].probed_cpu_ms = 5.0;
        let t = report(&rec);
        assert!(
            t.contains("Probes attached 0.5 s of 2.0 s (25%, 1 windows, 50% of the targets' CPU)"),
            "{t}"
        );
        // Counts scale by the CPU share: 4 handshakes seen, one window, so random arrivals set the interval:
        // 8 ± 1.96 × √(4 × 0.5) / 0.5.
        assert!(t.contains("Handshakes: ≈ 8 [4–14] (≈ 4.0 [2.0–6.8] /s)"), "{t}");
        assert!(t.contains("seen in the probe windows: 4 full, 0 resumed"), "{t}");
        assert!(t.contains("while probed"), "{t}");
    }

    #[test]
    fn windows_one_by_one_estimate_the_whole_recording() {
        let mut rec = sample_recording();
        // Two windows of 2.5 ms own CPU each out of 10 ms, seeing 2 and 2 of the 4 handshakes.
        rec.probing.live_s = 0.5;
        rec.probe_hits = 0;
        rec.probe_stepped_hits = 0;
        rec.targets[0].probed_cpu_ms = 5.0;
        let window = |full| ProbeWindow {
            start_unix_ns: None,
            live_s: 0.25,
            processes: vec![WindowPart {
                pid: 10,
                own_cpu_ms: 2.5,
                connections: 0,
                handshakes: HandshakeCounts {
                    total: full,
                    full,
                    server: full,
                    ..HandshakeCounts::default()
                },
                abandoned_weighted: None,
                stage_self_ns: BTreeMap::from([(Stage::Sign, 2_210_000)]),
            }],
        };
        rec.probing.window_figures = vec![window(2), window(2)];
        let s = summarize(&rec);
        assert!(s.handshakes.estimated);
        assert_eq!(s.handshakes.total, 8);
        // Windows that agree still get the spread of random arrivals: 2 handshakes a window, Student's t for
        // one degree of freedom; never below the 4 seen.
        assert_eq!(s.handshakes.total_ci95[0], 4);
        assert!(s.handshakes.total_ci95[1] > 40, "{:?}", s.handshakes.total_ci95);
        let sign = s.stages.iter().find(|st| st.name == Stage::Sign).unwrap();
        assert!((sign.self_cpu_ms - 8.84).abs() < 1e-9, "{sign:?}");
        assert_eq!(sign.observed.as_ref().unwrap().calls, 6);
        assert_eq!(sign.calls, Some(12));
    }
}
