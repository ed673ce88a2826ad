// SPDX-License-Identifier: Apache-2.0
//! Processes, CPUs and scratch directories of the tests.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::sync::mpsc;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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

/// The first line a test server writes on its standard output, "listening ...", once it accepts connections.
pub fn listening_line(child: &mut Child, what: &str) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening"), "{what} did not start: {line:?}");
    line
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

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
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

/// A copy of `binary` stripped of its symbols (binutils' strip), in `scratch`.
pub fn stripped_copy(binary: &std::path::Path, scratch: &Scratch) -> std::path::PathBuf {
    let name = binary.file_name().unwrap().to_string_lossy();
    let stripped = scratch.path(&format!("{name}-stripped"));
    let out = run(Command::new("strip").arg("-o").arg(&stripped).arg(binary));
    assert!(out.status.success(), "strip: {}", String::from_utf8_lossy(&out.stderr));
    stripped
}
