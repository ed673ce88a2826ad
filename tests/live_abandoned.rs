// SPDX-License-Identifier: Apache-2.0
//! Live: every handshake the server paid for is counted, completed or abandoned by the peer (needs root).
mod common;

use common::*;

/// nginx's workers and master, profiled with the probes attached throughout (exact counts).
fn record_nginx(nginx: &Nginx, recording: &std::path::Path) -> Recorder {
    let mut args = vec!["--pid".to_string(), nginx.master.to_string()];
    for w in nginx.workers() {
        args.extend(["--pid".to_string(), w.to_string()]);
    }
    args.extend(["-o".to_string(), recording.to_str().unwrap().to_string()]);
    Recorder::start(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

fn count(r: &serde_json::Value, field: &str) -> u64 {
    r["handshakes"][field]
        .as_u64()
        .unwrap_or_else(|| panic!("handshakes.{field}: {r:#}"))
}

/// `s_time -new` closes each connection as soon as its own handshake is done, before reading the server's
/// session tickets, and examples/abandon_client.py closes each after the server's flight without sending its
/// Finished: every connection made the server's key share and signature, and is counted once. s_time's
/// completed (the server read its Finished, then failed writing its tickets: its handshake state says so);
/// abandon_client's were abandoned.
#[test]
fn nginx_abandoned_handshakes_are_counted() {
    if !require_root("nginx_abandoned_handshakes_are_counted") {
        return;
    }
    let scratch = Scratch::new("nginx-abandoned");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3", "--tickets", "on"]);
    let recording = scratch.path("abandoned.tlsprof");
    let rec = record_nginx(&nginx, &recording);
    let s_time = s_time_new(nginx.port, 3);
    let out = run(std::process::Command::new("python3")
        .arg(repo().join("examples/abandon_client.py"))
        .args(["--port", &nginx.port.to_string(), "--count", "200"]));
    assert!(
        out.status.success(),
        "abandon_client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let client: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let left = client["abandoned"].as_u64().unwrap();
    // nginx frees a connection when it reads the close: give the last ones time to be freed.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let summary = rec.interrupt();
    let r = report_json(&recording);
    let (completed, abandoned) = (count(&r, "total"), count(&r, "abandoned"));
    eprintln!(
        "s_time -new: {s_time} connections, abandon_client: {left}; {completed} completed, {abandoned} abandoned"
    );
    let connections = s_time + left;
    assert_eq!(
        completed + abandoned,
        connections,
        "{completed} completed + {abandoned} abandoned vs {connections} client connections\n{summary}"
    );
    assert_eq!((completed, abandoned), (s_time, left), "{summary}");
    assert_eq!(r["handshakes"]["observed"]["partial"], 0, "{summary}");
    assert_eq!(r["lost"]["handshake_events"], 0, "{summary}");
    assert_eq!(r["lost"]["connections"], 0, "{summary}");
    // One signature per connection, abandoned or not.
    assert_eq!(stage(&r, "sign")["calls"].as_u64(), Some(connections), "{summary}");
    let kinds = r["handshakes"]["kinds"].as_array().unwrap();
    let abandoned_kinds: Vec<&serde_json::Value> = kinds.iter().filter(|k| k["outcome"] == "abandoned").collect();
    let in_kinds: u64 = abandoned_kinds.iter().map(|k| k["count"].as_u64().unwrap()).sum();
    assert_eq!(in_kinds, abandoned, "{summary}");
    assert!(
        abandoned_kinds
            .iter()
            .all(|k| k["resumed"] == false && k["role"] == "server" && k["certificate_key"] == "RSA-2048"),
        "{summary}"
    );
    // Their CPU is charged to them: each made a signature, and they show apart from the completed ones.
    let sign_ms = f(&stage(&r, "sign")["cpu_us_per_call"]) / 1e3;
    assert!(f(&r["handshakes"]["abandoned_cpu_ms"]["mean"]) > sign_ms, "{summary}");
    assert!(
        summary.contains(&format!("Abandoned handshakes: {abandoned} ")),
        "{summary}"
    );
    assert!(summary.contains("full server abandoned"), "{summary}");
}

/// With a client that sends a request and waits for the response, every handshake completes.
#[test]
fn nginx_handshakes_with_a_waiting_client_all_complete() {
    if !require_root("nginx_handshakes_with_a_waiting_client_all_complete") {
        return;
    }
    let scratch = Scratch::new("nginx-www");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let recording = scratch.path("www.tlsprof");
    let rec = record_nginx(&nginx, &recording);
    let connections = s_time_new_www(nginx.port, 3, "/");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let summary = rec.interrupt();
    let r = report_json(&recording);
    assert_eq!(count(&r, "total"), connections, "{summary}");
    assert_eq!(count(&r, "abandoned"), 0, "{summary}");
    assert_eq!(count(&r, "full"), connections, "{summary}");
}
