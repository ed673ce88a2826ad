// SPDX-License-Identifier: Apache-2.0
//! Live: a TLS library family defined here, outside tlsprof, is detected in a process and probed through the
//! library's record API like a built-in one (needs root).
mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use tlsprof::catalogue::causes::CauseRow;
use tlsprof::catalogue::families::{Calls, Family, Flavor, Naming, Symbols, BUILT_IN};
use tlsprof::catalogue::{Origin, Row, Stage};
use tlsprof::model::CallGraph;
use tlsprof::record::targets::{Process, Selection};
use tlsprof::record::{self, AttachOptions, HelloCapture, RecordOptions};

/// tests/fixtures/toy_tls.c's functions.
struct Toy;

const fn toy_row(symbol: &'static str, stage: Stage) -> Row {
    Row {
        symbol,
        stage: Some(stage),
        origin: Origin::Public,
        length_query_arg: 0,
        flags: 0,
        frequent: false,
    }
}

static TOY_ROWS: &[Row] = &[
    toy_row("toy_handshake", Stage::Handshake),
    toy_row("toy_sign", Stage::Sign),
];

impl Family for Toy {
    fn id(&self) -> &'static str {
        "toy"
    }
    fn name(&self) -> &'static str {
        "the toy TLS library"
    }
    fn rows(&self) -> &'static [Row] {
        TOY_ROWS
    }
    fn naming(&self) -> Naming {
        Naming::Symbols
    }
    fn calls(&self) -> Calls {
        Calls::Native
    }
    fn describe(&self, _flavor: Flavor) -> &'static str {
        "toy"
    }
    fn describe_symbols(&self, _symbols: Symbols) -> &'static str {
        "toy symbols"
    }
    fn own_code(&self) -> &'static str {
        "the toy library's"
    }
    fn cause_rows(&self) -> &'static [CauseRow] {
        &[]
    }
    fn record_layer(&self) -> &'static [(&'static str, Stage)] {
        &[]
    }
}

static TOY: Toy = Toy;

#[test]
fn a_family_from_outside_is_detected_and_probed() {
    if !require_root("a_family_from_outside_is_detected_and_probed") {
        return;
    }
    let scratch = Scratch::new("live_family");
    let bin = scratch.path("toy_tls");
    let out = run(Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&bin)
        .arg(repo().join("tests/fixtures/toy_tls.c")));
    assert!(out.status.success(), "build: {}", String::from_utf8_lossy(&out.stderr));
    let mut toy = Command::new(&bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(toy.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    let selection = Selection {
        pids: vec![toy.id()],
        comms: Vec::new(),
        all: false,
    };
    let procs: Vec<Process> = selection.resolve().unwrap();
    let opts = RecordOptions {
        duration: Some(Duration::from_secs(2)),
        selection,
        attach: AttachOptions {
            families: BUILT_IN.iter().copied().chain([&TOY as &dyn Family]).collect(),
            hello_capture: HelloCapture::Off,
            freq_hz: 99,
            all_probes: false,
            call_graph: CallGraph::Fp,
            stack_bytes: 8,
            kernel_stacks: false,
            wire_only: false,
            jvm_perf_maps: false,
        },
        max_overhead_pct: 100.0,
    };
    let rec = record::record(&procs, &opts, Arc::new(AtomicBool::new(false))).unwrap();
    drop(toy.stdin.take());
    let made: u64 = {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        line.trim().parse().unwrap()
    };
    assert!(toy.wait().unwrap().success());

    let lib = rec
        .libraries
        .iter()
        .position(|l| l.family == "toy")
        .unwrap_or_else(|| panic!("the toy family was not detected: {:?}", rec.libraries));
    assert_eq!(rec.libraries[lib].flavor, Flavor::Static);
    assert_eq!(rec.libraries[lib].functions_found, 2);
    let id = |name: &str| {
        rec.functions
            .iter()
            .position(|f| f.library == lib && f.name == name)
            .unwrap_or_else(|| panic!("{name} not probed")) as u16
    };
    let (handshake, sign) = (id("toy_handshake"), id("toy_sign"));
    let calls = |path: &[u16]| -> u64 { rec.tree.iter().filter(|n| n.path == path).map(|n| n.calls).sum() };
    let (handshakes, signs) = (calls(&[handshake]), calls(&[handshake, sign]));
    eprintln!("toy: {made} handshakes made, {handshakes} probed, {signs} signs inside them");
    // The recording starts after the toy has begun and ends before it stops: a call cut by either end may
    // be missing from one count.
    assert!(handshakes >= 100 && handshakes <= made, "{handshakes} of {made}");
    assert!(
        signs.abs_diff(handshakes) <= 1,
        "{signs} signs in {handshakes} handshakes"
    );
}
