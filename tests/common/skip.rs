// SPDX-License-Identifier: Apache-2.0
//! The live tests' root check.

/// Live tests need root. In CI they must run: fail loudly there; elsewhere skip with a message.
pub fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: live BPF tests must run in CI, but this is not root");
    }
    eprintln!("skipped {test}: needs root to load BPF programs");
    false
}
