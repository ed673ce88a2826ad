// SPDX-License-Identifier: Apache-2.0
//! `tlsprof top`: the live view. A recording session (the same probes, windows and budget as `record`)
//! hands over an interval at every refresh; the intervals since the last reset are merged and analysed, and
//! the screen, or off a terminal a line per process and interval, shows what they hold.

mod batch;
mod keys;
pub mod rows;
mod screen;
mod stderr;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};

use crate::analyze::{analyze, Analysis};
use crate::model::Recording;
use crate::record::targets::Process;
use crate::record::{self, RecordOptions, Snapshots};
pub use rows::RowGroup;

pub struct TopOptions {
    /// How often the figures are taken and shown.
    pub interval: Duration,
    pub group: RowGroup,
    /// A line per process and interval instead of the full screen.
    pub batch: bool,
    /// One interval, then stop (batch lines).
    pub once: bool,
    /// Where `w` writes what has been seen so far.
    pub output: PathBuf,
    /// Colour on the screen.
    pub color: bool,
}

/// The intervals handed over so far, merged: all of them (what `w` writes) and those since the last reset
/// (what the rows show).
#[derive(Default)]
struct Spans {
    since_start: Option<Recording>,
    since_reset: Option<Recording>,
}

impl Spans {
    fn add(&mut self, interval: Recording) {
        self.since_reset = Some(merged(self.since_reset.take(), &interval));
        self.since_start = Some(merged(self.since_start.take(), &interval));
    }

    fn reset(&mut self) {
        self.since_reset = None;
    }

    /// The analysis of the span since the last reset.
    fn analysis(&self) -> Option<Analysis> {
        self.since_reset.as_ref().map(analyze)
    }
}

fn merged(span: Option<Recording>, interval: &Recording) -> Recording {
    match span {
        None => interval.clone(),
        Some(span) => Recording::merge(&[&span, interval]),
    }
}

/// Sets the stop flag when dropped: however the view ends (a key, an error, a panic), the session stops
/// and detaches its probes.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Records the targets until `stop` (a signal, or `q`), showing each interval as it comes.
pub fn top(procs: &[Process], opts: &RecordOptions, top: &TopOptions, stop: Arc<AtomicBool>) -> Result<()> {
    let cpus = online_cpus();
    // On the screen, what the session says on standard error is shown in its last line, then printed
    // once the screen is gone.
    let captured = if top.batch { None } else { Some(stderr::capture()?) };
    let (tx, rx) = mpsc::channel::<Recording>();
    let shown = std::thread::scope(|scope| {
        let session_stop = stop.clone();
        let session = scope.spawn(move || {
            let mut take = |interval: Recording| {
                // The receiver goes first only when the view has ended, and then the session is stopping.
                let _ = tx.send(interval);
            };
            record::serve(
                procs,
                opts,
                session_stop,
                Snapshots {
                    every: top.interval,
                    cut: &|| false,
                    take: &mut take,
                },
            )
        });
        let shown = {
            let _stop = StopOnDrop(stop.clone());
            match &captured {
                None => batch::run(&rx, top, cpus, &stop),
                Some(c) => screen::run(&rx, top, cpus, &stop, c),
            }
        };
        let recorded = session
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the recording session failed")));
        recorded.and(shown)
    });
    if let Some(c) = captured {
        for line in c.restore() {
            eprintln!("{line}");
        }
    }
    shown
}

/// The next interval, waiting at most `wait`; Err when the session has ended.
fn next_interval(rx: &Receiver<Recording>, wait: Duration) -> Result<Option<Recording>, ()> {
    match rx.recv_timeout(wait) {
        Ok(rec) => Ok(Some(rec)),
        Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(()),
    }
}

fn online_cpus() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::sample_recording;

    #[test]
    fn a_reset_starts_the_rows_span_and_keeps_what_w_writes() {
        let mut spans = Spans::default();
        assert!(spans.analysis().is_none());
        let rec = sample_recording();
        spans.add(rec.clone());
        spans.add(rec.clone());
        let two = spans.analysis().unwrap().summary;
        let one = analyze(&rec).summary;
        assert!((two.duration_s - 2.0 * one.duration_s).abs() < 1e-9);
        assert_eq!(two.handshakes.observed.total, 2 * one.handshakes.observed.total);
        spans.reset();
        assert!(spans.analysis().is_none());
        spans.add(rec.clone());
        let after = spans.analysis().unwrap().summary;
        assert_eq!(after.handshakes.observed.total, one.handshakes.observed.total);
        let start = spans.since_start.as_ref().unwrap();
        assert!((start.duration_s - 3.0 * rec.duration_s).abs() < 1e-9);
    }
}
