// SPDX-License-Identifier: Apache-2.0
//! Live: resumption offered, accepted and refused, and why, against the clients' own counts (needs root):
//! nginx reloaded with and without a ticket key file, two nginx instances with their own or one shared key,
//! a session-ID cache too small for its clients, two Go servers with their own keys, and the default mode's
//! interval. The clients are examples/resume_client.py (Python's ssl: OpenSSL).
mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use common::*;

/// Starts the resuming client with `args`; its counts come from `counts`.
fn start_client(args: &[&str]) -> Child {
    Command::new("python3")
        .arg(repo().join("examples/resume_client.py"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The client's own counts: connections, offered (a session was offered), reused.
fn counts(client: Child) -> (u64, u64, u64) {
    let out = client.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "resuming client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    let n = |k: &str| v[k].as_u64().unwrap();
    (n("connections"), n("offered"), n("reused"))
}

/// The recording's resumption figures of servers, added up: offered, accepted, refused, and refusals by
/// reason.
struct Funnel {
    offered: u64,
    accepted: u64,
    refused: u64,
    unparsed: u64,
    reasons: std::collections::BTreeMap<String, u64>,
    exact: bool,
}

fn server_funnel(r: &Value) -> Funnel {
    let mut f = Funnel {
        offered: 0,
        accepted: 0,
        refused: 0,
        unparsed: 0,
        reasons: Default::default(),
        exact: true,
    };
    for p in r["resumption"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == "server")
    {
        let n = |k: &str| p[k].as_u64().unwrap();
        f.offered += n("offered_session_id") + n("offered_ticket") + n("offered_psk");
        f.accepted += n("accepted");
        f.refused += n("refused");
        f.unparsed += n("unparsed");
        f.exact &= p["refused_total"]["exact"] == true;
        for c in p["refused_by"].as_array().unwrap() {
            *f.reasons.entry(c["reason"].as_str().unwrap().to_string()).or_default() += c["count"].as_u64().unwrap();
        }
    }
    f
}

fn has_advice(r: &Value, id: &str) -> bool {
    r["advice"].as_array().unwrap().iter().any(|a| a["id"] == id)
}

/// The change the resumption_refused advice asks for.
fn refusal_fix(r: &Value) -> &str {
    r["advice"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "resumption_refused")
        .and_then(|a| a["change"].as_str())
        .unwrap_or_else(|| panic!("no resumption_refused advice: {:#}", r["advice"]))
}

/// Records `--comm comm` in exact mode with every hello read, while `load` runs; the report as JSON and text.
fn record_exact(scratch: &Scratch, comm: &str, load: impl FnOnce(&mut Recorder)) -> (Value, String) {
    let recording = scratch.path(&format!("{comm}.tlsprof"));
    let mut rec = Recorder::start(&[
        "--comm",
        comm,
        "--hello-capture",
        "always",
        "-o",
        recording.to_str().unwrap(),
    ]);
    load(&mut rec);
    let summary = rec.interrupt();
    (report_json(&recording), summary)
}

/// 50 clients resume 400 connections to nginx, which reloads halfway (the client waits until tlsprof has
/// attached to the new worker). Returns the clients' counts and the report.
fn across_a_reload(scratch: &Scratch, nginx: &Nginx) -> ((u64, u64, u64), Value, String) {
    let attached = nginx.dir.join("tlsprof-attached");
    let _ = std::fs::remove_file(&attached);
    let between = format!(
        "{} reload {} && for i in $(seq 300); do [ -e {} ] && exit 0; sleep 0.1; done; exit 1",
        repo().join("scripts/nginx-target.sh").display(),
        nginx.dir.display(),
        attached.display()
    );
    let port = nginx.port.to_string();
    let mut client = None;
    let (r, summary) = record_exact(scratch, "nginx", |rec| {
        let c = start_client(&[
            "--port",
            &port,
            "--count",
            "400",
            "--clients",
            "50",
            "--between",
            &between,
        ]);
        rec.wait_for("attached to new process");
        std::fs::write(&attached, "").unwrap();
        client = Some(counts(c));
    });
    (client.unwrap(), r, summary)
}

fn assert_counts_match(f: &Funnel, (connections, offered, reused): (u64, u64, u64), summary: &str) {
    eprintln!(
        "clients: {connections} connections, {offered} offered, {reused} reused; tlsprof: {} offered, {} accepted, \
         {} refused {:?}",
        f.offered, f.accepted, f.refused, f.reasons
    );
    assert_eq!(f.unparsed, 0, "every ClientHello read whole\n{summary}");
    assert!(f.exact, "exact mode, every hello read\n{summary}");
    assert_eq!(
        (f.offered, f.accepted, f.refused),
        (offered, reused, offered - reused),
        "the clients made {connections} connections, offered {offered} sessions, {reused} reused\n{summary}"
    );
}

#[test]
fn nginx_reload_refuses_the_old_tickets_unless_the_key_file_is_kept() {
    if !require_root("nginx_reload_refuses_the_old_tickets_unless_the_key_file_is_kept") {
        return;
    }
    let scratch = Scratch::new("resume-reload");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--tickets", "on"]);
    let (client, r, summary) = across_a_reload(&scratch, &nginx);
    let f = server_funnel(&r);
    assert_counts_match(&f, client, &summary);
    // Each client's first connection after the reload offers a ticket under the old key.
    assert!(
        f.refused >= 40,
        "50 clients, one refusal each after the reload\n{summary}"
    );
    assert_eq!(
        f.reasons.keys().collect::<Vec<_>>(),
        ["ticket_key_unknown"],
        "{summary}"
    );
    assert!(refusal_fix(&r).contains("ssl_session_ticket_key"), "{summary}");
    // The new worker's refusals are of the key the old worker accepted.
    let keys: Vec<&Value> = r["resumption"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["ticket_keys"].as_array().unwrap())
        .collect();
    assert!(
        keys.iter()
            .any(|k| k["refused_unknown_key"].as_u64() > Some(0)
                && !k["accepted_by_others"].as_array().unwrap().is_empty()),
        "{summary}"
    );
    drop(nginx);

    let key = scratch.path("ticket.key");
    std::fs::write(&key, (0..80u8).map(|i| i.wrapping_mul(37)).collect::<Vec<u8>>()).unwrap();
    let nginx = Nginx::start(
        &scratch.path("nginx-key"),
        &["--tickets", "on", "--ticket-key", key.to_str().unwrap()],
    );
    let (client, r, summary) = across_a_reload(&scratch, &nginx);
    let f = server_funnel(&r);
    assert_counts_match(&f, client, &summary);
    assert_eq!(f.refused, 0, "the key file outlives the reload\n{summary}");
    assert!(!has_advice(&r, "resumption_refused"), "{summary}");
}

/// Two servers of one kind behind one name: the client picks either at random for each connection.
fn two_servers(scratch: &Scratch, ports: &str, comm: &str, n: &str) -> ((u64, u64, u64), Value, String) {
    let mut client = None;
    let (r, summary) = record_exact(scratch, comm, |_| {
        client = Some(counts(start_client(&[
            "--port",
            ports,
            "--count",
            n,
            "--clients",
            "20",
        ])));
    });
    (client.unwrap(), r, summary)
}

#[test]
fn two_nginx_instances_refuse_each_others_tickets_unless_they_share_a_key() {
    if !require_root("two_nginx_instances_refuse_each_others_tickets_unless_they_share_a_key") {
        return;
    }
    let scratch = Scratch::new("resume-two");
    // One certificate, as behind a balancer: OpenSSL binds a session to it.
    let a = Nginx::start(&scratch.path("a"), &["--tickets", "on"]);
    let same_cert = ["--tickets", "on", "--cert-from", a.dir.to_str().unwrap()];
    let b = Nginx::start(&scratch.path("b"), &same_cert);
    let ports = format!("{},{}", a.port, b.port);
    let (client, r, summary) = two_servers(&scratch, &ports, "nginx", "300");
    let f = server_funnel(&r);
    assert_counts_match(&f, client, &summary);
    // A ticket goes back to the instance that made it half the time.
    let share = f.refused as f64 / f.offered as f64;
    assert!(
        (0.3..0.7).contains(&share),
        "{} of {} refused\n{summary}",
        f.refused,
        f.offered
    );
    assert_eq!(
        f.reasons.keys().collect::<Vec<_>>(),
        ["ticket_key_unknown"],
        "{summary}"
    );
    let cert = scratch.path("cert");
    std::fs::create_dir_all(&cert).unwrap();
    for f in ["cert.pem", "key.pem"] {
        std::fs::copy(a.dir.join(f), cert.join(f)).unwrap();
    }
    drop((a, b));

    let key = scratch.path("shared.key");
    std::fs::write(&key, (0..80u8).map(|i| i.wrapping_mul(11)).collect::<Vec<u8>>()).unwrap();
    let with_key = [
        "--tickets",
        "on",
        "--ticket-key",
        key.to_str().unwrap(),
        "--cert-from",
        cert.to_str().unwrap(),
    ];
    let a = Nginx::start(&scratch.path("a-key"), &with_key);
    let b = Nginx::start(&scratch.path("b-key"), &with_key);
    let (client, r, summary) = two_servers(&scratch, &format!("{},{}", a.port, b.port), "nginx", "300");
    let f = server_funnel(&r);
    assert_counts_match(&f, client, &summary);
    assert_eq!(f.refused, 0, "{summary}");
}

/// The client's side: Python's ssl (libssl) offering its sessions to two nginx with their own keys, profiled
/// as a TLS client: its offers and what came of them, the reason unknown (the ticket's format is the
/// server's).
#[test]
fn a_client_sees_its_offers_refused() {
    if !require_root("a_client_sees_its_offers_refused") {
        return;
    }
    let scratch = Scratch::new("resume-client");
    let a = Nginx::start(&scratch.path("a"), &["--tickets", "on"]);
    let b = Nginx::start(
        &scratch.path("b"),
        &["--tickets", "on", "--cert-from", a.dir.to_str().unwrap()],
    );
    let go = scratch.path("go");
    let ports = format!("{},{}", a.port, b.port);
    let client = start_client(&[
        "--port",
        &ports,
        "--count",
        "200",
        "--clients",
        "20",
        "--wait-for",
        go.to_str().unwrap(),
    ]);
    let recording = scratch.path("client.tlsprof");
    let rec = record_with_hellos(client.id(), &recording);
    std::fs::write(&go, "").unwrap();
    let (_, offered, reused) = counts(client);
    let summary = rec.interrupt();
    let r = report_json(&recording);
    let clients: Vec<&Value> = r["resumption"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == "client")
        .collect();
    let [c] = clients[..] else {
        panic!("one client process: {:#}\n{summary}", r["resumption"])
    };
    let n = |k: &str| c[k].as_u64().unwrap();
    // The figures first: a long summary after them may be cut where the failure is shown.
    let figures = format!(
        "client: {offered} offered, {reused} reused; tlsprof: {} offered, {} accepted, {} refused, {} unparsed, \
         refused by {}",
        n("offered_psk") + n("offered_ticket") + n("offered_session_id"),
        n("accepted"),
        n("refused"),
        n("unparsed"),
        c["refused_by"]
    );
    eprintln!("{figures}");
    assert_eq!(n("unparsed"), 0, "{figures}\n{summary}");
    assert_eq!(
        n("offered_psk") + n("offered_ticket") + n("offered_session_id"),
        offered,
        "{figures}\n{summary}"
    );
    assert_eq!(
        (n("accepted"), n("refused")),
        (reused, offered - reused),
        "{figures}\n{summary}"
    );
    assert!(n("refused") > 0, "{figures}\n{summary}");
    assert_eq!(c["refused_by"][0]["reason"], "unknown", "{figures}\n{summary}");
}

#[test]
fn session_ids_a_small_cache_evicted_are_refused_as_not_cached() {
    if !require_root("session_ids_a_small_cache_evicted_are_refused_as_not_cached") {
        return;
    }
    let scratch = Scratch::new("resume-cache");
    let nginx = Nginx::start(
        &scratch.path("nginx"),
        &[
            "--protocols",
            "TLSv1.2",
            "--tickets",
            "off",
            "--session-cache",
            "builtin:5",
        ],
    );
    let port = nginx.port.to_string();
    let mut client = None;
    let (r, summary) = record_exact(&scratch, "nginx", |_| {
        client = Some(counts(start_client(&[
            "--port",
            &port,
            "--count",
            "300",
            "--clients",
            "40",
            "--tls",
            "1.2",
            "--no-tickets",
        ])));
    });
    let client = client.unwrap();
    let f = server_funnel(&r);
    assert_counts_match(&f, client, &summary);
    assert!(f.refused > f.offered / 2, "40 clients, 5 sessions cached\n{summary}");
    assert_eq!(
        f.reasons.keys().collect::<Vec<_>>(),
        ["session_not_cached"],
        "{summary}"
    );
    assert!(refusal_fix(&r).contains("ssl_session_cache shared"), "{summary}");
}

/// Node.js (OpenSSL behind a memory BIO: its socket reads and writes happen outside the TLS calls): without
/// tickets and with no session cache, the sessions its clients offer are refused as not cached; with tickets,
/// resumed.
#[test]
fn node_without_tickets_refuses_its_clients_sessions_as_not_cached() {
    if !require_root("node_without_tickets_refuses_its_clients_sessions_as_not_cached") {
        return;
    }
    let scratch = Scratch::new("resume-node");
    self_signed_cert(&scratch);
    for (tickets, refused) in [("off", true), ("on", false)] {
        let (server, port) = start_node_server_with(Path::new("node"), &scratch.0, &["--tickets", tickets]);
        let port = port.to_string();
        let mut client = None;
        let (r, summary) = record_exact(&scratch, "node", |_| {
            client = Some(counts(start_client(&[
                "--port",
                &port,
                "--count",
                "200",
                "--clients",
                "10",
            ])));
        });
        let client = client.unwrap();
        let f = server_funnel(&r);
        assert_counts_match(&f, client, &summary);
        if refused {
            assert!(f.refused > 0, "{summary}");
            assert_eq!(
                f.reasons.keys().collect::<Vec<_>>(),
                ["session_not_cached"],
                "{summary}"
            );
        } else {
            assert_eq!(f.refused, 0, "{summary}");
        }
        drop(server);
    }
}

#[test]
fn go_servers_with_their_own_keys_refuse_for_a_reason_the_wire_does_not_show() {
    if !require_root("go_servers_with_their_own_keys_refuse_for_a_reason_the_wire_does_not_show") {
        return;
    }
    let scratch = Scratch::new("resume-go");
    let server = go_build("server", None, false);
    let (a, addr_a) = start_go_server(&server, &[]);
    let (b, addr_b) = start_go_server(&server, &[]);
    let port = |addr: &str| addr.rsplit(':').next().unwrap().to_string();
    let ports = format!("{},{}", port(&addr_a), port(&addr_b));
    let comm = Path::new(&server).file_name().unwrap().to_str().unwrap();
    // The kernel keeps 15 characters of a program's name.
    let comm: String = comm.chars().take(15).collect();
    let (client, r, summary) = two_servers(&scratch, &ports, &comm, "200");
    let f = server_funnel(&r);
    assert_counts_match(&f, client, &summary);
    assert!(f.refused > 0, "{summary}");
    assert_eq!(f.reasons.keys().collect::<Vec<_>>(), ["unknown"], "{summary}");
    assert!(refusal_fix(&r).contains("SetSessionTicketKeys"), "{summary}");
    drop((a, b));
}

/// By default the hellos are read once every 10 s and the probes attached in windows: the refusals over the
/// recording are estimated, and their interval holds the clients' count.
#[test]
fn default_mode_estimates_refusals_within_their_interval() {
    if !require_root("default_mode_estimates_refusals_within_their_interval") {
        return;
    }
    let scratch = Scratch::new("resume-default");
    let a = Nginx::start(&scratch.path("a"), &["--tickets", "on"]);
    let b = Nginx::start(
        &scratch.path("b"),
        &["--tickets", "on", "--cert-from", a.dir.to_str().unwrap()],
    );
    let recording = scratch.path("default.tlsprof");
    let rec = Recorder::start(&[
        "--comm",
        "nginx",
        "--max-overhead",
        "0.3",
        "-o",
        recording.to_str().unwrap(),
    ]);
    let ports = format!("{},{}", a.port, b.port);
    let client = counts(start_client(&[
        "--port",
        &ports,
        "--count",
        "100000",
        "--clients",
        "20",
        "--seconds",
        "25",
    ]));
    let summary = rec.interrupt();
    let r = report_json(&recording);
    let (_, offered, reused) = client;
    let mut value = 0.0;
    let (mut lo, mut hi) = (0.0, 0.0);
    for p in r["resumption"].as_array().unwrap() {
        let t = &p["refused_total"];
        value += f(&t["value"]);
        lo += f(&t["ci95"][0]);
        hi += f(&t["ci95"][1]);
    }
    eprintln!(
        "refused ≈ {value:.0} [{lo:.0}–{hi:.0}] by default; the clients: {} offered, {} refused",
        offered,
        offered - reused
    );
    assert!(value > 0.0, "some ClientHellos read in 25 s\n{summary}");
    assert_estimate("refused sessions", value, [lo, hi], offered - reused, 0.5, &summary);
}
