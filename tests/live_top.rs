// SPDX-License-Identifier: Apache-2.0
//! Live: `tlsprof top` on nginx (an RSA-3072 certificate) under `openssl s_time -new` and a resuming client, the
//! full screen driven in tmux as a user would (its keys, what it shows against the clients' counts, the
//! recording `w` writes, no BPF left after `q`), and the batch lines parsed (needs root).
mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;

/// The bound the default-mode tests hold estimates to (tests/live_default_mode.rs).
const TOLERANCE: f64 = 0.10;
const LOAD_SECS: u32 = 5;

/// A tmux server of its own (its socket named for this test process) with one session running `command`;
/// killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(command: &str) -> Tmux {
        // A server per terminal: one just killed may still hold its socket's name.
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let tmux = Tmux {
            socket: format!(
                "tlsprof-test-{}-{}",
                std::process::id(),
                STARTED.fetch_add(1, Ordering::Relaxed)
            ),
        };
        // The shell stays after tlsprof exits to say how it exited.
        let out = tmux
            .cmd()
            .args(["new-session", "-d", "-s", "top", "-x", "150", "-y", "40"])
            .arg(format!("{command}; echo \"top exited: $?\"; sleep 600"))
            .stderr(Stdio::piped())
            .output()
            .expect("tmux (Debian's package) runs: scripts/install-deps.sh installs it");
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]).stdout(Stdio::piped());
        c
    }

    fn keys(&self, keys: &str) {
        assert!(self
            .cmd()
            .args(["send-keys", "-t", "top", keys])
            .status()
            .unwrap()
            .success());
    }

    fn pane(&self) -> String {
        self.capture(&[])
    }

    /// The pane with its colours and attributes as escape sequences.
    fn styled_pane(&self) -> String {
        self.capture(&["-e"])
    }

    fn capture(&self, args: &[&str]) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "top"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The pane once it shows `what`, waiting at most `secs`.
    fn wait_for(&self, what: impl Fn(&str) -> bool, secs: u64, doing: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let pane = self.pane();
            if what(&pane) {
                return pane;
            }
            assert!(Instant::now() < deadline, "{doing}: not shown in {secs} s:\n{pane}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

/// The row of process `pid`: its cells split on runs of spaces (a cell like "sign 48%" holds one).
fn row_of(pane: &str, pid: u32) -> Vec<String> {
    let line = pane
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&pid.to_string()))
        .unwrap_or_else(|| panic!("no row for {pid}:\n{pane}"));
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(String::from)
        .collect()
}

/// "≈512±12" or "512": the value and its 95% interval.
fn figure(cell: &str) -> (f64, [f64; 2]) {
    let cell = cell.trim_start_matches('≈');
    match cell.split_once('±') {
        Some((v, half)) => {
            let (v, half): (f64, f64) = (v.parse().unwrap(), half.parse().unwrap());
            (v, [v - half, v + half])
        }
        None => {
            let v = cell.parse().unwrap_or_else(|_| panic!("not a figure: {cell}"));
            (v, [v, v])
        }
    }
}

/// "12.3 s since reset" in the header.
fn span_s(pane: &str) -> f64 {
    let head = pane.lines().next().unwrap();
    let at = head
        .find(" s since reset")
        .unwrap_or_else(|| panic!("no span:\n{pane}"));
    head[..at].rsplit(' ').next().unwrap().parse().unwrap()
}

/// Some SGR escape sequence in `text` sets a colour (39 and 49, the default colours, do not).
fn coloured(text: &str) -> bool {
    text.split("\x1b[").skip(1).any(|seq| {
        let params = seq.split('m').next().unwrap_or_default();
        params
            .split(';')
            .filter_map(|p| p.parse::<u32>().ok())
            .any(|p| matches!(p, 30..=38 | 40..=48 | 90..=97 | 100..=107))
    })
}

/// No tlsprof program is loaded a few seconds after top exited on `how` (the kernel frees programs after
/// their links, a little later).
fn assert_no_programs_left(how: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tlsprof_programs().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(tlsprof_programs(), Vec::<String>::new(), "left behind after {how}");
}

