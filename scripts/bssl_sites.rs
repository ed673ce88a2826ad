// SPDX-License-Identifier: Apache-2.0
//! Writes a BoringSSL revision's error-site table (src/record/discovery/error_sites.rs) from a build of it
//! that keeps its symbols: `cargo run --release --example bssl-sites -- BINARY NAME > TABLE.tsv`, NAME saying
//! which BoringSSL it is. The boring crate's table comes from examples/rust/boring-server as the tests build
//! it (target/examples/release/boring-server).

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [binary, name] = args.as_slice() else {
        eprintln!("usage: bssl-sites BINARY NAME");
        return ExitCode::from(2);
    };
    let Some(rows) = tlsprof::record::error_sites::table_rows(Path::new(binary)) else {
        eprintln!("bssl-sites: {binary}: no BoringSSL error sites with symbols");
        return ExitCode::FAILURE;
    };
    println!("# Error sites of {name}: file, line, the function they lie in.");
    println!(
        "# Written by scripts/bssl_sites.rs from {}.",
        Path::new(binary).display()
    );
    for (file, line, function) in rows {
        println!("{file}\t{line}\t{function}");
    }
    ExitCode::SUCCESS
}
