// SPDX-License-Identifier: Apache-2.0
//! Live: the --max-overhead duty cycle on nginx under full-handshake load, its cost measured on the target by
//! an identical twin, not by tlsprof's own estimate (needs root).
mod common;

use std::path::Path;
use std::thread;

use serde_json::Value;

use common::*;

const SECS: u32 = 8;

/// What separates the twins beyond the profiler: unprofiled twins differ by up to half a point over a run (make
/// bench, *no profiler*), and a governed run adds where in the load its windows fall.
const TWIN_RESOLUTION: f64 = 0.015;

/// On-CPU ns of a process's threads so far (/proc/PID/schedstat; the nginx workers have one thread).
fn cpu_ns(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
    text.split_whitespace().next().unwrap().parse().unwrap()
}

struct Run {
    /// The profiled worker's CPU per handshake over the control twin's, − 1: what the profiler cost it.
    paired_overhead: f64,
    /// What tlsprof estimated its probes cost (calibrated per hit, or more where the samples in the traps
    /// measured more), against the worker's own CPU.
    estimated_overhead: f64,
    connections: u64,
    report: Value,
    summary: String,
}

/// tlsprof with `args` on twin `profiled`'s worker while both twins take the same full-handshake load on the
/// same CPU, at the same time.
fn paired_run(twins: &[Nginx; 2], workers: [u32; 2], profiled: usize, args: &[&str], recording: &Path) -> Run {
    let pid = workers[profiled].to_string();
    let rec = Recorder::start(&[&["--pid", &pid, "-o", recording.to_str().unwrap()], args].concat());
    let client = cpus().client;
    let before = workers.map(cpu_ns);
    let control_port = twins[1 - profiled].port;
    let control = thread::spawn(move || s_time_new_on(control_port, SECS, client));
    let connections = s_time_new_on(twins[profiled].port, SECS, client);
    let control_connections = control.join().unwrap();
    let after = workers.map(cpu_ns);
    let summary = rec.interrupt();
    let per_handshake = |i: usize, n: u64| (after[i] - before[i]) as f64 / n as f64;
    let report = report_json(recording);
    let probes_ms = f(&report["probe_overhead_ms"]);
    Run {
        paired_overhead: per_handshake(profiled, connections) / per_handshake(1 - profiled, control_connections) - 1.0,
        estimated_overhead: probes_ms / (f(&report["process_cpu_ms"]) - probes_ms),
        connections,
        report,
        summary,
    }
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.collect();
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn busy_nginx_probed_part_time_costs_what_the_budget_buys_measured_by_a_twin() {
    if !require_root("busy_nginx_probed_part_time_costs_what_the_budget_buys_measured_by_a_twin") {
        return;
    }
    let scratch = Scratch::new("governor");
    let twins = [
        Nginx::start(&scratch.path("a"), &["--protocols", "TLSv1.3"]),
        Nginx::start(&scratch.path("b"), &["--protocols", "TLSv1.3"]),
    ];
    let workers = [twins[0].workers()[0], twins[1].workers()[0]];
    let server = cpus().server;
    for w in workers {
        pin(w, server);
    }
    // What the probes cost attached throughout depends on the CPU (traps against RSA and X25519 arithmetic):
    // measure it, then allow a third of it as tlsprof reckons it. The governor must then pause them and
    // repay a window in about twice its length, so that each recording holds several windows. The twin that
    // is profiled alternates (A, B, B, A), so a difference between the twins cancels.
    let first = paired_run(&twins, workers, 0, &[], &scratch.path("exact-a.tlsprof"));
    let budget = first.estimated_overhead / 3.0;
    let budget_arg = (budget * 100.0).to_string();
    let governed_args = ["--max-overhead", budget_arg.as_str()];
    let governed = [
        paired_run(&twins, workers, 1, &governed_args, &scratch.path("governed-b.tlsprof")),
        paired_run(&twins, workers, 0, &governed_args, &scratch.path("governed-a.tlsprof")),
    ];
    let exact = [
        first,
        paired_run(&twins, workers, 1, &[], &scratch.path("exact-b.tlsprof")),
    ];

    let attached = mean(exact.iter().map(|r| r.paired_overhead));
    let attached_estimate = mean(exact.iter().map(|r| r.estimated_overhead));
    let real = mean(governed.iter().map(|r| r.paired_overhead));
    let fraction = mean(governed.iter().map(|r| f(&r.report["probing"]["fraction"])));
    // How far tlsprof's estimate per hit falls short of what a hit costs in this worker, by the twin.
    let estimate_error = attached / attached_estimate;
    eprintln!(
        "attached throughout: {:+.2}% by the twin, {:.2}% by tlsprof's estimate (×{estimate_error:.2}); \
         budget {:.2}%: {:+.2}% by the twin, probes live {:.0}% of the time",
        attached * 100.0,
        attached_estimate * 100.0,
        budget * 100.0,
        real * 100.0,
        fraction * 100.0
    );
    for run in &governed {
        let p = &run.report["probing"];
        assert!(
            f(&p["fraction"]) < 0.9 && f(&p["windows"]) >= 2.0,
            "probes were not paused: {p}\n{}",
            run.summary
        );
    }
    // The governor holds the budget in tlsprof's estimated cost: what the twin measures is the budget times
    // the estimate's shortfall measured in the same run, neither more (the budget is kept in those units) nor
    // much less (the windows buy what the budget allows), and no more than the probed share of the cost
    // attached throughout.
    let bought = budget * estimate_error;
    assert!(
        (real - bought).abs() <= TWIN_RESOLUTION,
        "the governed worker paid {:+.2}% by its twin, the budget of {:.2}% buys {:.2}% at the estimate's \
         shortfall (×{estimate_error:.2})",
        real * 100.0,
        budget * 100.0,
        bought * 100.0
    );
    assert!(
        real <= fraction * attached + TWIN_RESOLUTION,
        "the governed worker paid {:+.2}% by its twin, probed {:.0}% of the time at {:+.2}%",
        real * 100.0,
        fraction * 100.0,
        attached * 100.0
    );

    for run in &governed {
        let (r, summary) = (&run.report, &run.summary);
        // Counts from the windows scale to the client's own count.
        let estimated = f(&r["handshakes"]["total"]);
        assert!(
            within(estimated, run.connections as f64, 0.15),
            "estimated {estimated:.0} handshakes vs {} client connections\n{summary}",
            run.connections
        );
        assert_eq!(r["handshakes"]["resumed"], 0, "{summary}");
        for field in ["depth_overflow", "missed_returns"] {
            assert_eq!(
                r["lost"][field], 0,
                "{field}: pausing must not leave broken frames\n{summary}"
            );
        }
        assert!(
            f(&r["observed_tls_cpu_ms"]) <= f(&r["probed_cpu_ms"]) * 1.05,
            "TLS CPU seen in the windows exceeds the worker's CPU while probed\n{summary}"
        );
        assert!(summary.contains("Probes attached"), "{summary}");
    }
}
