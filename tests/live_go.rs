// SPDX-License-Identifier: Apache-2.0
//! Live: Go HTTPS servers (examples/go) profiled by tlsprof (needs root): the machine's Go, the newest release
//! stripped and Go 1.21 stripped, counts against the clients', the sign stage against the server's own clock of
//! the same signature in the same run, no return probe on Go code, and servers that grow their goroutines'
//! stacks deeply during handshakes alive and correct afterwards.
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use tlsprof::catalogue::Site;

/// The oldest Go release tlsprof supports and the newest it is tested on, fetched through the Go module proxy.
const OLDEST_GO: &str = "go1.21.13";
const NEWEST_GO: &str = "go1.27.3";

/// Deep enough that every handshake's goroutine grows (and so moves) its stack in GetCertificate.
const RECURSE: &str = "3000";

/// The advice of this id, with its text.
fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Handshakes of a role in the mix by certificate key ("none" where it names none), full or resumed.
fn certificate_keys(r: &serde_json::Value, role: &str, resumed: bool) -> std::collections::BTreeMap<String, u64> {
    let mut keys = std::collections::BTreeMap::new();
    for k in r["handshakes"]["kinds"].as_array().unwrap() {
        if k["role"] == role && k["resumed"] == resumed {
            let key = k["certificate_key"].as_str().unwrap_or("none").to_string();
            *keys.entry(key).or_default() += n(&k["count"]);
        }
    }
    keys
}

