// SPDX-License-Identifier: Apache-2.0
//! Writes a BoringSSL revision's error-site table (src/record/discovery/error_sites.rs) from builds of it
//! that keep their symbols: `cargo run --release --example bssl-sites -- NAME BINARY... > TABLE.tsv`, NAME
//! saying which BoringSSL it is; a server's and a client's build together hold both sides' code. The boring
//! crate's table comes from examples/rust/boring-server and boring-client as the tests build them
//! (target/examples/release/).

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (name, binaries) = match args.as_slice() {
        [name, binaries @ ..] if !binaries.is_empty() => (name, binaries),
        _ => {
            eprintln!("usage: bssl-sites NAME BINARY...");
            return ExitCode::from(2);
        }
    };
    let mut rows = Vec::new();
    for binary in binaries {
        let Some(found) = tlsprof::record::error_sites::table_rows(Path::new(binary)) else {
            eprintln!("bssl-sites: {binary}: no BoringSSL error sites with symbols");
            return ExitCode::FAILURE;
        };
        rows.extend(found);
    }
    rows.sort_unstable();
    rows.dedup();
    println!("# Error sites of {name}: file, line, the function they lie in.");
    println!("# Written by scripts/bssl_sites.rs from {}.", binaries.join(", "));
    for (file, line, function) in rows {
        println!("{file}\t{line}\t{function}");
    }
    ExitCode::SUCCESS
}
