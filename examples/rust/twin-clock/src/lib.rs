// SPDX-License-Identifier: Apache-2.0
//! The shared half of the Rust ground-truth fixtures, as tests/fixtures/crypto_ops.c has it: a fixture makes
//! operations of two kinds (a key exchange and a signature, or a handshake and its signature), timing each with
//! its thread's CPU clock (`Clock::timed`, summed over the calls an operation makes until `Clock::end_op`). It
//! prints "ready", waits for a line on stdin, runs, and prints one JSON line. An unprobed twin, forked before any
//! profiler attaches, makes the same operations in turn with it, one step each: its clock, read in the same
//! milliseconds as the probed calls, is the ground truth. `--op-log PATH` writes each operation's kind (the
//! kind's initial), start (ns since the Unix epoch) and thread CPU (µs), the twin's to PATH.twin.

use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::os::fd::FromRawFd;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn fail(what: &str) -> ! {
    eprintln!("{}: {what} failed", program());
    std::process::exit(1);
}

fn program() -> String {
    std::env::args()
        .next()
        .and_then(|p| p.rsplit('/').next().map(str::to_string))
        .unwrap_or_default()
}

/// The command line every fixture shares: `[--derive x25519|p256] [--sign rsa2048|p256] [--no-twin]
/// [--op-log PATH]` and `counts` numbers.
pub struct Options {
    pub derive_alg: &'static str,
    pub sign_alg: &'static str,
    pub op_log: Option<String>,
    pub twin: bool,
    pub counts: Vec<u64>,
}

impl Options {
    /// The options, or the usage line (`operands`: what the numbers are) and exit 2.
    pub fn parse(counts: usize, operands: &str) -> Options {
        let usage = || -> ! {
            eprintln!(
                "usage: {} [--derive x25519|p256] [--sign rsa2048|p256] [--no-twin] [--op-log PATH] {operands}",
                program()
            );
            std::process::exit(2);
        };
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut o = Options {
            derive_alg: "x25519",
            sign_alg: "rsa2048",
            op_log: None,
            twin: true,
            counts: vec![],
        };
        let mut i = 0;
        while i < args.len() && args[i].starts_with("--") {
            match (args[i].as_str(), args.get(i + 1).map(String::as_str)) {
                ("--no-twin", _) => {
                    o.twin = false;
                    i += 1;
                    continue;
                }
                ("--derive", Some("x25519")) => o.derive_alg = "x25519",
                ("--derive", Some("p256")) => o.derive_alg = "p256",
                ("--sign", Some("rsa2048")) => o.sign_alg = "rsa2048",
                ("--sign", Some("p256")) => o.sign_alg = "p256",
                ("--op-log", Some(path)) => o.op_log = Some(path.to_string()),
                _ => usage(),
            }
            i += 2;
        }
        o.counts = args[i..].iter().map_while(|a| a.parse().ok()).collect();
        if o.counts.len() != counts || args.len() - i != counts {
            usage();
        }
        o
    }
}

/// One operation in the op log.
struct Op {
    kind: usize,
    start_ns: u128,
    cpu_us: f64,
}

/// The thread CPU and wall time of one kind's measured calls, and how many operations they made.
#[derive(Default, Clone, Copy)]
struct Meter {
    cpu_us: f64,
    wall_us: f64,
    ops: u64,
}

