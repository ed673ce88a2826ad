// SPDX-License-Identifier: Apache-2.0
//! Live: whole stacks through Debian's frame-pointer-less OpenSSL (nginx, compared with perf) and JavaScript
//! frames in Node.js (needs root).
mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};

use common::*;

fn folded(recording: &std::path::Path) -> Vec<(String, u64)> {
    let out = run(tlsprof().args(["flamegraph", "--folded"]).arg(recording));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (stack, count) = l.rsplit_once(' ').unwrap();
            (stack.to_string(), count.parse().unwrap())
        })
        .collect()
}

/// Unresolved code is named per address (`libcrypto.so.3+0x130d41` here, a raw address in perf): compare it
/// per library.
fn leaf_group(name: &str, dso: &str) -> String {
    if name.contains("+0x") || name.starts_with("0x") || name == "[unknown]" {
        format!("[{}]", dso.rsplit('/').next().unwrap_or(dso))
    } else {
        name.to_string()
    }
}

fn shares(counts: HashMap<String, u64>) -> HashMap<String, f64> {
    let total: u64 = counts.values().sum();
    counts
        .into_iter()
        .map(|(k, v)| (k, v as f64 / total.max(1) as f64))
        .collect()
}

/// `perf record --call-graph dwarf` of a process's user-mode samples, run at the same time as tlsprof so that
/// both see the same seconds (the same work's CPU cost drifts from one second to the next on these VMs).
struct PerfRecord {
    child: std::process::Child,
    data: std::path::PathBuf,
}

impl PerfRecord {
    fn start(pid: u32, scratch: &Scratch) -> PerfRecord {
        let data = scratch.path("perf.data");
        let child = Command::new("perf")
            .args([
                "record",
                "-q",
                "-e",
                "cpu-clock:u",
                "-F",
                "997",
                "--call-graph",
                "dwarf",
                "-p",
                &pid.to_string(),
                "-o",
            ])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // perf has no ready signal; it attaches well within this.
        std::thread::sleep(std::time::Duration::from_millis(500));
        PerfRecord { child, data }
    }

    /// Stops perf and returns its leaf symbol shares.
    fn leaf_shares(mut self) -> HashMap<String, f64> {
        // SAFETY: plain signal to our own child; perf writes its data on SIGINT.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        assert!(
            self.child.wait().unwrap().success() || self.data.exists(),
            "perf record failed"
        );
        let out = run(Command::new("perf")
            .args(["script", "-F", "ip,sym,dso", "-i"])
            .arg(&self.data));
        assert!(
            out.status.success(),
            "perf script: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let mut counts: HashMap<String, u64> = HashMap::new();
        // Samples are blocks of frames separated by blank lines; the first frame is the leaf.
        let mut first = true;
        for line in text.lines() {
            if line.trim().is_empty() {
                first = true;
                continue;
            }
            if first {
                first = false;
                // "   7f1c2d25e8a0 bn_sqrx8x_internal+0x1a (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)"
                let mut parts = line.split_whitespace();
                let _ip = parts.next();
                let sym = parts.next().unwrap_or("[unknown]");
                let sym = sym.split_once("+0x").map_or(sym, |(s, _)| s);
                let dso = line.rsplit_once('(').map_or("?", |(_, d)| d.trim_end_matches(')'));
                *counts.entry(leaf_group(sym, dso)).or_default() += 1;
            }
        }
        shares(counts)
    }
}

