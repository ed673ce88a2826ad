// SPDX-License-Identifier: Apache-2.0
//! Golden outputs: the text report, JSON, flame graph and diff of checked-in recordings (two `make demo`
//! runs, their samples cut to the 120 heaviest stacks), compared byte for byte. No root needed.
//! Refresh after an intended change with `make golden`, and read the diff before committing it.
mod common;

use std::path::PathBuf;

use common::*;

fn golden(name: &str) -> PathBuf {
    repo().join("tests/golden").join(name)
}

/// Runs tlsprof with `args` in tests/golden and returns its standard output.
fn tlsprof_in_golden(args: &[&str]) -> Vec<u8> {
    let out = run(tlsprof().current_dir(repo().join("tests/golden")).args(args));
    assert!(
        out.status.success(),
        "tlsprof {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Compares tlsprof's standard output for `args` with tests/golden/`expected`.
fn check(expected: &str, args: &[&str]) {
    compare(expected, args, tlsprof_in_golden(args));
}

fn compare(expected: &str, args: &[&str], got: Vec<u8>) {
    let path = golden(expected);
    if std::env::var_os("TLSPROF_BLESS").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run `make golden`)", path.display()));
    if got != want {
        let got = String::from_utf8_lossy(&got);
        let want = String::from_utf8_lossy(&want);
        let first = got
            .lines()
            .zip(want.lines())
            .position(|(g, w)| g != w)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "tlsprof {args:?} differs from {} at line {}:\n  got:  {:?}\n  want: {:?}\n(an intended change: `make golden`, then review the diff)",
            path.display(),
            first + 1,
            got.lines().nth(first).unwrap_or("(end)"),
            want.lines().nth(first).unwrap_or("(end)")
        );
    }
}

/// Text with its colour sequences (ESC [ parameters m) taken out: what a terminal shows.
fn visible(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.next_if_eq(&'[').is_some() {
            while chars.next_if(|c| c.is_ascii_digit() || *c == ';').is_some() {}
            assert_eq!(
                chars.next(),
                Some('m'),
                "an escape sequence other than a colour: {text:?}"
            );
        } else {
            out.push(c);
        }
    }
    out
}

/// The first screen of each checked-in recording: the report's first lines (`--brief` prints them alone),
/// none wider than an 80–100 column terminal, in colour too.
#[test]
fn first_screen_fits_100_columns() {
    for recording in ["before.tlsprof", "after.tlsprof"] {
        for color in ["never", "always"] {
            let brief = tlsprof_in_golden(&["report", "--brief", "--color", color, recording]);
            let report = tlsprof_in_golden(&["report", "--color", color, recording]);
            let (brief, report) = (String::from_utf8(brief).unwrap(), String::from_utf8(report).unwrap());
            assert!(
                report.starts_with(&brief),
                "the report opens with its first screen: {brief}"
            );
            let shown = visible(&brief);
            let lines: Vec<&str> = shown.lines().collect();
            assert!((4..=15).contains(&lines.len()), "{brief}");
            for line in lines {
                assert!(line.chars().count() <= 100, "{} columns: {line}", line.chars().count());
            }
        }
    }
}

