// SPDX-License-Identifier: Apache-2.0
//! Live: `tlsprof serve` on an nginx under a bounded full-handshake load, scraped by a real Prometheus
//! (Debian's package, on loopback with its own configuration and data directory): the handshakes it
//! stores match the clients' count within the default mode's bounds and inside the interval tlsprof
//! states, the sign stage's CPU is there, `promtool check metrics` accepts a scrape, `go tool pprof`
//! reads `/profile?seconds=2`, and a profile scraper's `/debug/pprof/profile?seconds=1` is answered after the
//! next second, as Go's net/http/pprof answers it (needs root).
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::*;

/// Load on nginx, as the 10 s default-mode test's, a little longer so that it spans several intervals.
const LOAD_SECS: u32 = 20;
/// The bound the default-mode tests hold a 10 s recording to (tests/live_default_mode.rs).
const TOLERANCE: f64 = 0.10;

/// An instant query of Prometheus' HTTP API: the value of its one series, or None when it has none.
fn query(port: u16, promql: &str) -> Option<f64> {
    let body = get_text(port, &format!("/api/v1/query?query={}", url_encode(promql)));
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success", "{body}");
    let result = v["data"]["result"].as_array().unwrap();
    assert!(result.len() <= 1, "{promql}: {body}");
    result.first().map(|r| r["value"][1].as_str().unwrap().parse().unwrap())
}

/// Prometheus scraping tlsprof on `target` every second; killed on drop.
fn start_prometheus(dir: &Path, target: u16) -> (Running, u16) {
    let port = free_port();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: tlsprof\n    \
             static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        ),
    )
    .unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus (Debian's package) runs: scripts/install-deps.sh installs it");
    let prometheus = Running(child);
    wait_until_ready(port, "/-/ready", "prometheus", Duration::from_secs(30));
    (prometheus, port)
}

#[test]
fn prometheus_scrapes_serve_handshakes_within_the_default_modes_bounds() {
    if !require_root("prometheus_scrapes_serve_handshakes_within_the_default_modes_bounds") {
        return;
    }
    let scratch = Scratch::new("live-serve");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let listen = free_port();
    let mut args = Vec::new();
    for pid in [vec![nginx.master], nginx.workers()].concat() {
        args.extend(["--pid".to_string(), pid.to_string()]);
    }
    let serve = Serving::start(listen, &args);
    assert_eq!(get(listen, "/profile?seconds=61").0, 400);
    assert_eq!(get(listen, "/nothing").0, 404);
    // What profile scrapers ask for by default besides CPU is refused at once.
    let asked = Instant::now();
    assert_eq!(get(listen, "/debug/pprof/allocs").0, 404);
    assert!(asked.elapsed() < Duration::from_secs(5));
    let (_prometheus, prom) = start_prometheus(&scratch.0, listen);

    let connections = s_time_new(nginx.port, LOAD_SECS);

    // Every connection is in the counters once two intervals have passed with no new one (the counters
    // move an interval at a time); then Prometheus has it once it has scraped the last of them.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut settled, mut last, mut trace) = (None, (0.0, 0.0), Vec::new());
    let metrics = loop {
        assert!(
            Instant::now() < deadline,
            "the counters did not settle in 60 s (connections, intervals each 0.5 s: {trace:?}):\n{}",
            serve.log
        );
        std::thread::sleep(Duration::from_millis(500));
        let m = get_text(listen, "/metrics");
        let now = (
            scraped(&m, "tlsprof_connections_total"),
            scraped(&m, "tlsprof_intervals_total"),
        );
        trace.push(now);
        if now.0 != last.0 {
            settled = Some(now.1);
        }
        last = now;
        if settled.is_some_and(|at| now.1 >= at + 2.0) {
            break m;
        }
    };
    let intervals = scraped(&metrics, "tlsprof_intervals_total");
    let deadline = Instant::now() + Duration::from_secs(20);
    // Later intervals add nothing: the load is over.
    while query(prom, "sum(tlsprof_intervals_total)").is_none_or(|v| v < intervals) {
        assert!(Instant::now() < deadline, "Prometheus did not scrape tlsprof in 20 s");
        std::thread::sleep(Duration::from_millis(500));
    }

    let total = query(prom, "sum(tlsprof_handshakes_total)").expect("tlsprof_handshakes_total");
    let lower = query(prom, "sum(tlsprof_handshakes_ci95_lower)").unwrap();
    let upper = query(prom, "sum(tlsprof_handshakes_ci95_upper)").unwrap();
    let counted = query(prom, "sum(tlsprof_connections_total)").unwrap();
    let estimated = query(prom, "sum(tlsprof_intervals_total{estimated=\"true\"})").unwrap_or(0.0);
    eprintln!(
        "handshakes: {connections} by the clients; Prometheus has {total:.0} [{lower:.0}, {upper:.0}] ({:+.1}%), \
         {counted} connections counted, {intervals} intervals ({estimated} estimated)",
        100.0 * (total / connections as f64 - 1.0)
    );
    assert!(
        estimated >= 1.0,
        "no interval was estimated: the probes stayed attached\n{metrics}"
    );
    assert_estimate(
        "handshakes in Prometheus",
        total,
        [lower, upper],
        connections,
        TOLERANCE,
        &metrics,
    );
    let sign = query(prom, "sum(tlsprof_stage_cpu_seconds_total{stage=\"sign\"})").expect("the sign stage's CPU");
    assert!(sign > 0.0, "sign stage CPU {sign}");
    let per_handshake = query(prom, "sum(tlsprof_handshake_cpu_seconds_count)").unwrap();
    assert!(per_handshake > 0.0, "no handshake in the CPU histogram");

    let scrape = scratch.path("scrape.txt");
    std::fs::write(&scrape, &metrics).unwrap();
    let check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&scrape).unwrap())
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );

    let (status, gz) = get(listen, "/profile?seconds=2");
    assert_eq!(status, 200);
    let profile = scratch.path("profile.pb.gz");
    std::fs::write(&profile, gz).unwrap();
    if let Some(go) = go() {
        let out = Command::new(go)
            .args(["tool", "pprof", "-top"])
            .arg(&profile)
            .env("PPROF_TMPDIR", &scratch.0)
            .output()
            .unwrap();
        let top = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && top.contains("Type: cpu") && top.contains("flat%"),
            "go tool pprof -top: {top}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // A profile scraper's request: the next second, as Go's net/http/pprof answers it. After the load, so
    // that the intervals it cuts do not change the estimates checked above (tests/live_parca.rs scrapes
    // during a load, in exact mode).
    let asked = Instant::now();
    let (status, head, body) = get_with_head(listen, "/debug/pprof/profile?seconds=1");
    let took = asked.elapsed();
    assert_eq!(status, 200, "{head}\n{}", String::from_utf8_lossy(&body));
    for h in [
        "Content-Type: application/octet-stream",
        "Content-Disposition: attachment; filename=\"profile\"",
    ] {
        assert!(head.contains(h), "no {h}: {head}");
    }
    assert!(
        took >= Duration::from_secs(1),
        "answered after {took:?}, before the second had passed"
    );
    assert_eq!(&body[..2], &[0x1f, 0x8b], "not gzipped");

    // SIGTERM ends it, cleanly.
    serve.stop();
}