#[test]
fn nginx_stacks_reach_main_and_leaves_match_perf() {
    if !require_root("nginx_stacks_reach_main_and_leaves_match_perf") {
        return;
    }
    let scratch = Scratch::new("stacks-nginx");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let worker = nginx.workers()[0];
    let recording = scratch.path("stacks.tlsprof");
    let rec = Recorder::start(&[
        "--pid",
        &worker.to_string(),
        "--freq",
        "997",
        "--kernel",
        "-o",
        recording.to_str().unwrap(),
    ]);
    let perf = PerfRecord::start(worker, &scratch);
    s_time_new(nginx.port, 8);
    let theirs = perf.leaf_shares();
    let summary = rec.interrupt();

    let stacks = folded(&recording);
    let in_handshake: Vec<&(String, u64)> = stacks
        .iter()
        .filter(|(s, _)| s.contains(";SSL_do_handshake [handshake]"))
        .collect();
    let total: u64 = in_handshake.iter().map(|(_, c)| c).sum();
    let whole: u64 = in_handshake
        .iter()
        .filter(|(s, _)| s.contains(";ngx_ssl_handshake;") && s.contains(";main;") && !s.contains("[truncated]"))
        .map(|(_, c)| c)
        .sum();
    assert!(total >= 200, "too few handshake samples ({total})\n{summary}");
    eprintln!("{whole} of {total} handshake samples reach ngx_ssl_handshake and main");
    assert!(
        whole as f64 >= 0.9 * total as f64,
        "{whole} of {total} handshake samples reach ngx_ssl_handshake and main\n{summary}"
    );

    // A function named from libc's debug file (libc6-dbg) has the name .dynsym gives it, without a version.
    let versioned: Vec<&str> = stacks
        .iter()
        .flat_map(|(s, _)| s.split(';'))
        .filter(|f| f.contains("@GLIBC"))
        .collect();
    assert!(
        versioned.is_empty(),
        "frames named with their symbol version: {versioned:?}"
    );

    // Leaf functions of user-mode samples, against perf sampling the same seconds.
    let mut ours: HashMap<String, u64> = HashMap::new();
    for (stack, count) in &stacks {
        if stack.contains("_[k]") {
            continue;
        }
        let leaf = stack.rsplit(';').next().unwrap();
        let dso = leaf.split_once('+').map_or("", |(d, _)| d);
        *ours.entry(leaf_group(leaf, dso)).or_default() += count;
    }
    let ours = shares(ours);
    // PLT stubs are named as perf names them (`memset@plt`; `*ABS*+0x9f550@plt` there for an IFUNC's stub,
    // `memcpy@plt` here): their shares agree taken together.
    let plt = |shares: &HashMap<String, f64>| -> f64 {
        shares.iter().filter(|(k, _)| k.ends_with("@plt")).map(|(_, v)| v).sum()
    };
    let (our_plt, perf_plt) = (plt(&ours), plt(&theirs));
    eprintln!(
        "PLT stubs: tlsprof {:.2}% perf {:.2}%",
        our_plt * 100.0,
        perf_plt * 100.0
    );
    assert!(
        (our_plt - perf_plt).abs() <= 0.01,
        "PLT stubs: tlsprof {:.2}% vs perf {:.2}%\ntlsprof: {ours:?}\nperf: {theirs:?}",
        our_plt * 100.0,
        perf_plt * 100.0
    );

    let mut top: Vec<(&String, &f64)> = theirs.iter().collect();
    top.sort_by(|a, b| b.1.total_cmp(a.1));
    assert!(top.len() >= 5, "perf found too few leaves: {theirs:?}");
    for (leaf, share) in top.iter().take(5) {
        let mine = ours.get(*leaf).copied().unwrap_or(0.0);
        // Two samplers' shares differ by their sampling error and by the stacks each could not unwind: 5
        // points is several times that at this many samples.
        eprintln!("leaf {leaf}: tlsprof {:.1}% perf {:.1}%", mine * 100.0, **share * 100.0);
        assert!(
            (mine - **share).abs() <= 0.05,
            "leaf {leaf}: tlsprof {:.1}% vs perf {:.1}%\ntlsprof: {ours:?}\nperf: {theirs:?}",
            mine * 100.0,
            **share * 100.0
        );
    }
}

#[test]
fn node_client_hello_samples_sit_under_named_javascript_frames() {
    if !require_root("node_client_hello_samples_sit_under_named_javascript_frames") {
        return;
    }
    let scratch = Scratch::new("stacks-node");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--protocols", "TLSv1.3"]);
    let recording = scratch.path("client.tlsprof");
    let (_, summary) = profile_node_client(&recording, nginx.port, &["--perf-basic-prof"], &["--count", "600"]);
    let stacks = folded(&recording);
    let hello: Vec<&(String, u64)> = stacks
        .iter()
        .filter(|(s, _)| s.contains(";tls_construct_client_hello;"))
        .collect();
    let total: u64 = hello.iter().map(|(_, c)| c).sum();
    let named: u64 = hello
        .iter()
        .filter(|(s, _)| s.contains(";JS:") && !s.contains("[anon]"))
        .map(|(_, c)| c)
        .sum();
    assert!(total >= 5, "too few ClientHello samples ({total})\n{summary}");
    eprintln!("{named} of {total} ClientHello samples under named JavaScript frames");
    assert!(
        named as f64 >= 0.9 * total as f64,
        "{named} of {total} ClientHello samples under named JS frames\n{hello:#?}"
    );
    assert!(!summary.contains("have no names"), "{summary}");

    // Without a perf map, the summary says how to get JavaScript names.
    let (_, summary) = profile_node_client(&recording, nginx.port, &[], &["--count", "100"]);
    assert!(summary.contains("start it with --perf-basic-prof"), "{summary}");
}