#[test]
fn top_shows_nginx_as_its_clients_saw_it_and_its_keys_work() {
    if !require_root("top_shows_nginx_as_its_clients_saw_it_and_its_keys_work") {
        return;
    }
    let scratch = Scratch::new("live-top");
    // RSA-3072: signing is the top stage beside the resumed handshakes, whatever the CPU.
    let nginx = Nginx::start(&scratch.path("nginx"), &["--tickets", "on", "--cert", "rsa3072"]);
    let worker = nginx.workers()[0];
    let written = scratch.path("top.tlsprof");
    let tmux = Tmux::start(&format!(
        "NO_COLOR=1 {} top --pid {worker} --pid {} --output {}",
        env!("CARGO_BIN_EXE_tlsprof"),
        nginx.master,
        written.display()
    ));
    tmux.wait_for(|p| p.contains("since reset"), 60, "the first interval");
    let programs = tlsprof_programs();
    assert!(!programs.is_empty(), "no tlsprof program loaded while top runs");

    // The rows' span starts at the reset, before the load; the screen is held once the load is over.
    tmux.keys("r");
    tmux.wait_for(|p| p.contains("rates reset"), 10, "r");
    let port = nginx.port;
    let resuming = std::thread::spawn(move || {
        python_client(
            "resume_client.py",
            &[
                "--port",
                &port.to_string(),
                "--count",
                "100000",
                "--clients",
                "10",
                "--tls",
                "1.3",
                "--seconds",
                &LOAD_SECS.to_string(),
            ],
        )
    });
    let full = s_time_new(nginx.port, LOAD_SECS);
    let resumed = resuming.join().unwrap();
    let connections = full + resumed["connections"].as_u64().unwrap();
    let reused = resumed["reused"].as_u64().unwrap();
    // Two intervals more: the one the load ended in is in.
    std::thread::sleep(Duration::from_millis(2500));
    tmux.keys("p");
    let pane = tmux.wait_for(|p| p.contains("· paused"), 10, "p");
    let row = row_of(&pane, worker);
    eprintln!("{connections} connections by the clients ({reused} resumed):\n{pane}");
    let span = span_s(&pane);
    let (rate, [lo, hi]) = figure(&row[3]);
    // The screen's rounding: a rate of 100 or more in whole handshakes, the span in tenths.
    let slack = 0.5 * span + 0.05 * rate;
    assert_estimate(
        "handshakes since the reset (the row's rate times the span)",
        rate * span,
        [lo * span - slack, hi * span + slack],
        connections,
        TOLERANCE,
        &pane,
    );
    let resumed_pct: f64 = row[4].parse().unwrap();
    let truth = 100.0 * reused as f64 / connections as f64;
    assert!(
        (resumed_pct - truth).abs() <= 10.0,
        "resumed {resumed_pct}% on the screen, {truth:.1}% by the clients\n{pane}"
    );
    assert!(
        row[6].starts_with("sign "),
        "top stage {:?} for an RSA certificate\n{pane}",
        row[6]
    );
    let (tls_share, _) = figure(&row[2]);
    assert!(tls_share > 0.0 && tls_share <= 100.0, "TLS share {tls_share}\n{pane}");

    // NO_COLOR: attributes (bold, reverse) but no colour.
    let styled = tmux.styled_pane();
    assert!(styled.contains("\x1b["), "no attributes at all:\n{styled}");
    assert!(!coloured(&styled), "colour despite NO_COLOR:\n{styled:?}");

    // Paused: the figures stay as they were while the recording goes on.
    std::thread::sleep(Duration::from_millis(2200));
    assert_eq!(span_s(&tmux.pane()), span, "the span moved while paused");

    // ↓ selects the master (no TLS, sorted last): no stages to draw; ↑ the worker again.
    let bars = format!("nginx {worker}: its stages");
    assert!(pane.contains(&bars), "the worker's stages are not drawn\n{pane}");
    tmux.keys("Down");
    tmux.wait_for(|p| !p.contains(&bars), 10, "Down");
    tmux.keys("Up");
    tmux.wait_for(|p| p.contains(&bars), 10, "Up");

    // s cycles the sort column.
    tmux.keys("s");
    tmux.wait_for(|p| p.contains("sort (MACH%)"), 10, "s");

    // w writes what has been seen since top started: the same handshakes.
    tmux.keys("w");
    tmux.wait_for(|p| p.contains("wrote "), 10, "w");
    let report = report_json(&written);
    let total = handshakes_of(&report, "total") as f64;
    assert!(
        (lo * span - slack..=hi * span + slack).contains(&total),
        "the written recording has {total} handshakes, the screen {:.0} [{:.0}, {:.0}]\n{pane}",
        rate * span,
        lo * span,
        hi * span
    );

    tmux.keys("q");
    let end = tmux.wait_for(|p| p.contains("top exited:"), 30, "q");
    assert!(end.contains("top exited: 0"), "{end}");
    assert_no_programs_left("q");
}

