// SPDX-License-Identifier: Apache-2.0
//! The HTML report and diff in a real browser: headless Chromium loads the pages made from the checked-in
//! recordings; the tests read the rendered DOM (figures equal to the JSON report's, the flame graph drawn
//! with its frames and its script run), check that a screenshot is not blank and that the page logged
//! nothing to the console. No root needed; without Chromium (scripts/install-deps.sh installs it) they are
//! skipped, or fail in CI.
mod common;

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// Longest a Chromium run may take before it is killed and the test fails.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(60);
const HOSTILE: &str = "<script>alert(1)</script>";

fn golden(name: &str) -> PathBuf {
    repo().join("tests/golden").join(name)
}

/// Chromium on PATH, or None after saying the test is skipped (failing in CI).
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = ["chromium", "chromium-browser"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|p| p.is_file());
    if found.is_none() {
        skip(
            &this_test(),
            "chromium is not installed (scripts/install-deps.sh installs it)",
        );
    }
    found
}

/// What a Chromium run printed: the DOM or nothing on stdout, its log on stderr.
struct BrowserRun {
    stdout: String,
    stderr: String,
}

impl BrowserRun {
    /// Lines the page logged to the console (console.* calls and uncaught exceptions), which Chromium
    /// writes to its log as `INFO:CONSOLE(line)] "message", source: URL`.
    fn console_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
            .collect()
    }
}

