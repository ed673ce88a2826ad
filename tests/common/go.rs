// SPDX-License-Identifier: Apache-2.0
//! Go targets and tools: examples/go, its toolchain, and pprof.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use super::{repo, run, skip, this_test, Running};

/// The Go toolchain: `go` on PATH, else where the official archive installs it.
pub fn go_tool() -> PathBuf {
    let on_path = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if on_path {
        PathBuf::from("go")
    } else {
        PathBuf::from("/usr/local/go/bin/go")
    }
}

/// Builds a program of examples/go (`server`, `client`, `ops`) into target/go-examples/, once per
/// variant: with `toolchain` (a release such as "go1.21.13", fetched through the Go module proxy; None: the
/// machine's go) and stripped of symbols and DWARF (`-ldflags=-s -w`) or not.
pub fn go_build(program: &str, toolchain: Option<&str>, stripped: bool) -> PathBuf {
    let dir = repo().join("target").join("go-examples");
    std::fs::create_dir_all(&dir).unwrap();
    let name = format!(
        "{program}-{}{}",
        toolchain.unwrap_or("local"),
        if stripped { "-stripped" } else { "" }
    );
    let out = dir.join(name);
    let mut cmd = Command::new(go_tool());
    cmd.current_dir(repo().join("examples/go"))
        .args(["build", "-o"])
        .arg(&out);
    if stripped {
        cmd.arg("-ldflags=-s -w");
    }
    cmd.arg(format!("./{program}"));
    if let Some(t) = toolchain {
        cmd.env("GOTOOLCHAIN", t);
    }
    let built = run(&mut cmd);
    assert!(
        built.status.success(),
        "go build {program}: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    out
}

/// The HTTPS server of examples/go/server, started with `args`; its address is on its first line.
pub fn start_go_server(binary: &Path, args: &[&str]) -> (Running, String) {
    let mut cmd = Command::new(binary);
    cmd.args(args);
    start_go_server_cmd(cmd)
}

/// The same server from a command made by the caller (environment, arguments).
pub fn start_go_server_cmd(mut cmd: Command) -> (Running, String) {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("go server did not start: {line:?}"))
        .trim()
        .to_string();
    (Running(child), addr)
}

/// Runs examples/go/client against `addr` with `args` (pinned to `cpu` when given) and returns its JSON
/// line: connections, resumed, errors, wrong_answers.
pub fn go_client(client: &Path, addr: &str, args: &[&str], cpu: Option<usize>) -> Value {
    let mut cmd = match cpu {
        Some(c) => {
            let mut t = Command::new("taskset");
            t.args(["-c", &c.to_string()]).arg(client);
            t
        }
        None => Command::new(client),
    };
    let out = run(cmd.args(["-addr", addr]).args(args));
    assert!(
        out.status.success(),
        "go client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("go client prints one JSON line")
}

/// Go's pprof, from PATH or the Go distribution's usual place; without it the caller skips its checks (see `skip`).
pub fn go() -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("go"))
        .chain([PathBuf::from("/usr/local/go/bin/go")])
        .find(|p| p.is_file());
    if found.is_none() {
        skip(
            &format!("go tool pprof in {}", this_test()),
            "go is not installed (scripts/install-deps.sh installs it)",
        );
    }
    found
}

/// examples/go-quic (HTTP/3 on quic-go beside HTTPS over TCP, its own module) built into target/go-examples/,
/// its modules fetched through the Go module proxy the first time.
pub fn go_quic_build() -> PathBuf {
    let out = repo().join("target/go-examples/go-quic");
    let built = run(Command::new(go_tool())
        .current_dir(repo().join("examples/go-quic"))
        .args(["build", "-o"])
        .arg(&out)
        .arg("."));
    assert!(
        built.status.success(),
        "go build examples/go-quic: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    out
}

/// Runs examples/go-quic's HTTP/3 client against `addr` for `n` connections (`resume`: offering its last
/// session); its JSON line: connections, resumed.
pub fn go_quic_client(binary: &Path, addr: &str, n: u32, resume: bool) -> Value {
    let mut cmd = Command::new(binary);
    cmd.args(["client", "-addr", addr, "-n", &n.to_string()]);
    if resume {
        cmd.arg("-resume");
    }
    let out = run(&mut cmd);
    assert!(
        out.status.success(),
        "go-quic client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("go-quic client prints one JSON line")
}

/// Parca (the profile store) built from examples/parca's module into target/go-examples/parca by
/// scripts/build-parca.sh, once; a build `make test` started is waited for.
pub fn parca_build() -> PathBuf {
    let built = run(&mut Command::new(repo().join("scripts/build-parca.sh")));
    assert!(
        built.status.success(),
        "scripts/build-parca.sh: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    repo().join("target/go-examples/parca")
}
