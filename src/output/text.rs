// SPDX-License-Identifier: Apache-2.0
//! The summary of a recording: headline, per-stage table and call tree as text, and the same as JSON.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::{json, Value};

use crate::catalogue::Stage;
use crate::model::{Flavor, Symbols};

use crate::model::{CpuHistogram, Recording, Role};

/// Tree nodes below this share of TLS CPU are folded into a count, to keep the tree readable.
const TREE_MIN_SHARE: f64 = 0.001;

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

fn cpu_line(h: &CpuHistogram) -> String {
    format!(
        "mean {:.3} ms, p50 {:.3} ms, p99 {:.3} ms",
        h.mean_ns() / 1e6,
        h.quantile_ns(0.5) / 1e6,
        h.quantile_ns(0.99) / 1e6
    )
}

fn targets_line(rec: &Recording) -> String {
    let mut by_comm: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for t in &rec.targets {
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

pub fn text(rec: &Recording) -> String {
    let mut out = String::new();
    let hs = rec.handshake_totals();
    let tls_ms = ms(rec.tls_cpu_ns());
    let proc_ms = rec.probed_cpu_ms();
    let probed_s = rec.probing.live_s.max(1e-9);

    let _ = writeln!(out, "tlsprof: {} for {:.1} s", targets_line(rec), rec.duration_s);
    for l in &rec.libraries {
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
    if let Some(line) = probing_line(rec, hs.total) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "Handshakes: {} ({:.1}/s): {} full, {} resumed; {} server, {} client{}",
        hs.total,
        hs.total as f64 / probed_s,
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
    let _ = writeln!(
        out,
        "TLS CPU: {:.1} ms = {:.1}% of process CPU ({:.1} ms{}, from its CPU clock)",
        tls_ms,
        pct(tls_ms, proc_ms),
        proc_ms,
        if rec.probed_part_time() { " while probed" } else { "" }
    );
    if hs.total > 0 {
        let _ = writeln!(out, "CPU per handshake: {}", cpu_line(&hs.cpu));
        let _ = writeln!(out, "Handshake mix (version, cipher and group from ServerHellos seen on the sockets; certificate key from signature lengths):");
        for g in rec.handshakes.iter().filter(|g| g.role != Role::Partial) {
            let kind = match (&g.resumption, g.resumed) {
                (Some(how), true) => format!("resumed ({how})"),
                (None, true) => "resumed".to_string(),
                (_, false) => "full".to_string(),
            };
            let role = if g.role == Role::Server { "server" } else { "client" };
            let fields = [
                g.version.as_deref().unwrap_or("version ?"),
                g.cipher.as_deref().unwrap_or("cipher ?"),
                g.key_exchange.as_deref().unwrap_or("no key exchange"),
                g.certificate_key.as_deref().unwrap_or("no certificate"),
            ];
            let _ = writeln!(
                out,
                "  {:>5.1}%  {}  {kind} {role} ({}): {}",
                pct(g.cpu.count as f64, hs.total as f64),
                fields.join(" "),
                g.cpu.count,
                cpu_line(&g.cpu)
            );
        }
        if rec.handshakes.iter().any(|g| g.version.is_none()) {
            let _ = writeln!(out, "  (\"?\": the ServerHello was not seen: outside --hello-capture windows, or a library that keeps the handshake off the socket)");
        }
    }
    let _ = writeln!(out, "{}", samples_line(rec));
    let stepped = if rec.probe_stepped_hits > 0 {
        format!(
            " ({} of them entries the kernel single-steps, {:.1} µs more each)",
            rec.probe_stepped_hits,
            rec.probe_cost.cold_step_ns / 1e3
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "Probe cost: {:.1} µs per hit in a busy target ({:.1} µs back to back; measured at attach): {} hits{} ≈ {:.1} ms = {:.2}% of the targets' CPU over the recording (--max-overhead {}%); removed from the figures above and below",
        rec.probe_cost.cold_hit_ns / 1e3,
        rec.probe_cost.hit_ns / 1e3,
        rec.probe_hits,
        stepped,
        rec.probe_overhead_ms(),
        pct(rec.probe_overhead_ms(), rec.process_cpu_ms()),
        rec.probing.max_overhead_pct
    );
    let _ = writeln!(out, "{}", connection_reuse_line(rec, hs.total));

    let advice = crate::analyze::advice::advise(rec);
    if !advice.is_empty() {
        let _ = writeln!(out, "\nAdvice:");
        for a in &advice {
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
    for s in rec.stages() {
        let _ = writeln!(
            out,
            "{:<14}{:>11.1}{:>7.1}%{:>12.1}{:>10}{:>12.1}",
            s.stage.name(),
            ms(s.self_ns),
            pct(ms(s.self_ns), tls_ms),
            ms(s.cpu_ns),
            s.calls,
            s.self_us_per_call()
        );
    }
    for (stage, cpu_ms) in sampled_record_layer(rec) {
        let _ = writeln!(
            out,
            "{:<14}{:>11.1}   (sampled: SSL_* frames in CPU samples; --all-probes counts calls)",
            stage.name(),
            cpu_ms
        );
    }

    let _ = writeln!(
        out,
        "\nCall tree (CPU; % of process CPU)\n{:>11}{:>8}{:>11}{:>10}  frame",
        "total ms", "%", "self ms", "calls"
    );
    tree_text(rec, proc_ms, &mut out);
    out
}

/// The read and write stages estimated from CPU samples when SSL_read/SSL_write were not probed: each sample
/// stands for 1/freq s of CPU.
fn sampled_record_layer(rec: &Recording) -> Vec<(Stage, f64)> {
    if rec.all_probes || rec.sample_freq_hz == 0 {
        return Vec::new();
    }
    let (read, write) = rec.record_layer_sampled();
    // Samples cover the whole recording; the stage table covers the probed windows' share of the CPU.
    let total_ms = rec.samples_total() as f64 * 1e3 / rec.sample_freq_hz as f64 * rec.probed_cpu_share();
    vec![(Stage::Read, read * total_ms), (Stage::Write, write * total_ms)]
}

/// When the probes were attached only part of the time: for how long, why, and what the counts scale to.
fn probing_line(rec: &Recording, handshakes: u64) -> Option<String> {
    let p = &rec.probing;
    let fraction = rec.probed_fraction();
    let cpu_share = rec.probed_cpu_share();
    rec.probed_part_time().then(|| {
        format!(
            "Probes attached {:.1} s of {:.1} s ({:.0}%, {} windows, {:.0}% of the targets' CPU): they cost up to {:.1}% of the targets' CPU while attached, over the --max-overhead {}% budget. Handshakes, stage CPU and the call tree are from those windows (≈ {:.0} handshakes over the whole recording); CPU samples cover all of it",
            p.live_s,
            rec.duration_s,
            100.0 * fraction,
            p.windows,
            100.0 * cpu_share,
            100.0 * p.peak_overhead,
            p.max_overhead_pct,
            rec.handshakes_estimated(handshakes)
        )
    })
}

/// How much record-layer work each handshake carries: calls per handshake when SSL_read/SSL_write were
/// probed, else their share of the CPU samples.
fn connection_reuse_line(rec: &Recording, handshakes: u64) -> String {
    let (read, write) = rec.record_layer_sampled();
    let sampled = format!(
        "record layer in {:.1}% of samples (SSL_read {:.1}%, SSL_write {:.1}%)",
        100.0 * (read + write),
        100.0 * read,
        100.0 * write
    );
    if !rec.all_probes {
        return format!("Connection reuse: {sampled}; add --all-probes to count SSL_read/SSL_write calls per handshake (each call then costs the target a probe hit)");
    }
    let calls = |stage: Stage| rec.stages().iter().find(|s| s.stage == stage).map_or(0, |s| s.calls);
    let per = handshakes.max(1) as f64;
    format!(
        "Connection reuse: {:.1} SSL_write and {:.1} SSL_read calls per handshake; {sampled}",
        calls(Stage::Write) as f64 / per,
        calls(Stage::Read) as f64 / per
    )
}

fn samples_line(rec: &Recording) -> String {
    let total = rec.samples_total();
    let in_tls: u64 = rec.samples.iter().filter(|s| !s.path.is_empty()).map(|s| s.count).sum();
    let whole: u64 = rec.samples.iter().filter(|s| s.complete).map(|s| s.count).sum();
    let l = &rec.lost;
    let lost_events = l.handshake_events + l.tree_nodes + l.depth_overflow + l.threads + l.connections;
    let mut line = format!(
        "Samples: {} at {} Hz, {} in TLS stages ({:.1}%), {:.1}% with whole stacks ({:?} call graph, {}-byte stack copies)\n\
         Lost: {} samples, {} unreadable stacks, {} cut stacks, {} handshake events, {} tree nodes, {} too deep, {} threads, {} connections; {} missed returns{}",
        total,
        rec.sample_freq_hz,
        in_tls,
        pct(in_tls as f64, total as f64),
        pct(whole as f64, total as f64),
        rec.call_graph,
        rec.stack_bytes,
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
    for pid in &rec.unnamed_jit_pids {
        line.push_str(&format!(
            "\nJIT frames of {} (pid {pid}) have no names: start it with --perf-basic-prof (Node.js) to see JavaScript functions",
            rec.comm_of(*pid)
        ));
    }
    line
}

#[derive(Default)]
struct Node {
    calls: u64,
    cpu_ns: u64,
    self_ns: u64,
    children: BTreeMap<u16, Node>,
}

fn tree_text(rec: &Recording, proc_ms: f64, out: &mut String) {
    let mut roots: BTreeMap<&str, (f64, Node)> = BTreeMap::new();
    for t in &rec.targets {
        roots.entry(&t.comm).or_default().0 += t.probed_cpu_ms;
    }
    for n in &rec.tree {
        let (_, root) = roots.entry(rec.comm_of(n.pid)).or_default();
        let mut node = root;
        for f in &n.path {
            node = node.children.entry(*f).or_default();
        }
        node.calls += n.calls;
        node.cpu_ns += n.cpu_ns;
        node.self_ns += n.self_ns;
    }
    let min_ns = (rec.tls_cpu_ns() as f64 * TREE_MIN_SHARE) as u64;
    let mut hidden = 0;
    for (comm, (cpu_ms, root)) in &roots {
        let _ = writeln!(
            out,
            "{:>11.1}{:>7.1}%{:>11}{:>10}  {comm}",
            cpu_ms,
            pct(*cpu_ms, proc_ms),
            "-",
            "-"
        );
        print_children(rec, root, 1, proc_ms, min_ns, &mut hidden, out);
    }
    if hidden > 0 {
        let _ = writeln!(
            out,
            "  ({hidden} nodes under {:.1}% of TLS CPU not shown)",
            TREE_MIN_SHARE * 100.0
        );
    }
}

fn print_children(
    rec: &Recording,
    node: &Node,
    depth: usize,
    proc_ms: f64,
    min_ns: u64,
    hidden: &mut usize,
    out: &mut String,
) {
    let mut kids: Vec<(&u16, &Node)> = node.children.iter().collect();
    kids.sort_by_key(|(_, n)| std::cmp::Reverse(n.cpu_ns));
    for (f, n) in kids {
        if n.cpu_ns < min_ns {
            *hidden += 1 + count_nodes(n);
            continue;
        }
        let func = &rec.functions[usize::from(*f)];
        let stage = func.stage.map_or(String::new(), |s| format!(" [{}]", s.name()));
        let _ = writeln!(
            out,
            "{:>11.1}{:>7.1}%{:>11.1}{:>10}  {}{}{}",
            ms(n.cpu_ns),
            pct(ms(n.cpu_ns), proc_ms),
            ms(n.self_ns),
            n.calls,
            "  ".repeat(depth),
            func.name,
            stage
        );
        print_children(rec, n, depth + 1, proc_ms, min_ns, hidden, out);
    }
}

fn count_nodes(n: &Node) -> usize {
    n.children.values().map(|c| 1 + count_nodes(c)).sum()
}

pub fn json(rec: &Recording) -> Value {
    let (read, write) = rec.record_layer_sampled();
    let hs = rec.handshake_totals();
    let tls_ms = ms(rec.tls_cpu_ns());
    let proc_ms = rec.probed_cpu_ms();
    let hist = |h: &CpuHistogram| json!({"mean": h.mean_ns() / 1e6, "p50": h.quantile_ns(0.5) / 1e6, "p99": h.quantile_ns(0.99) / 1e6});
    let mut stages: Vec<Value> = rec
        .stages()
        .iter()
        .map(|s| {
            json!({
                "name": s.stage,
                "cpu_ms": ms(s.cpu_ns),
                "self_cpu_ms": ms(s.self_ns),
                "calls": s.calls,
                "cpu_us_per_call": s.self_us_per_call(),
            })
        })
        .collect();
    stages.extend(sampled_record_layer(rec).into_iter().map(|(stage, cpu_ms)| {
        json!({"name": stage, "cpu_ms": cpu_ms, "self_cpu_ms": cpu_ms, "calls": null, "cpu_us_per_call": null, "sampled": true})
    }));
    let functions: Vec<Value> = rec
        .function_figures()
        .iter()
        .map(|f| json!({"name": f.name, "library": f.library, "stage": f.stage, "calls": f.calls, "cpu_ms": ms(f.cpu_ns)}))
        .collect();
    let libraries: Vec<Value> = rec
        .libraries
        .iter()
        .map(
            |l| json!({"path": l.path, "flavor": l.flavor, "version": l.version, "symbols": l.symbols, "pids": l.pids}),
        )
        .collect();
    let kinds: Vec<Value> = rec
        .handshakes
        .iter()
        .map(|g| {
            json!({"role": g.role, "resumed": g.resumed, "resumption": g.resumption, "version": g.version, "cipher": g.cipher,
                   "key_exchange": g.key_exchange, "certificate_key": g.certificate_key,
                   "count": g.cpu.count, "cpu_ms": hist(&g.cpu)})
        })
        .collect();
    json!({
        "duration_s": rec.duration_s,
        "targets": rec.targets,
        "process_cpu_ms": rec.process_cpu_ms(),
        "probed_cpu_ms": proc_ms,
        "probing": {
            "max_overhead_pct": rec.probing.max_overhead_pct, "live_s": rec.probing.live_s,
            "fraction": rec.probed_fraction(), "cpu_share": rec.probed_cpu_share(), "windows": rec.probing.windows,
            "peak_overhead": rec.probing.peak_overhead,
            "handshakes_estimated": rec.handshakes_estimated(hs.total),
        },
        "tls_cpu_ms": tls_ms,
        "tls_share": if proc_ms > 0.0 { Some(tls_ms / proc_ms) } else { None },
        "handshakes": {
            "total": hs.total, "full": hs.full, "resumed": hs.resumed,
            "server": hs.server, "client": hs.client, "partial": hs.partial,
            "cpu_ms": hist(&hs.cpu),
            "kinds": kinds,
        },
        "stages": stages,
        "functions": functions,
        "libraries": libraries,
        "all_probes": rec.all_probes,
        "sample_freq_hz": rec.sample_freq_hz,
        "samples": rec.samples_total(),
        "lost_samples": rec.lost.samples,
        "lost": rec.lost,
        "probe_cost_us_per_hit": rec.probe_cost.hit_ns / 1e3,
        "probe_cost_cold_us_per_hit": rec.probe_cost.cold_hit_ns / 1e3,
        "probe_hits": rec.probe_hits,
        "probe_stepped_hits": rec.probe_stepped_hits,
        "probe_cost_cold_us_per_step": rec.probe_cost.cold_step_ns / 1e3,
        "probe_overhead_ms": rec.probe_overhead_ms(),
        "record_layer_sampled": {"read": read, "write": write},
        "advice": crate::analyze::advice::advise(rec),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Stage;
    use crate::model::tests::sample_recording;

    #[test]
    fn text_has_headline_stage_table_and_tree() {
        let t = text(&sample_recording());
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
        assert!(
            t.contains("      SSL_do_handshake [handshake]") || t.contains("  SSL_do_handshake [handshake]"),
            "{t}"
        );
        assert!(t.contains("EVP_DigestSignFinal [sign]"), "{t}");
    }

    #[test]
    fn part_time_probing_is_stated_even_with_one_window() {
        let mut rec = sample_recording();
        assert!(!text(&rec).contains("Probes attached"));
        // Paused after the first window and never resumed before the end; half the CPU fell in the window.
        rec.probing.live_s = 0.5;
        rec.probe_hits = 0;
        rec.probe_stepped_hits = 0;
        rec.targets[0].probed_cpu_ms = 5.0;
        let t = text(&rec);
        assert!(
            t.contains("Probes attached 0.5 s of 2.0 s (25%, 1 windows, 50% of the targets' CPU)"),
            "{t}"
        );
        // Counts scale by the CPU share: 4 handshakes seen.
        assert!(t.contains("≈ 8 handshakes over the whole recording"), "{t}");
        assert!(t.contains("while probed"), "{t}");
    }

    #[test]
    fn json_has_the_documented_fields() {
        let j = json(&sample_recording());
        for field in [
            "duration_s",
            "process_cpu_ms",
            "tls_cpu_ms",
            "handshakes",
            "stages",
            "functions",
            "libraries",
            "samples",
            "lost_samples",
        ] {
            assert!(j.get(field).is_some(), "missing {field}");
        }
        for field in ["total", "full", "resumed", "server", "client"] {
            assert!(j["handshakes"].get(field).is_some(), "missing handshakes.{field}");
        }
        let sign = j["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "sign")
            .unwrap();
        assert_eq!(sign["calls"], 6);
        assert!((sign["cpu_us_per_call"].as_f64().unwrap() - 4420.0 / 6.0).abs() < 1e-6);
        let f = &j["functions"][0];
        for field in ["name", "library", "stage", "calls", "cpu_ms"] {
            assert!(f.get(field).is_some(), "missing functions[].{field}");
        }
        for field in ["path", "flavor", "version", "symbols"] {
            assert!(j["libraries"][0].get(field).is_some(), "missing libraries[].{field}");
        }
        assert_eq!(j["stages"][0]["name"], Stage::Handshake.name());
    }
}
