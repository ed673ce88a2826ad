// SPDX-License-Identifier: Apache-2.0
//! A TLS client on BoringSSL (the boring crate): `boring-client PORT COUNT [--wait-for FILE]` makes COUNT
//! connections to 127.0.0.1:PORT one after another, each a GET of / read to its end, resuming the last session
//! the server gave it, and prints one JSON line: connections made and resumed. With --wait-for it starts once
//! FILE exists (at most 30 s): a profiler attaches first. The server's certificate is taken as it comes (a
//! loopback test client); the handshake's signature is checked with it, as any client does.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use boring::ssl::{Ssl, SslContext, SslMethod, SslSession, SslSessionCacheMode, SslVerifyMode};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (port, count, wait_for) = match args.as_slice() {
        [_, port, count] => (port, count, None),
        [_, port, count, flag, file] if flag == "--wait-for" => (port, count, Some(file)),
        _ => {
            eprintln!("usage: boring-client PORT COUNT [--wait-for FILE]");
            std::process::exit(2);
        }
    };
    let (Ok(port), Ok(count)) = (port.parse::<u16>(), count.parse::<u32>()) else {
        eprintln!("boring-client: PORT and COUNT are numbers");
        std::process::exit(2);
    };
    if let Some(file) = wait_for {
        let until = Instant::now() + Duration::from_secs(30);
        while !std::path::Path::new(file).exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // The newest session the server gave (TLS 1.3 sends it after the handshake), offered by the next connection.
    let last: Arc<Mutex<Option<SslSession>>> = Arc::default();
    let mut builder = SslContext::builder(SslMethod::tls()).expect("a TLS context");
    builder.set_verify(SslVerifyMode::NONE);
    builder.set_session_cache_mode(SslSessionCacheMode::CLIENT);
    let slot = last.clone();
    builder.set_new_session_callback(move |_, session| {
        *slot.lock().expect("the session slot") = Some(session);
    });
    let context = builder.build();
    let (mut made, mut resumed) = (0u32, 0u32);
    for _ in 0..count {
        let Ok(sock) = TcpStream::connect(("127.0.0.1", port)) else {
            eprintln!("boring-client: cannot connect to port {port}");
            std::process::exit(1);
        };
        let mut ssl = Ssl::new(&context).expect("a connection");
        if let Some(session) = last.lock().expect("the session slot").as_ref() {
            // SAFETY: the session came from a connection of this same context.
            unsafe { ssl.set_session(session) }.expect("offering the session");
        }
        let Ok(mut tls) = ssl.connect(sock) else { continue };
        if tls
            .write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
            .is_err()
        {
            continue;
        }
        let mut body = Vec::new();
        let _ = tls.read_to_end(&mut body);
        made += 1;
        if tls.ssl().session_reused() {
            resumed += 1;
        }
    }
    println!("{{\"connections\": {made}, \"resumed\": {resumed}}}");
}