#[test]
fn go_server_stages_counts_and_sign_cost_without_return_probes() {
    if !require_root("go_server_stages_counts_and_sign_cost_without_return_probes") {
        return;
    }
    let server_bin = go_build("server", None, false);
    let client = go_build("client", None, false);
    let scratch = Scratch::new("go");
    let (mut server, addr) = start_go_server(&server_bin, &["-key", "ecdsa", "-sign-clock"]);
    let cpus = cpus();
    pin(server.pid(), cpus.server);
    let recording = scratch.path("go.tlsprof");
    let rec = Recorder::start(&["--pid", &server.pid().to_string(), "-o", recording.to_str().unwrap()]);

    // Every link on the Go executable is the entry-style Go program, with Go cookies.
    let links: Vec<_> = uprobe_links(rec.pid())
        .into_iter()
        .filter(|(_, path, _)| path == server_bin.to_str().unwrap())
        .collect();
    assert!(!links.is_empty(), "no uprobe link on {}", server_bin.display());
    for (prog, _, cookies) in &links {
        assert_eq!(
            program_name(*prog),
            "go_probe",
            "a link on Go code uses another program"
        );
        let go_abi = u64::from(tlsprof::catalogue::GO_ABI) << tlsprof::catalogue::COOKIE_FLAGS_SHIFT;
        assert!(cookies.iter().all(|c| c & go_abi != 0), "{cookies:?}");
    }
    assert!(
        links
            .iter()
            .flat_map(|(_, _, cookies)| cookies)
            .any(|&c| Site::of_cookie(c) == Some(Site::Exit)),
        "no exit site probed"
    );

    let full = go_client(&client, &addr, &["-duration", "4s"], cpus.client);
    let resumed13 = go_client(&client, &addr, &["-n", "300", "-resume", "-workers", "2"], cpus.client);
    let resumed12 = go_client(
        &client,
        &addr,
        &["-n", "300", "-resume", "-workers", "2", "-version", "1.2"],
        cpus.client,
    );
    let summary = rec.interrupt();
    eprintln!("{summary}");
    // The server's own clock of the signatures it made beside the probed ones (one handshake in two).
    let clock = Command::new(&client)
        .args(["-addr", &addr, "-fetch", "/sign-clock"])
        .output()
        .unwrap();
    let clock: serde_json::Value = serde_json::from_slice(&clock.stdout).expect("/sign-clock JSON");

    let clients = [&full, &resumed13, &resumed12];
    for c in clients {
        assert_eq!((n(&c["errors"]), n(&c["wrong_answers"])), (0, 0), "{c}");
    }
    let connections: u64 = clients.iter().map(|c| n(&c["connections"])).sum();
    let resumed: u64 = clients.iter().map(|c| n(&c["resumed"])).sum();
    let r = report_json(&recording);
    let lib = &r["libraries"][0];
    assert_eq!(
        (&lib["family"], &lib["flavor"]),
        (&"go".into(), &"static".into()),
        "{r:#}"
    );
    assert!(lib["version"].as_str().unwrap_or("").starts_with("go1."), "{lib}");
    // Go's scheduler probes hit at goroutine switches: a part of the hits, told apart.
    let (hits, scheduler) = (n(&r["probe_hits"]), n(&r["probe_scheduler_hits"]));
    assert!(
        scheduler > 0 && scheduler < hits,
        "{scheduler} of {hits} hits at the scheduler"
    );
    let hs = &r["handshakes"];
    let total = f(&hs["total"]);
    eprintln!(
        "clients: {connections} connections, {resumed} resumed; tlsprof: {total} handshakes, {} full, {} resumed, {} server",
        hs["full"], hs["resumed"], hs["server"]
    );
    assert!(
        within(total, connections as f64, 0.02),
        "{total} vs {connections}\n{summary}"
    );
    assert_eq!(f(&hs["resumed"]), resumed as f64, "{summary}");
    assert_eq!(f(&hs["server"]), total);
    assert_eq!(f(&hs["full"]) + f(&hs["resumed"]), total);

    // The fetch's own handshake, the last call, went to the signer when the count of calls is odd.
    let fetch_signed = (n(&clock["signer_calls"]) + n(&clock["clocked"])) % 2;
    let sign = stage(&r, "sign");
    assert_eq!(
        f(&sign["calls"]),
        (n(&clock["signer_calls"]) - fetch_signed) as f64,
        "{sign} vs {clock}"
    );
    let per_call = f(&sign["cpu_us_per_call"]);
    let reference = f(&clock["clocked_ns"]) / f(&clock["clocked"]) / 1e3;
    eprintln!(
        "sign: tlsprof {per_call:.1} µs per call over {} calls; the server's clock {reference:.1} µs over {} signatures",
        sign["calls"], clock["clocked"]
    );
    assert!(
        within(per_call, reference, 0.15),
        "sign {per_call:.1} µs vs {reference:.1} µs by the server's clock\n{summary}"
    );
    for s in ["keygen", "derive", "resume", "key_schedule"] {
        assert!(f(&stage(&r, s)["calls"]) >= f(&hs["full"]), "{s}: {}", stage(&r, s));
    }
    // The certificate key, from the length of each signature the probed signer made; the server's clocked
    // signatures (not probed, as a KMS signer's) name none.
    let full_keys = certificate_keys(&r, "server", false);
    assert_eq!(
        full_keys.get("ECDSA P-256").map(|&c| c as f64),
        Some(f(&sign["calls"])),
        "{summary}"
    );
    assert_eq!(full_keys.len(), 2, "{full_keys:?}");
    assert!(
        certificate_keys(&r, "server", true).keys().all(|k| k == "none"),
        "{summary}"
    );
    // Few resumed: advice in Go's terms.
    let resume = advice(&r, "session_resumption");
    assert!(
        resume["change"].as_str().unwrap().contains("SetSessionTicketKeys"),
        "{resume}"
    );
    assert!(server.0.try_wait().unwrap().is_none(), "the server died");
}

/// Exact mode on a Go server, built with the machine's Go and, stripped, with the newest release: the
/// functions that only direct calls reach (TLS 1.3's HKDF-Extract among them) end where their callers resume,
/// on instructions the kernel emulates; those reached through function values and interfaces (the handshake,
/// the signature, the key share) learn their callers in the first handshakes and end there too once their
/// return instructions (single-stepped) are no longer probed. Every call is still seen to end, and counted.
#[test]
fn go_server_exact_mode_ends_calls_where_their_callers_resume() {
    if !require_root("go_server_exact_mode_ends_calls_where_their_callers_resume") {
        return;
    }
    for (toolchain, stripped) in [(None, false), (Some(NEWEST_GO), true)] {
        exact_mode_ends_calls_where_their_callers_resume(toolchain, stripped);
    }
}

