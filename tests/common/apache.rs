// SPDX-License-Identifier: Apache-2.0
//! Apache httpd targets (Debian's apache2 with mod_ssl), from scripts/apache-target.sh.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{free_port, repo};

/// An Apache httpd from scripts/apache-target.sh, stopped on drop.
pub struct Apache {
    pub dir: PathBuf,
    pub port: u16,
    /// The parent process: it forks the children that serve (prefork) or run the threads that do (event).
    pub parent: u32,
}

impl Apache {
    /// With the multi-processing module `mpm` (event, prefork) and an ECDSA P-256 certificate.
    pub fn start(dir: &Path, mpm: &str) -> Apache {
        let port = free_port();
        let out = Command::new(repo().join("scripts/apache-target.sh"))
            .args(["start", dir.to_str().unwrap(), &port.to_string(), "--mpm", mpm])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "apache-target.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let parent = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        Apache {
            dir: dir.to_path_buf(),
            port,
            parent,
        }
    }
}

impl Drop for Apache {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("scripts/apache-target.sh"))
            .args(["stop", self.dir.to_str().unwrap()])
            .status();
    }
}

/// `count` invocations of curl, one after another, each a new process making one HTTPS request to `port`:
/// how many succeeded.
pub fn curl_runs(port: u16, count: u32) -> u64 {
    let url = format!("https://127.0.0.1:{port}/index.html");
    (0..count)
        .filter(|_| {
            Command::new("curl")
                .args(["-sk", "--max-time", "10", "-o", "/dev/null", &url])
                .status()
                .is_ok_and(|s| s.success())
        })
        .count() as u64
}
