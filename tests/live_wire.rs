// SPDX-License-Identifier: Apache-2.0
//! Live: handshakes counted from the targets' sockets (the wire), whatever their TLS stack (needs root). Where
//! the probes count too (nginx, haproxy) the wire agrees with them and with the clients; where nothing can be
//! probed (the JDK's own TLS, a stripped rustls) or nothing is asked to be (--wire-only: nginx, a Go server)
//! the wire's counts, mix and resumption funnel are the clients', exactly, and within the interval at the
//! default budget.
mod common;

use serde_json::Value;

use common::*;

/// What the clients of `drive` made: completed connections, resumed ones, abandoned ones.
#[derive(Debug)]
struct Made {
    connections: u64,
    resumed: u64,
    abandoned: u64,
}

/// Every kind of handshake a server meets, against `port`: 100 TLS 1.3 connections from 10 clients resuming
/// their sessions, 60 over TLS 1.2, `s_time -new -www /` full handshakes for `secs` (each reads its response:
/// the server completes every one), and 30 clients that leave after the server's flight; and beside them
/// all, 100 connections of bytes that look like TLS and are not (examples/hostile_wire_client.py: random
/// bytes, ClientHellos cut anywhere, records that claim more than comes), none of them a handshake.
fn drive(port: u16, secs: u32) -> Made {
    let hostile = std::thread::spawn(move || {
        python_client(
            "hostile_wire_client.py",
            &["--port", &port.to_string(), "--count", "100"],
        )
    });
    let (tls13, tls12) = (resume_clients(port, 100, "1.3"), resume_clients(port, 60, "1.2"));
    let full = s_time_new_www(port, secs, "/");
    let left = python_client("abandon_client.py", &["--port", &port.to_string(), "--count", "30"]);
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    let hostile = hostile.join().unwrap();
    assert_eq!(n(&hostile, "connections"), 100, "{hostile}");
    Made {
        connections: n(&tls13, "connections") + n(&tls12, "connections") + full,
        resumed: n(&tls13, "reused") + n(&tls12, "reused"),
        abandoned: n(&left, "abandoned"),
    }
}

/// Records `args` (exact mode unless they set --max-overhead) while `drive` runs against `port`: what the
/// clients made, the summary, the JSON report and what tlsprof wrote on stderr.
fn record_driven(args: &[&str], port: u16, secs: u32, scratch: &Scratch) -> (Made, String, Value, String) {
    let recording = scratch.path("wire.tlsprof");
    let mut all = args.to_vec();
    all.extend(["-o", recording.to_str().unwrap()]);
    let rec = Recorder::start(&all);
    let made = drive(port, secs);
    // A server drops each connection after its response: give the last ones time to go.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (summary, log) = rec.interrupt_with_log();
    eprintln!("clients: {made:?}\n{summary}");
    (made, summary, report_json(&recording), log)
}

/// The report's counts are the clients', each handshake once, as a server.
fn assert_counts(r: &Value, made: &Made, summary: &str) {
    assert_eq!(handshakes_of(r, "total"), made.connections, "{summary}");
    assert_eq!(handshakes_of(r, "resumed"), made.resumed, "{summary}");
    assert_eq!(handshakes_of(r, "full"), made.connections - made.resumed, "{summary}");
    assert_eq!(handshakes_of(r, "abandoned"), made.abandoned, "{summary}");
    assert_eq!(handshakes_of(r, "server"), made.connections, "{summary}");
    assert_eq!(r["lost"]["handshake_events"], 0, "{summary}");
}