fn exact_mode_ends_calls_where_their_callers_resume(toolchain: Option<&str>, stripped: bool) {
    let server_bin = go_build("server", toolchain, stripped);
    let client = go_build("client", None, false);
    let scratch = Scratch::new(&format!("go-exact-{}", toolchain.unwrap_or("local")));
    let (mut server, addr) = start_go_server(&server_bin, &["-key", "ecdsa", "-no-tickets"]);
    let cpus = cpus();
    pin(server.pid(), cpus.server);
    let recording = scratch.path("go-exact.tlsprof");
    let rec = Recorder::start(&[
        "--pid",
        &server.pid().to_string(),
        "--max-overhead",
        "100",
        "-o",
        recording.to_str().unwrap(),
    ]);
    let sites = |site: Site| {
        uprobe_links(rec.pid())
            .into_iter()
            .filter(|(_, path, _)| path == server_bin.to_str().unwrap())
            .flat_map(|(_, _, cookies)| cookies)
            .filter(|&c| Site::of_cookie(c) == Some(site))
            .count()
    };
    let (returned_sites, exits_at_start) = (sites(Site::Returned), sites(Site::Exit));
    let (first, then): (u64, u64) = (300, 3000);
    let seen = go_client(
        &client,
        &addr,
        &["-n", &first.to_string(), "-workers", "2"],
        cpus.client,
    );
    assert_eq!((n(&seen["errors"]), n(&seen["connections"])), (0, first), "{seen}");
    // Settled: the return instructions of the functions called lose their probes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while sites(Site::Exit) >= exits_at_start && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (learned_sites, exits_settled) = (sites(Site::Learned), sites(Site::Exit));
    let seen = go_client(&client, &addr, &["-n", &then.to_string(), "-workers", "2"], cpus.client);
    let summary = rec.interrupt();
    eprintln!("{summary}");
    assert_eq!((n(&seen["errors"]), n(&seen["connections"])), (0, then), "{seen}");
    assert!(returned_sites > 0, "no exit probed where a caller resumes\n{summary}");
    eprintln!(
        "{returned_sites} exits where callers resume, {learned_sites} learned; return instructions probed: \
         {exits_at_start} at start, {exits_settled} once settled"
    );
    assert!(learned_sites > 0, "no caller learned\n{summary}");
    assert!(
        exits_settled < exits_at_start,
        "no return instruction unprobed\n{summary}"
    );
    let r = report_json(&recording);
    if let Some(release) = toolchain {
        assert_eq!(r["libraries"][0]["version"], release, "{summary}");
    }
    let full = f(&r["handshakes"]["full"]);
    assert_eq!(full, (first + then) as f64, "{summary}");
    // TLS 1.3 without a pre-shared key extracts three secrets: early, handshake and master.
    assert_eq!(f(&stage(&r, "key_schedule")["calls"]), 3.0 * full, "{summary}");
    assert_eq!(f(&stage(&r, "sign")["calls"]), full, "{summary}");
    assert_eq!(r["lost"]["missed_returns"], 0, "{summary}");
    // Single steps only while the first handshakes were learning: a few for each of those, none after.
    let stepped = f(&r["probe_stepped_hits"]);
    eprintln!("{stepped} hits single-stepped in {full} handshakes");
    assert!(
        stepped * 2.0 < full,
        "{stepped} hits single-stepped in {full} handshakes\n{summary}"
    );
    assert!(server.0.try_wait().unwrap().is_none(), "the server died");
}

