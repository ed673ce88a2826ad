// SPDX-License-Identifier: Apache-2.0
//! Continuous mode (`tlsprof serve`): a recording session that hands over an interval every few seconds.
//! Each interval's summary is added into the metrics; the last minute of intervals is kept for profiles.
//! A small HTTP server serves `/metrics` (Prometheus text format), `/debug/pprof/profile?seconds=N` (pprof,
//! as Go's net/http/pprof serves it: the next N seconds, which is what profile scrapers ask for) and
//! `/profile?seconds=N` (pprof, the last N seconds at once). Memory stays bounded however long it runs: the
//! session starts each interval's figures from none, and only the metrics' bounded label sets and a minute
//! of intervals are kept.

pub mod metrics;
pub mod web;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use crate::analyze::summarize;
use crate::model::Recording;
use crate::output::{pprof, prometheus};
use crate::record::targets::Process;
use crate::record::{self, RecordOptions, Snapshots};
use metrics::Metrics;

/// How often an interval is added into the metrics: what a scrape's counters lag behind by, at most (plus
/// the wait for a probe window).
pub const INTERVAL: Duration = Duration::from_secs(5);
/// The longest profile served, in seconds.
pub const MAX_PROFILE_S: u64 = 60;
/// A profile's length when the request names none, or none above zero (as Go's net/http/pprof).
const DEFAULT_PROFILE_S: u64 = 30;
/// Intervals are kept this long after they end: a profile of the next MAX_PROFILE_S seconds still finds its
/// first one when its last ends.
const KEEP: Duration = Duration::from_secs(MAX_PROFILE_S + 2 * INTERVAL.as_secs());
/// A profile of the next N seconds waits at most this long past them for the interval that ends them (the
/// session polls every few tens of milliseconds; it stalls only when something is wrong).
const PROFILE_GRACE: Duration = Duration::from_secs(5);
/// Profiles of the next N seconds being recorded at once, at most: each holds a thread and a connection.
const MAX_PROFILES_AT_ONCE: usize = 8;
/// The profile paths Go services serve and scrapers ask for by default, which tlsprof does not record.
const NOT_RECORDED: [&str; 7] = [
    "/debug/pprof/allocs",
    "/debug/pprof/heap",
    "/debug/pprof/block",
    "/debug/pprof/goroutine",
    "/debug/pprof/mutex",
    "/debug/pprof/threadcreate",
    "/debug/fgprof",
];

/// An interval handed over by the session, and when (tlsprof's monotonic clock) it began and ended.
struct Kept {
    start: Instant,
    end: Instant,
    rec: Arc<Recording>,
}

struct Served {
    metrics: String,
    /// The intervals that ended in the last KEEP, oldest first.
    recent: VecDeque<Kept>,
    /// When the last interval ended: the next one's start.
    last_end: Instant,
    /// Interval boundaries asked for by profiles of the next N seconds, not yet reached.
    cuts: Vec<Instant>,
    /// The session has ended: no interval will come.
    ended: bool,
}

impl Served {
    fn new(now: Instant) -> Served {
        Served {
            metrics: String::new(),
            recent: VecDeque::new(),
            last_end: now,
            cuts: Vec::new(),
            ended: false,
        }
    }

    fn keep(&mut self, rec: Recording, now: Instant) {
        self.recent.push_back(Kept {
            start: self.last_end,
            end: now,
            rec: Arc::new(rec),
        });
        self.last_end = now;
        while self.recent.len() > 1 && self.recent.front().is_some_and(|k| k.end + KEEP < now) {
            self.recent.pop_front();
        }
    }

    /// Whether a boundary asked for is due at `now` (each is reached once).
    fn cut_due(&mut self, now: Instant) -> bool {
        let before = self.cuts.len();
        self.cuts.retain(|&c| c > now);
        self.cuts.len() < before
    }

    /// The intervals that began at or after `from` and ended by the first end at or after `until`: None
    /// until that interval has ended.
    fn between(&self, from: Instant, until: Instant) -> Option<Vec<Arc<Recording>>> {
        let last = self.recent.iter().find(|k| k.end >= until)?.end;
        Some(
            self.recent
                .iter()
                .filter(|k| k.start >= from && k.end <= last)
                .map(|k| k.rec.clone())
                .collect(),
        )
    }
}

struct Shared {
    served: Mutex<Served>,
    profiles_at_once: AtomicUsize,
    auth: Option<web::BasicAuth>,
}