#[test]
fn top_batch_lines_parse_and_sigterm_stops_it_cleanly() {
    if !require_root("top_batch_lines_parse_and_sigterm_stops_it_cleanly") {
        return;
    }
    let scratch = Scratch::new("live-top-batch");
    let nginx = Nginx::start(&scratch.path("nginx"), &[]);
    let worker = nginx.workers()[0];
    let mut child = tlsprof()
        .args([
            "top",
            "--batch",
            "--interval",
            "1",
            "--max-overhead",
            "100",
            "--pid",
            &worker.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(child.stdout.take().unwrap(), |_| true);
    let header = lines.recv_timeout(Duration::from_secs(60)).expect("a header line");
    let names: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(&names[..3], ["t", "pid", "tls%"], "{header}");
    let col = |name: &str| names.iter().position(|n| *n == name).unwrap();
    let connections = s_time_new(nginx.port, 3);
    let mut counted = 0.0;
    let mut seen = Vec::new();
    // Exact mode: each interval's rate times its length (t is when it ended) adds up to the clients'
    // connections.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last_t = 0.0;
    while Instant::now() < deadline {
        let Ok(line) = lines.recv_timeout(Duration::from_secs(5)) else {
            break;
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[col("pid")], worker.to_string(), "{line}");
        assert_eq!(fields.last(), Some(&"nginx"), "{line}");
        let t: f64 = fields[0].parse().unwrap();
        if let Ok(rate) = fields[col("hs/s")].parse::<f64>() {
            assert_eq!(fields[col("hs/s-ci95")], "exact", "{line}");
            counted += rate * (t - last_t);
        }
        last_t = t;
        let idle = fields[col("hs/s")] == "0.0";
        seen.push(line);
        if seen.len() >= 3 && idle && counted > 0.0 {
            break;
        }
    }
    let text = seen.join("\n");
    eprintln!("{connections} connections by s_time:\n{header}\n{text}");
    assert!(
        within(counted, connections as f64, TOLERANCE),
        "{counted:.0} handshakes in the lines for {connections} connections\n{text}"
    );
    let pid = child.id();
    // SAFETY: kill only sends a signal to our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "top after SIGTERM: {status}");
    assert_no_programs_left("SIGTERM");

    // --once: one interval's lines, then it stops by itself.
    let out = run(tlsprof().args(["top", "--once", "--pid", &worker.to_string()]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "top --once: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "a header and one line:\n{text}");
    assert_eq!(
        lines[1].split_whitespace().nth(1),
        Some(worker.to_string().as_str()),
        "{text}"
    );
    assert_no_programs_left("--once");
}

/// tlsprof processes running `top`: none may be left behind however the terminal went.
fn top_processes() -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        if args.len() > 1 && args[0].ends_with(b"/tlsprof") && args[1] == b"top" {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn top_follows_new_workers_and_quits_on_ctrl_c_and_a_closed_terminal() {
    if !require_root("top_follows_new_workers_and_quits_on_ctrl_c_and_a_closed_terminal") {
        return;
    }
    let scratch = Scratch::new("live-top-quit");
    let nginx = Nginx::start(&scratch.path("nginx"), &[]);
    let old = nginx.workers()[0];
    // The master's children that start are followed; the worker running now is given.
    let tmux = Tmux::start(&format!(
        "{} top --pid {} --pid {old} --output /dev/null",
        env!("CARGO_BIN_EXE_tlsprof"),
        nginx.master
    ));
    tmux.wait_for(
        |p| p.lines().any(|l| l.starts_with(&format!("{old} "))),
        60,
        "the first interval",
    );
    // A reload: the master forks new workers and the old one exits (greyed, then gone).
    let out = Command::new(repo().join("scripts/nginx-target.sh"))
        .args(["reload", nginx.dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "reload: {}", String::from_utf8_lossy(&out.stderr));
    let deadline = Instant::now() + Duration::from_secs(10);
    let new = loop {
        let workers: Vec<u32> = nginx.workers().into_iter().filter(|&w| w != old).collect();
        if let Some(&w) = workers.first() {
            break w;
        }
        assert!(Instant::now() < deadline, "no new worker after the reload");
        std::thread::sleep(Duration::from_millis(100));
    };
    tmux.wait_for(
        |p| {
            p.lines().any(|l| l.starts_with(&format!("{new} ")))
                && p.lines()
                    .any(|l| l.starts_with(&format!("{old} ")) && l.contains("(exited)"))
        },
        20,
        "the new worker beside the old one, greyed",
    );
    tmux.wait_for(
        |p| !p.lines().any(|l| l.starts_with(&format!("{old} "))),
        20,
        "the old worker gone",
    );

    tmux.keys("C-c");
    let end = tmux.wait_for(|p| p.contains("top exited:"), 30, "Ctrl-C");
    assert!(end.contains("top exited: 0"), "{end}");
    assert_no_programs_left("Ctrl-C");
    drop(tmux);

    // A terminal that goes away (tmux killed: SIGHUP, then a tty that reads nothing).
    let tmux = Tmux::start(&format!(
        "exec {} top --pid {} --output /dev/null",
        env!("CARGO_BIN_EXE_tlsprof"),
        nginx.master
    ));
    tmux.wait_for(|p| p.contains("since reset"), 60, "the first interval");
    assert_eq!(top_processes().len(), 1, "one top runs");
    drop(tmux);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !top_processes().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        top_processes(),
        Vec::<u32>::new(),
        "top still runs after its terminal closed"
    );
    assert_no_programs_left("a closed terminal");
}
