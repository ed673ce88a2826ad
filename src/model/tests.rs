// SPDX-License-Identifier: Apache-2.0
//! Recordings the tests of every layer start from.

use std::collections::BTreeMap;

use super::*;
use crate::catalogue::Stage;

/// nginx-like: SSL_do_handshake > EVP_DigestSign > EVP_DigestSignFinal, plus EVP_PKEY_derive.
pub fn sample_recording() -> Recording {
    Recording {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        tlsprof_version: "test".into(),
        start_unix_ns: Some(1_700_000_000_000_000_000),
        duration_s: 2.0,
        sample_freq_hz: 99,
        call_graph: CallGraph::Dwarf,
        stack_bytes: 16384,
        unnamed_jit_pids: Vec::new(),
        all_probes: false,
        targets: vec![nginx()],
        libraries: vec![libssl()],
        functions: stage_functions(),
        tree: call_tree(),
        samples: signing_samples(),
        unnamed_files: Vec::new(),
        debug_files: BTreeMap::new(),
        frame_files: BTreeMap::from([
            ("main".to_string(), "/usr/sbin/nginx".to_string()),
            ("ngx_ssl_handshake".to_string(), "/usr/sbin/nginx".to_string()),
            (
                "bn_mul_mont".to_string(),
                "/usr/lib/x86_64-linux-gnu/libcrypto.so.3".to_string(),
            ),
        ]),
        handshakes: vec![full_handshakes()],
        ticket_keys: Vec::new(),
        lost: Lost::default(),
        probe_cost: ProbeCost {
            hit_ns: 2000.0,
            inside_ns: 1500.0,
            cold_hit_ns: 3000.0,
            step_ns: 10_000.0,
            cold_step_ns: 12_000.0,
        },
        probe_hits: 100,
        probe_stepped_hits: 10,
        other_process_hits: 0,
        probe_scheduler_hits: 0,
        probe_traps: None,
        probing: Probing {
            max_overhead_pct: 0.5,
            live_s: 2.0,
            windows: 1,
            peak_overhead: 0.001,
            window_figures: Vec::new(),
        },
        openssl_speed: BTreeMap::from([("ecdsap256_sign".to_string(), 40.0)]),
    }
}

/// The sample recording's one target: nginx, pid 10, there from start to end.
fn nginx() -> Target {
    Target {
        pid: 10,
        comm: "nginx".into(),
        process_cpu_ms: 10.0,
        probed_cpu_ms: 10.0,
        io_driven_from_s: None,
        container: None,
        placement: Default::default(),
        connections: 0,
        execs_at_s: Vec::new(),
        stage_slices_ms: 0.0,
        stage_slices_cpu_ms: 0.0,
        own_programs: OwnPrograms::default(),
        joined_at_s: None,
        parent: None,
        exited: false,
        wire_only: false,
        jit_stacks_cut: false,
        processes: 1,
    }
}

/// The system's shared OpenSSL 3, its public API seen.
fn libssl() -> Library {
    Library {
        path: "/usr/lib/x86_64-linux-gnu/libssl.so.3".into(),
        family: "openssl".into(),
        flavor: Flavor::Shared,
        version: Some("OpenSSL 3.0.19 27 Jan 2026".into()),
        symbols: Symbols::Exported,
        functions_found: 3,
        pids: vec![10],
        replaced: false,
        handshake_state: false,
    }
}

/// The stage functions, by id: 0 SSL_do_handshake, 1 EVP_DigestSign, 2 EVP_DigestSignFinal, 3 EVP_PKEY_derive.
fn stage_functions() -> Vec<Function> {
    let func = |name: &str, stage| Function {
        name: name.into(),
        library: 0,
        stage: Some(stage),
    };
    vec![
        func("SSL_do_handshake", Stage::Handshake),
        func("EVP_DigestSign", Stage::Sign),
        func("EVP_DigestSignFinal", Stage::Sign),
        func("EVP_PKEY_derive", Stage::Derive),
    ]
}

/// 4 handshakes, each signing (EVP_DigestSign > EVP_DigestSignFinal) and deriving, and 2 bare
/// EVP_DigestSignFinal calls outside any handshake.
fn call_tree() -> Vec<TreeNode> {
    let node = |path: Vec<u16>, calls, cpu_ns, self_ns| TreeNode {
        pid: 10,
        path,
        calls,
        cpu_ns,
        self_ns,
    };
    vec![
        node(vec![0], 4, 5_150_000, 650_000),
        node(vec![0, 1], 4, 4_400_000, 100_000),
        node(vec![0, 1, 2], 4, 4_300_000, 4_300_000),
        node(vec![0, 3], 4, 100_000, 100_000),
        node(vec![2], 2, 20_000, 20_000),
    ]
}

