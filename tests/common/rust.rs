// SPDX-License-Identifier: Apache-2.0
//! Rust targets: examples/rust/ built once into target/examples (cargo keeps the build between runs).

use std::path::PathBuf;
use std::process::Command;

use super::process::{repo, run};

/// examples/rust/NAME built in release mode, as its users would build it; returns the executable.
pub fn build_rust_example(name: &str) -> PathBuf {
    let dir = repo().join("examples/rust").join(name);
    let target = repo().join("target/examples");
    let out = run(Command::new(env!("CARGO"))
        .args(["build", "--release", "--locked", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target));
    assert!(
        out.status.success(),
        "build examples/rust/{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("release").join(name)
}
