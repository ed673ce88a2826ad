// SPDX-License-Identifier: Apache-2.0
//! Live: Debian nginx under full-handshake and resuming load, profiled by tlsprof (needs root).
mod common;

use common::*;

#[test]
fn nginx_full_handshakes_counted_and_sign_share_matches_speed() {
    if !require_root("nginx_full_handshakes_counted_and_sign_share_matches_speed") {
        return;
    }
    let scratch = Scratch::new("nginx-full");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let cpus = cpus();
    let recording = scratch.path("full.tlsprof");
    let mut args = vec!["--pid".to_string(), nginx.master.to_string()];
    for w in nginx.workers() {
        pin(w, cpus.server);
        args.extend(["--pid".to_string(), w.to_string()]);
    }
    args.extend(["-o".to_string(), recording.to_str().unwrap().to_string()]);
    let rec = Recorder::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let speed = SpeedBeside::rsa2048_sign(cpus.server, 4);
    let connections = s_time_new_on(nginx.port, 4, cpus.client);
    let speed_us = speed.sign_us();
    let summary = rec.interrupt();

    let r = report_json(&recording);
    let full = f(&r["handshakes"]["full"]);
    assert!(
        within(full, connections as f64, 0.05),
        "full handshakes {full} vs {connections} client connections"
    );
    assert_eq!(r["handshakes"]["resumed"], 0, "{summary}");
    assert_eq!(f(&r["handshakes"]["server"]), full);
    // Debian's OpenSSL 3.0 opens EVP_PKEY_keygen with a `cmpl` and SSL_free with a `test`, which the kernel
    // would single-step: their probes sit on the jumps after them, so no hit takes a second trap.
    assert_eq!(r["probe_stepped_hits"], 0, "{summary}");
    // nginx drives its handshakes with SSL_do_handshake: no stage runs outside one, so SSL_read and
    // SSL_write stay unprobed.
    assert_eq!(r["lost"]["unframed_work"], 0, "{summary}");
    assert!(
        r["targets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["io_driven_from_s"].is_null()),
        "{summary}"
    );
    let sign = stage(&r, "sign");
    assert!(
        within(f(&sign["calls"]), full, 0.05),
        "one signature per full handshake: {sign}\n{summary}"
    );
    // Sign's share of TLS CPU depends on how fast this CPU signs: it must be the share that the clients'
    // connections, each signed at openssl speed's cost beside the server, make of the TLS CPU.
    let tls_ms = f(&r["tls_cpu_ms"]);
    let share = f(&sign["self_cpu_ms"]) / tls_ms;
    let implied = connections as f64 * speed_us / 1e3 / tls_ms;
    eprintln!(
        "sign {:.0} µs per call, openssl speed beside it {speed_us:.0} µs; {:.1}% of TLS CPU, {:.1}% implied",
        f(&sign["cpu_us_per_call"]),
        share * 100.0,
        implied * 100.0
    );
    assert!(
        server_sign_matches_speed(share, implied),
        "sign is {:.0}% of TLS CPU where {connections} signatures at openssl speed's {speed_us:.0} µs make {:.0}%\n{summary}",
        share * 100.0,
        implied * 100.0
    );
    let per_call = f(&sign["cpu_us_per_call"]);
    assert!(
        server_sign_matches_speed(per_call, speed_us),
        "sign {per_call:.0} µs per call vs openssl speed rsa2048 {speed_us:.0} µs\n{summary}"
    );
    // The worker's scheduler slices by the kernel's task clock are its CPU clock's time from its first stage
    // on: nginx's worker is one thread, idle until the load starts. Stage times are scaled by the slices'
    // task clock against their wall clock (steal time), so TLS CPU stays within the process's CPU.
    let worker = r["targets"]
        .as_array()
        .unwrap()
        .iter()
        .max_by(|a, b| f(&a["process_cpu_ms"]).total_cmp(&f(&b["process_cpu_ms"])))
        .unwrap();
    let (wall, task, worker_cpu) = (
        f(&worker["stage_slices_ms"]),
        f(&worker["stage_slices_cpu_ms"]),
        f(&worker["process_cpu_ms"]),
    );
    eprintln!(
        "worker: slices {wall:.1} ms by the wall clock, {task:.1} ms by the task clock; CPU clock {worker_cpu:.1} ms"
    );
    assert!(
        wall > 0.0 && (worker_cpu * 0.97..=worker_cpu * 1.01).contains(&task),
        "worker's slices {wall:.1} ms by the wall clock, {task:.1} ms by the task clock, vs its CPU clock {worker_cpu:.1} ms\n{summary}"
    );
    assert!(
        f(&r["tls_cpu_ms"]) <= f(&r["process_cpu_ms"]) * 1.05,
        "TLS CPU exceeds process CPU\n{summary}"
    );
    let libssl = r["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["path"].as_str().unwrap().contains("libssl"));
    let libssl = libssl.expect("libssl found");
    assert_eq!(libssl["symbols"], "exported");
    assert!(libssl["version"].as_str().unwrap().starts_with("OpenSSL 3."));
    assert!(summary.contains("SSL_do_handshake [handshake]"), "{summary}");
    assert!(summary.contains("EVP_DigestSign [sign]"), "{summary}");

    // Flame graph: an SVG naming the signing frame, and folded stacks inferno accepts.
    let svg = scratch.path("full.svg");
    let out = run(tlsprof().args(["flamegraph"]).arg(&recording).arg("-o").arg(&svg));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.starts_with("<?xml") && svg_text.contains("EVP_DigestSign"));
    let out = run(tlsprof().args(["flamegraph", "--folded"]).arg(&recording));
    let folded = String::from_utf8(out.stdout).unwrap();
    assert!(
        folded.lines().any(|l| l.starts_with("nginx;")
            && l.split_once("SSL_do_handshake [handshake];")
                .is_some_and(|(_, inner)| inner.contains("EVP_DigestSign [sign]"))),
        "{folded}"
    );
    let mut redrawn = Vec::new();
    inferno::flamegraph::from_lines(&mut Default::default(), folded.lines(), &mut redrawn)
        .expect("inferno parses the folded stacks");
}

/// Debian's OpenSSL asks EVP_PKEY_derive and EVP_DigestSign for their output's length first, with a NULL
/// buffer: where the kernel has uprobe sessions, such a call's entry declines its return probe, and the
/// handshake costs two hits fewer. With sessions or without (TLSPROF_UPROBE_SESSIONS=0), every stage call is
/// counted.
#[test]
fn nginx_length_queries_cost_one_hit_where_the_kernel_has_uprobe_sessions() {
    if !require_root("nginx_length_queries_cost_one_hit_where_the_kernel_has_uprobe_sessions") {
        return;
    }
    let scratch = Scratch::new("nginx-sessions");
    let nginx = Nginx::start(
        &scratch.path("nginx"),
        &["--protocols", "TLSv1.3", "--cert", "ecdsa-p256"],
    );
    let worker = nginx.workers()[0];
    pin(worker, cpus().server);
    let mut hits_per_handshake = Vec::new();
    for sessions in ["1", "0"] {
        let recording = scratch.path(&format!("sessions-{sessions}.tlsprof"));
        let mut cmd = tlsprof();
        cmd.env("TLSPROF_UPROBE_SESSIONS", sessions);
        let rec = Recorder::start_from(cmd, &["--pid", &worker.to_string(), "-o", recording.to_str().unwrap()]);
        let connections = s_time_new_www(nginx.port, 3, "/");
        let summary = rec.interrupt();
        let r = report_json(&recording);
        let full = f(&r["handshakes"]["full"]);
        assert_eq!(full, connections as f64, "sessions {sessions}\n{summary}");
        for name in ["keygen", "derive", "sign"] {
            assert_eq!(
                f(&stage(&r, name)["calls"]),
                full,
                "one {name} call per handshake, sessions {sessions}\n{summary}"
            );
        }
        assert_eq!(r["lost"]["missed_returns"], 0, "{summary}");
        hits_per_handshake.push(f(&r["probe_hits"]) / full);
    }
    let (with, without) = (hits_per_handshake[0], hits_per_handshake[1]);
    eprintln!("probe hits per handshake: {with:.2} with uprobe sessions, {without:.2} without");
    let kernel_btf = std::fs::read("/sys/kernel/btf/vmlinux").unwrap_or_default();
    let has_sessions = kernel_btf
        .windows(b"BPF_TRACE_UPROBE_SESSION".len())
        .any(|w| w == b"BPF_TRACE_UPROBE_SESSION");
    let saved = if has_sessions { 2.0 } else { 0.0 };
    assert!(
        (without - with - saved).abs() < 0.1,
        "{with:.2} hits per handshake with sessions, {without:.2} without: {saved} fewer expected"
    );
}

fn resumption(tls: &str, nginx_args: &[&str]) {
    let scratch = Scratch::new(&format!("nginx-resume-{tls}"));
    let nginx = Nginx::start(&scratch.path("nginx"), nginx_args);
    let recording = scratch.path("resume.tlsprof");
    let workers = nginx.workers();
    let rec = Recorder::start(&["--pid", &workers[0].to_string(), "-o", recording.to_str().unwrap()]);
    let out = run(std::process::Command::new("python3")
        .arg(repo().join("examples/resume_client.py"))
        .args(["--port", &nginx.port.to_string(), "--count", "300", "--tls", tls]));
    assert!(
        out.status.success(),
        "resume_client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let client: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary = rec.interrupt();
    let r = report_json(&recording);
    let reused = f(&client["reused"]);
    let connections = f(&client["connections"]);
    assert!(reused >= connections * 0.9, "the client did not resume: {client}");
    let resumed = f(&r["handshakes"]["resumed"]);
    let full = f(&r["handshakes"]["full"]);
    assert!(
        within(resumed, reused, 0.05),
        "TLS {tls}: {resumed} resumed vs {reused} reused by the client\n{summary}"
    );
    let expected_full = connections - reused;
    assert!(
        (full - expected_full).abs() <= 0.05 * connections,
        "TLS {tls}: {full} full vs {expected_full}\n{summary}"
    );
}

#[test]
fn nginx_resumed_handshakes_tls12_session_cache() {
    if require_root("nginx_resumed_handshakes_tls12_session_cache") {
        resumption("1.2", &["--session-cache", "on", "--tickets", "off"]);
    }
}

#[test]
fn nginx_resumed_handshakes_tls13_tickets() {
    if require_root("nginx_resumed_handshakes_tls13_tickets") {
        resumption("1.3", &["--tickets", "on"]);
    }
}

/// `--comm` follows the name: workers started by a reload during the recording join it.
#[test]
fn nginx_reload_workers_join_a_comm_recording() {
    if !require_root("nginx_reload_workers_join_a_comm_recording") {
        return;
    }
    let scratch = Scratch::new("nginx-reload");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let old_workers = nginx.workers();
    let recording = scratch.path("reload.tlsprof");
    let rec = Recorder::start(&["--comm", "nginx", "-o", recording.to_str().unwrap()]);
    // SAFETY: plain signal to the nginx master this test started.
    unsafe { libc::kill(nginx.master as i32, libc::SIGHUP) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while nginx.workers().iter().any(|w| old_workers.contains(w)) || nginx.workers().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "nginx did not replace its workers"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // The recording rescans every half second.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let connections = s_time_new(nginx.port, 3);
    let (summary, log) = rec.interrupt_with_log();
    let new_worker = nginx.workers()[0];
    assert!(
        log.contains(&format!("attached to new process {new_worker} (nginx)")),
        "{log}"
    );
    let r = report_json(&recording);
    let full = f(&r["handshakes"]["full"]);
    // --comm takes every nginx on the machine: another one can only add handshakes, never hide ours.
    assert!(
        full >= 0.95 * connections as f64,
        "full handshakes {full} vs {connections} after the reload\n{summary}"
    );
}

/// The pid nginx's pid file names (`nginx.pid`, or `nginx.pid.oldbin` for the master being upgraded).
fn pid_file(dir: &std::path::Path, name: &str) -> Option<u32> {
    std::fs::read_to_string(dir.join(name)).ok()?.trim().parse().ok()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// An nginx binary upgrade under `--comm nginx` (USR2: a new master and workers from the binary on disk;
/// WINCH: the old workers finish; QUIT: the old master leaves): the new processes join the recording and
/// every handshake before, during and after is counted.
#[test]
fn nginx_binary_upgrade_under_comm() {
    if !require_root("nginx_binary_upgrade_under_comm") {
        return;
    }
    let scratch = Scratch::new("nginx-upgrade");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let old_master = nginx.master;
    let old_workers = nginx.workers();
    let recording = scratch.path("upgrade.tlsprof");
    let mut rec = Recorder::start(&["--comm", "nginx", "-o", recording.to_str().unwrap()]);
    let before = s_time_new_www(nginx.port, 2, "/");

    let signal = |pid: u32, sig: i32| {
        // SAFETY: a plain signal to a process this test started.
        assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0, "signal {sig} to {pid}");
    };
    signal(old_master, libc::SIGUSR2);
    wait_until("the new master", || {
        pid_file(&nginx.dir, "nginx.pid").is_some_and(|p| p != old_master)
            && pid_file(&nginx.dir, "nginx.pid.oldbin") == Some(old_master)
    });
    let new_master = pid_file(&nginx.dir, "nginx.pid").unwrap();
    let new_workers = || {
        let out = run(std::process::Command::new("pgrep").args(["-P", &new_master.to_string()]));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse::<u32>().ok())
            .collect::<Vec<u32>>()
    };
    wait_until("the new workers", || !new_workers().is_empty());
    for pid in std::iter::once(new_master).chain(new_workers()) {
        let line = rec.wait_for_line(
            &format!("attached to new process {pid} "),
            std::time::Duration::from_secs(10),
        );
        assert!(
            line.is_some(),
            "tlsprof did not attach to new nginx process {pid}:\n{}",
            rec.stderr
        );
    }
    signal(old_master, libc::SIGWINCH);
    wait_until("the old workers to finish", || {
        old_workers
            .iter()
            .all(|w| tlsprof::record::targets::Process::from_pid(*w).is_none_or(|p| !p.alive()))
    });
    let during = s_time_new_www(nginx.port, 2, "/");
    signal(old_master, libc::SIGQUIT);
    wait_until("the old master to leave", || {
        tlsprof::record::targets::Process::from_pid(old_master).is_none_or(|p| !p.alive())
    });
    let after = s_time_new_www(nginx.port, 2, "/");
    let summary = rec.interrupt();

    let r = report_json(&recording);
    let connections = (before + during + after) as f64;
    let server = f(&r["handshakes"]["server"]);
    eprintln!("clients: {before} + {during} + {after} connections; tlsprof: {server} server handshakes");
    // --comm takes every nginx on the machine: another one can only add handshakes, never hide ours.
    assert!(
        server >= 0.95 * connections,
        "{server} server handshakes vs {connections} client connections\n{summary}"
    );
    // Both generations of workers did handshakes under the probes (the call tree's roots, by process).
    let raw: serde_json::Value = serde_json::from_slice(&std::fs::read(&recording).unwrap()).unwrap();
    let handshake_calls = |pid: u32| {
        raw["tree"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["pid"] == pid && n["path"].as_array().unwrap().len() == 1)
            .map(|n| n["calls"].as_u64().unwrap())
            .sum::<u64>()
    };
    for pid in old_workers.iter().copied().chain(new_workers()) {
        assert!(handshake_calls(pid) > 0, "no handshakes recorded in nginx worker {pid}");
    }
    let pids: Vec<u64> = r["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["pid"].as_u64().unwrap())
        .collect();
    for pid in [old_master, new_master]
        .into_iter()
        .chain(old_workers)
        .chain(new_workers())
    {
        assert!(pids.contains(&u64::from(pid)), "process {pid} missing from {pids:?}");
    }
}