fn clock_us(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

/// A call's start (ns since the Unix epoch), thread CPU and wall time (µs).
#[derive(Clone, Copy)]
pub struct Sample {
    start_ns: u128,
    cpu_us: f64,
    wall_us: f64,
}

/// Runs `call` on the thread's CPU clock.
pub fn measure<T>(call: impl FnOnce() -> T) -> (T, Sample) {
    let start_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let wall0 = clock_us(libc::CLOCK_MONOTONIC);
    let cpu0 = clock_us(libc::CLOCK_THREAD_CPUTIME_ID);
    let out = std::hint::black_box(call());
    let cpu_us = clock_us(libc::CLOCK_THREAD_CPUTIME_ID) - cpu0;
    (
        out,
        Sample {
            start_ns,
            cpu_us,
            wall_us: clock_us(libc::CLOCK_MONOTONIC) - wall0,
        },
    )
}

/// The thread CPU a measured call costs outside its own window (the clock's reads), median of 1,001: a function
/// that encloses a fixture's window (a library calling the fixture back) costs this much more than the window.
pub fn clock_cost_us() -> f64 {
    let mut costs: Vec<f64> = (0..1001)
        .map(|_| {
            let ((_, inner), outer) = measure(|| measure(|| ()));
            outer.cpu_us - inner.cpu_us
        })
        .collect();
    costs.sort_by(f64::total_cmp);
    costs[costs.len() / 2]
}

/// Times a fixture's calls, per kind of operation.
pub struct Clock {
    meters: [Meter; 2],
    /// The operation under way of each kind: its start and CPU so far.
    pending: [Option<(u128, f64)>; 2],
    log: Option<Vec<Op>>,
}

impl Clock {
    fn new(log: bool) -> Clock {
        Clock {
            meters: [Meter::default(); 2],
            pending: [None; 2],
            log: log.then(Vec::new),
        }
    }

    /// `call`, timed as part of the operation of `kind` under way.
    pub fn timed<T>(&mut self, kind: usize, call: impl FnOnce() -> T) -> T {
        let (out, sample) = measure(call);
        self.add(kind, sample);
        out
    }

    /// A call measured elsewhere (inside a library's callback), as part of the operation of `kind` under way.
    pub fn add(&mut self, kind: usize, sample: Sample) {
        self.meters[kind].cpu_us += sample.cpu_us;
        self.meters[kind].wall_us += sample.wall_us;
        let pending = self.pending[kind].get_or_insert((sample.start_ns, 0.0));
        pending.1 += sample.cpu_us;
    }

    /// The operation of `kind` under way is complete.
    pub fn end_op(&mut self, kind: usize) {
        let Some((start_ns, cpu_us)) = self.pending[kind].take() else {
            return;
        };
        self.meters[kind].ops += 1;
        if let Some(log) = self.log.as_mut() {
            log.push(Op { kind, start_ns, cpu_us });
        }
    }

    fn write_log(&self, path: Option<String>, kinds: [&str; 2]) {
        let (Some(log), Some(path)) = (&self.log, path) else {
            return;
        };
        let mut text = String::new();
        for op in log {
            text += &format!("{} {} {:.3}\n", &kinds[op.kind][..1], op.start_ns, op.cpu_us);
        }
        std::fs::write(path, text).unwrap_or_else(|_| fail("writing the op log"));
    }
}

fn pipe() -> [File; 2] {
    let mut fds = [0; 2];
    // SAFETY: pipe fills two descriptors that nothing else owns.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        fail("pipe");
    }
    // SAFETY: each descriptor is fresh and owned by one File.
    fds.map(|fd| unsafe { File::from_raw_fd(fd) })
}

/// The main process and its twin take turns, one step each, through two pipes.
struct Lockstep {
    to_twin: [File; 2],
    to_main: [File; 2],
    is_twin: bool,
}

impl Lockstep {
    fn byte(&self, mut file: &File, write: bool) {
        let ok = if write {
            file.write_all(&[0]).is_ok()
        } else {
            file.read_exact(&mut [0]).is_ok()
        };
        if !ok {
            if self.is_twin {
                // The main process is gone.
                // SAFETY: the twin leaves without running anything of the main process's.
                unsafe { libc::_exit(0) };
            }
            fail("lockstep pipe");
        }
    }

    /// Waits for this process's turn: the twin always, the main process from its second step on.
    fn begin(&self, first: bool) {
        if self.is_twin {
            self.byte(&self.to_twin[0], false);
        } else if !first {
            self.byte(&self.to_main[0], false);
        }
    }

    fn end(&self) {
        self.byte(
            if self.is_twin {
                &self.to_main[1]
            } else {
                &self.to_twin[1]
            },
            true,
        );
    }
}

fn run_steps(steps: u64, lockstep: Option<&Lockstep>, clock: &mut Clock, step: &mut impl FnMut(&mut Clock)) {
    for i in 0..steps {
        if let Some(l) = lockstep {
            l.begin(i == 0);
        }
        step(clock);
        if let Some(l) = lockstep {
            l.end();
        }
    }
}

