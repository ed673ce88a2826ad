// SPDX-License-Identifier: Apache-2.0
//! Live: `tlsprof serve --web.config.file` (TLS and basic auth, as the Prometheus exporter-toolkit configures
//! them), checked with curl, and a real Parca (v0.28.0, built from examples/parca's module) scraping it over
//! TLS with basic auth, on an nginx under a bounded full-handshake load, as it scrapes a Go service
//! (`/debug/pprof/profile?seconds=N`, every N s), with examples/parca/parca.yaml's profiling configuration.
//! Parca's query API must return the stored scrapes, the TLS stages' frames in the merged top list, and the
//! sign stage's CPU over the scraped windows as serve's metrics count it (exact mode, so that both are sums
//! of the same measured figures). A client certificate, where the file requires one, is verified. Needs root.
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use common::*;

/// Parca's scrape interval, and the seconds it asks for.
const SCRAPE_SECS: u64 = 5;
const LOAD_SECS: u32 = 10;

const USER: &str = "scraper";
const PASSWORD: &str = "s3cret-for-tests";

/// A web configuration for serve in `dir`: a certificate for 127.0.0.1 and its key, `USER` with `PASSWORD`
/// (hashed by htpasswd), and `extra` lines under tls_server_config.
fn web_config(dir: &Path, extra: &str) -> PathBuf {
    openssl(dir, &format!("req -x509 {EC_KEY} -keyout server.key -out server.pem -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1"));
    let hashed = run(Command::new("htpasswd").args(["-nbB", "-C", "10", USER, PASSWORD]));
    assert!(
        hashed.status.success(),
        "htpasswd (apache2-utils): {}",
        String::from_utf8_lossy(&hashed.stderr)
    );
    let line = String::from_utf8(hashed.stdout).unwrap();
    let hash = line.trim().split_once(':').unwrap().1.to_string();
    let path = dir.join("web.yml");
    std::fs::write(
        &path,
        format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n{extra}basic_auth_users:\n  {USER}: '{hash}'\n"
        ),
    )
    .unwrap();
    path
}

/// A new EC P-256 key, unencrypted, for `openssl req`.
const EC_KEY: &str = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";

