// SPDX-License-Identifier: Apache-2.0
//! Live: the Debian package (`make deb`, cargo-deb) installed on this machine with dpkg: its binary checks
//! the machine and records nginx, its man pages render, its bash completion loads; purged, it leaves none of
//! its files (needs root).
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const PACKAGE: &str = "tlsprof";

fn dpkg(args: &[&str]) -> String {
    let out = run(Command::new("dpkg").args(args));
    assert!(
        out.status.success(),
        "dpkg {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn installed() -> bool {
    let out = run(Command::new("dpkg-query").args(["-W", "-f=${Status}", PACKAGE]));
    String::from_utf8_lossy(&out.stdout).contains("install ok installed")
}

/// scripts/build-deb.sh on the tested binary: the package's path.
fn build_package() -> PathBuf {
    let out = run(Command::new(repo().join("scripts/build-deb.sh"))
        .arg(env!("CARGO_BIN_EXE_tlsprof"))
        .arg(gen_docs()));
    assert!(
        out.status.success(),
        "build-deb.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        path.extension().is_some_and(|e| e == "deb"),
        "build-deb.sh printed {path:?}"
    );
    path
}

/// Removes the package however the test ends, so that a failure leaves nothing installed.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", PACKAGE]).output();
    }
}

#[test]
fn package_installs_records_and_purges_without_leftovers() {
    if !require_root(&this_test()) {
        return;
    }
    assert!(
        !installed(),
        "a {PACKAGE} package is installed on this machine already: the test would replace it; remove it first"
    );
    let deb = build_package();
    let purge = Purge;
    dpkg(&["-i", deb.to_str().unwrap()]);
    let files: Vec<PathBuf> = dpkg(&["-L", PACKAGE])
        .lines()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .collect();
    for wanted in [
        "/usr/bin/tlsprof",
        "/usr/share/man/man1/tlsprof.1.gz",
        "/usr/share/man/man1/tlsprof-record.1.gz",
        "/usr/share/bash-completion/completions/tlsprof",
        "/usr/share/zsh/vendor-completions/_tlsprof",
        "/usr/share/fish/vendor_completions.d/tlsprof.fish",
        "/usr/lib/systemd/system/tlsprof.service",
        "/usr/share/doc/tlsprof/examples/prometheus.yml",
    ] {
        assert!(
            files.contains(&PathBuf::from(wanted)),
            "the package has no {wanted}: {files:?}"
        );
    }
    let bin = Path::new("/usr/bin/tlsprof");
    let check = run(Command::new(bin).arg("check"));
    assert!(
        check.status.success(),
        "the installed tlsprof check: {}",
        String::from_utf8_lossy(&check.stdout)
    );

    // man finds the pages where the package put them, and renders one.
    let where_ = run(Command::new("man").args(["-w", "tlsprof"]));
    assert_eq!(
        String::from_utf8_lossy(&where_.stdout).trim(),
        "/usr/share/man/man1/tlsprof.1.gz"
    );
    let page = run(Command::new("man")
        .args(["-P", "cat", "tlsprof-record"])
        .env("MANWIDTH", "100"));
    let page = String::from_utf8_lossy(&page.stdout);
    assert!(page.contains("--max-overhead"), "man tlsprof-record: {page}");
    let completion = run(Command::new("bash").args([
        "-c",
        "source /usr/share/bash-completion/completions/tlsprof && complete -p tlsprof",
    ]));
    assert!(completion.status.success(), "the bash completion does not load");

    // The installed binary records: nginx's full handshakes, counted against the client's connections.
    let scratch = Scratch::new("package");
    let nginx = Nginx::start(&scratch.path("nginx"), &[]);
    let recording = scratch.path("package.tlsprof");
    let mut args = vec!["-o".to_string(), recording.to_str().unwrap().to_string()];
    for w in nginx.workers() {
        args.extend(["--pid".to_string(), w.to_string()]);
    }
    let rec = Recorder::start_from(Command::new(bin), &args.iter().map(String::as_str).collect::<Vec<_>>());
    let connections = s_time_new(nginx.port, 2);
    let summary = rec.interrupt();
    let full = f(&report_json(&recording)["handshakes"]["full"]);
    assert!(
        connections > 0 && within(full, connections as f64, 0.05),
        "the installed tlsprof counted {full} full handshakes for {connections} connections\n{summary}"
    );
    drop(nginx);

    drop(purge);
    assert!(!installed(), "dpkg --purge left {PACKAGE} installed");
    let left: Vec<&PathBuf> = files.iter().filter(|p| p.exists()).collect();
    assert!(left.is_empty(), "left behind by dpkg --purge: {left:?}");
}
