// SPDX-License-Identifier: Apache-2.0
//! nginx targets, from scripts/nginx-target.sh.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::{free_port, repo, run};

/// An nginx from scripts/nginx-target.sh, stopped on drop.
pub struct Nginx {
    pub dir: PathBuf,
    pub port: u16,
    pub master: u32,
}

impl Nginx {
    /// Debian's nginx.
    pub fn start(dir: &Path, args: &[&str]) -> Nginx {
        Nginx::start_binary(Path::new("/usr/sbin/nginx"), dir, args)
    }

    /// The nginx executable `binary`.
    pub fn start_binary(binary: &Path, dir: &Path, args: &[&str]) -> Nginx {
        let port = free_port();
        let out = Command::new(repo().join("scripts/nginx-target.sh"))
            .env("NGINX_BIN", binary)
            .args(["start", dir.to_str().unwrap(), &port.to_string()])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nginx-target.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let master = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        Nginx {
            dir: dir.to_path_buf(),
            port,
            master,
        }
    }

    /// The worker processes (they do the TLS work; the master only manages them).
    pub fn workers(&self) -> Vec<u32> {
        let out = Command::new("pgrep")
            .args(["-P", &self.master.to_string()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("scripts/nginx-target.sh"))
            .args(["stop", self.dir.to_str().unwrap()])
            .status();
    }
}

/// AWS-LC's build (scripts/build-aws-lc.sh), once per test run; kept in target/ between runs.
fn aws_lc_build() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = repo().join("target/nginx-aws-lc");
        let out = run(Command::new(repo().join("scripts/build-aws-lc.sh")).arg(&dir));
        assert!(
            out.status.success(),
            "build-aws-lc.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
}

/// nginx built against AWS-LC.
pub fn nginx_aws_lc() -> PathBuf {
    aws_lc_build().join("nginx")
}

/// The AWS-LC ground-truth fixture (tests/fixtures/bssl_handshakes.c built against AWS-LC).
pub fn aws_lc_fixture() -> PathBuf {
    aws_lc_build().join("bssl_handshakes")
}