/// A recording of processes counted from the wire alone: the clients' counts; every kind from the wire and
/// its CPU unknown, named by version, cipher and group; the resumption funnel read from every ClientHello
/// (every offer accepted); no TLS CPU claimed; the first screen says so.
fn assert_from_the_wire(r: &Value, made: &Made, summary: &str) {
    assert_counts(r, made, summary);
    assert!(
        r["targets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["wire_only"] == true && t["tls_cpu_ms"].is_null()),
        "{summary}"
    );
    assert!(r["tls_share"].is_null(), "{summary}");
    let kinds = r["handshakes"]["kinds"].as_array().unwrap();
    assert!(
        kinds.iter().all(|k| k["from_wire"] == true && k["cpu_ms"].is_null()),
        "{summary}"
    );
    for version in ["TLSv1.3", "TLSv1.2"] {
        let resumed: u64 = kinds
            .iter()
            .filter(|k| k["version"] == version && k["resumed"] == true)
            .map(|k| k["count"].as_u64().unwrap())
            .sum();
        assert!(resumed > 0, "no resumed {version} handshake: {summary}");
    }
    assert!(
        kinds
            .iter()
            .all(|k| k["cipher"].is_string() && (k["resumed"] == true || k["key_exchange"] == "x25519")),
        "{summary}"
    );
    // A TLS 1.2 server's certificate crosses in the clear: its key is read off it (every server here has an
    // ECDSA P-256 one); TLS 1.3 encrypts it.
    let mut full12 = kinds
        .iter()
        .filter(|k| k["version"] == "TLSv1.2" && k["resumed"] == false && k["outcome"] == "completed")
        .peekable();
    assert!(full12.peek().is_some(), "{summary}");
    assert!(full12.all(|k| k["certificate_key"] == "ECDSA P-256"), "{summary}");
    let offered: u64 = r["resumption"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["accepted"].as_u64().unwrap())
        .sum();
    assert_eq!(offered, made.resumed, "{summary}");
    assert!(
        r["resumption"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["refused"] == 0 && p["unparsed"] == 0),
        "{summary}"
    );
    assert!(flowed(summary).contains("from the wire, TLS CPU not seen"), "{summary}");
    assert!(!summary.contains("tls_not_the_cost"), "{summary}");
}

/// nginx's master and workers as --pid arguments.
fn nginx_pids(nginx: &Nginx) -> Vec<String> {
    [vec![nginx.master], nginx.workers()]
        .concat()
        .iter()
        .flat_map(|p| ["--pid".to_string(), p.to_string()])
        .collect()
}

/// nginx with its probes and its sockets read throughout: the wire counts every handshake as the probes do
/// and as the clients saw it, full, resumed and abandoned. Then the same nginx with the probes off
/// (--wire-only): the clients' counts from the wire alone.
#[test]
fn nginx_wire_counts_agree_with_the_probes_and_the_clients() {
    if !require_root("nginx_wire_counts_agree_with_the_probes_and_the_clients") {
        return;
    }
    let scratch = Scratch::new("live_wire_nginx");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--tickets", "on", "--cert", "ecdsa-p256"]);
    let pids = nginx_pids(&nginx);
    let mut args: Vec<&str> = pids.iter().map(String::as_str).collect();
    args.extend(["--hello-capture", "always"]);
    let (made, summary, r, _) = record_driven(&args, nginx.port, 2, &scratch);
    assert_counts(&r, &made, &summary);
    let wire = &r["handshakes"]["wire"];
    assert_eq!(wire["total"], made.connections, "{summary}");
    assert_eq!(wire["resumed"], made.resumed, "{summary}");
    assert_eq!(wire["full"], made.connections - made.resumed, "{summary}");
    assert_eq!(wire["abandoned"], made.abandoned, "{summary}");
    assert!(summary.contains("From the wire"), "{summary}");

    args.push("--wire-only");
    let (made, summary, r, _) = record_driven(&args, nginx.port, 2, &scratch);
    assert_from_the_wire(&r, &made, &summary);
    assert!(
        uprobe_links(nginx.workers()[0]).is_empty() || r["functions"].as_array().unwrap().is_empty(),
        "{summary}"
    );
}

/// --wire-only at the default budget: the socket programs run in windows, like the probes, and the totals are
/// estimated from them with intervals that hold the clients' counts.
#[test]
fn nginx_wire_only_default_budget_estimates_hold_the_clients_counts() {
    if !require_root("nginx_wire_only_default_budget_estimates_hold_the_clients_counts") {
        return;
    }
    let scratch = Scratch::new("live_wire_nginx_default");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let pids = nginx_pids(&nginx);
    let mut args: Vec<&str> = pids.iter().map(String::as_str).collect();
    args.extend(["--wire-only", "--max-overhead", "0.3", "-o"]);
    let recording = scratch.path("default.tlsprof");
    args.push(recording.to_str().unwrap());
    let rec = Recorder::start(&args);
    let connections = s_time_new(nginx.port, 15);
    let summary = rec.interrupt();
    let r = report_json(&recording);
    let h = &r["handshakes"];
    eprintln!(
        "s_time: {connections}; {} [{}, {}] in {} windows",
        h["total"], h["total_ci95"][0], h["total_ci95"][1], r["probing"]["windows"]
    );
    assert_eq!(
        h["estimated"], true,
        "the sockets were read throughout at 0.3%\n{summary}"
    );
    let ci = [f(&h["total_ci95"][0]), f(&h["total_ci95"][1])];
    assert_estimate(
        "handshakes from the wire",
        f(&h["total"]),
        ci,
        connections,
        0.15,
        &summary,
    );
    assert!(summary.contains("estimated from"), "{summary}");
}

/// The JDK's own TLS (JSSE in JIT-compiled Java, no native TLS library): counted from its sockets exactly as
/// its clients saw it.
#[test]
fn jdk_https_server_is_counted_from_the_wire() {
    if !require_root("jdk_https_server_is_counted_from_the_wire") {
        return;
    }
    let scratch = Scratch::new("live_wire_jdk");
    let store = java_keystore(&scratch, "ec.p12", &["-keyalg", "EC", "-groupname", "secp256r1"]);
    let (server, port) = start_java_server(&scratch, &store, &[]);
    let pid = server.pid().to_string();
    // Its JIT code left unnamed: no frame tells its TLS CPU (tests/live_java.rs asks the JVM for names).
    let (made, summary, r, log) = record_driven(&["--pid", &pid, "--no-jvm-perf-map"], port, 3, &scratch);
    assert_from_the_wire(&r, &made, &summary);
    assert!(log.contains("has no TLS code tlsprof can probe"), "{log}");
    // Run without -XX:+PreserveFramePointer: the report says what its stacks lack, and how to get it.
    assert_eq!(r["targets"][0]["jit_stacks_cut"], true, "{summary}");
    assert!(
        flowed(&summary).contains("start it with -XX:+PreserveFramePointer"),
        "{summary}"
    );
}

/// A rustls server stripped of its symbols: named on stderr (what it runs), and counted from the wire.
#[test]
fn stripped_rustls_server_is_counted_from_the_wire() {
    if !require_root("stripped_rustls_server_is_counted_from_the_wire") {
        return;
    }
    let scratch = Scratch::new("live_wire_stripped_rustls");
    let stripped = stripped_copy(&build_rust_example("rustls-server"), &scratch);
    let (server, port) = start_server_binary(&stripped, &scratch, &[]);
    let pid = server.pid().to_string();
    let (made, summary, r, log) = record_driven(&["--pid", &pid], port, 2, &scratch);
    assert_from_the_wire(&r, &made, &summary);
    assert!(flowed(&log).contains("it runs rustls 0.23."), "{log}");
}

/// A Go HTTPS server with the probes off (--wire-only): its goroutines move between threads, its
/// connections are followed by socket.
#[test]
fn go_server_is_counted_from_the_wire() {
    if !require_root("go_server_is_counted_from_the_wire") {
        return;
    }
    let scratch = Scratch::new("live_wire_go");
    let (server, addr) = start_go_server(&go_build("server", None, false), &[]);
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let pid = server.pid().to_string();
    let (made, summary, r, _) = record_driven(&["--pid", &pid, "--wire-only"], port, 2, &scratch);
    assert_from_the_wire(&r, &made, &summary);
}

/// haproxy, two threads on Debian's shared OpenSSL: the probes and the wire count alike, and the wire alone
/// counts as its clients saw.
#[test]
fn haproxy_wire_counts_agree_with_the_probes_and_the_clients() {
    if !require_root("haproxy_wire_counts_agree_with_the_probes_and_the_clients") {
        return;
    }
    let scratch = Scratch::new("live_wire_haproxy");
    let (server, port) = start_haproxy(&scratch, 2);
    let pid = server.pid().to_string();
    let (made, summary, r, _) = record_driven(&["--pid", &pid, "--hello-capture", "always"], port, 2, &scratch);
    assert_counts(&r, &made, &summary);
    let wire = &r["handshakes"]["wire"];
    assert_eq!(wire["total"], made.connections, "{summary}");
    assert_eq!(wire["resumed"], made.resumed, "{summary}");
    assert_eq!(wire["abandoned"], made.abandoned, "{summary}");
    let (made, summary, r, _) = record_driven(&["--pid", &pid, "--wire-only"], port, 2, &scratch);
    assert_from_the_wire(&r, &made, &summary);
}

/// A process with no TLS at all (a plain `sleep`) is a wire-only target with nothing to count.
#[test]
fn process_without_tls_is_counted_from_the_wire() {
    if !require_root("process_without_tls_is_counted_from_the_wire") {
        return;
    }
    let scratch = Scratch::new("live_wire_sleep");
    let sleeper = Running(std::process::Command::new("sleep").arg("30").spawn().unwrap());
    let recording = scratch.path("sleep.tlsprof");
    let out = run(tlsprof()
        .args(["record", "--pid", &sleeper.pid().to_string(), "--duration", "1", "-o"])
        .arg(&recording));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("counted from its sockets (the wire) alone"), "{log}");
    let r = report_json(&recording);
    assert_eq!(handshakes_of(&r, "total"), 0);
    assert_eq!(r["targets"][0]["wire_only"], true);
}