/// Runs openssl in `dir` with `command`'s words as its arguments.
fn openssl(dir: &Path, command: &str) {
    let args: Vec<&str> = command.split_whitespace().collect();
    let out = run(Command::new("openssl").current_dir(dir).args(&args));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// curl's status code for GET `path` on serve at `port` (000: no HTTP answer), with `args` besides.
fn curl(port: u16, scheme: &str, path: &str, args: &[&str]) -> String {
    let out = run(Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10"])
        .args(args)
        .arg(format!("{scheme}://127.0.0.1:{port}{path}")));
    String::from_utf8(out.stdout).unwrap()
}

/// Parca on loopback, its data in `dir`, scraping 127.0.0.1:`target` over TLS with basic auth (the
/// certificate and user of `web_config`), with examples/parca/parca.yaml's profiling configuration at
/// SCRAPE_SECS; killed on drop.
fn start_parca(dir: &Path, target: u16) -> (Running, u16) {
    let port = free_port();
    let example = std::fs::read_to_string(repo().join("examples/parca/parca.yaml")).unwrap();
    let config = example
        .replace("127.0.0.1:9465", &format!("127.0.0.1:{target}"))
        .replace(
            "scrape_interval: \"10s\"",
            &format!(
            "scrape_interval: \"{SCRAPE_SECS}s\"\n    scheme: https\n    tls_config:\n      ca_file: server.pem\n    \
                 basic_auth:\n      username: {USER}\n      password: {PASSWORD}"
        ),
        );
    assert_ne!(
        config, example,
        "examples/parca/parca.yaml no longer has the lines the test replaces"
    );
    std::fs::write(dir.join("parca.yaml"), config).unwrap();
    let child = Command::new(parca_build())
        .current_dir(dir)
        .args(["--config-path=parca.yaml", &format!("--http-address=127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("parca.log")).unwrap())
        .spawn()
        .unwrap();
    let parca = Running(child);
    wait_until_ready(port, "/api/profiles/types", "Parca", Duration::from_secs(60));
    (parca, port)
}

/// Parca's scrapes of tlsprof as its targets API tells of them: each ended scrape's start, and the last
/// error.
#[derive(Default)]
struct Scrapes {
    seen: Vec<String>,
}

impl Scrapes {
    /// Waits until `n` scrapes have ended, each of them without an error.
    fn wait(&mut self, parca: u16, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(SCRAPE_SECS * (n as u64 + 3) + 10);
        while self.seen.len() < n {
            let targets = parca_api(parca, "/api/targets", &[]);
            let target = &targets["targets"]["tlsprof"]["targets"][0];
            // The zero time until the first scrape has ended.
            if let Some(last) = target["lastScrape"].as_str().filter(|t| !t.starts_with("0001-")) {
                assert_eq!(
                    target["lastError"].as_str().unwrap_or(""),
                    "",
                    "Parca's scrape failed: {targets}"
                );
                if self.seen.last().is_none_or(|l| l != last) {
                    self.seen.push(last.to_string());
                }
            }
            assert!(
                Instant::now() < deadline,
                "Parca ended {} scrapes of tlsprof, not {n}, in time: {targets}",
                self.seen.len()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// RFC 3339 in UTC, as Parca's API reads timestamps.
fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn parca_api(port: u16, path: &str, params: &[(&str, &str)]) -> Value {
    let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={}", url_encode(v))).collect();
    let body = get_text(port, &format!("{path}?{}", query.join("&")));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

#[test]
fn parca_scrapes_serve_and_stores_the_stages_metrics_count() {
    if !require_root("parca_scrapes_serve_and_stores_the_stages_metrics_count") {
        return;
    }
    let scratch = Scratch::new("live-parca");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let listen = free_port();
    let mut args: Vec<String> = vec!["--max-overhead".into(), "100".into()];
    for pid in [vec![nginx.master], nginx.workers()].concat() {
        args.extend(["--pid".to_string(), pid.to_string()]);
    }
    let web = web_config(&scratch.0, "");
    args.extend(["--web.config.file".into(), web.display().to_string()]);
    let serve = Serving::start(listen, &args);
    assert!(
        serve.log.contains("https://") && serve.log.contains("TLS and basic auth"),
        "{}",
        serve.log
    );
    let ca = scratch.path("server.pem").display().to_string();
    let right = format!("{USER}:{PASSWORD}");
    assert_eq!(curl(listen, "http", "/metrics", &[]), "000", "plain HTTP answered");
    assert_eq!(
        curl(listen, "https", "/metrics", &["--cacert", &ca]),
        "401",
        "no password"
    );
    assert_eq!(
        curl(
            listen,
            "https",
            "/metrics",
            &["--cacert", &ca, "-u", &format!("{USER}:wrong")]
        ),
        "401"
    );
    assert_eq!(
        curl(listen, "https", "/metrics", &["--cacert", &ca, "-u", "nobody:nothing"]),
        "401"
    );
    assert_eq!(
        curl(listen, "https", "/metrics", &["--cacert", &ca, "-u", &right]),
        "200"
    );
    let from = SystemTime::now();
    let (_parca, parca) = start_parca(&scratch.0, listen);
    // The load comes once Parca has scraped once, so that the windows it scrapes next, back to back, hold all
    // of it; the query, once two more scrapes have ended after it: the one under way when it ended, and one
    // wholly after.
    let mut scrapes = Scrapes::default();
    scrapes.wait(parca, 1);
    let connections = s_time_new(nginx.port, LOAD_SECS);
    let after_load = scrapes.seen.len();
    scrapes.wait(parca, after_load + 2);
    let metrics = fetch(listen, &ca, &right, "/metrics");
    let until = SystemTime::now() + Duration::from_secs(1);
    let (start, end) = (rfc3339(from), rfc3339(until));

    let types = parca_api(parca, "/api/profiles/types", &[]);
    let cpu = types["types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "process_cpu" && t["sampleType"] == "cpu")
        .unwrap_or_else(|| panic!("no process_cpu profile of CPU ns stored: {types}"));
    assert_eq!(cpu["sampleUnit"], "nanoseconds", "{cpu}");
    let query = r#"process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta{job="tlsprof"}"#;

    let range = parca_api(
        parca,
        "/api/profiles/query_range",
        &[("query", query), ("start", &start), ("end", &end), ("step", "1s")],
    );
    let stored: Vec<&Value> = range["series"][0]["samples"]
        .as_array()
        .map_or(Vec::new(), |s| s.iter().collect());
    let secs = |s: &Value| {
        s["duration"]
            .as_str()
            .and_then(|d| d.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1e9
    };
    assert!(
        stored.len() >= LOAD_SECS as usize / SCRAPE_SECS as usize,
        "Parca stored {} scrapes of a {LOAD_SECS} s load scraped every {SCRAPE_SECS} s: {range}",
        stored.len()
    );
    for s in &stored {
        // Each holds the SCRAPE_SECS after its request, cut within a poll of the session at either end.
        assert!(
            (SCRAPE_SECS as f64 - 0.5..SCRAPE_SECS as f64 + 0.5).contains(&secs(s)),
            "a stored scrape of {} s, asked for {SCRAPE_SECS} s: {range}",
            secs(s)
        );
    }

    let top = parca_api(
        parca,
        "/api/profiles/query",
        &[
            ("mode", "MODE_MERGE"),
            ("merge.query", query),
            ("merge.start", &start),
            ("merge.end", &end),
            ("reportType", "REPORT_TYPE_TOP"),
        ],
    );
    let stage_ns = |stage: &str| -> f64 {
        let tag = format!(" [{stage}]");
        top["top"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| {
                n["meta"]["function"]["name"]
                    .as_str()
                    .is_some_and(|f| f.ends_with(&tag))
            })
            .filter_map(|n| n["cumulative"].as_str()?.parse::<f64>().ok())
            .sum()
    };
    for stage in ["handshake", "keygen", "derive"] {
        assert!(
            stage_ns(stage) > 0.0,
            "no {stage} stage frame in Parca's merged top list: {top}"
        );
    }
    // Each window's CPU: its targets' own (their CPU clocks less the probes' cost), as tlsprof serves it.
    let parca_cpu_s: f64 = stored
        .iter()
        .filter_map(|s| s["value"].as_str()?.parse::<f64>().ok())
        .sum::<f64>()
        / 1e9;
    let parca_sign_s = stage_ns("sign") / 1e9;
    let metrics_sign_s = scraped_where(&metrics, "tlsprof_stage_cpu_seconds_total", "stage=\"sign\"");
    let metrics_cpu_s =
        scraped(&metrics, "tlsprof_target_cpu_seconds_total") - scraped(&metrics, "tlsprof_probe_cpu_seconds_total");
    let share = |sign: f64, cpu: f64| sign / cpu;
    eprintln!(
        "{connections} connections; Parca stored {} scrapes ({:.2} s in all); sign stage: {parca_sign_s:.3} s in \
         Parca, {metrics_sign_s:.3} s by serve's metrics ({:+.1}%); sign's share of the targets' CPU {:.2}% in \
         Parca, {:.2}% by the metrics",
        stored.len(),
        stored.iter().map(|s| secs(s)).sum::<f64>(),
        100.0 * (parca_sign_s / metrics_sign_s - 1.0),
        100.0 * share(parca_sign_s, parca_cpu_s),
        100.0 * share(metrics_sign_s, metrics_cpu_s),
    );
    assert!(metrics_sign_s > 0.0, "no sign stage CPU in the metrics:\n{metrics}");
    // The windows are disjoint (nothing counted twice) and hold most of the load: they leave out only what
    // ran between a response and Parca's next request (it stores each profile first).
    assert!(
        (0.8..1.005).contains(&(parca_sign_s / metrics_sign_s)),
        "sign stage CPU: {parca_sign_s:.3} s in Parca, {metrics_sign_s:.3} s by serve's metrics\n{metrics}"
    );
    // What the windows hold, they hold as the metrics count it: the same share of the same steady load.
    assert!(
        (share(parca_sign_s, parca_cpu_s) / share(metrics_sign_s, metrics_cpu_s) - 1.0).abs() < 0.03,
        "sign stage CPU over the targets' own: {parca_sign_s:.3} s of {parca_cpu_s:.3} s in Parca, \
         {metrics_sign_s:.3} s of {metrics_cpu_s:.3} s by serve's metrics\n{metrics}"
    );
    serve.stop();
}

/// GET `path` over TLS with basic auth: the body.
fn fetch(port: u16, ca: &str, user: &str, path: &str) -> String {
    let out = run(Command::new("curl")
        .args(["-sf", "--max-time", "10", "--cacert", ca, "-u", user])
        .arg(format!("https://127.0.0.1:{port}{path}")));
    assert!(
        out.status.success(),
        "curl {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn serve_takes_only_clients_whose_certificate_it_verifies_when_asked() {
    if !require_root("serve_takes_only_clients_whose_certificate_it_verifies_when_asked") {
        return;
    }
    let scratch = Scratch::new("serve-mtls");
    let dir = &scratch.0;
    openssl(
        dir,
        &format!("req -x509 {EC_KEY} -keyout ca.key -out ca.pem -days 2 -subj /CN=tlsprof-test-CA"),
    );
    openssl(
        dir,
        "req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout client.key -out client.csr -subj /CN=scraper",
    );
    std::fs::write(
        dir.join("client.ext"),
        "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        "x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile client.ext",
    );
    // A client certificate signed by another CA: refused as one with none is.
    openssl(
        dir,
        &format!("req -x509 {EC_KEY} -keyout stranger.key -out stranger.pem -days 2 -subj /CN=stranger"),
    );
    let web = web_config(
        dir,
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n  min_version: TLS13\n",
    );
    let nginx = Nginx::start(&scratch.path("nginx"), &[]);
    let listen = free_port();
    let serve = Serving::start(
        listen,
        &[
            "--pid".into(),
            nginx.workers()[0].to_string(),
            "--web.config.file".into(),
            web.display().to_string(),
        ],
    );
    let ca = scratch.path("server.pem").display().to_string();
    let user = format!("{USER}:{PASSWORD}");
    let with = |cert: &str, key: &str, more: &[&str]| {
        let (cert, key) = (scratch.path(cert), scratch.path(key));
        let mut args = vec!["--cacert".to_string(), ca.clone(), "-u".into(), user.clone()];
        args.extend(["--cert".to_string(), cert.display().to_string()]);
        args.extend(["--key".to_string(), key.display().to_string()]);
        args.extend(more.iter().map(|s| s.to_string()));
        curl(
            listen,
            "https",
            "/metrics",
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        curl(listen, "https", "/metrics", &["--cacert", &ca, "-u", &user]),
        "000",
        "no client certificate"
    );
    assert_eq!(
        with("stranger.pem", "stranger.key", &[]),
        "000",
        "a certificate of another CA"
    );
    assert_eq!(
        with("client.pem", "client.key", &["--tls-max", "1.2"]),
        "000",
        "TLS 1.2 below min_version"
    );
    assert_eq!(with("client.pem", "client.key", &[]), "200");
    serve.stop();
}