impl Shared {
    fn served(&self) -> std::sync::MutexGuard<'_, Served> {
        self.served.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Listens on `listen` (with the TLS and basic auth `web` asks for), then records the targets until `stop`,
/// serving what it has so far.
pub fn serve(
    listen: &str,
    web: Option<web::WebConfig>,
    procs: &[Process],
    opts: &RecordOptions,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    allocator::fix_thresholds();
    let (tls, auth) = web.map_or((None, None), |w| (w.tls, w.auth));
    let front_stop = Arc::new(AtomicBool::new(false));
    let (server, scheme, private_dir) = match tls {
        None => {
            let server = tiny_http::Server::http(listen).map_err(|e| anyhow!("cannot listen on {listen}: {e}"))?;
            (server, "http", None)
        }
        Some(config) => {
            let listener =
                std::net::TcpListener::bind(listen).map_err(|e| anyhow!("cannot listen on {listen}: {e}"))?;
            let dir = private_dir()?;
            let socket = dir.join("http.sock");
            let server = tiny_http::Server::http_unix(&socket)
                .map_err(|e| anyhow!("cannot listen on {}: {e}", socket.display()))?;
            let stop = front_stop.clone();
            std::thread::spawn(move || web::front(listener, config, socket, stop));
            (server, "https", Some(dir))
        }
    };
    let server = Arc::new(server);
    let protection = match (scheme, &auth) {
        ("http", None) => format!(
            "; plain HTTP without authentication: anyone who reaches {listen} reads the targets' profiles and metrics \
             (--web.config.file sets TLS and basic auth)"
        ),
        ("http", Some(_)) => "; basic auth required, over plain HTTP: passwords and profiles cross the network \
                               in the clear (tls_server_config)"
            .to_string(),
        (_, None) => "; TLS, without basic auth".to_string(),
        (_, Some(_)) => "; TLS and basic auth".to_string(),
    };
    let shared = Arc::new(Shared {
        served: Mutex::new(Served::new(Instant::now())),
        profiles_at_once: AtomicUsize::new(0),
        auth,
    });
    eprintln!(
        "tlsprof: serving /metrics, /debug/pprof/profile and /profile on {scheme}://{listen} (figures every {} s){protection}",
        INTERVAL.as_secs()
    );
    let http = {
        let (server, shared) = (server.clone(), shared.clone());
        std::thread::spawn(move || {
            for request in server.incoming_requests() {
                respond(request, &shared);
            }
        })
    };
    let mut metrics = Metrics::default();
    let mut take = |rec: Recording| {
        metrics.add(&rec, &summarize(&rec));
        let text = metrics.render();
        let mut s = shared.served();
        s.metrics = text;
        s.keep(rec, Instant::now());
        drop(s);
        allocator::release_freed_memory();
    };
    let cut = || shared.served().cut_due(Instant::now());
    let result = record::serve(
        procs,
        opts,
        stop,
        Snapshots {
            every: INTERVAL,
            cut: &cut,
            take: &mut take,
        },
    );
    shared.served().ended = true;
    front_stop.store(true, Ordering::Relaxed);
    server.unblock();
    let _ = http.join();
    if let Some(dir) = private_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    // Profiles still waiting answer that the session ended.
    let deadline = Instant::now() + Duration::from_secs(1);
    while shared.profiles_at_once.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    result
}

/// Each interval's figures and each profile come and go at sizes of their own, and glibc's allocator keeps
/// what they freed: the holes left in its heaps, and the free space at the top of each thread's heap, stay
/// resident once touched, so a run of hours would keep more and more of them. Its thresholds are fixed at
/// their defaults (freeing a large block would otherwise raise them to its size: blocks that large would then
/// come from the heaps, and no top smaller than twice that would be given back), and after each interval the
/// free pages inside the heaps are handed back.
#[cfg(target_env = "gnu")]
mod allocator {
    const THRESHOLD: libc::c_int = 128 * 1024;

    pub fn fix_thresholds() {
        // SAFETY: mallopt only sets glibc's allocator parameters, under its own lock.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD);
            libc::mallopt(libc::M_TRIM_THRESHOLD, THRESHOLD);
        }
    }

    pub fn release_freed_memory() {
        // SAFETY: malloc_trim only walks glibc's own free lists, under the arenas' locks.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

#[cfg(not(target_env = "gnu"))]
mod allocator {
    pub fn fix_thresholds() {}
    pub fn release_freed_memory() {}
}

fn span<'a>(recs: impl Iterator<Item = &'a Arc<Recording>>) -> f64 {
    recs.map(|r| r.duration_s).sum()
}

fn header(k: &str, v: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("valid header")
}

fn text(status: u16, body: String) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    tiny_http::Response::from_string(body)
        .with_status_code(status)
        .with_header(header("Content-Type", "text/plain; charset=utf-8"))
        .with_header(header("X-Content-Type-Options", "nosniff"))
}

