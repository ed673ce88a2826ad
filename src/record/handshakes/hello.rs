// SPDX-License-Identifier: Apache-2.0
//! Hello windows: when the socket tracepoints that catch ServerHellos and ClientHellos are attached
//! (--hello-capture).

use std::time::{Duration, Instant};

use anyhow::Result;
use libbpf_rs::Link;

use crate::record::kernel::programs::Programs;

/// When the socket calls that carry ServerHellos are watched: their tracepoints run on every read and write
/// of every process while attached, so by default only in short windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelloCapture {
    /// Once every 10 s while the probes are attached, for up to 1 s: the handshake mix and resumption are
    /// sampled from the connections made then.
    Sampled,
    /// All the time: every handshake's version, cipher, group and offer, for a little CPU on every socket call.
    Always,
    /// Never: version, cipher suite, group and resumption offers stay unknown.
    Off,
}

/// --hello-capture sampled: watch socket calls for this long, every period (while the stage probes are
/// attached: a ServerHello is matched to its connection through them), if handshakes completed since the
/// last window: keep-alive traffic with no handshakes would pay for the capture programs for nothing.
const WINDOW: Duration = Duration::from_secs(1);
const PERIOD: Duration = Duration::from_secs(10);

pub struct HelloWindows {
    mode: HelloCapture,
    /// The tracepoints' links while a window is open.
    links: Option<Vec<Link>>,
    opened: Instant,
    /// Handshakes completed when the last window opened.
    completed_then: u64,
}

impl HelloWindows {
    /// Opens the first window unless capture is off: before the probes are announced, so that a handshake
    /// right after the announcement does not miss its ServerHello.
    pub fn start(mode: HelloCapture, programs: &Programs) -> Result<HelloWindows> {
        let links = match mode {
            HelloCapture::Off => None,
            _ => Some(programs.attach_hello_capture()?),
        };
        Ok(HelloWindows {
            mode,
            links,
            opened: Instant::now(),
            completed_then: 0,
        })
    }

    /// Opens or closes the window for this round: `probes_live`, the stage probes are attached; `completed`,
    /// handshakes completed so far. True when a window opened.
    pub fn update(&mut self, programs: &Programs, probes_live: bool, completed: u64) -> Result<bool> {
        let due = match self.mode {
            HelloCapture::Off => false,
            HelloCapture::Always => probes_live,
            HelloCapture::Sampled => {
                probes_live
                    && if self.links.is_some() {
                        self.opened.elapsed() < WINDOW
                    } else {
                        self.opened.elapsed() >= PERIOD && completed > self.completed_then
                    }
            }
        };
        if !due {
            self.links = None;
        } else if self.links.is_none() {
            self.links = Some(programs.attach_hello_capture()?);
            self.opened = Instant::now();
            self.completed_then = completed;
            return Ok(true);
        }
        Ok(false)
    }

    pub fn close(&mut self) {
        self.links = None;
    }
}
