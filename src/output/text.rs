// SPDX-License-Identifier: Apache-2.0
//! The text report: headline, handshake mix, advice, per-stage table and call tree, rendered from a summary.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::analyze::{CpuStats, Summary};
use crate::catalogue::Stage;
use crate::model::{Flavor, Outcome, Role, Symbols};

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

fn targets_line(s: &Summary) -> String {
    let mut by_comm: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for t in &s.targets {
        by_comm.entry(&t.comm).or_default().push(t.pid);
    }
    by_comm
        .iter()
        .map(|(comm, pids)| {
            let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
            format!("{comm} (pid {})", pids.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub fn text(s: &Summary) -> String {
    let mut out = String::new();
    let hs = &s.handshakes;
    let tls_ms = s.tls_cpu_ms;
    let proc_ms = s.probed_cpu_ms;

    let _ = writeln!(out, "tlsprof: {} for {:.1} s", targets_line(s), s.duration_s);
    for l in &s.libraries {
        let flavor = match l.flavor {
            Flavor::Shared => "shared library",
            Flavor::Static => "linked into the executable",
            Flavor::App => "application TLS glue",
        };
        let symbols = match l.symbols {
            Symbols::Internal => "internal handshake functions visible",
            Symbols::Exported => "public API only",
            Symbols::None => "no OpenSSL functions",
        };
        let _ = writeln!(
            out,
            "  {}: {} ({flavor}; {symbols}; {} catalogue functions)",
            l.version.as_deref().unwrap_or("TLS code"),
            l.path,
            l.functions_found
        );
    }
    if let Some(line) = probing_line(s) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "Handshakes: {} ({:.1}/s): {} full, {} resumed; {} server, {} client{}",
        hs.total,
        hs.rate_per_s,
        hs.full,
        hs.resumed,
        hs.server,
        hs.client,
        if hs.partial > 0 {
            format!(" ({} under way when the probes attached, not counted)", hs.partial)
        } else {
            String::new()
        }
    );
    if hs.abandoned > 0 {
        let _ = writeln!(
            out,
            "Abandoned handshakes: {} did work but their connection ended before they completed (the peer went away after the server's flight, or they failed): {}",
            hs.abandoned,
            cpu_line(&hs.abandoned_cpu_ms)
        );
    }
    let _ = writeln!(
        out,
        "TLS CPU: {:.1} ms = {:.1}% of process CPU ({:.1} ms{}, from its CPU clock)",
        tls_ms,
        pct(tls_ms, proc_ms),
        proc_ms,
        if s.probing.part_time { " while probed" } else { "" }
    );
    let paid_for = hs.total + hs.abandoned;
    if hs.total > 0 {
        let _ = writeln!(out, "CPU per handshake: {}", cpu_line(&hs.cpu_ms));
    }
    if paid_for > 0 {
        let _ = writeln!(out, "Handshake mix (version, cipher and group from ServerHellos seen on the sockets; certificate key from signature lengths):");
        for g in hs.kinds.iter().filter(|g| g.role != Role::Partial) {
            let kind = match (&g.resumption, g.resumed) {
                (Some(how), true) => format!("resumed ({how})"),
                (None, true) => "resumed".to_string(),
                (_, false) => "full".to_string(),
            };
            let role = match (g.role, g.outcome) {
                (Role::Server, Outcome::Completed) => "server",
                (_, Outcome::Completed) => "client",
                (Role::Server, Outcome::Abandoned) => "server abandoned",
                (_, Outcome::Abandoned) => "client abandoned",
            };
            let fields = [
                g.version.as_deref().unwrap_or("version ?"),
                g.cipher.as_deref().unwrap_or("cipher ?"),
                g.key_exchange.as_deref().unwrap_or("no key exchange"),
                g.certificate_key.as_deref().unwrap_or("no certificate"),
            ];
            let _ = writeln!(
                out,
                "  {:>5.1}%  {}  {kind} {role} ({}): {}",
                pct(g.count as f64, paid_for as f64),
                fields.join(" "),
                g.count,
                cpu_line(&g.cpu_ms)
            );
        }
        if hs.kinds.iter().any(|g| g.version.is_none()) {
            let _ = writeln!(out, "  (\"?\": the ServerHello was not seen: outside --hello-capture windows, or a library that keeps the handshake off the socket)");
        }
    }
    let _ = writeln!(out, "{}", samples_line(s));
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
        "Probe cost: {:.1} µs per hit in a busy target ({:.1} µs back to back; measured at attach): {} hits{} ≈ {:.1} ms = {:.2}% of the targets' CPU over the recording (--max-overhead {}%); removed from the figures above and below",
        s.probe_cost_cold_us_per_hit,
        s.probe_cost_us_per_hit,
        s.probe_hits,
        stepped,
        s.probe_overhead_ms,
        pct(s.probe_overhead_ms, s.process_cpu_ms),
        s.probing.max_overhead_pct
    );
    let _ = writeln!(out, "{}", connection_reuse_line(s));

    if !s.advice.is_empty() {
        let _ = writeln!(out, "\nAdvice:");
        for a in &s.advice {
            let _ = writeln!(
                out,
                "  [{}] {}\n    evidence: {}\n    saving: {}",
                a.id, a.change, a.evidence, a.estimated_saving
            );
        }
    }

    let _ = writeln!(
        out,
        "\n{:<14}{:>11}{:>8}{:>12}{:>10}{:>12}",
        "stage", "self ms", "% TLS", "total ms", "calls", "µs/call"
    );
    for st in &s.stages {
        match (st.calls, st.cpu_us_per_call) {
            (Some(calls), Some(per_call)) => {
                let _ = writeln!(
                    out,
                    "{:<14}{:>11.1}{:>7.1}%{:>12.1}{:>10}{:>12.1}",
                    st.name.name(),
                    st.self_cpu_ms,
                    pct(st.self_cpu_ms, tls_ms),
                    st.cpu_ms,
                    calls,
                    per_call
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "{:<14}{:>11.1}   (sampled: SSL_* frames in CPU samples; --all-probes counts calls)",
                    st.name.name(),
                    st.cpu_ms
                );
            }
        }
    }

    let _ = writeln!(
        out,
        "\nCall tree (CPU; % of process CPU)\n{:>11}{:>8}{:>11}{:>10}  frame",
        "total ms", "%", "self ms", "calls"
    );
    for row in &s.call_tree.rows {
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
            row.frame,
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
    out
}

/// When the probes were attached only part of the time: for how long, why, and what the counts scale to.
fn probing_line(s: &Summary) -> Option<String> {
    let p = &s.probing;
    p.part_time.then(|| {
        format!(
            "Probes attached {:.1} s of {:.1} s ({:.0}%, {} windows, {:.0}% of the targets' CPU): they cost up to {:.1}% of the targets' CPU while attached, over the --max-overhead {}% budget. Handshakes, stage CPU and the call tree are from those windows (≈ {:.0} handshakes over the whole recording); CPU samples cover all of it",
            p.live_s,
            s.duration_s,
            100.0 * p.fraction,
            p.windows,
            100.0 * p.cpu_share,
            100.0 * p.peak_overhead,
            p.max_overhead_pct,
            p.handshakes_estimated
        )
    })
}

/// How much record-layer work each handshake carries: calls per handshake when SSL_read/SSL_write were
/// probed, else their share of the CPU samples.
fn connection_reuse_line(s: &Summary) -> String {
    let (read, write) = (s.record_layer_sampled.read, s.record_layer_sampled.write);
    let sampled = format!(
        "record layer in {:.1}% of samples (SSL_read {:.1}%, SSL_write {:.1}%)",
        100.0 * (read + write),
        100.0 * read,
        100.0 * write
    );
    if !s.all_probes {
        return format!("Connection reuse: {sampled}; add --all-probes to count SSL_read/SSL_write calls per handshake (each call then costs the target a probe hit)");
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
        "Connection reuse: {:.1} SSL_write and {:.1} SSL_read calls per handshake; {sampled}",
        calls(Stage::Write) as f64 / per,
        calls(Stage::Read) as f64 / per
    )
}

fn samples_line(s: &Summary) -> String {
    let total = s.samples;
    let st = &s.stacks;
    let l = &s.lost;
    let lost_events = l.handshake_events + l.tree_nodes + l.depth_overflow + l.threads + l.connections;
    let mut line = format!(
        "Samples: {} at {} Hz, {} in TLS stages ({:.1}%), {:.1}% with whole stacks ({} call graph, {}-byte stack copies)\n\
         Lost: {} samples, {} unreadable stacks, {} cut stacks, {} handshake events, {} tree nodes, {} too deep, {} threads, {} connections; {} missed returns{}",
        total,
        s.sample_freq_hz,
        st.in_tls,
        pct(st.in_tls as f64, total as f64),
        pct(st.whole as f64, total as f64),
        st.call_graph.map_or("?".to_string(), |c| format!("{c:?}")),
        st.stack_bytes,
        l.samples,
        l.unreadable_stacks,
        l.cut_stacks,
        l.handshake_events,
        l.tree_nodes,
        l.depth_overflow,
        l.threads,
        l.connections,
        l.missed_returns,
        if l.samples + lost_events > 0 { " (figures undercount)" } else { "" }
    );
    for (pid, comm) in &st.unnamed_jit {
        line.push_str(&format!(
            "\nJIT frames of {comm} (pid {pid}) have no names: start it with --perf-basic-prof (Node.js) to see JavaScript functions"
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::summarize;
    use crate::model::tests::sample_recording;
    use crate::model::Recording;

    fn report(rec: &Recording) -> String {
        text(&summarize(rec))
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
        // Counts scale by the CPU share: 4 handshakes seen.
        assert!(t.contains("≈ 8 handshakes over the whole recording"), "{t}");
        assert!(t.contains("while probed"), "{t}");
    }
}