/// The handshakes a QUIC server on quic-go made: 40 HTTP/3 connections from Go 1.26's client resuming its
/// sessions beside 40 HTTPS ones over TCP (Python's, resuming theirs) to the same server, recorded with `args`.
/// Checks that every QUIC handshake is counted once and named from its Initial packets (QUIC TLSv1.3 with
/// X25519MLKEM768, the group Go offers first; resumed ones tagged, their offers in the resumption funnel), and
/// the TCP ones beside them as such. Returns the report.
fn quic_beside_tcp(args: &[&str], scratch: &Scratch) -> Value {
    let binary = go_quic_build();
    let mut child = std::process::Command::new(&binary)
        .arg("server")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let line = listening_line(&mut child, "go-quic server");
    let server = Running(child);
    let addr = line.trim().strip_prefix("listening ").unwrap().to_string();
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let recording = scratch.path("quic.tlsprof");
    let pid = server.pid().to_string();
    let mut all = vec!["--pid", &pid, "-o", recording.to_str().unwrap()];
    all.extend(args);
    let rec = Recorder::start(&all);
    let quic = go_quic_client(&binary, &addr, 40, true);
    let tcp = resume_clients(port, 40, "1.3");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let summary = rec.interrupt();
    eprintln!("QUIC client {quic}, TCP client {tcp}\n{summary}");
    let r = report_json(&recording);
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    let (quic_made, quic_resumed) = (n(&quic, "connections"), n(&quic, "resumed"));
    let (tcp_made, tcp_resumed) = (n(&tcp, "connections"), n(&tcp, "reused"));
    assert!(quic_resumed > 0 && tcp_resumed > 0, "{quic} {tcp}");
    assert_eq!(handshakes_of(&r, "total"), quic_made + tcp_made, "{summary}");
    assert_eq!(handshakes_of(&r, "resumed"), quic_resumed + tcp_resumed, "{summary}");
    assert_eq!(handshakes_of(&r, "abandoned"), 0, "{summary}");
    let kinds = r["handshakes"]["kinds"].as_array().unwrap();
    let count = |quic: bool, resumed: bool| -> u64 {
        kinds
            .iter()
            .filter(|k| k["quic"] == quic && k["resumed"] == resumed)
            .map(|k| k["count"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(count(true, true), quic_resumed, "{summary}");
    assert_eq!(count(true, false), quic_made - quic_resumed, "{summary}");
    assert_eq!(count(false, true), tcp_resumed, "{summary}");
    assert!(
        kinds
            .iter()
            .filter(|k| k["quic"] == true)
            .all(|k| k["version"] == "TLSv1.3" && k["key_exchange"] == "X25519MLKEM768"),
        "{summary}"
    );
    // The mix reads "QUIC TLSv1.3 <cipher> X25519MLKEM768" (the cipher as the machine's AES support has Go pick).
    let mix = flowed(&summary);
    assert!(
        mix.contains("QUIC TLSv1.3 TLS_") && mix.contains("X25519MLKEM768"),
        "{summary}"
    );
    let accepted: u64 = r["resumption"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["accepted"].as_u64().unwrap())
        .sum();
    assert_eq!(accepted, quic_resumed + tcp_resumed, "{summary}");
    r
}

/// A quic-go HTTP/3 server counted from the wire alone: its QUIC handshakes from their Initial packets.
#[test]
fn quic_server_is_counted_from_the_wire() {
    if !require_root("quic_server_is_counted_from_the_wire") {
        return;
    }
    let scratch = Scratch::new("live_wire_quic");
    let r = quic_beside_tcp(&["--wire-only"], &scratch);
    assert!(r["handshakes"]["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .all(|k| k["from_wire"] == true));
}

/// The same server probed (Go's crypto/tls): the probes count its handshakes and their CPU, and its QUIC ones
/// are named from their Initial packets, tied to them by the random Go's QUICConn took in.
#[test]
fn quic_server_probed_names_its_quic_handshakes() {
    if !require_root("quic_server_probed_names_its_quic_handshakes") {
        return;
    }
    let scratch = Scratch::new("live_wire_quic_probed");
    let r = quic_beside_tcp(&["--hello-capture", "always"], &scratch);
    let kinds = r["handshakes"]["kinds"].as_array().unwrap();
    assert!(
        kinds.iter().all(|k| k["from_wire"] == false && k["cpu_ms"].is_object()),
        "{kinds:?}"
    );
    let wire = &r["handshakes"]["wire"];
    assert_eq!(wire["total"], r["handshakes"]["total"], "{wire}");
}
