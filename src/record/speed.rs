// SPDX-License-Identifier: Apache-2.0
//! `openssl speed` on this machine: what an alternative (an ECDSA certificate, an X25519 key exchange) would
//! cost here, measured rather than assumed, for advice.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

pub use crate::model::speed_ops::{ECDSA_P256_SIGN, X25519_DERIVE};

/// Runs `openssl speed -mr` for one second per test of the operations asked for; µs per operation by name.
/// Missing on failure, or when `cancelled` turns true meanwhile (the run is then stopped).
pub fn measure(ops: &[&str], cancelled: impl Fn() -> bool) -> BTreeMap<String, f64> {
    let algorithms: Vec<&str> = ops
        .iter()
        .filter_map(|&op| match op {
            ECDSA_P256_SIGN => Some("ecdsap256"),
            X25519_DERIVE => Some("ecdhx25519"),
            _ => None,
        })
        .collect();
    if algorithms.is_empty() {
        return BTreeMap::new();
    }
    let Ok(mut child) = Command::new("openssl")
        .args(["speed", "-seconds", "1", "-mr"])
        .args(&algorithms)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    else {
        return BTreeMap::new();
    };
    // Its few lines of output fit in the pipe: it never blocks on writing them while we poll.
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if !cancelled() => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return BTreeMap::new();
            }
        }
    }
    let mut text = String::new();
    let _ = child.stdout.take().map(|mut o| o.read_to_string(&mut text));
    parse(&text)
}

/// `-mr` lines: `+F4:<i>:<bits>:<sign/s>:<verify/s>` for ECDSA, `+F5:<i>:<bits>:<op/s>` for ECDH.
fn parse(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        let rate = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).filter(|r| *r > 0.0);
        match (fields.first().copied(), fields.get(2).copied()) {
            (Some("+F4"), Some("256")) => {
                if let Some(r) = rate(3) {
                    out.insert(ECDSA_P256_SIGN.to_string(), 1e6 / r);
                }
            }
            (Some("+F5"), Some("253")) => {
                if let Some(r) = rate(3) {
                    out.insert(X25519_DERIVE.to_string(), 1e6 / r);
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_readable_lines_give_microseconds_per_operation() {
        let m = parse("+DT:ecdsa:1:256\n+F4:3:256:40000.000000:14054.000000\n+F5:9:253:25000.000000\n+H:x\n");
        assert!((m[ECDSA_P256_SIGN] - 25.0).abs() < 1e-9);
        assert!((m[X25519_DERIVE] - 40.0).abs() < 1e-9);
    }
}