#[test]
fn go_server_recursing_deeply_during_handshakes_survives_a_recording() {
    if !require_root("go_server_recursing_deeply_during_handshakes_survives_a_recording") {
        return;
    }
    let server_bin = go_build("server", None, false);
    let client = go_build("client", None, false);
    let scratch = Scratch::new("go-deep");
    let (mut server, addr) = start_go_server(&server_bin, &["-key", "ecdsa", "-recurse", RECURSE]);
    let cpus = cpus();
    pin(server.pid(), cpus.server);
    let recording = scratch.path("go.tlsprof");
    let rec = Recorder::start(&["--pid", &server.pid().to_string(), "-o", recording.to_str().unwrap()]);
    let load = go_client(
        &client,
        &addr,
        &["-duration", "4s", "-recurse", "2000", "-workers", "8"],
        cpus.client,
    );
    let summary = rec.interrupt();
    eprintln!("{summary}");
    assert_eq!((n(&load["errors"]), n(&load["wrong_answers"])), (0, 0), "{load}");
    let r = report_json(&recording);
    let total = f(&r["handshakes"]["total"]);
    eprintln!(
        "deep recursion: client {} connections; tlsprof {total} handshakes",
        load["connections"]
    );
    assert!(within(total, f(&load["connections"]), 0.02), "{summary}");
    assert_eq!(f(&stage(&r, "sign")["calls"]), total, "{summary}");
    // Alive and correct afterwards, through deeper recursion still.
    assert!(server.0.try_wait().unwrap().is_none(), "the server died");
    let after = go_client(&client, &addr, &["-n", "50", "-recurse", "5000"], cpus.client);
    assert_eq!(
        (
            n(&after["connections"]),
            n(&after["errors"]),
            n(&after["wrong_answers"])
        ),
        (50, 0, 0)
    );
}

#[test]
fn stripped_oldest_go_is_profiled_with_names() {
    if !require_root("stripped_oldest_go_is_profiled_with_names") {
        return;
    }
    let server_bin = go_build("server", Some(OLDEST_GO), true);
    let client = go_build("client", None, false);
    let scratch = Scratch::new("go-stripped");
    let (mut server, addr) = start_go_server(&server_bin, &["-key", "rsa", "-recurse", RECURSE]);
    let cpus = cpus();
    pin(server.pid(), cpus.server);
    let recording = scratch.path("go.tlsprof");
    let rec = Recorder::start(&["--pid", &server.pid().to_string(), "-o", recording.to_str().unwrap()]);
    let full = go_client(&client, &addr, &["-n", "300", "-recurse", "2000"], cpus.client);
    let resumed = go_client(
        &client,
        &addr,
        &["-n", "200", "-resume", "-version", "1.2"],
        cpus.client,
    );
    let summary = rec.interrupt();
    eprintln!("{summary}");

    let r = report_json(&recording);
    assert_eq!(r["libraries"][0]["version"], OLDEST_GO, "{r:#}");
    let connections = n(&full["connections"]) + n(&resumed["connections"]);
    let hs = &r["handshakes"];
    eprintln!(
        "clients: {connections} connections, {} resumed; tlsprof: {} handshakes, {} resumed",
        resumed["resumed"], hs["total"], hs["resumed"]
    );
    assert!(within(f(&hs["total"]), connections as f64, 0.02), "{summary}");
    assert_eq!(f(&hs["resumed"]), f(&resumed["resumed"]), "{summary}");
    // The TLS 1.2 handshakes sign and agree keys from callers first seen after those functions' return
    // instructions lost their probes (the TLS 1.3 handshakes before settled them): those calls end unseen
    // until their callers are probed, each counted as a missed return, and their handshakes' certificate key
    // is not told. Every other one is.
    let full_keys = certificate_keys(&r, "server", false);
    let untold: u64 = full_keys.iter().filter(|(k, _)| *k != "RSA-2048").map(|(_, n)| n).sum();
    assert!(full_keys.get("RSA-2048").is_some_and(|&n| n >= 300), "{summary}");
    assert!(untold <= n(&r["lost"]["missed_returns"]), "{summary}");
    for name in [
        "crypto/tls.(*Conn).serverHandshake",
        "crypto/rsa.(*PrivateKey).Sign",
        "crypto/ecdh.(*x25519Curve).GenerateKey",
    ] {
        let func = function(&r, name).unwrap_or_else(|| panic!("{name} not found in the stripped binary\n{summary}"));
        assert!(f(&func["calls"]) > 0.0, "{func}");
    }
    // Whole stacks from the goroutine's root, named from Go's function table, through the stage frames.
    let folded = run(tlsprof().args(["flamegraph", "--folded"]).arg(&recording));
    let folded = String::from_utf8_lossy(&folded.stdout);
    assert!(
        folded.lines().any(|l| l.contains("runtime.goexit;")
            && l.contains(";crypto/tls.(*Conn).serverHandshake [handshake];")
            && l.contains(";crypto/rsa.(*PrivateKey).Sign [sign];crypto/")),
        "no named Go stack through sign:\n{folded}"
    );
    assert!(server.0.try_wait().unwrap().is_none(), "the server died");
    let after = go_client(&client, &addr, &["-n", "20", "-recurse", "5000"], cpus.client);
    assert_eq!((n(&after["errors"]), n(&after["wrong_answers"])), (0, 0));
}

