// SPDX-License-Identifier: Apache-2.0
//! Live: Apache httpd (mod_ssl drives its handshakes with SSL_accept), event and prefork, against clients that
//! leave as soon as their handshake is done, that make a request, and one curl process per request (needs
//! root).
mod common;

use common::*;

/// A client run against a port: how many connections it completed.
type Client = fn(u16) -> u64;

/// The clients, each for one recording, by name.
const CLIENTS: [(&str, Client); 3] = [
    ("s_time -new", |port| s_time_new(port, 3)),
    ("s_time -new -www", |port| s_time_new_www(port, 3, "/index.html")),
    ("curl", |port| curl_runs(port, 100)),
];

/// A TLS 1.3 server whose client leaves right after its Finished fails writing its session tickets, inside
/// SSL_accept: the handshake completed all the same. Every connection is counted once, completed, with its
/// signature; the first screen's rate is the clients'.
fn apache_handshakes_are_counted(mpm: &str) {
    let test = format!("apache_{mpm}_handshakes_are_counted");
    if !require_root(&test) {
        return;
    }
    let scratch = Scratch::new(&format!("apache-{mpm}"));
    let apache = Apache::start(&scratch.path("httpd"), mpm);
    for (client, run_client) in CLIENTS {
        let recording = scratch.path("apache.tlsprof");
        let rec = Recorder::start(&["--comm", "apache2", "-o", recording.to_str().unwrap()]);
        let connections = run_client(apache.port);
        // The server frees a connection once it has read the close.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let summary = rec.interrupt();
        let r = report_json(&recording);
        let (completed, abandoned) = (handshakes_of(&r, "total"), handshakes_of(&r, "abandoned"));
        eprintln!("{mpm}, {client}: {connections} connections; {completed} completed, {abandoned} abandoned");
        assert!(connections > 0, "{client} made no connection");
        assert!(
            completed * 100 >= connections * 95,
            "{mpm}, {client}: {completed} completed of {connections} connections\n{summary}"
        );
        assert!(
            (completed + abandoned).abs_diff(connections) * 100 <= connections,
            "{mpm}, {client}: {completed} completed + {abandoned} abandoned for {connections} connections\n{summary}"
        );
        assert_eq!(handshakes_of(&r, "server"), completed, "{summary}");
        assert_eq!(handshakes_of(&r, "resumed"), 0, "{summary}");
        // ECDSA P-256: one signature per handshake, abandoned ones too.
        assert_eq!(calls_of(&r, "EVP_DigestSign"), completed + abandoned, "{summary}");
        assert!(
            every_full_kind(&r, |k| k["certificate_key"] == "ECDSA P-256"),
            "{summary}"
        );
        // The first screen's rate, exact here, is the clients' over the recording.
        let rate = f(&r["handshakes"]["rate_per_s"]);
        let clients_rate = connections as f64 / f(&r["duration_s"]);
        assert!(
            within(rate, clients_rate, 0.01),
            "{rate} handshakes/s for the clients' {clients_rate}\n{summary}"
        );
        let digits = if rate >= 100.0 { 0 } else { 1 };
        assert!(
            summary.contains("apache2: TLS") && summary.contains(&format!("{rate:.digits$} handshakes/s")),
            "the first screen gives another rate than {rate:.1}/s:\n{summary}"
        );
        let lib = r["libraries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["path"].as_str().unwrap().contains("libssl"))
            .unwrap();
        assert_eq!(lib["handshake_state"], true, "{summary}");
    }
}

#[test]
fn apache_event_handshakes_are_counted() {
    apache_handshakes_are_counted("event");
}

#[test]
fn apache_prefork_handshakes_are_counted() {
    apache_handshakes_are_counted("prefork");
}