/// A pprof profile as Go's net/http/pprof sends one, or the reason there is none.
fn profile_response(profile: Result<Vec<u8>, (u16, String)>) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    match profile {
        Ok(bytes) => tiny_http::Response::from_data(bytes)
            .with_header(header("Content-Type", "application/octet-stream"))
            .with_header(header("Content-Disposition", "attachment; filename=\"profile\""))
            .with_header(header("X-Content-Type-Options", "nosniff")),
        Err((status, why)) => text(status, format!("{why}\n")),
    }
}

/// A directory only its owner (root) can enter, for the HTTP server's Unix socket behind the TLS front; its
/// name random, so that nobody can have made it first.
fn private_dir() -> Result<std::path::PathBuf> {
    use ring::rand::SecureRandom;
    use std::os::unix::fs::DirBuilderExt;
    let mut name = [0u8; 8];
    ring::rand::SystemRandom::new()
        .fill(&mut name)
        .map_err(|_| anyhow!("no random bytes for a private directory's name"))?;
    let hex: String = name.iter().map(|b| format!("{b:02x}")).collect();
    let dir = std::env::temp_dir().join(format!("tlsprof-serve-{hex}"));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| anyhow!("cannot make {}: {e}", dir.display()))?;
    Ok(dir)
}

fn respond(request: tiny_http::Request, shared: &Arc<Shared>) {
    if let Some(auth) = &shared.auth {
        let given = request
            .headers()
            .iter()
            .find(|h| h.field.equiv("Authorization"))
            .map(|h| h.value.as_str().to_string());
        if !auth.allows(given.as_deref()) {
            let response = text(401, "basic auth required\n".into())
                .with_header(header("WWW-Authenticate", "Basic realm=\"tlsprof\""));
            let _ = request.respond(response);
            return;
        }
    }
    let url = request.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let response = match path {
        "/metrics" => {
            let body = shared.served().metrics.clone();
            tiny_http::Response::from_string(body).with_header(header("Content-Type", prometheus::CONTENT_TYPE))
        }
        "/profile" => profile_response(seconds(query).and_then(|n| last_seconds(n, shared))),
        "/debug/pprof/profile" => match seconds(query) {
            Err(e) => profile_response(Err(e)),
            Ok(n) => return next_seconds_in_background(request, n, shared),
        },
        p if NOT_RECORDED.contains(&p) => text(
            404,
            format!(
                "{p}: tlsprof records CPU profiles only (/debug/pprof/profile); turn the other profiles off in the scraper's configuration\n"
            ),
        ),
        _ => text(
            404,
            "tlsprof serves /metrics, /debug/pprof/profile?seconds=N and /profile?seconds=N\n".into(),
        ),
    };
    let _ = request.respond(response);
}

/// The `seconds` of a profile request, as Go's net/http/pprof reads it: missing, or not above zero, is
/// DEFAULT_PROFILE_S.
fn seconds(query: &str) -> Result<u64, (u16, String)> {
    let Some(v) = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find_map(|(k, v)| (k == "seconds").then_some(v))
    else {
        return Ok(DEFAULT_PROFILE_S);
    };
    match v.parse::<i64>() {
        Ok(n) if n <= 0 => Ok(DEFAULT_PROFILE_S),
        Ok(n) if n as u64 <= MAX_PROFILE_S => Ok(n as u64),
        Ok(_) => Err((
            400,
            format!("seconds={v}: tlsprof serves profiles of at most {MAX_PROFILE_S} s"),
        )),
        Err(_) => Err((400, format!("seconds={v:.20}: give a whole number of seconds"))),
    }
}

/// The pprof profile of the last `seconds` (whole intervals, at least that long when that much was kept).
fn last_seconds(seconds: u64, shared: &Shared) -> Result<Vec<u8>, (u16, String)> {
    let recent: Vec<Arc<Recording>> = {
        let s = shared.served();
        let mut taken = Vec::new();
        for k in s.recent.iter().rev() {
            if span(taken.iter()) >= seconds as f64 {
                break;
            }
            taken.push(k.rec.clone());
        }
        taken
    };
    if recent.is_empty() {
        return Err((
            503,
            format!(
                "no interval recorded yet: the first comes {} s after start",
                INTERVAL.as_secs()
            ),
        ));
    }
    let rec = Recording::merge(&recent);
    Ok(pprof::pprof(&rec, &summarize(&rec)))
}

