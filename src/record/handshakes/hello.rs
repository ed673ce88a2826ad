// SPDX-License-Identifier: Apache-2.0
//! Hello windows: when the socket tracepoints that catch ServerHellos and ClientHellos are attached
//! (--hello-capture).

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Result;
use libbpf_rs::Link;

use crate::record::kernel::detach;
use crate::record::kernel::programs::Programs;

/// When the socket calls that carry ServerHellos are watched: their tracepoints run on every read and write
/// of every process while attached, so by default only in short windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelloCapture {
    /// Once every 10 s while the probes are attached and connections are being made, for up to 1 s: the
    /// handshake mix and resumption are sampled from the connections made then.
    Sampled,
    /// All the time: every handshake's version, cipher, group and offer, for a little CPU on every socket call.
    Always,
    /// Never: version, cipher suite, group and resumption offers stay unknown.
    Off,
}

/// --hello-capture sampled: watch socket calls for this long, every period (while the stage probes are
/// attached: a ServerHello is matched to its connection through them), if connections are being made or
/// handshakes completed within RECENT before the window would open. Keep-alive traffic, whose connections
/// were made long before, would pay for the capture programs in every socket read and write for nothing.
const WINDOW: Duration = Duration::from_secs(1);
const PERIOD: Duration = Duration::from_secs(10);
const RECENT: Duration = Duration::from_secs(1);

pub struct HelloWindows {
    schedule: Schedule,
    /// The tracepoints' links while a window is open.
    links: Option<Vec<Link>>,
    /// The last window's links being removed: the kernel waits for RCU grace periods as it removes each
    /// tracepoint's program (most of a second for all of them), which the session's thread must not wait out.
    closing: Option<JoinHandle<()>>,
}

/// When the windows open and close: the mode, and what was seen of the handshakes.
struct Schedule {
    mode: HelloCapture,
    /// When the open window (or the last one) opened.
    opened: Instant,
    /// Connections made and handshakes completed as last seen, and when that count last changed.
    made: u64,
    changed: Option<Instant>,
}

impl Schedule {
    /// Whether a window should be open at `now`, given whether one is (`open`): `probes_live`, the stage
    /// probes are attached; `made`, the targets' connections (counted all the time) and the handshakes the
    /// probes saw complete (where connections are not counted: io_uring) so far.
    fn due(&mut self, open: bool, probes_live: bool, made: u64, now: Instant) -> bool {
        // Any change: the sum also falls when a target exits.
        if made != self.made {
            self.made = made;
            self.changed = Some(now);
        }
        match self.mode {
            HelloCapture::Off => false,
            HelloCapture::Always => probes_live,
            HelloCapture::Sampled if open => probes_live && now.duration_since(self.opened) < WINDOW,
            HelloCapture::Sampled => {
                probes_live
                    && now.duration_since(self.opened) >= PERIOD
                    && self.changed.is_some_and(|t| now.duration_since(t) < RECENT)
            }
        }
    }
}

impl HelloWindows {
    /// Opens the first window unless capture is off: before the probes are announced, so that a handshake
    /// right after the announcement does not miss its ServerHello.
    pub fn start(mode: HelloCapture, programs: &mut Programs) -> Result<HelloWindows> {
        let links = match mode {
            HelloCapture::Off => None,
            _ => Some(programs.attach_hello_capture()?),
        };
        Ok(HelloWindows {
            schedule: Schedule {
                mode,
                opened: Instant::now(),
                made: 0,
                changed: None,
            },
            links,
            closing: None,
        })
    }

    /// Opens or closes the window for this round: `probes_live`, the stage probes are attached; `made`, the
    /// targets' connections and handshakes completed so far. True when a window opened.
    /// --hello-capture always keeps the programs attached from start to end: they run only while the probes
    /// are attached (the probe epoch says), so the probe windows are theirs without the cost of attaching
    /// and removing them at each one.
    pub fn update(&mut self, programs: &mut Programs, probes_live: bool, made: u64) -> Result<bool> {
        let now = Instant::now();
        if self.schedule.mode == HelloCapture::Always {
            return Ok(false);
        }
        if !self.schedule.due(self.links.is_some(), probes_live, made, now) {
            self.pause();
        } else if self.links.is_none() {
            // Never attached twice at once: each program would run twice on every call.
            if let Some(closing) = self.closing.take() {
                let _ = closing.join();
            }
            self.links = Some(programs.attach_hello_capture()?);
            self.schedule.opened = now;
            return Ok(true);
        }
        Ok(false)
    }

    /// The probes pause: a sampled window closes with them (off the session's thread); --hello-capture
    /// always keeps its programs, which the probe epoch stills until the probes resume.
    pub fn pause(&mut self) {
        if self.schedule.mode == HelloCapture::Always {
            return;
        }
        if let Some(links) = self.links.take() {
            self.closing = Some(std::thread::spawn(move || detach(links)));
        }
    }

    /// Removes the programs, and waits until they are gone.
    pub fn close(&mut self) {
        if let Some(links) = self.links.take() {
            detach(links);
        }
        if let Some(closing) = self.closing.take() {
            let _ = closing.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_windows_open_every_period_only_while_connections_are_made() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let mut s = Schedule {
            mode: HelloCapture::Sampled,
            opened: t0,
            made: 0,
            changed: None,
        };
        // The first window (opened at start) lasts WINDOW.
        assert!(s.due(true, true, 0, at(0.5)));
        assert!(!s.due(true, true, 0, at(1.0)));
        // Connections at 2 s, then none (keep-alive): no window at 10 s, nor later.
        assert!(!s.due(false, true, 4, at(2.0)));
        assert!(!s.due(false, true, 4, at(10.0)));
        assert!(!s.due(false, true, 4, at(30.0)));
        // Connections made again: the next round opens one.
        assert!(s.due(false, true, 5, at(30.5)));
        s.opened = at(30.5);
        assert!(s.due(true, true, 9, at(31.0)));
        assert!(!s.due(true, true, 12, at(31.5)));
        // Not before a period has passed since, however many complete.
        assert!(!s.due(false, true, 50, at(35.0)));
        assert!(s.due(false, true, 60, at(40.6)));
        // Never while the stage probes are detached (their connections are what a hello is matched to).
        assert!(!s.due(false, false, 70, at(40.7)));
        // A target that exits takes its connections out of the sum: a change all the same.
        s.opened = at(40.6);
        assert!(s.due(false, true, 20, at(51.0)));
    }

    #[test]
    fn always_follows_the_probes_and_off_never_opens() {
        let t0 = Instant::now();
        let mut always = Schedule {
            mode: HelloCapture::Always,
            opened: t0,
            made: 0,
            changed: None,
        };
        assert!(always.due(false, true, 0, t0 + Duration::from_secs(100)));
        assert!(!always.due(true, false, 0, t0 + Duration::from_secs(100)));
        let mut off = Schedule {
            mode: HelloCapture::Off,
            ..always
        };
        assert!(!off.due(false, true, 1, t0 + Duration::from_secs(100)));
    }
}
