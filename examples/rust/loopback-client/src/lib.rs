// SPDX-License-Identifier: Apache-2.0
//! The shared half of the Rust TLS clients: `NAME PORT COUNT [--wait-for FILE]` makes COUNT connections to
//! 127.0.0.1:PORT one after another and prints one JSON line: connections made and resumed. With --wait-for
//! it starts once FILE exists (at most 30 s): a profiler attaches first.

use std::net::TcpStream;
use std::time::{Duration, Instant};

/// What each connection asks for: / read to its end, the server closing it.
pub const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n";

/// Runs the client `name` as its command line asks. `exchange` makes one connection's TLS handshake over
/// the socket, sends REQUEST and reads the answer to its end; it returns whether the handshake resumed a
/// session, or None where the connection failed (not counted as made).
pub fn run(name: &str, mut exchange: impl FnMut(TcpStream) -> Option<bool>) {
    let args: Vec<String> = std::env::args().collect();
    let (port, count, wait_for) = match args.as_slice() {
        [_, port, count] => (port, count, None),
        [_, port, count, flag, file] if flag == "--wait-for" => (port, count, Some(file)),
        _ => {
            eprintln!("usage: {name} PORT COUNT [--wait-for FILE]");
            std::process::exit(2);
        }
    };
    let (Ok(port), Ok(count)) = (port.parse::<u16>(), count.parse::<u32>()) else {
        eprintln!("{name}: PORT and COUNT are numbers");
        std::process::exit(2);
    };
    if let Some(file) = wait_for {
        let until = Instant::now() + Duration::from_secs(30);
        while !std::path::Path::new(file).exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let (mut made, mut resumed) = (0u32, 0u32);
    for _ in 0..count {
        let Ok(sock) = TcpStream::connect(("127.0.0.1", port)) else {
            eprintln!("{name}: cannot connect to port {port}");
            std::process::exit(1);
        };
        if let Some(reused) = exchange(sock) {
            made += 1;
            resumed += u32::from(reused);
        }
    }
    println!("{{\"connections\": {made}, \"resumed\": {resumed}}}");
}
