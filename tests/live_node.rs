// SPDX-License-Identifier: Apache-2.0
//! Live: a Node.js HTTPS server (OpenSSL linked in, internals exported) profiled by tlsprof (needs root).
mod common;

use common::*;

#[test]
fn node_internal_functions_resolved_and_handshakes_counted() {
    if !require_root("node_internal_functions_resolved_and_handshakes_counted") {
        return;
    }
    let scratch = Scratch::new("node");
    // nginx-target.sh makes the RSA-2048 certificate; the nginx itself is not used.
    let certs = Nginx::start(&scratch.path("certs"), &[]);
    let (node, port) = start_node_server(&certs.dir);
    let cpus = cpus();
    pin(node.pid(), cpus.server);
    let recording = scratch.path("node.tlsprof");
    let rec = Recorder::start(&["--pid", &node.pid().to_string(), "-o", recording.to_str().unwrap()]);
    let speed = SpeedBeside::rsa2048_sign(cpus.server, 4);
    let connections = s_time_new_on(port, 4, cpus.client);
    let speed_us = speed.sign_us();
    let summary = rec.interrupt();

    let r = report_json(&recording);
    let lib = &r["libraries"][0];
    assert_eq!(lib["path"], "/usr/bin/node", "{r:#}");
    assert_eq!(lib["family"], "openssl");
    assert_eq!(lib["flavor"], "static");
    assert_eq!(lib["symbols"], "internal");
    let full = f(&r["handshakes"]["full"]);
    assert!(
        within(full, connections as f64, 0.05),
        "full handshakes {full} vs {connections} connections\n{summary}"
    );
    assert_eq!(f(&r["handshakes"]["server"]), full);
    // Node.js drives the handshake from SSL_read: the state machine is what tlsprof sees.
    let statem = function(&r, "ossl_statem_accept").expect("ossl_statem_accept probed");
    assert!(f(&statem["calls"]) >= full, "{summary}");
    for internal in [
        "tls_construct_cert_verify",
        "ssl_derive",
        "ssl_generate_pkey",
        "tls13_change_cipher_state",
    ] {
        let func = function(&r, internal).unwrap_or_else(|| panic!("{internal} not counted\n{summary}"));
        assert!(f(&func["calls"]) >= full, "{internal}: {func}");
    }
    let sign = stage(&r, "sign");
    assert!(
        within(f(&sign["calls"]), full, 0.05),
        "one signature per full handshake: {sign}"
    );
    // In the server, under its client's load, a TLS 1.3 RSA-PSS signature measures above `openssl speed`,
    // at times by more than nginx's (the same signature in a plain crypto.sign loop matches tlsprof's
    // figure), hence a wider band than nginx's.
    let per_call = f(&sign["cpu_us_per_call"]);
    assert!(
        within(per_call, speed_us, 0.30),
        "sign {per_call:.0} µs vs openssl speed {speed_us:.0} µs\n{summary}"
    );
    // Sign's share of TLS CPU depends on how fast this CPU signs: it must be the share that the clients'
    // connections, each signed at openssl speed's cost beside the server, make of the TLS CPU.
    let tls_ms = f(&r["tls_cpu_ms"]);
    let share = f(&sign["self_cpu_ms"]) / tls_ms;
    let implied = connections as f64 * speed_us / 1e3 / tls_ms;
    eprintln!(
        "sign {per_call:.0} µs per call, openssl speed beside it {speed_us:.0} µs; {:.1}% of TLS CPU, {:.1}% implied",
        share * 100.0,
        implied * 100.0
    );
    assert!(
        within(share, implied, 0.30),
        "sign is {:.0}% of TLS CPU where {connections} signatures at openssl speed's {speed_us:.0} µs make {:.0}%\n{summary}",
        share * 100.0,
        implied * 100.0
    );
    assert!(summary.contains("tls_construct_cert_verify [sign]"), "{summary}");
}
