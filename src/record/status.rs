// SPDX-License-Identifier: Apache-2.0
//! The live status line on a terminal (elapsed time, handshakes and samples so far), and the warnings
//! printed over it.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::model::untrusted::printable;

const EVERY: Duration = Duration::from_millis(500);

pub struct StatusLine {
    /// Standard error is a terminal: the line is drawn and cleared; otherwise nothing is.
    terminal: bool,
    last: Instant,
}

impl StatusLine {
    pub fn new() -> StatusLine {
        StatusLine {
            terminal: std::io::stderr().is_terminal(),
            last: Instant::now(),
        }
    }

    /// What starts a message printed while the line may be showing: clears it.
    pub fn clear(&self) -> &'static str {
        if self.terminal {
            "\r\x1b[K"
        } else {
            ""
        }
    }

    pub fn show(&mut self, elapsed: Duration, handshakes: u64, samples: u64) {
        if !self.terminal || self.last.elapsed() < EVERY {
            return;
        }
        self.last = Instant::now();
        let secs = elapsed.as_secs_f64().max(1e-3);
        eprint!(
            "\r\x1b[K[{:>6.1}s] {} handshakes ({:.0}/s), {} samples",
            secs,
            handshakes,
            handshakes as f64 / secs,
            samples
        );
        let _ = std::io::stderr().flush();
    }
}

/// Subjects warned about, at most: continuous mode meets ever new processes. Past it, the set starts again.
const MAX_WARNED: usize = 4096;

/// Prints a warning on its own line, once per subject for the whole run (a file that many processes map is
/// named once), clearing the status line first when one may be showing.
pub fn warn_once(subject: &str, message: &str) {
    static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.len() >= MAX_WARNED && !warned.contains(subject) {
        warned.clear();
    }
    if warned.insert(subject.to_string()) {
        let clear = if std::io::stderr().is_terminal() {
            "\r\x1b[K"
        } else {
            ""
        };
        eprintln!("{clear}tlsprof: warning: {}", printable(message));
    }
}