/// CPU samples in EVP_DigestSign's arithmetic: 3 with their whole stack, 2 whose unwinding stopped early,
/// taken in a timer interrupt.
fn signing_samples() -> Vec<Sample> {
    let frames = |names: &[&str]| names.iter().map(|&n| String::from(n)).collect();
    vec![
        Sample {
            pid: 10,
            path: vec![0, 1],
            frames: frames(&[
                "main",
                "ngx_ssl_handshake",
                "SSL_do_handshake [handshake]",
                "EVP_DigestSign [sign]",
                "bn_mul_mont",
            ]),
            kernel: Vec::new(),
            complete: true,
            count: 3,
        },
        Sample {
            pid: 10,
            path: vec![0, 1],
            frames: frames(&[
                "[truncated]",
                "SSL_do_handshake [handshake]",
                "EVP_DigestSign [sign]",
                "bn_mul_mont",
            ]),
            kernel: vec!["asm_sysvec_apic_timer_interrupt".into()],
            complete: false,
            count: 2,
        },
    ]
}

/// The 4 full TLS 1.3 server handshakes, 1.2 to 1.4 ms each.
fn full_handshakes() -> HandshakeGroup {
    let mut cpu = CpuHistogram::default();
    for ns in [1_200_000, 1_300_000, 1_250_000, 1_400_000] {
        cpu.add(ns);
    }
    HandshakeGroup {
        pid: Some(10),
        kind: HandshakeKind {
            role: Role::Server,
            resumed: false,
            certificate_key: Some("RSA-2048".into()),
            key_exchange: Some("x25519".into()),
            version: Some("TLSv1.3".into()),
            cipher: Some("TLS_AES_256_GCM_SHA384".into()),
            resumption: None,
            outcome: Outcome::Completed,
            offer: None,
            refusal: None,
            quic: false,
        },
        cpu,
        from_wire: false,
    }
}

/// The sample recording's server (OpenSSL, pid 10) with ClientHellos read: 6 tickets accepted under key
/// "aa", 3 refused under key "bb" that it never accepted, and 1 client that offered nothing; its 4 full
/// handshakes cost 1.29 ms each, its resumed ones 0.4 ms.
pub fn recording_with_refusals() -> Recording {
    let mut rec = sample_recording();
    let full = rec.handshakes[0].clone();
    let group = |resumed: bool, offer: Offer, refusal: Option<Refusal>, n: usize, ns: u64| {
        let mut g = full.clone();
        g.kind.resumed = resumed;
        g.kind.offer = Some(offer);
        g.kind.refusal = refusal;
        g.cpu = CpuHistogram::default();
        (0..n).for_each(|_| g.cpu.add(ns));
        g
    };
    rec.handshakes = vec![
        group(true, Offer::Psk, None, 6, 400_000),
        group(false, Offer::Psk, Some(Refusal::Ticket), 3, 1_300_000),
        group(false, Offer::Nothing, None, 1, 1_260_000),
    ];
    let mut accepted = TicketKey::new(10, Some("aa".into()), 0.1);
    (0..6).for_each(|i| accepted.add(true, 0.2 + f64::from(i)));
    let mut refused = TicketKey::new(10, Some("bb".into()), 0.5);
    (0..3).for_each(|i| refused.add(false, 0.6 + f64::from(i)));
    rec.ticket_keys = vec![accepted, refused];
    rec
}

/// The sample recording's nginx (pid 10) beside a node (pid 20), probed part of the time in two windows
/// that saw both: nginx's handshakes are one per connection, node's too.
pub fn two_process_recording() -> Recording {
    let mut rec = sample_recording();
    rec.probing.live_s = 0.5;
    rec.targets[0].probed_cpu_ms = 5.0;
    rec.targets[0].connections = 40;
    let mut node = rec.targets[0].clone();
    (
        node.pid,
        node.comm,
        node.process_cpu_ms,
        node.probed_cpu_ms,
        node.connections,
    ) = (20, "node".into(), 20.0, 10.0, 100);
    rec.targets.push(node);
    let mut own = rec.libraries[0].clone();
    (own.path, own.flavor, own.pids) = ("/usr/bin/node".into(), Flavor::Static, vec![20]);
    rec.libraries.push(own);
    let mut group = rec.handshakes[0].clone();
    group.pid = Some(20);
    group.cpu = CpuHistogram::default();
    for _ in 0..10 {
        group.cpu.add(1_000_000);
    }
    rec.handshakes.push(group);
    let more: Vec<TreeNode> = rec.tree.iter().map(|n| TreeNode { pid: 20, ..n.clone() }).collect();
    rec.tree.extend(more);
    let part = |pid, own_cpu_ms, n| WindowPart {
        pid,
        own_cpu_ms,
        connections: n,
        handshakes: HandshakeCounts {
            total: n,
            full: n,
            server: n,
            ..HandshakeCounts::default()
        },
        stage_self_ns: BTreeMap::from([(Stage::Sign, 1_000_000 * n)]),
        ..WindowPart::default()
    };
    let window = ProbeWindow {
        start_unix_ns: None,
        live_s: 0.25,
        processes: vec![part(10, 2.5, 2), part(20, 5.0, 5)],
        stands_in: false,
    };
    rec.probing.window_figures = vec![window.clone(), window];
    rec
}