#[test]
fn a_parked_handshake_is_not_charged_for_the_goroutine_that_ran_meanwhile() {
    if !require_root("a_parked_handshake_is_not_charged_for_the_goroutine_that_ran_meanwhile") {
        return;
    }
    let server_bin = go_build("server", None, false);
    let client = go_build("client", None, false);
    let scratch = Scratch::new("go-park");
    // One P: while a handshake's goroutine sleeps in GetCertificate, the spinning goroutine runs on the same
    // thread, with no kernel context switch between them.
    let mut cmd = Command::new(&server_bin);
    cmd.env("GOMAXPROCS", "1")
        .args(["-key", "ecdsa", "-park", "20ms", "-burn"]);
    let (mut server, addr) = start_go_server_cmd(cmd);
    let cpus = cpus();
    pin(server.pid(), cpus.server);
    let recording = scratch.path("go.tlsprof");
    let rec = Recorder::start(&["--pid", &server.pid().to_string(), "-o", recording.to_str().unwrap()]);
    let load = go_client(&client, &addr, &["-duration", "3s", "-workers", "2"], cpus.client);
    let summary = rec.interrupt();
    eprintln!("{summary}");
    assert_eq!(n(&load["errors"]), 0, "{load}");
    let r = report_json(&recording);
    let total = f(&r["handshakes"]["total"]);
    let handshake_ms = f(&r["tls_cpu_ms"]);
    let process_ms = f(&r["process_cpu_ms"]);
    // Each handshake sleeps 20 ms inside its handshake call while the spinner has the CPU: charged to the
    // handshake, that would be about 20 ms of CPU per handshake and most of the process's CPU.
    let per_handshake_ms = handshake_ms / total;
    eprintln!(
        "parked handshakes: {total} (client {}), {per_handshake_ms:.3} ms CPU per handshake, handshakes {handshake_ms:.0} ms of {process_ms:.0} ms process CPU",
        load["connections"]
    );
    assert!(within(total, f(&load["connections"]), 0.02), "{summary}");
    assert!(per_handshake_ms < 20.0 / 4.0, "{summary}");
    assert!(handshake_ms < process_ms / 4.0, "{summary}");
    assert!(server.0.try_wait().unwrap().is_none(), "the server died");
}

/// A Go client started held (-hold), so that tlsprof attaches before its first connection.
struct HeldClient {
    child: std::process::Child,
    stdout: BufReader<std::process::ChildStdout>,
}

