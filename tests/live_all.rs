// SPDX-License-Identifier: Apache-2.0
//! Live: `record --all` (needs root). It finds an nginx and a Node.js server running when it starts, and a
//! process started during the recording in new mount and pid namespaces, from a program and libraries that
//! exist only inside its mount namespace, in a cgroup named like a container's: each one's handshakes counted
//! against its clients', its container named.
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A cgroup named as docker names a container's scope. (A part of a cgroup path of the wrong shape, such as
/// an id with a terminal escape in it, names nothing: model::Placement's tests.)
const CONTAINER_ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The v2 cgroup hierarchy: at /sys/fs/cgroup, or beside the v1 ones in a hybrid layout.
fn cgroup2_root() -> &'static str {
    if Path::new("/sys/fs/cgroup/unified/cgroup.procs").exists() {
        "/sys/fs/cgroup/unified"
    } else {
        "/sys/fs/cgroup"
    }
}

fn build_server(scratch: &Scratch) {
    let out = run(Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(scratch.path("tls_server"))
        .arg(repo().join("tests/fixtures/hostile_target.c"))
        .args(["-lssl", "-lcrypto"]));
    assert!(out.status.success(), "build: {}", String::from_utf8_lossy(&out.stderr));
}

/// Where the dynamic linker finds a library `tls_server` links.
fn library_path(scratch: &Scratch, name: &str) -> String {
    let out = run(Command::new("ldd").arg(scratch.path("tls_server")));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.trim_start().starts_with(name))
        .and_then(|l| l.split("=>").nth(1)?.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| panic!("ldd shows no {name}"))
}

/// A target's handshakes over the recording, as the report gives them (exact: probes attached throughout).
fn handshakes_of(report: &serde_json::Value, pid: u32) -> u64 {
    report["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["pid"] == pid)
        .map(|t| t["handshakes"].as_u64().unwrap())
        .sum()
}

#[test]
fn all_finds_nginx_node_and_a_process_started_in_new_namespaces() {
    if !require_root("all_finds_nginx_node_and_a_process_started_in_new_namespaces") {
        return;
    }
    let scratch = Scratch::new("all");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let (node, node_port) = start_node_server(&nginx.dir);
    build_server(&scratch);

    let recording = scratch.path("all.tlsprof");
    let started = Instant::now();
    let mut rec = Recorder::start(&["--all", "-o", recording.to_str().unwrap()]);
    eprintln!("tlsprof --all: probes live {:?} after start", started.elapsed());

    // Started after tlsprof: a mount namespace where a tmpfs over an empty directory holds the program and
    // its libssl and libcrypto (none of them exist at that path on the host), a pid namespace, a cgroup.
    let hidden = scratch.path("hidden");
    std::fs::create_dir(&hidden).unwrap();
    let cgroup = Path::new(cgroup2_root()).join(format!("docker-{CONTAINER_ID}.scope"));
    std::fs::create_dir(&cgroup).unwrap();
    let script = format!(
        "mount -t tmpfs tmpfs '{hidden}' && cp '{bin}' '{ssl}' '{crypto}' '{hidden}/' && echo $$ > '{procs}' && LD_LIBRARY_PATH='{hidden}' exec '{hidden}/tls_server' '{cert}' '{cert}' '{key}' --wait",
        hidden = hidden.display(),
        bin = scratch.path("tls_server").display(),
        ssl = library_path(&scratch, "libssl"),
        crypto = library_path(&scratch, "libcrypto"),
        procs = cgroup.join("cgroup.procs").display(),
        cert = nginx.dir.join("cert.pem").display(),
        key = nginx.dir.join("key.pem").display(),
    );
    let mut unshare = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc"])
        .args(["sh", "-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(unshare.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the namespaced server did not start");
    let out = run(Command::new("pgrep").args(["-P", &unshare.id().to_string()]));
    let hidden_pid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(
        !hidden.join("tls_server").exists(),
        "the program must exist only inside its mount namespace"
    );
    let attached = rec.wait_for_line(
        &format!("attached to new process {hidden_pid} "),
        Duration::from_secs(10),
    );
    assert!(
        attached.is_some(),
        "--all did not attach to {hidden_pid}:\n{}",
        rec.stderr
    );
    let mut stdin = unshare.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();

    let nginx_connections = s_time_new_www(nginx.port, 2, "/");
    let node_connections = s_time_new_www(node_port, 2, "/");
    drop(stdin);
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let made: u64 = line.trim().parse().unwrap();
    assert!(unshare.wait().unwrap().success());
    let _ = std::fs::remove_dir(&cgroup);
    let tlsprof_pid = rec.pid();
    let (summary, log) = rec.interrupt_with_log();

    let r = report_json(&recording);
    let nginx_seen: u64 = nginx.workers().iter().map(|&w| handshakes_of(&r, w)).sum();
    let node_seen = handshakes_of(&r, node.pid());
    let hidden_seen = handshakes_of(&r, hidden_pid);
    eprintln!(
        "clients: nginx {nginx_connections}, node {node_connections}; namespaced server {made} on each side; \
         tlsprof --all saw nginx {nginx_seen}, node {node_seen}, namespaced {hidden_seen}"
    );
    // Every handshake of each server, no more: the probes were attached throughout (--max-overhead 100).
    let close = |seen: u64, truth: u64| seen.abs_diff(truth) <= 2.max(truth / 100);
    assert!(
        close(nginx_seen, nginx_connections),
        "nginx: {nginx_seen} vs {nginx_connections}\n{summary}"
    );
    assert!(
        close(node_seen, node_connections),
        "node: {node_seen} vs {node_connections}\n{summary}"
    );
    // Both sides of each of its handshakes, all made after tlsprof attached.
    assert_eq!(hidden_seen, 2 * made, "namespaced server\n{summary}\n{log}");

    // Its container named from the cgroup.
    let target = r["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["pid"] == hidden_pid)
        .unwrap();
    assert_eq!(target["container"], "docker 0123456789ab", "{target}");
    assert_eq!(target["placement"]["container_id"], CONTAINER_ID, "{target}");
    assert!(
        summary.contains(&format!(
            "(pid {hidden_pid}) in docker 0123456789ab: {hidden_seen} handshakes,"
        )),
        "{summary}"
    );
    assert!(!summary.contains('\x1b'), "raw escape in the summary:\n{summary}");
    // tlsprof never profiles itself.
    assert!(
        r["targets"].as_array().unwrap().iter().all(|t| t["pid"] != tlsprof_pid),
        "{summary}"
    );
}