/// Colour only where asked for or on a terminal without NO_COLOR; the same text either way.
#[test]
fn colour_on_a_terminal_unless_no_color() {
    let plain = tlsprof_in_golden(&["report", "before.tlsprof"]);
    assert!(!plain.contains(&0x1b), "piped output is plain");
    let coloured = String::from_utf8(tlsprof_in_golden(&["report", "--color", "always", "before.tlsprof"])).unwrap();
    assert!(coloured.contains('\x1b'));
    // Bars are drawn only in colour: without them, the text is the plain report's.
    let unbarred: String = visible(&coloured)
        .chars()
        .filter(|c| !"█▉▊▋▌▍▎▏".contains(*c))
        .collect();
    let trimmed: Vec<&str> = unbarred.lines().map(str::trim_end).collect();
    assert_eq!(trimmed.join("\n") + "\n", String::from_utf8(plain).unwrap());
    // On a terminal (script(1) gives it one), auto colours unless NO_COLOR is set and not empty.
    let on_terminal = |no_color: &str| {
        let cmd = format!(
            "{} report --brief --color auto before.tlsprof",
            env!("CARGO_BIN_EXE_tlsprof")
        );
        let out = run(std::process::Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env("NO_COLOR", no_color)
            .current_dir(repo().join("tests/golden")));
        assert!(out.status.success(), "script: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout.contains(&0x1b)
    };
    assert!(on_terminal(""), "an empty NO_COLOR leaves colour on");
    assert!(!on_terminal("1"), "NO_COLOR=1 turns colour off");
}

#[test]
fn report_text() {
    check("report.txt", &["report", "before.tlsprof"]);
}

#[test]
fn report_text_in_colour() {
    check("report.color.txt", &["report", "--color", "always", "before.tlsprof"]);
}

#[test]
fn report_json() {
    check("report.json", &["report", "--json", "before.tlsprof"]);
}

#[test]
fn flame_graph_svg() {
    check("flame.svg", &["flamegraph", "before.tlsprof"]);
}

#[test]
fn folded_stacks() {
    check("flame.folded", &["flamegraph", "--folded", "before.tlsprof"]);
}

#[test]
fn diff_text() {
    check("diff.txt", &["diff", "before.tlsprof", "after.tlsprof"]);
}

#[test]
fn diff_json() {
    check("diff.json", &["diff", "--json", "before.tlsprof", "after.tlsprof"]);
}

#[test]
fn diff_svg() {
    let scratch = Scratch::new("golden-diff-svg");
    let svg = scratch.path("diff.svg");
    let args = [
        "diff",
        "before.tlsprof",
        "after.tlsprof",
        "--output",
        svg.to_str().unwrap(),
    ];
    tlsprof_in_golden(&args);
    compare("diff.svg", &args[..3], std::fs::read(&svg).unwrap());
}

/// Objects keyed by data (debug_files: file path -> where its debug information was found): values, not fields.
const MAPS: &[&str] = &["debug_files"];

/// A JSON shape: each key and the keys below it (the union over an array's objects).
#[derive(Default)]
struct Shape(std::collections::BTreeMap<String, Shape>);

fn shape_of(v: &serde_json::Value) -> Shape {
    let mut shape = Shape::default();
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let below = if MAPS.contains(&k.as_str()) {
                    Shape::default()
                } else {
                    shape_of(v)
                };
                shape.0.insert(k.clone(), below);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                for (k, v) in shape_of(item).0 {
                    shape.0.entry(k).or_insert(v);
                }
            }
        }
        _ => {}
    }
    shape
}

fn paths(shape: &Shape, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in &shape.0 {
        let path = format!("{prefix}{k}");
        out.extend(paths(v, &format!("{path}.")));
        out.push(path);
    }
    out
}

/// Parses docs/json-report.md's list: `name`, `name {child, ...}` or `name [{child, ...}]`, comma-separated.
fn parse_shape(tokens: &mut std::iter::Peekable<std::vec::IntoIter<String>>) -> Shape {
    let mut shape = Shape::default();
    while let Some(name) = tokens.next_if(|t| t.starts_with(|c: char| c.is_alphanumeric())) {
        let array = tokens.next_if(|t| t == "[").is_some();
        let children = if tokens.next_if(|t| t == "{").is_some() {
            let inner = parse_shape(tokens);
            assert_eq!(
                tokens.next().as_deref(),
                Some("}"),
                "docs/json-report.md: {name} {{...}} does not close"
            );
            inner
        } else {
            Shape::default()
        };
        if array {
            assert_eq!(
                tokens.next().as_deref(),
                Some("]"),
                "docs/json-report.md: {name} [...] does not close"
            );
        }
        shape.0.insert(name, children);
        tokens.next_if(|t| t == ",");
    }
    shape
}

fn tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if "{}[],".contains(c) {
            out.push(c.to_string());
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

#[test]
fn readme_lists_every_json_field() {
    let readme = std::fs::read_to_string(repo().join("docs/json-report.md")).unwrap();
    let start = readme
        .find("`tlsprof report --json` prints")
        .expect("docs/json-report.md describes the JSON report");
    let list = &readme[start..];
    let list = &list[list.find(':').unwrap() + 1..list.find("\n\n").unwrap()];
    let mut plain = String::new();
    let mut depth = 0;
    for c in list.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '`' => {}
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let mut tokens = tokens(&plain).into_iter().peekable();
    let documented = parse_shape(&mut tokens);
    assert_eq!(tokens.next(), None, "docs/json-report.md's field list does not parse");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(golden("report.json")).unwrap()).unwrap();
    let (documented, actual) = (paths(&documented, ""), paths(&shape_of(&json), ""));
    let missing: Vec<&String> = actual.iter().filter(|p| !documented.contains(p)).collect();
    let extra: Vec<&String> = documented.iter().filter(|p| !actual.contains(p)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/json-report.md's `tlsprof report --json` field list: missing {missing:?}, not in the JSON {extra:?}"
    );
}