/// Runs `steps` calls of `step` (each makes an operation or more, timing them on the clock) in this process
/// and, in turn with it, in its unprobed twin; prints "ready" first and the JSON line at the end, named by the
/// two `kinds` (e.g. "derive" and "sign": `derives`, `derive_cpu_us`, `unprobed_derive_cpu_us`, ...) and
/// ending with `extra` JSON fields.
pub fn run(options: &Options, kinds: [&str; 2], steps: u64, extra: &str, mut step: impl FnMut(&mut Clock)) {
    let mut lockstep = options.twin.then(|| Lockstep {
        to_twin: pipe(),
        to_main: pipe(),
        is_twin: false,
    });
    let log = options.op_log.is_some();
    let mut twin_pid = None;
    if let Some(l) = lockstep.as_mut() {
        std::io::stdout().flush().unwrap_or_else(|_| fail("stdout"));
        // SAFETY: one thread; the child runs only this program's code and leaves with _exit.
        match unsafe { libc::fork() } {
            -1 => fail("fork"),
            0 => {
                l.is_twin = true;
                let mut clock = Clock::new(log);
                run_steps(steps, Some(l), &mut clock, &mut step);
                clock.write_log(options.op_log.as_ref().map(|p| format!("{p}.twin")), kinds);
                let cpu = clock
                    .meters
                    .map(|m| if m.ops > 0 { m.cpu_us / m.ops as f64 } else { 0.0 });
                let ok = (&l.to_main[1]).write_all(&cpu.map(f64::to_le_bytes).concat()).is_ok();
                // SAFETY: the twin leaves without running the main process's exit handlers.
                unsafe { libc::_exit(if ok { 0 } else { 1 }) };
            }
            pid => twin_pid = Some(pid),
        }
    }

    println!("ready");
    std::io::stdout().flush().unwrap_or_else(|_| fail("stdout"));
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .unwrap_or_else(|_| fail("reading stdin"));

    let mut clock = Clock::new(log);
    run_steps(steps, lockstep.as_ref(), &mut clock, &mut step);
    clock.write_log(options.op_log.clone(), kinds);
    let twin = match (lockstep.as_ref(), twin_pid) {
        (Some(l), Some(pid)) => {
            // The twin's last step, then its figures.
            if steps > 0 {
                l.byte(&l.to_main[0], false);
            }
            let mut bytes = [0u8; 16];
            let mut status = 0;
            // SAFETY: waitpid writes the status it is given.
            if (&l.to_main[0]).read_exact(&mut bytes).is_err()
                || unsafe { libc::waitpid(pid, &mut status, 0) } != pid
                || !libc::WIFEXITED(status)
                || libc::WEXITSTATUS(status) != 0
            {
                fail("the unprobed twin");
            }
            let cpu = |k: usize| f64::from_le_bytes(bytes[k * 8..k * 8 + 8].try_into().unwrap_or([0; 8]));
            (0..2)
                .map(|k| format!("\"unprobed_{}_cpu_us\":{:.2},", kinds[k], cpu(k)))
                .collect::<String>()
                + &format!("\"twin_pid\":{pid}")
        }
        _ => {
            (0..2)
                .map(|k| format!("\"unprobed_{}_cpu_us\":null,", kinds[k]))
                .collect::<String>()
                + "\"twin_pid\":null"
        }
    };
    let mut json = String::from("{");
    for (k, kind) in kinds.iter().enumerate() {
        let m = clock.meters[k];
        let n = m.ops.max(1) as f64;
        json += &format!(
            "\"{kind}s\":{},\"{kind}_cpu_us\":{:.2},\"{kind}_wall_us\":{:.2},",
            m.ops,
            m.cpu_us / n,
            m.wall_us / n
        );
    }
    println!(
        "{json}{twin},\"pid\":{},\"derive_alg\":\"{}\",\"sign_alg\":\"{}\",{extra}}}",
        std::process::id(),
        options.derive_alg,
        options.sign_alg
    );
}