/// Runs headless Chromium on `page` with `args` in a profile of its own, killed (with everything it
/// started) after BROWSER_TIMEOUT.
fn browse(browser: &Path, scratch: &Scratch, page: &Path, args: &[&str]) -> BrowserRun {
    let (out, err) = (scratch.path("browser.out"), scratch.path("browser.err"));
    let mut child = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
        .args(["--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000"])
        .arg(format!("--user-data-dir={}", scratch.path("profile").display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > BROWSER_TIMEOUT {
            // SAFETY: kill has no preconditions; the group is the browser's own (process_group(0)).
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!("chromium {args:?} took over {BROWSER_TIMEOUT:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let run = BrowserRun {
        stdout: std::fs::read_to_string(&out).unwrap(),
        stderr: std::fs::read_to_string(&err).unwrap(),
    };
    assert!(status.success(), "chromium {args:?}: {status}\n{}", run.stderr);
    run
}

/// Writes the page tlsprof makes with `args` (which end with `--html -o`) to `page`.
fn make_page(args: &[&str], page: &Path) {
    let out = run(tlsprof().current_dir(repo().join("tests/golden")).args(args).arg(page));
    assert!(
        out.status.success(),
        "tlsprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn tlsprof_json(args: &[&str]) -> Value {
    let out = run(tlsprof().current_dir(repo().join("tests/golden")).args(args));
    assert!(
        out.status.success(),
        "tlsprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The figures the rendered page shows, by their `data-key`: the number each one prints, with how many
/// decimals it printed.
fn figures(dom: &str) -> HashMap<String, (f64, i32)> {
    let mut figures = HashMap::new();
    for rest in dom.split("data-key=\"").skip(1) {
        let (key, rest) = rest.split_once('"').unwrap();
        let text = rest.split_once('>').unwrap().1.split('<').next().unwrap();
        let number: String = text
            .trim_start_matches("≈ ")
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
            .collect();
        let decimals = number.split_once('.').map_or(0, |(_, d)| d.len() as i32);
        let value = number
            .parse()
            .unwrap_or_else(|_| panic!("{key}: {text:?} is not a figure"));
        assert!(
            figures.insert(key.to_string(), (value, decimals)).is_none(),
            "{key} twice"
        );
    }
    figures
}

/// The page shows `key` as `want` rounded to the decimals it printed.
fn check_figure(figures: &HashMap<String, (f64, i32)>, key: &str, want: f64) {
    let &(shown, decimals) = figures.get(key).unwrap_or_else(|| panic!("{key} is not on the page"));
    let half_ulp = 0.5 * 10f64.powi(-decimals) + 1e-9;
    assert!(
        (shown - want).abs() <= half_ulp,
        "{key}: the page shows {shown}, the JSON report has {want}"
    );
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

/// The flame graph is in the DOM with its frames, and its script ran: inferno's init() takes the fixed
/// width off the SVG and sizes the frames to the page.
fn check_flame_graph(dom: &str, frame: &str) {
    let svg = dom
        .split("<svg version=\"1.1\"")
        .nth(1)
        .expect("no flame graph <svg> in the DOM");
    let tag = svg.split('>').next().unwrap();
    assert!(tag.contains("onload=\"init(evt)\""), "not inferno's SVG: {tag}");
    assert!(!tag.contains("width="), "the flame graph's script did not run: {tag}");
    let frames = svg.split("<svg id=\"frames\"").nth(1).expect("no frames");
    let titled = frames.matches("<g><title>").count();
    assert!(titled > 50, "{titled} frames");
    assert!(frames.contains(frame), "no {frame} frame");
}

/// A screenshot of the page is an image: many colours, much of it not white.
fn check_screenshot(png_path: &Path) {
    let decoder = png::Decoder::new(std::io::BufReader::new(File::open(png_path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1280, 2000));
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(channels).collect();
    let colours: std::collections::HashSet<[u8; 3]> = pixels.iter().map(|p| [p[0], p[1], p[2]]).collect();
    let not_white = pixels.iter().filter(|p| p[..3] != [255, 255, 255]).count();
    let share = not_white as f64 / pixels.len() as f64;
    assert!(colours.len() > 200, "{} colours: a blank page?", colours.len());
    assert!(share > 0.05, "{:.1}% of the pixels are not white", 100.0 * share);
}

#[test]
fn report_renders_the_json_reports_figures() {
    let Some(browser) = chromium() else { return };
    let scratch = Scratch::new("html-report");
    let page = scratch.path("report.html");
    make_page(&["report", "before.tlsprof", "--html", "-o"], &page);
    let run = browse(&browser, &scratch, &page, &["--dump-dom"]);
    assert_eq!(
        run.console_lines(),
        Vec::<&str>::new(),
        "the page logged to the console"
    );
    let dom = &run.stdout;
    let json = tlsprof_json(&["report", "--json", "before.tlsprof"]);
    let shown = figures(dom);
    check_figure(&shown, "tls_cpu_ms", f(&json["tls_cpu_ms"]));
    check_figure(&shown, "tls_share", 100.0 * f(&json["tls_share"]));
    check_figure(&shown, "process_cpu_ms", f(&json["process_cpu_ms"]));
    check_figure(&shown, "samples", f(&json["samples"]));
    for field in ["total", "full", "resumed", "rate_per_s"] {
        check_figure(&shown, &format!("handshakes.{field}"), f(&json["handshakes"][field]));
    }
    check_figure(
        &shown,
        "handshakes.cpu_ms.mean",
        f(&json["handshakes"]["cpu_ms"]["mean"]),
    );
    let stages = json["stages"].as_array().unwrap();
    assert!(stages.len() >= 5);
    for stage in stages {
        let key = format!("stage.{}.self_cpu_ms", stage["name"].as_str().unwrap());
        check_figure(&shown, &key, f(&stage["self_cpu_ms"]));
    }
    // One row per process name, in the order recorded, with its processes' handshakes summed.
    let mut by_name: Vec<(String, f64)> = Vec::new();
    for t in json["targets"].as_array().unwrap() {
        let (comm, n) = (t["comm"].as_str().unwrap().to_string(), f(&t["handshakes"]));
        match by_name.iter_mut().find(|(c, _)| *c == comm) {
            Some((_, sum)) => *sum += n,
            None => by_name.push((comm, n)),
        }
    }
    for (i, (_, n)) in by_name.iter().enumerate() {
        check_figure(&shown, &format!("group.{i}.handshakes"), *n);
    }
    check_flame_graph(dom, "EVP_DigestSign [sign]");
    assert!(
        dom.contains("<details class=\"accounting\">"),
        "the accounting is not collapsed"
    );
}

#[test]
fn report_screenshot_is_not_blank() {
    let Some(browser) = chromium() else { return };
    let scratch = Scratch::new("html-screenshot");
    let page = scratch.path("report.html");
    make_page(&["report", "before.tlsprof", "--html", "-o"], &page);
    let png = scratch.path("report.png");
    let shot = format!("--screenshot={}", png.display());
    let run = browse(&browser, &scratch, &page, &[&shot, "--window-size=1280,2000"]);
    assert_eq!(
        run.console_lines(),
        Vec::<&str>::new(),
        "the page logged to the console"
    );
    check_screenshot(&png);
}

#[test]
fn diff_renders_the_json_diffs_figures() {
    let Some(browser) = chromium() else { return };
    let scratch = Scratch::new("html-diff");
    let page = scratch.path("diff.html");
    make_page(&["diff", "before.tlsprof", "after.tlsprof", "--html", "-o"], &page);
    let run = browse(&browser, &scratch, &page, &["--dump-dom"]);
    assert_eq!(
        run.console_lines(),
        Vec::<&str>::new(),
        "the page logged to the console"
    );
    let json = tlsprof_json(&["diff", "--json", "before.tlsprof", "after.tlsprof"]);
    let shown = figures(&run.stdout);
    for side in ["before", "after"] {
        let j = &json[side];
        let key = |k: &str| format!("diff.{side}.{k}");
        check_figure(&shown, &key("handshakes_per_s"), f(&j["handshakes_per_s"]));
        check_figure(&shown, &key("resumed_share"), 100.0 * f(&j["resumed_share"]));
        check_figure(&shown, &key("tls_share"), 100.0 * f(&j["tls_share"]));
        for q in ["mean", "p50"] {
            let want = f(&j["cpu_us_per_handshake"][q]);
            check_figure(&shown, &key(&format!("cpu_us_per_handshake.{q}")), want);
        }
        for stage in json["stages"].as_array().unwrap() {
            let name = stage["name"].as_str().unwrap();
            let want = f(&stage[format!("{side}_us_per_handshake")]);
            check_figure(&shown, &key(&format!("stage.{name}")), want);
        }
        // Each recording's own figures, as its report gives them.
        let report = tlsprof_json(&["report", "--json", &format!("{side}.tlsprof")]);
        check_figure(
            &shown,
            &format!("{side}.handshakes.total"),
            f(&report["handshakes"]["total"]),
        );
    }
    check_flame_graph(&run.stdout, "SSL_do_handshake [handshake]");
}

/// A process named like markup shows as text: the only script in the DOM is the flame graph's.
#[test]
fn hostile_process_name_is_text_in_the_browser() {
    let Some(browser) = chromium() else { return };
    let scratch = Scratch::new("html-hostile");
    let mut rec: Value = serde_json::from_slice(&std::fs::read(golden("before.tlsprof")).unwrap()).unwrap();
    for t in rec["targets"].as_array_mut().unwrap() {
        t["comm"] = HOSTILE.into();
    }
    let recording = scratch.path("hostile.tlsprof");
    std::fs::write(&recording, serde_json::to_vec(&rec).unwrap()).unwrap();
    let page = scratch.path("hostile.html");
    make_page(&["report", recording.to_str().unwrap(), "--html", "-o"], &page);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains(HOSTILE), "the name reached the page unescaped");
    let run = browse(&browser, &scratch, &page, &["--dump-dom"]);
    assert_eq!(
        run.console_lines(),
        Vec::<&str>::new(),
        "the page logged to the console"
    );
    assert_eq!(
        run.stdout.matches("<script").count(),
        1,
        "a script element besides the flame graph's"
    );
    assert!(run.stdout.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

/// The console check sees what a page logs: one that throws is caught.
#[test]
fn console_check_catches_a_page_that_throws() {
    let Some(browser) = chromium() else { return };
    let scratch = Scratch::new("html-throws");
    let page = scratch.path("throws.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>",
    )
    .unwrap();
    let run = browse(&browser, &scratch, &page, &["--dump-dom"]);
    let lines = run.console_lines();
    assert!(
        lines.iter().any(|l| l.contains("Uncaught ReferenceError")),
        "{lines:?}\n{}",
        run.stderr
    );
}
