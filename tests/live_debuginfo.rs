// SPDX-License-Identifier: Apache-2.0
//! Names for stripped libraries from their debug information: a library built here with debug information,
//! its debug file split off and the library stripped, runs in a target; tlsprof names its internal function
//! through a local debuginfod server (elfutils' debuginfod on loopback) and through MiniDebugInfo
//! (.gnu_debugdata), says which file stayed unnamed and how to name it without either, and a server that
//! never answers does not hold the recording up beyond its timeout. Needs root (BPF).
mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const INTERNAL: &str = "spin_inner_loop";

fn sh(cmd: &mut Command) {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// libspin.so (stripped) and its debug file, libspin-mini.so (stripped, with .gnu_debugdata), and a program
/// for each. Returns (program, program using the MiniDebugInfo library, debug file, build id).
fn build(dir: &Path) -> (PathBuf, PathBuf, PathBuf, String) {
    let src = repo().join("tests/fixtures/stripped_lib.c");
    let p = |f: &str| dir.join(f);
    for lib in ["libspin.so", "libspin-mini.so"] {
        sh(Command::new("cc")
            .args(["-O2", "-g", "-fPIC", "-shared", "-Wl,--build-id", "-o"])
            .arg(p(lib))
            .arg(&src));
    }
    sh(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(p("libspin.so"))
        .arg(p("libspin.debug")));
    // Fedora's MiniDebugInfo: a symbol table of the functions .dynsym lacks, xz-compressed, in the stripped file.
    sh(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(p("libspin-mini.so"))
        .arg(p("mini.full")));
    std::fs::write(p("keep"), format!("{INTERNAL}\n")).unwrap();
    sh(Command::new("objcopy")
        .arg("-S")
        .arg(format!("--keep-symbols={}", p("keep").display()))
        .arg(p("mini.full"))
        .arg(p("mini")));
    sh(Command::new("xz").arg("-f").arg(p("mini")));
    for lib in ["libspin.so", "libspin-mini.so"] {
        sh(Command::new("strip").arg("--strip-all").arg(p(lib)));
    }
    sh(Command::new("objcopy")
        .arg(format!("--add-section=.gnu_debugdata={}", p("mini.xz").display()))
        .arg(p("libspin-mini.so")));
    for (prog, lib) in [("spin", "spin"), ("spin-mini", "spin-mini")] {
        sh(Command::new("cc")
            .args(["-O2", "-DMAIN", "-o"])
            .arg(p(prog))
            .arg(&src)
            .arg(format!("-L{}", dir.display()))
            .arg(format!("-l{lib}"))
            .arg(format!("-Wl,-rpath,{}", dir.display()))
            .args(["-Wl,--no-as-needed", "-lcrypto"]));
    }
    let notes = run(Command::new("readelf").arg("-n").arg(p("libspin.so")));
    let notes = String::from_utf8_lossy(&notes.stdout);
    let build_id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("libspin.so has a build id")
        .to_string();
    (p("spin"), p("spin-mini"), p("libspin.debug"), build_id)
}

/// elfutils' debuginfod serving the debug files in `dir` on loopback, once it answers for `build_id`.
fn start_debuginfod(dir: &Path, build_id: &str) -> (Running, u16) {
    let port = free_port();
    let server = Command::new("debuginfod")
        .args(["-F", "-p", &port.to_string(), "-d"])
        .arg(dir.join("debuginfod.sqlite"))
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("debuginfod (Debian package debuginfod) is installed");
    let server = Running(server);
    let url = format!("http://127.0.0.1:{port}/buildid/{build_id}/debuginfo");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = run(Command::new("curl").args(["-s", "-o", "/dev/null", "-w", "%{http_code}", &url]));
        if String::from_utf8_lossy(&out.stdout) == "200" {
            return (server, port);
        }
        assert!(Instant::now() < deadline, "debuginfod did not serve {url}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn start_target(program: &Path, secs: u32) -> Running {
    Running(Command::new(program).arg(secs.to_string()).spawn().unwrap())
}

/// Records `pid` for `secs` with `env`; returns the folded stacks, the JSON report, the text summary and
/// how long tlsprof ran.
fn record(
    scratch: &Scratch,
    name: &str,
    pid: u32,
    secs: u32,
    env: &[(&str, String)],
) -> (String, serde_json::Value, String, Duration) {
    let data = scratch.path(&format!("{name}.tlsprof"));
    let started = Instant::now();
    let mut cmd = tlsprof();
    cmd.args([
        "record",
        "--pid",
        &pid.to_string(),
        "--duration",
        &secs.to_string(),
        "-o",
    ])
    .arg(&data)
    .env("DEBUGINFOD_CACHE_PATH", scratch.path(&format!("{name}-cache")));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    let took = started.elapsed();
    assert!(out.status.success(), "record: {}", String::from_utf8_lossy(&out.stderr));
    let folded = run(tlsprof().args(["flamegraph", "--folded"]).arg(&data));
    (
        String::from_utf8(folded.stdout).unwrap(),
        report_json(&data),
        String::from_utf8(out.stdout).unwrap(),
        took,
    )
}

fn unnamed<'a>(report: &'a serde_json::Value, file: &str) -> Option<&'a serde_json::Value> {
    report["unnamed_files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().is_some_and(|p| p.ends_with(file)))
}

/// Where the names of the file ending in `file` came from, when from debug information.
fn debug_source(report: &serde_json::Value, file: &str) -> Option<String> {
    report["debug_files"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(p, _)| p.ends_with(file))
        .map(|(_, s)| s.as_str().unwrap().to_string())
}

#[test]
fn stripped_library_is_named_from_debuginfod_and_minidebuginfo() {
    if !require_root("stripped_library_is_named_from_debuginfod_and_minidebuginfo") {
        return;
    }
    let scratch = Scratch::new("debuginfo");
    let (program, mini_program, debug_file, build_id) = build(&scratch.0);

    // Without debug information: file+offset frames, and the summary says which file and how to name it.
    let target = start_target(&program, 20);
    let none = [("DEBUGINFOD_URLS", String::new())];
    let (folded, report, text, plain_took) = record(&scratch, "none", target.0.id(), 2, &none);
    assert!(folded.contains("libspin.so+0x"), "{folded}");
    assert!(!folded.contains(INTERNAL), "{folded}");
    let u = unnamed(&report, "/libspin.so").unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(u["reason"], "no_debug_info");
    assert_eq!(u["build_id"], build_id.as_str());
    assert!(u["samples"].as_u64().unwrap() > 0, "{u}");
    assert!(
        text.contains("Unnamed frames in ") && flowed(&text).contains("set DEBUGINFOD_URLS"),
        "{text}"
    );

    // From a debuginfod server on loopback, serving the debug file split off the library.
    let served = scratch.path("served");
    std::fs::create_dir_all(&served).unwrap();
    std::fs::rename(&debug_file, served.join("libspin.debug")).unwrap();
    let (_server, port) = start_debuginfod(&served, &build_id);
    let url = format!("http://127.0.0.1:{port}");
    let (folded, report, text, _) = record(
        &scratch,
        "debuginfod",
        target.0.id(),
        2,
        &[("DEBUGINFOD_URLS", url.clone())],
    );
    assert!(folded.contains(INTERNAL), "{folded}");
    assert!(!folded.contains("libspin.so+0x"), "{folded}");
    assert!(unnamed(&report, "/libspin.so").is_none(), "{report:#}");
    let source = debug_source(&report, "/libspin.so");
    assert!(source.is_some_and(|s| s.starts_with(&url)), "{report:#}");
    assert!(flowed(&text).contains("from its debug information"), "{text}");

    // A server that accepts connections and never answers: given up after DEBUGINFOD_TIMEOUT, the recording
    // takes at most that much longer than one with no server, and says the servers had nothing.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://127.0.0.1:{}", silent.local_addr().unwrap().port());
    let env = [("DEBUGINFOD_URLS", dead), ("DEBUGINFOD_TIMEOUT", "2".to_string())];
    let (folded, report, _, took) = record(&scratch, "silent", target.0.id(), 2, &env);
    drop(silent);
    eprintln!("recording with a silent debuginfod server: {took:?}; with none: {plain_took:?}");
    assert!(folded.contains("libspin.so+0x"), "{folded}");
    assert_eq!(unnamed(&report, "/libspin.so").unwrap()["reason"], "not_on_servers");
    assert!(
        took <= plain_took + Duration::from_secs(2) + Duration::from_millis(1500),
        "with a silent server {took:?}, without any {plain_took:?}"
    );
    drop(target);

    // MiniDebugInfo: the symbol table in the stripped file's .gnu_debugdata.
    let target = start_target(&mini_program, 10);
    let (folded, report, _, _) = record(&scratch, "mini", target.0.id(), 2, &none);
    assert!(folded.contains(&format!(";spin;{INTERNAL} ")), "{folded}");
    assert_eq!(
        debug_source(&report, "/libspin-mini.so").as_deref(),
        Some(".gnu_debugdata"),
        "{report:#}"
    );
    drop(target);
}
