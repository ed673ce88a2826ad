// SPDX-License-Identifier: Apache-2.0
//! `openssl speed` on this machine: what an alternative (an ECDSA certificate, an X25519 key exchange) would
//! cost here, measured rather than assumed, for advice.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

pub use crate::model::speed_ops::{ECDSA_P256_SIGN, X25519_DERIVE};

/// Each operation's `openssl speed` test, and the line `-mr` prints on standard error as soon as that test is
/// over (the protocol `-multi` collects its children's results with): `<tag>:<count>:<bits>:<seconds>`, the
/// seconds of user CPU the count took. ECDSA's verify test, which follows its sign test, is not waited for.
const TESTS: [(&str, &str, &str, &str); 2] = [
    (ECDSA_P256_SIGN, "ecdsap256", "+R5", "256"),
    (X25519_DERIVE, "ecdhx25519", "+R7", "253"),
];

/// Runs `openssl speed -mr` for one second per operation asked for, one test at a time; µs per operation by
/// name. Missing on failure, and all of them when `cancelled` turns true meanwhile (the run is then stopped).
pub fn measure(ops: &[&str], cancelled: impl Fn() -> bool) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (op, algorithm, tag, bits) in TESTS {
        if !ops.contains(&op) {
            continue;
        }
        if let Some(us) = run_test(algorithm, (tag, bits), &cancelled) {
            out.insert(op.to_string(), us);
        }
        if cancelled() {
            return BTreeMap::new();
        }
    }
    out
}

/// One test, stopped once its result line is out.
fn run_test(algorithm: &str, line: (&str, &str), cancelled: &impl Fn() -> bool) -> Option<f64> {
    let mut child = Command::new("openssl")
        .args(["speed", "-seconds", "1", "-mr", algorithm])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let stderr = child.stderr.take()?;
    // Read on a thread, so that a cancellation is seen while the test runs.
    let (lines, received) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines.send(l).is_err() {
                break;
            }
        }
    });
    let mut result = None;
    while !cancelled() {
        match received.recv_timeout(Duration::from_millis(50)) {
            Ok(l) => {
                result = parse(&l, line);
                if result.is_some() {
                    break;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    // Its standard error closed with it.
    let _ = reader.join();
    result
}

/// µs per operation from a `<tag>:<count>:<bits>:<seconds>` line, when it is that test's.
fn parse(l: &str, (tag, bits): (&str, &str)) -> Option<f64> {
    let fields: Vec<&str> = l.trim().split(':').collect();
    let [t, count, b, seconds] = fields[..] else {
        return None;
    };
    let count = count.parse::<f64>().ok().filter(|c| *c > 0.0)?;
    let seconds = seconds.parse::<f64>().ok().filter(|s| *s > 0.0)?;
    (t == tag && b == bits).then_some(seconds / count * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_give_microseconds_per_operation() {
        let sign = ("+R5", "256");
        assert_eq!(parse("+R5:40000:256:1.00\n", sign), Some(25.0));
        assert_eq!(parse("+R7:25000:253:1.00", ("+R7", "253")), Some(40.0));
        for other in [
            "+DTP:256:sign:ecdsa:1",
            "+R6:14054:256:1.00",
            "+R5:40000:384:1.00",
            "+R5:0:256:1.00",
            "+R5:40000:256:0.00",
            "+R5:x:256:1.00",
            "+R5:40000:256",
            "+F4:3:256:40000.000000:14054.000000",
            "",
        ] {
            assert_eq!(parse(other, sign), None, "{other:?}");
        }
    }
}
