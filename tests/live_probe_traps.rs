// SPDX-License-Identifier: Apache-2.0
//! Live: what the probes cost an nginx worker, measured in it by the trap sampler: its share of samples in
//! the probes' traps is the CPU sampler's, and it samples only while the probes are attached and hit often
//! (new connections, not requests on kept-alive ones) (needs root).
mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use common::*;

const SECS: u32 = 6;

/// Kernel frames of a uprobe trap, named here apart from tlsprof's catalogue: the breakpoint's exception,
/// the single-step's, and the uprobe code (the return trampoline's system call included).
fn in_trap(kernel_frame: &str) -> bool {
    let name = kernel_frame.trim_end_matches("_[k]");
    name == "asm_exc_int3" || name == "asm_exc_debug" || name.starts_with("uprobe") || name.contains("uretprobe")
}

/// tlsprof with `args` on the worker under full-handshake load: its report and summary.
fn profile(nginx: &Nginx, worker: u32, args: &[&str], recording: &Path) -> (Value, String) {
    let pid = worker.to_string();
    let rec = Recorder::start(&[&["--pid", &pid, "-o", recording.to_str().unwrap()], args].concat());
    s_time_new_on(nginx.port, SECS, cpus().client);
    let summary = rec.interrupt();
    (report_json(recording), summary)
}

/// The trap sampler's samples against the worker's CPU while it ran, at its rate: it ran when tlsprof
/// counted it as running, and only then. Its timer counts the CPU's time (the hypervisor's steal included),
/// the worker's clock its own: a quarter apart at most.
fn assert_sampled_while_running(r: &Value, summary: &str) {
    let traps = &r["probe_traps"];
    let expected = f(&traps["sampled_cpu_ms"]) / 1e3 * f(&traps["freq_hz"]);
    let samples = f(&traps["of_samples"]);
    assert!(
        within(samples, expected, 0.25),
        "the trap sampler took {samples} samples over {:.0} ms of CPU while it ran, at {} Hz: {expected:.0} \
         expected\n{summary}",
        f(&traps["sampled_cpu_ms"]),
        traps["freq_hz"]
    );
    assert!(
        f(&r["probe_overhead_ms"]) >= f(&r["probe_overhead_calibrated_ms"]),
        "the probes' cost is the calibrated one or more\n{summary}"
    );
}

/// A server taking new connections hits the probes enough for the trap sampler to run all the time they
/// are attached.
fn assert_sampled_while_probed(r: &Value, summary: &str) {
    assert_sampled_while_running(r, summary);
    let sampled = f(&r["probe_traps"]["sampled_cpu_ms"]);
    assert!(
        within(sampled, f(&r["probed_cpu_ms"]), 0.1),
        "the trap sampler ran over {sampled:.0} ms of the {:.0} ms of CPU probed\n{summary}",
        f(&r["probed_cpu_ms"])
    );
}

#[test]
fn trap_sampler_agrees_with_the_cpu_sampler_and_runs_only_while_the_probes_are_attached() {
    if !require_root("trap_sampler_agrees_with_the_cpu_sampler_and_runs_only_while_the_probes_are_attached") {
        return;
    }
    let scratch = Scratch::new("probe-traps");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let worker = nginx.workers()[0];
    pin(worker, cpus().server);

    // Probes attached throughout, the CPU sampler near the trap sampler's rate and keeping kernel frames.
    let exact = scratch.path("exact.tlsprof");
    let (r, summary) = profile(&nginx, worker, &["--freq", "999", "--kernel"], &exact);
    assert_sampled_while_probed(&r, &summary);
    let traps = &r["probe_traps"];
    let (trapped, taken) = (f(&traps["samples"]), f(&traps["of_samples"]));
    let folded = run(tlsprof().args(["flamegraph", "--folded", exact.to_str().unwrap()]));
    assert!(folded.status.success());
    let (mut cpu_trapped, mut cpu_taken) = (0.0, 0.0);
    for line in String::from_utf8_lossy(&folded.stdout).lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        let count: f64 = count.parse().unwrap();
        cpu_taken += count;
        if stack.split(';').any(in_trap) {
            cpu_trapped += count;
        }
    }
    // Two samplers of the same seconds: their shares differ by chance only. Four standard errors of the
    // difference of two shares, each counted from its own samples.
    let (p1, p2) = (trapped / taken, cpu_trapped / cpu_taken);
    let pooled = (trapped + cpu_trapped) / (taken + cpu_taken);
    let bound = 4.0 * (pooled * (1.0 - pooled) * (1.0 / taken + 1.0 / cpu_taken)).sqrt();
    eprintln!(
        "in the probes' traps: {trapped} of {taken} trap-sampler samples ({:.2}%), {cpu_trapped} of {cpu_taken} CPU \
         samples ({:.2}%); {:.1} ms measured, {:.1} ms calibrated",
        p1 * 100.0,
        p2 * 100.0,
        f(&traps["cpu_ms"]),
        f(&r["probe_overhead_calibrated_ms"])
    );
    assert!(
        trapped > 0.0 && cpu_trapped > 0.0,
        "no sample in the probes' traps\n{summary}"
    );
    assert!(
        (p1 - p2).abs() <= bound,
        "the trap sampler found {:.2}% of its samples in the traps, the CPU sampler {:.2}% (bound ±{:.2})\n{summary}",
        p1 * 100.0,
        p2 * 100.0,
        bound * 100.0
    );
    assert!(summary.contains("measured in the targets:"), "{summary}");

    // At the default budget the probes come and go: the trap sampler with them.
    let (r, summary) = profile(
        &nginx,
        worker,
        &["--max-overhead", "0.3"],
        &scratch.path("default.tlsprof"),
    );
    assert!(
        f(&r["probing"]["fraction"]) < 0.9,
        "the probes were not paused\n{summary}"
    );
    assert_sampled_while_probed(&r, &summary);

    // Requests on kept-alive connections hit the probes a few times a second: the trap sampler stops after
    // the first poll that says so, and its interrupts no longer cost the worker.
    let keep_alive = scratch.path("keep-alive.tlsprof");
    let rec = Recorder::start(&["--pid", &worker.to_string(), "-o", keep_alive.to_str().unwrap()]);
    let mut wrk = Command::new("taskset");
    wrk.args(["-c", &cpus().client.unwrap_or(cpus().server).to_string()])
        .args(["wrk", "-t1", "-c4", &format!("-d{SECS}s")])
        .arg(format!("https://127.0.0.1:{}/", nginx.port));
    let out = run(&mut wrk);
    assert!(out.status.success(), "wrk: {}", String::from_utf8_lossy(&out.stderr));
    let summary = rec.interrupt();
    let r = report_json(&keep_alive);
    assert_sampled_while_running(&r, &summary);
    let (sampled, probed) = (f(&r["probe_traps"]["sampled_cpu_ms"]), f(&r["probed_cpu_ms"]));
    eprintln!("keep-alive: the trap sampler ran over {sampled:.0} of {probed:.0} ms probed");
    assert!(
        sampled < 0.25 * probed,
        "the trap sampler ran over {sampled:.0} ms of the {probed:.0} ms of CPU probed\n{summary}"
    );
}
