// SPDX-License-Identifier: Apache-2.0
//! Standard error held while the screen is up: what the session says there (warnings, processes that
//! joined) would scribble over the screen. Its lines are kept, the last shown on the screen, and all given
//! back when the screen is gone.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{bail, Result};

/// Lines kept, at most: the rest are counted.
const KEPT: usize = 200;

#[derive(Default)]
struct Lines {
    kept: VecDeque<String>,
    dropped: usize,
}

pub struct Captured {
    /// The standard error there was before.
    saved: OwnedFd,
    reader: JoinHandle<()>,
    lines: Arc<Mutex<Lines>>,
}

/// Points standard error at a pipe read by a thread of its own.
pub fn capture() -> Result<Captured> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors that nothing else owns; dup copies fd 2 into a new one.
    let (read, write, saved) = unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            bail!(
                "cannot make a pipe for standard error: {}",
                std::io::Error::last_os_error()
            );
        }
        let (read, write) = (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]));
        let saved = libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3);
        if saved < 0 {
            bail!("cannot keep standard error: {}", std::io::Error::last_os_error());
        }
        (read, write, OwnedFd::from_raw_fd(saved))
    };
    // SAFETY: dup2 replaces fd 2 with a copy of the pipe's write end; the write end itself is closed after.
    if unsafe { libc::dup2(write.as_raw_fd(), 2) } < 0 {
        bail!(
            "cannot point standard error at a pipe: {}",
            std::io::Error::last_os_error()
        );
    }
    drop(write);
    let lines = Arc::new(Mutex::new(Lines::default()));
    let kept = lines.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(File::from(read)).lines() {
            let Ok(line) = line else { break };
            // The status line's carriage returns and clears are for a terminal.
            let line = line.rsplit('\r').next().unwrap_or_default().replace("\x1b[K", "");
            if line.is_empty() {
                continue;
            }
            let mut l = kept.lock().unwrap_or_else(|e| e.into_inner());
            if l.kept.len() == KEPT {
                l.kept.pop_front();
                l.dropped += 1;
            }
            l.kept.push_back(line);
        }
    });
    Ok(Captured { saved, reader, lines })
}

impl Captured {
    /// The last line said, if any.
    pub fn last(&self) -> Option<String> {
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .kept
            .back()
            .cloned()
    }

    /// Standard error as it was; the lines said meanwhile.
    pub fn restore(self) -> Vec<String> {
        // SAFETY: dup2 puts the saved descriptor back on fd 2, closing the pipe's last write end, so the
        // reader sees its end.
        unsafe { libc::dup2(self.saved.as_raw_fd(), 2) };
        let _ = self.reader.join();
        let l = std::mem::take(&mut *self.lines.lock().unwrap_or_else(|e| e.into_inner()));
        let mut out = Vec::new();
        if l.dropped > 0 {
            out.push(format!("tlsprof: ({} earlier lines not kept)", l.dropped));
        }
        out.extend(l.kept);
        out
    }
}
