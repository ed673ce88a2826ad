// SPDX-License-Identifier: Apache-2.0
//! Tests that cannot run here: they say so, or fail in CI, where everything must run.

use std::io::Write;

/// Says that `what` did not run, and why, in every run; in CI (CI=true) fails instead. cargo counts a
/// skipped test as passed and libtest captures `eprintln!` (showing it only for failures), but not writes
/// to the stderr handle itself: the line shows even when the output is captured.
pub fn skip(what: &str, why: &str) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{what}: {why}, and in CI everything must run");
    }
    let _ = writeln!(std::io::stderr(), "skipped {what}: {why}");
}

/// The name of the running test: libtest names each test's thread after it.
pub fn this_test() -> String {
    std::thread::current().name().unwrap_or("a test").to_string()
}

/// Live tests need root to load BPF programs: skip without it (see `skip`).
pub fn require_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    skip(test, "needs root to load BPF programs");
    false
}
