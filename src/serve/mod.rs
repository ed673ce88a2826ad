// SPDX-License-Identifier: Apache-2.0
//! Continuous mode (`tlsprof serve`): a recording session that hands over an interval every few seconds.
//! Each interval's summary is added into the metrics; the last minute of intervals is kept for profiles.
//! A small HTTP server serves `/metrics` (Prometheus text format) and `/profile?seconds=N` (pprof). Memory
//! stays bounded however long it runs: the session starts each interval's figures from none, and only
//! the metrics' bounded label sets and a minute of intervals are kept.

pub mod metrics;

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
/// The longest profile `/profile` serves, in seconds, and the default (as Go's net/http/pprof).
pub const MAX_PROFILE_S: u64 = 60;
const DEFAULT_PROFILE_S: u64 = 30;

#[derive(Default)]
struct Served {
    metrics: String,
    /// The intervals of at least the last MAX_PROFILE_S seconds, oldest first.
    recent: VecDeque<Arc<Recording>>,
}

/// Listens on `listen`, then records the targets until `stop`, serving what it has so far.
pub fn serve(listen: &str, procs: &[Process], opts: &RecordOptions, stop: Arc<AtomicBool>) -> Result<()> {
    allocator::fix_thresholds();
    let server = Arc::new(tiny_http::Server::http(listen).map_err(|e| anyhow!("cannot listen on {listen}: {e}"))?);
    let served = Arc::new(Mutex::new(Served::default()));
    eprintln!(
        "tlsprof: serving /metrics and /profile on http://{} (figures every {} s)",
        server.server_addr(),
        INTERVAL.as_secs()
    );
    let http = {
        let (server, served) = (server.clone(), served.clone());
        std::thread::spawn(move || {
            for request in server.incoming_requests() {
                respond(request, &served);
            }
        })
    };
    let mut metrics = Metrics::default();
    let mut take = |rec: Recording| {
        metrics.add(&rec, &summarize(&rec));
        let text = metrics.render();
        let mut s = served.lock().unwrap_or_else(|e| e.into_inner());
        s.metrics = text;
        s.recent.push_back(Arc::new(rec));
        while s.recent.len() > 1 && span(s.recent.iter().skip(1)) >= MAX_PROFILE_S as f64 {
            s.recent.pop_front();
        }
        drop(s);
        allocator::release_freed_memory();
    };
    let result = record::serve(
        procs,
        opts,
        stop,
        Snapshots {
            every: INTERVAL,
            take: &mut take,
        },
    );
    server.unblock();
    let _ = http.join();
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

fn respond(request: tiny_http::Request, served: &Mutex<Served>) {
    let url = request.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let header = |k: &str, v: &str| tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("valid header");
    let text = |status: u16, body: String| {
        tiny_http::Response::from_string(body)
            .with_status_code(status)
            .with_header(header("Content-Type", "text/plain; charset=utf-8"))
    };
    let response = match path {
        "/metrics" => {
            let body = served.lock().unwrap_or_else(|e| e.into_inner()).metrics.clone();
            tiny_http::Response::from_string(body).with_header(header("Content-Type", prometheus::CONTENT_TYPE))
        }
        "/profile" => match profile(query, served) {
            Ok(bytes) => tiny_http::Response::from_data(bytes)
                .with_header(header("Content-Type", "application/octet-stream"))
                .with_header(header("Content-Disposition", "attachment; filename=\"profile\"")),
            Err((status, why)) => text(status, format!("{why}\n")),
        },
        _ => text(404, "tlsprof serves /metrics and /profile?seconds=N\n".into()),
    };
    let _ = request.respond(response);
}

/// The pprof profile of the last `seconds=N` (whole intervals, at least N seconds when that much was kept).
fn profile(query: &str, served: &Mutex<Served>) -> Result<Vec<u8>, (u16, String)> {
    let mut seconds = DEFAULT_PROFILE_S;
    for (k, v) in query.split('&').filter_map(|kv| kv.split_once('=')) {
        if k == "seconds" {
            seconds = v.parse().ok().filter(|s| (1..=MAX_PROFILE_S).contains(s)).ok_or((
                400,
                format!("seconds={v:.20}: give a whole number of seconds from 1 to {MAX_PROFILE_S}"),
            ))?;
        }
    }
    let recent: Vec<Arc<Recording>> = {
        let s = served.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken = Vec::new();
        for r in s.recent.iter().rev() {
            if span(taken.iter()) >= seconds as f64 {
                break;
            }
            taken.push(r.clone());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::sample_recording;

    #[test]
    fn profile_seconds_are_bounded_and_need_an_interval() {
        let served = Mutex::new(Served::default());
        assert_eq!(profile("seconds=0", &served).unwrap_err().0, 400);
        assert_eq!(profile("seconds=61", &served).unwrap_err().0, 400);
        assert_eq!(profile("seconds=x", &served).unwrap_err().0, 400);
        assert_eq!(profile("seconds=5", &served).unwrap_err().0, 503);
        served.lock().unwrap().recent.push_back(Arc::new(sample_recording()));
        let gz = profile("seconds=5", &served).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    }
}
