// SPDX-License-Identifier: Apache-2.0
//! Live: processes that start during the recording are probed before their first handshake: a curl process
//! per request (--comm curl, started before any curl runs), PostgreSQL's backend forked for each connection
//! (--comm postgres, --pid of the postmaster) and its psql clients (needs root).
mod common;

use common::*;

/// The report's target standing for the processes named `comm` that started during the recording (the report
/// folds them into one).
fn joined<'a>(r: &'a serde_json::Value, comm: &str) -> &'a serde_json::Value {
    r["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| !t["joined_at_s"].is_null() && t["comm"] == comm)
        .unwrap_or_else(|| panic!("no {comm} that started during the recording: {:#}", r["targets"]))
}

/// The processes of a recording (its raw file) that made no handshake the probes saw, with what was counted
/// of them: for a failure's message.
fn without_handshakes(recording: &std::path::Path) -> String {
    let raw: serde_json::Value = serde_json::from_slice(&std::fs::read(recording).unwrap()).unwrap();
    let seen: Vec<&serde_json::Value> = raw["handshakes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| &g["pid"])
        .collect();
    let quiet: Vec<String> = raw["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| !seen.contains(&&t["pid"]))
        .map(|t| {
            format!(
                "pid {} ({}): joined at {} s, {} connections, {} ms CPU, exited {}",
                t["pid"], t["comm"], t["joined_at_s"], t["connections"], t["process_cpu_ms"], t["exited"]
            )
        })
        .collect();
    format!("processes without a handshake seen: {quiet:#?}; lost {}", raw["lost"])
}

/// How many processes a target of the report stands for.
fn processes(t: &serde_json::Value) -> u64 {
    t["processes"].as_u64().unwrap_or(1)
}

#[test]
fn curl_processes_that_start_during_the_recording_are_counted() {
    if !require_root("curl_processes_that_start_during_the_recording_are_counted") {
        return;
    }
    let scratch = Scratch::new("follow-curl");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--cert", "ecdsa-p256"]);
    let recording = scratch.path("curl.tlsprof");
    let rec = Recorder::start(&["--comm", "curl", "-o", recording.to_str().unwrap()]);
    assert!(
        rec.stderr.contains("no process named 'curl' runs yet: waiting for one"),
        "{}",
        rec.stderr
    );
    let runs = curl_runs(nginx.port, 100);
    let (summary, log) = rec.interrupt_with_log();
    let r = report_json(&recording);
    assert_eq!(runs, 100, "curl failed");
    assert_eq!(
        handshakes_of(&r, "total"),
        runs,
        "{}\n{log}\n{summary}",
        without_handshakes(&recording)
    );
    assert_eq!(handshakes_of(&r, "client"), runs, "{summary}");
    assert_eq!(handshakes_of(&r, "abandoned"), 0, "{summary}");
    assert_eq!(calls_of(&r, "EVP_PKEY_keygen"), runs, "{summary}");
    assert_eq!(calls_of(&r, "EVP_PKEY_derive"), runs, "{summary}");
    // Every curl joined as it started, with its connection and its CPU (read as it exited): one line of the
    // report.
    let curls = joined(&r, "curl");
    assert_eq!(r["targets"].as_array().unwrap().len(), 1, "{summary}");
    assert_eq!(processes(curls), runs, "{summary}");
    assert_eq!(curls["connections"], runs, "{summary}");
    assert!(f(&curls["process_cpu_ms"]) > 0.0, "{summary}");
    assert!(
        flowed(&summary).contains("curl (100 processes that started during the recording)"),
        "{summary}"
    );
    assert_eq!(r["lost"]["processes"], 0, "{summary}");
}

/// PostgreSQL forks a backend for each connection, which handshakes within a millisecond: every one counted,
/// by the server's name and by the postmaster's pid; and psql's processes as clients.
#[test]
fn postgres_backends_and_psql_clients_are_counted() {
    if !require_root("postgres_backends_and_psql_clients_are_counted") {
        return;
    }
    let scratch = Scratch::new("follow-postgres");
    let pg = Postgres::start(&scratch.path("pg"));
    let postmaster = pg.postmaster.to_string();
    let selections: [(&str, [&str; 2]); 3] = [
        ("server", ["--comm", "postgres"]),
        ("server", ["--pid", &postmaster]),
        ("client", ["--comm", "psql"]),
    ];
    for (role, selection) in selections {
        let recording = scratch.path("pg.tlsprof");
        let mut args = selection.to_vec();
        args.extend(["-o", recording.to_str().unwrap()]);
        let rec = Recorder::start(&args);
        let runs = pg.psql_runs(100);
        // A backend ends once it has read the client's goodbye.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (summary, rec_log) = rec.interrupt_with_log();
        let r = report_json(&recording);
        eprintln!(
            "{selection:?}: {runs} psql runs, {} {role} handshakes",
            handshakes_of(&r, role)
        );
        assert_eq!(runs, 100, "psql failed");
        assert_eq!(
            handshakes_of(&r, "total"),
            runs,
            "{selection:?}: {}\n{}\n{summary}",
            without_handshakes(&recording),
            rec_log
        );
        assert_eq!(handshakes_of(&r, role), runs, "{selection:?}\n{summary}");
        assert_eq!(handshakes_of(&r, "abandoned"), 0, "{selection:?}\n{summary}");
        // Each handshake makes its key share; psql's two: PostgreSQL asks for P-256 (ssl_ecdh_curve), OpenSSL's
        // client offers X25519 first, and the server's HelloRetryRequest has it make another.
        let key_shares = if role == "client" { 2 * runs } else { runs };
        assert_eq!(calls_of(&r, "EVP_PKEY_keygen"), key_shares, "{selection:?}\n{summary}");
        assert_eq!(calls_of(&r, "EVP_PKEY_derive"), runs, "{selection:?}\n{summary}");
        // One process per connection, each joined as it started: a backend forked by the postmaster.
        let started = joined(&r, if role == "server" { "postgres" } else { "psql" });
        assert!(processes(started) >= runs, "{selection:?}\n{summary}");
        if role == "server" {
            assert_eq!(started["parent"], pg.postmaster, "{selection:?}\n{summary}");
        }
        assert_eq!(r["lost"]["processes"], 0, "{selection:?}\n{summary}");
    }
}
