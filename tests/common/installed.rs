// SPDX-License-Identifier: Apache-2.0
//! What `make install` and `make deb` install from: the man pages' and completions' generator.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{repo, run};

/// scripts/gen_docs.rs: `cargo test` builds the examples beside the tests; built here when it has not (a
/// single test run), as `make install` builds it.
pub fn gen_docs() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_tlsprof"));
    let built = bin.parent().unwrap().join("examples/gen-docs");
    if built.exists() {
        return built;
    }
    let out = run(Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--locked",
            "--quiet",
            "--example",
            "gen-docs",
            "--manifest-path",
        ])
        .arg(repo().join("Cargo.toml")));
    assert!(
        out.status.success(),
        "build gen-docs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    built
}