/// Answers a profile of the next `seconds` from a thread of its own once they have been recorded, so that
/// /metrics is served meanwhile.
fn next_seconds_in_background(request: tiny_http::Request, seconds: u64, shared: &Arc<Shared>) {
    if shared.profiles_at_once.fetch_add(1, Ordering::AcqRel) >= MAX_PROFILES_AT_ONCE {
        shared.profiles_at_once.fetch_sub(1, Ordering::AcqRel);
        let why = format!("{MAX_PROFILES_AT_ONCE} profiles are being recorded already: ask again later");
        let _ = request.respond(profile_response(Err((503, why))));
        return;
    }
    let shared = shared.clone();
    std::thread::spawn(move || {
        let profile = next_seconds(seconds, &shared);
        let _ = request.respond(profile_response(profile));
        shared.profiles_at_once.fetch_sub(1, Ordering::AcqRel);
    });
}

/// The pprof profile of the next `seconds`: the session ends an interval now and another once they have
/// passed, and the profile is the intervals between (to within a poll of the session at each end). Scrapers
/// that ask every N seconds for N seconds then get each stretch once.
fn next_seconds(seconds: u64, shared: &Shared) -> Result<Vec<u8>, (u16, String)> {
    let from = Instant::now();
    let until = from + Duration::from_secs(seconds);
    shared.served().cuts.extend([from, until]);
    let recs = loop {
        std::thread::sleep(Duration::from_millis(50));
        let s = shared.served();
        if let Some(recs) = s.between(from, until) {
            break recs;
        }
        if s.ended {
            return Err((503, "tlsprof serve is stopping".into()));
        }
        if Instant::now() > until + PROFILE_GRACE {
            return Err((
                503,
                format!(
                    "no interval ended within {} s of the profile's end",
                    PROFILE_GRACE.as_secs()
                ),
            ));
        }
    };
    if recs.is_empty() {
        return Err((503, "no interval was recorded in those seconds".into()));
    }
    let rec = Recording::merge(&recs);
    Ok(pprof::pprof(&rec, &summarize(&rec)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::sample_recording;

    fn shared() -> Shared {
        Shared {
            served: Mutex::new(Served::new(Instant::now())),
            profiles_at_once: AtomicUsize::new(0),
            auth: None,
        }
    }

    #[test]
    fn profile_seconds_read_as_go_reads_them() {
        assert_eq!(seconds(""), Ok(DEFAULT_PROFILE_S));
        assert_eq!(seconds("debug=1"), Ok(DEFAULT_PROFILE_S));
        assert_eq!(seconds("seconds=0"), Ok(DEFAULT_PROFILE_S));
        assert_eq!(seconds("seconds=-3"), Ok(DEFAULT_PROFILE_S));
        assert_eq!(seconds("seconds=14"), Ok(14));
        assert_eq!(seconds(&format!("seconds={MAX_PROFILE_S}")), Ok(MAX_PROFILE_S));
        assert_eq!(seconds("seconds=61").unwrap_err().0, 400);
        assert_eq!(seconds("seconds=x").unwrap_err().0, 400);
    }

    #[test]
    fn the_last_seconds_need_an_interval() {
        let shared = shared();
        assert_eq!(last_seconds(5, &shared).unwrap_err().0, 503);
        shared.served().keep(sample_recording(), Instant::now());
        let gz = last_seconds(5, &shared).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    }

    #[test]
    fn the_next_seconds_are_the_intervals_cut_at_both_ends() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut s = Served::new(t0);
        let from = at(3_000);
        let until = at(5_000);
        s.cuts.extend([from, until]);
        assert!(!s.cut_due(at(2_990)));
        // The interval under way when the profile was asked for ends at the session's next poll, after it.
        s.keep(sample_recording(), at(2_500));
        assert!(s.cut_due(at(3_040)));
        assert!(!s.cut_due(at(3_090)));
        s.keep(sample_recording(), at(3_040));
        s.keep(sample_recording(), at(4_000));
        assert!(
            s.between(from, until).is_none(),
            "the profile's last interval has not ended"
        );
        assert!(s.cut_due(at(5_030)));
        s.keep(sample_recording(), at(5_030));
        s.keep(sample_recording(), at(6_000));
        let recs = s.between(from, until).unwrap();
        assert_eq!(recs.len(), 2, "from 3.04 s to 4 s and on to 5.03 s");
        assert!(s.cuts.is_empty());
    }

    #[test]
    fn intervals_are_kept_as_long_as_a_profile_can_need_them() {
        let t0 = Instant::now();
        let mut s = Served::new(t0);
        for i in 1..=40 {
            s.keep(sample_recording(), t0 + INTERVAL * i);
        }
        let oldest = s.recent.front().unwrap();
        let newest = s.recent.back().unwrap();
        assert!(newest.end.duration_since(oldest.end) <= KEEP);
        assert!(newest.end.duration_since(oldest.start) >= Duration::from_secs(MAX_PROFILE_S));
    }
}
