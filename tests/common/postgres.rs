// SPDX-License-Identifier: Apache-2.0
//! PostgreSQL targets (Debian's server, `ssl = on`), from scripts/postgres-target.sh, and psql clients.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{free_port, repo};

/// A PostgreSQL server from scripts/postgres-target.sh, stopped on drop.
pub struct Postgres {
    pub dir: PathBuf,
    pub port: u16,
    /// The postmaster: it forks a backend for each connection.
    pub postmaster: u32,
}

impl Postgres {
    pub fn start(dir: &Path) -> Postgres {
        let port = free_port();
        let out = Command::new(repo().join("scripts/postgres-target.sh"))
            .args(["start", dir.to_str().unwrap(), &port.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "postgres-target.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let postmaster = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        Postgres {
            dir: dir.to_path_buf(),
            port,
            postmaster,
        }
    }

    /// `count` psql processes, one after another, each connecting over TLS (`sslmode=require`) and running a
    /// query: how many succeeded.
    pub fn psql_runs(&self, count: u32) -> u64 {
        let conninfo = format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres sslmode=require connect_timeout=10",
            self.port
        );
        (0..count)
            .filter(|_| {
                Command::new("psql")
                    .args([&conninfo, "-Atqc", "select 1"])
                    .output()
                    .is_ok_and(|o| o.status.success() && o.stdout.starts_with(b"1"))
            })
            .count() as u64
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("scripts/postgres-target.sh"))
            .args(["stop", self.dir.to_str().unwrap()])
            .status();
    }
}
