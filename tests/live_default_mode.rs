// SPDX-License-Identifier: Apache-2.0
//! Live: the default mode (--max-overhead 0.3, probes attached part of the time) reports totals for the
//! whole recording: handshakes within bounds of what the clients counted, 95% intervals that contain the
//! clients' counts, and stage shares close to exact mode measured at the same time (needs root).
mod common;

use std::path::Path;
use std::thread;

use serde_json::Value;

use common::*;

/// Args recording these processes into `out` at the default budget, or in exact mode.
fn record_args(pids: &[u32], out: &Path, exact: bool) -> Vec<String> {
    let mut args: Vec<String> = pids.iter().flat_map(|p| ["--pid".to_string(), p.to_string()]).collect();
    args.extend(["-o".to_string(), out.to_str().unwrap().to_string()]);
    let budget = if exact { "100" } else { "0.3" };
    args.extend(["--max-overhead".to_string(), budget.to_string()]);
    args
}

fn start(args: &[String]) -> Recorder {
    Recorder::start(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The total is right (see check_estimate), and the rate is the clients' over the recording's time.
fn check_totals(r: &Value, connections: u64, tolerance: f64, summary: &str) {
    check_estimate(r, "total", connections, tolerance, summary);
    let rate = f(&r["handshakes"]["rate_per_s"]);
    let truth_rate = connections as f64 / f(&r["duration_s"]);
    assert!(
        within(rate, truth_rate, tolerance),
        "rate {rate:.1}/s vs the clients' {truth_rate:.1}/s over the recording\n{summary}"
    );
}

/// Stage shares of TLS CPU: what the windows saw, scaled, must match exact mode on the same process.
fn check_shares(estimated: &Value, exact: &Value) {
    let share = |r: &Value, name: &str| f(&stage(r, name)["self_cpu_ms"]) / f(&r["tls_cpu_ms"]);
    for name in ["handshake", "keygen", "derive", "sign"] {
        let (a, b) = (share(estimated, name), share(exact, name));
        eprintln!("{name}: {:.1}% estimated, {:.1}% exact", a * 100.0, b * 100.0);
        assert!(
            (a - b).abs() <= 0.05,
            "{name} is {:.1}% of TLS CPU by default, {:.1}% in exact mode at the same time",
            a * 100.0,
            b * 100.0
        );
    }
}

/// An nginx server under a full-handshake load, recorded twice at the same time: at the default budget,
/// and in exact mode. The exact recording's probes are on every call, in the windows and out of them, so
/// the shares compare the windows with every call of the same process over the same seconds. A twin server
/// would not do: two identical servers' shares differ by several points at times.
fn nginx_default_mode(secs: u32, tolerance: f64, name: &str) {
    let scratch = Scratch::new(name);
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let pids = [vec![nginx.master], nginx.workers()].concat();
    let (rec_default, rec_exact) = (scratch.path("default.tlsprof"), scratch.path("exact.tlsprof"));
    let default = start(&record_args(&pids, &rec_default, false));
    let exact = start(&record_args(&pids, &rec_exact, true));
    let connections = s_time_new(nginx.port, secs);
    let summary = default.interrupt();
    exact.interrupt();
    let r = report_json(&rec_default);
    check_totals(&r, connections, tolerance, &summary);
    let exact = report_json(&rec_exact);
    check_shares(&r, &exact);
    check_own_programs(&r, &exact, connections, &summary);
}

/// tlsprof's programs besides the probes, measured in their runs in the targets: the connection counter ran
/// in every accept that took one of the clients' connections (and in those that found none), the samplers at
/// least once per sample kept, the scheduler's switches only while the probes were attached: in exact mode
/// throughout, by default in the windows only.
fn check_own_programs(default: &Value, exact: &Value, connections: u64, summary: &str) {
    let runs = |r: &Value, kind: &str| r["own_programs"][kind]["runs"].as_u64().unwrap();
    let ms = |r: &Value, kind: &str| f(&r["own_programs"][kind]["ms"]);
    for r in [default, exact] {
        let own = &r["own_programs"];
        assert!(runs(r, "connections") >= connections, "{own}\n{summary}");
        assert!(runs(r, "sampler") >= r["samples"].as_u64().unwrap(), "{own}\n{summary}");
        for kind in ["connections", "sampler", "scheduler"] {
            assert!(runs(r, kind) > 0 && ms(r, kind) > 0.0, "{kind}: {own}\n{summary}");
        }
        let sum: f64 = ["sampler", "scheduler", "connections", "capture"]
            .iter()
            .map(|k| ms(r, k))
            .sum();
        assert!((f(&r["own_programs_ms"]) - sum).abs() < 1e-6, "{own}");
    }
    assert!(
        runs(exact, "scheduler") > 2 * runs(default, "scheduler"),
        "switches seen: exact {} vs default {} (windows {:.0}% of the time)\n{summary}",
        runs(exact, "scheduler"),
        runs(default, "scheduler"),
        100.0 * f(&default["probing"]["fraction"])
    );
}

/// 30 s: long enough for the tighter bound; the checks of a shorter run are the same.
#[test]
fn nginx_default_mode_30s_totals_within_5_percent_and_shares_as_exact() {
    if !require_root("nginx_default_mode_30s_totals_within_5_percent_and_shares_as_exact") {
        return;
    }
    nginx_default_mode(30, 0.05, "default-30s");
}

/// Clients that leave every handshake after the server's flight (examples/abandon_client.py, `clients` at
/// once for `secs`, each holding its connection `hold_ms` before closing it): the server paid for each, and
/// the default mode counts them as abandoned, within `tolerance` of the clients' count and its interval.
fn nginx_default_mode_abandoned(secs: u32, clients: usize, hold_ms: u32, tolerance: f64, name: &str) {
    let scratch = Scratch::new(name);
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let recording = scratch.path("abandoned.tlsprof");
    let pids = [vec![nginx.master], nginx.workers()].concat();
    let rec = start(&record_args(&pids, &recording, false));
    let port = nginx.port.to_string();
    let clients: Vec<_> = (0..clients)
        .map(|_| {
            let port = port.clone();
            thread::spawn(move || {
                run(std::process::Command::new("python3")
                    .arg(repo().join("examples/abandon_client.py"))
                    .args(["--port", &port, "--seconds", &secs.to_string()])
                    .args(["--hold-ms", &hold_ms.to_string()]))
            })
        })
        .collect();
    let mut abandoned = 0;
    for client in clients {
        let out = client.join().unwrap();
        assert!(
            out.status.success(),
            "abandon_client: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let counts: Value = serde_json::from_slice(&out.stdout).unwrap();
        abandoned += counts["abandoned"].as_u64().unwrap();
    }
    // nginx frees a connection when it reads the close: give the last ones time to be freed.
    thread::sleep(std::time::Duration::from_millis(500));
    let summary = rec.interrupt();
    let r = report_json(&recording);
    check_estimate(&r, "abandoned", abandoned, tolerance, &summary);
    let completed = f(&r["handshakes"]["total"]);
    assert!(
        completed <= 0.10 * abandoned as f64,
        "{completed} completed handshakes estimated where the clients abandoned all {abandoned}\n{summary}"
    );
}

#[test]
fn nginx_default_mode_10s_abandoned_handshakes_within_10_percent() {
    if !require_root("nginx_default_mode_10s_abandoned_handshakes_within_10_percent") {
        return;
    }
    nginx_default_mode_abandoned(10, 2, 0, 0.10, "default-abandoned");
}

/// Clients that close 40 ms after the server's flight, as a client a round trip away does: many of those
/// whose work falls in a 0.1 s probe window end after it, unseen (about 40% of them), and the count makes
/// up for them. Fewer handshakes are seen than at full speed, each weighing more: 30 s, and a wider bound.
#[test]
fn nginx_default_mode_30s_abandoned_40ms_after_the_servers_flight_within_20_percent() {
    if !require_root("nginx_default_mode_30s_abandoned_40ms_after_the_servers_flight_within_20_percent") {
        return;
    }
    nginx_default_mode_abandoned(30, 16, 40, 0.20, "default-abandoned-late");
}

/// nginx and Node.js recorded together at the default budget, each under its own full-handshake load: each
/// process's own estimate (its part of every probe window) within 10% of its clients' count, its interval
/// containing it, and the processes adding up to the whole.
#[test]
fn nginx_and_node_default_mode_10s_each_process_within_10_percent() {
    if !require_root("nginx_and_node_default_mode_10s_each_process_within_10_percent") {
        return;
    }
    let scratch = Scratch::new("default-two");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let (node, node_port) = start_node_server(&nginx.dir);
    let worker = nginx.workers()[0];
    let recording = scratch.path("two.tlsprof");
    let rec = start(&record_args(&[worker, node.pid()], &recording, false));
    let nginx_port = nginx.port;
    let nginx_load = thread::spawn(move || s_time_new(nginx_port, 10));
    let node_connections = s_time_new(node_port, 10);
    let nginx_connections = nginx_load.join().unwrap();
    let summary = rec.interrupt();
    let r = report_json(&recording);
    let mut sum = 0.0;
    for (pid, truth, name) in [
        (worker, nginx_connections, "nginx"),
        (node.pid(), node_connections, "node"),
    ] {
        let t = r["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["pid"] == pid)
            .unwrap();
        let (estimate, ci) = (f(&t["handshakes"]), &t["handshakes_ci95"]);
        eprintln!(
            "{name}: {truth} by its clients; estimated {estimate} [{}, {}], {} seen",
            ci[0], ci[1], t["observed_handshakes"]
        );
        assert_estimate(name, estimate, [f(&ci[0]), f(&ci[1])], truth, 0.10, &summary);
        sum += estimate;
    }
    let total = f(&r["handshakes"]["total"]);
    assert!(
        within(sum, total, 0.02),
        "processes {sum} vs the whole {total}\n{summary}"
    );
    assert!(summary.contains(&format!("(pid {worker}): ≈ ")), "{summary}");
}

/// A Node.js HTTPS server under full-handshake load, recorded at the default budget.
fn node_default_mode(secs: u32, tolerance: f64, name: &str) {
    let scratch = Scratch::new(name);
    // The server's certificate and key: nginx-target makes them.
    let certs = Nginx::start(&scratch.path("certs"), &[]);
    let (node, port) = start_node_server(&certs.dir);
    let recording = scratch.path("node.tlsprof");
    let rec = start(&record_args(&[node.pid()], &recording, false));
    let connections = s_time_new(port, secs);
    let summary = rec.interrupt();
    check_totals(&report_json(&recording), connections, tolerance, &summary);
}

#[test]
fn node_default_mode_30s_totals_within_5_percent() {
    if !require_root("node_default_mode_30s_totals_within_5_percent") {
        return;
    }
    node_default_mode(30, 0.05, "default-node-30s");
}

/// A Go HTTPS server (examples/go) under full-handshake load from Go clients, recorded at the default budget:
/// totals within the same bounds, and only entry-style probes on the Go executable whenever they are attached.
#[test]
fn go_default_mode_10s_totals_within_10_percent_without_return_probes() {
    if !require_root("go_default_mode_10s_totals_within_10_percent_without_return_probes") {
        return;
    }
    let server_bin = go_build("server", None, false);
    let client = go_build("client", None, false);
    let scratch = Scratch::new("default-go-10s");
    let (mut server, addr) = start_go_server(&server_bin, &["-key", "ecdsa"]);
    let cpus = cpus();
    pin(server.pid(), cpus.server);
    let recording = scratch.path("go.tlsprof");
    let rec = start(&record_args(&[server.pid()], &recording, false));
    let on_go = |rec: &Recorder| -> Vec<String> {
        uprobe_links(rec.pid())
            .into_iter()
            .filter(|(_, path, _)| Path::new(path) == server_bin)
            .map(|(prog, _, _)| program_name(prog))
            .collect()
    };
    assert!(!on_go(&rec).is_empty(), "no probe on the Go executable once live");
    let client_cpu = cpus.client;
    let load = thread::spawn(move || go_client(&client, &addr, &["-duration", "10s", "-workers", "4"], client_cpu));
    while !load.is_finished() {
        let programs = on_go(&rec);
        assert!(programs.iter().all(|p| p == "go_probe"), "{programs:?}");
        thread::sleep(std::time::Duration::from_millis(100));
    }
    let seen = load.join().unwrap();
    let summary = rec.interrupt();
    eprintln!("{summary}");
    assert_eq!(seen["errors"].as_u64(), Some(0), "{seen}");
    check_totals(
        &report_json(&recording),
        seen["connections"].as_u64().unwrap(),
        0.10,
        &summary,
    );
    assert!(server.0.try_wait().unwrap().is_none(), "the server died");
}

/// The rustls and BoringSSL servers (examples/rust) at the default budget under `openssl s_time -new`: their
/// handshakes estimated within 10% of the client's count, the interval containing it.
#[test]
fn rust_servers_default_mode_10s_totals_within_10_percent() {
    if !require_root("rust_servers_default_mode_10s_totals_within_10_percent") {
        return;
    }
    for server in ["rustls-server", "boring-server"] {
        let scratch = Scratch::new(&format!("default-{server}"));
        let (target, port) = start_rust_server(server, &scratch);
        let recording = scratch.path("default.tlsprof");
        let rec = start(&record_args(&[target.pid()], &recording, false));
        let connections = s_time_new(port, 10);
        let summary = rec.interrupt();
        check_totals(&report_json(&recording), connections, 0.10, &summary);
    }
}
