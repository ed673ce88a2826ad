// SPDX-License-Identifier: Apache-2.0
//! Compiles bpf/tlsprof.bpf.c into a libbpf-rs skeleton in OUT_DIR.
use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "bpf/tlsprof.bpf.c";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo")).join("tlsprof.skel.rs");
    SkeletonBuilder::new()
        .source(SRC)
        .clang_args(["-Ibpf", "-Wall", "-Wno-unused-function"])
        .build_and_generate(&out)
        .expect("compile bpf/tlsprof.bpf.c (needs clang: run scripts/install-deps.sh)");
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-changed=bpf/tlsprof.h");
}