impl HeldClient {
    fn start(client: &Path, addr: &str, args: &[&str], env: &[(&str, &str)], cpu: Option<usize>) -> HeldClient {
        let mut cmd = Command::new("taskset");
        cmd.envs(env.iter().copied());
        cmd.args(["-c", &cpu.map_or("0-1023".to_string(), |c| c.to_string())])
            .arg(client)
            .args(["-addr", addr, "-hold"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
        HeldClient { child, stdout }
    }

    /// Lets it run its connections; what it saw.
    fn run(&mut self) -> serde_json::Value {
        writeln!(self.child.stdin.as_mut().unwrap(), "go").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("client said {line:?}: {e}"))
    }

    /// Lets it exit.
    fn close(mut self) {
        drop(self.child.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

#[test]
fn go_client_counts_full_and_resumed_handshakes_as_it_does() {
    if !require_root("go_client_counts_full_and_resumed_handshakes_as_it_does") {
        return;
    }
    let server_bin = go_build("server", None, false);
    let client = go_build("client", None, false);
    let scratch = Scratch::new("go-client");
    let (mut server, addr) = start_go_server(&server_bin, &["-key", "ecdsa"]);
    let cpus = cpus();
    pin(server.pid(), cpus.server);
    for version in ["1.3", "1.2"] {
        // One client makes full handshakes only, the other resumes from its session cache.
        let mut held = [&[][..], &["-resume"][..]].map(|extra| {
            let mut args = vec!["-n", "300", "-workers", "2", "-version", version];
            args.extend_from_slice(extra);
            HeldClient::start(&client, &addr, &args, &[], cpus.client)
        });
        let recording = scratch.path(&format!("client-{version}.tlsprof"));
        let pids = held.each_ref().map(|h| h.child.id().to_string());
        let rec = Recorder::start(&[
            "--pid",
            &pids[0],
            "--pid",
            &pids[1],
            "--hello-capture",
            "always",
            "-o",
            recording.to_str().unwrap(),
        ]);
        let seen = held.each_mut().map(|h| h.run());
        let summary = rec.interrupt();
        for h in held {
            h.close();
        }
        eprintln!("{summary}");
        for s in &seen {
            assert_eq!((n(&s["errors"]), n(&s["wrong_answers"])), (0, 0), "{s}");
        }
        let connections: u64 = seen.iter().map(|s| n(&s["connections"])).sum();
        let resumed = n(&seen[1]["resumed"]);
        let r = report_json(&recording);
        let hs = &r["handshakes"];
        eprintln!(
            "TLS {version} clients: {connections} connections, {resumed} resumed; tlsprof: {} handshakes, {} full, {} resumed, {} client",
            hs["total"], hs["full"], hs["resumed"], hs["client"]
        );
        assert!(resumed > 0, "{seen:?}");
        assert_eq!(f(&hs["total"]), connections as f64, "{summary}");
        assert_eq!(f(&hs["client"]), f(&hs["total"]), "{summary}");
        assert_eq!(f(&hs["resumed"]), resumed as f64, "{summary}");
        // The server's key, from the length of the handshake signature the client checked; full handshakes
        // verify the server's chain and signature, resumed ones neither.
        let full = f(&hs["full"]);
        assert_eq!(
            certificate_keys(&r, "client", false)
                .get("ECDSA P-256")
                .map(|&c| c as f64),
            Some(full),
            "{summary}"
        );
        assert_eq!(f(&stage(&r, "verify")["calls"]), 2.0 * full, "{summary}");
        let reuse = advice(&r, "client_connection_reuse");
        assert!(
            reuse["change"].as_str().unwrap().contains("MaxIdleConnsPerHost"),
            "{reuse}"
        );
        let version_name = format!("TLSv{version}");
        assert!(
            r["handshakes"]["kinds"]
                .as_array()
                .unwrap()
                .iter()
                .all(|k| k["version"] == version_name.as_str()),
            "{summary}"
        );
    }
    assert!(server.0.try_wait().unwrap().is_none(), "the server died");
}

#[test]
fn newest_go_negotiates_the_hybrid_group_and_its_ml_kem_work_is_keygen_and_derive() {
    if !require_root("newest_go_negotiates_the_hybrid_group_and_its_ml_kem_work_is_keygen_and_derive") {
        return;
    }
    let server_bin = go_build("server", None, false);
    let client = go_build("client", None, false);
    let scratch = Scratch::new("go-mlkem");
    // examples/go declares go 1.21 so that the oldest release builds it, and so takes Go 1.21's default
    // GODEBUG settings; a module declaring go 1.24 or later has tlsmlkem=1 by default.
    let hybrid = [("GODEBUG", "tlsmlkem=1")];
    let mut cmd = Command::new(&server_bin);
    cmd.envs(hybrid).args(["-key", "ecdsa"]);
    let (mut server, addr) = start_go_server_cmd(cmd);
    let cpus = cpus();
    pin(server.pid(), cpus.server);
    let mut held = HeldClient::start(&client, &addr, &["-n", "300", "-workers", "2"], &hybrid, cpus.client);
    let recording = scratch.path("mlkem.tlsprof");
    let rec = Recorder::start(&[
        "--pid",
        &server.pid().to_string(),
        "--pid",
        &held.child.id().to_string(),
        "--hello-capture",
        "always",
        "-o",
        recording.to_str().unwrap(),
    ]);
    let seen = held.run();
    let summary = rec.interrupt();
    held.close();
    eprintln!("{summary}");
    assert_eq!((n(&seen["errors"]), n(&seen["connections"])), (0, 300), "{seen}");
    let r = report_json(&recording);
    for k in r["handshakes"]["kinds"].as_array().unwrap() {
        assert_eq!(k["key_exchange"], "X25519MLKEM768", "{summary}");
    }
    let hs = &r["handshakes"];
    assert_eq!((f(&hs["server"]), f(&hs["client"])), (300.0, 300.0), "{summary}");
    // The server parses the client's ML-KEM key and encapsulates to it (derive); the client makes its key
    // (keygen) and decapsulates (derive): once per handshake each, in the stage beside X25519's.
    let calls = |name: &str, stage: &str| {
        let func = function(&r, name).unwrap_or_else(|| panic!("{name} not in the call tree\n{summary}"));
        assert_eq!(func["stage"], stage, "{func}");
        f(&func["calls"])
    };
    for (name, stage) in [
        ("crypto/internal/fips140/mlkem.parseEK", "derive"),
        ("crypto/mlkem.(*EncapsulationKey768).Encapsulate", "derive"),
        ("crypto/internal/fips140/mlkem.kemKeyGen", "keygen"),
        ("crypto/mlkem.(*DecapsulationKey768).Decapsulate", "derive"),
    ] {
        assert_eq!(calls(name, stage), 300.0, "{name}\n{summary}");
    }
    // The hybrid's cost split into its ML-KEM and X25519 halves: together, the key exchange stages' CPU.
    let hybrid = advice(&r, "hybrid_key_exchange");
    let evidence = hybrid["evidence"].as_str().unwrap();
    let figure = |after: &str| -> f64 {
        let rest = &evidence[evidence.find(after).unwrap_or_else(|| panic!("{evidence}")) + after.len()..];
        rest.split(' ').next().unwrap().parse().unwrap()
    };
    let (mlkem_us, x25519_us) = (figure("of which ML-KEM "), figure(" and X25519 "));
    let kx_us = (f(&stage(&r, "keygen")["self_cpu_ms"]) + f(&stage(&r, "derive")["self_cpu_ms"])) * 1e3 / 600.0;
    eprintln!("hybrid: ML-KEM {mlkem_us} µs + X25519 {x25519_us} µs per handshake; keygen + derive {kx_us:.1} µs");
    assert!(mlkem_us > 0.0 && x25519_us > 0.0, "{evidence}");
    assert!(
        (mlkem_us + x25519_us - kx_us).abs() <= 1.5,
        "{evidence} vs {kx_us:.1} µs"
    );
    assert!(server.0.try_wait().unwrap().is_none(), "the server died");
}

/// examples/go/server built as `name` in target/go-examples with extra `go build` arguments and environment.
fn go_build_server_variant(name: &str, args: &[&str], env: &[(&str, &str)]) -> std::path::PathBuf {
    let out = repo().join("target/go-examples").join(name);
    let built = run(Command::new(go_tool())
        .current_dir(repo().join("examples/go"))
        .envs(env.iter().copied())
        .args(["build", "-o"])
        .arg(&out)
        .args(args)
        .arg("./server"));
    assert!(
        built.status.success(),
        "go build {name}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    out
}

#[test]
fn go_built_as_pie_and_with_cgo_is_profiled() {
    if !require_root("go_built_as_pie_and_with_cgo_is_profiled") {
        return;
    }
    let client = go_build("client", None, false);
    let variants = [
        // Loaded at a random base: every address tlsprof takes from the file is moved by it.
        (go_build_server_variant("server-pie", &["-buildmode=pie"], &[]), "pie"),
        // Linked with libc (net's cgo resolver): threads made by pthread_create.
        (
            go_build_server_variant("server-cgo", &[], &[("CGO_ENABLED", "1")]),
            "cgo",
        ),
    ];
    for (server_bin, kind) in variants {
        let elf = fs_read_head(&server_bin);
        let (ty, interp) = (
            u16::from_le_bytes([elf[16], elf[17]]),
            elf.windows(8).any(|w| w == b"ld-linux"),
        );
        assert!(
            if kind == "pie" { ty == 3 } else { ty == 2 && interp },
            "{kind}: ELF type {ty}"
        );
        let scratch = Scratch::new(&format!("go-{kind}"));
        let (mut server, addr) = start_go_server(&server_bin, &["-key", "ecdsa"]);
        let cpus = cpus();
        pin(server.pid(), cpus.server);
        let recording = scratch.path("go.tlsprof");
        let rec = Recorder::start(&["--pid", &server.pid().to_string(), "-o", recording.to_str().unwrap()]);
        let full = go_client(&client, &addr, &["-n", "300", "-workers", "2"], cpus.client);
        let resumed = go_client(&client, &addr, &["-n", "200", "-resume", "-workers", "2"], cpus.client);
        let summary = rec.interrupt();
        eprintln!("{summary}");
        let r = report_json(&recording);
        let hs = &r["handshakes"];
        let connections = n(&full["connections"]) + n(&resumed["connections"]);
        eprintln!(
            "{kind}: clients {connections} connections, {} resumed; tlsprof {} handshakes, {} resumed",
            resumed["resumed"], hs["total"], hs["resumed"]
        );
        assert_eq!(f(&hs["total"]), connections as f64, "{summary}");
        assert_eq!(f(&hs["resumed"]), f(&resumed["resumed"]), "{summary}");
        assert_eq!(f(&stage(&r, "sign")["calls"]), f(&hs["full"]), "{summary}");
        assert_eq!(
            certificate_keys(&r, "server", false).keys().collect::<Vec<_>>(),
            ["ECDSA P-256"],
            "{summary}"
        );
        let folded = run(tlsprof().args(["flamegraph", "--folded"]).arg(&recording));
        let folded = String::from_utf8_lossy(&folded.stdout);
        assert!(
            folded.lines().any(
                |l| l.contains("runtime.goexit;") && l.contains(";crypto/tls.(*Conn).serverHandshake [handshake];")
            ),
            "{kind}: no named Go stack through the handshake:\n{folded}"
        );
        assert!(server.0.try_wait().unwrap().is_none(), "the {kind} server died");
    }
}

/// The first bytes of a file: its ELF header and, in an executable, the interpreter's path soon after.
fn fs_read_head(path: &Path) -> Vec<u8> {
    let mut head = vec![0u8; 4096];
    let n = std::io::Read::read(&mut std::fs::File::open(path).unwrap(), &mut head).unwrap();
    head.truncate(n);
    head
}
