// SPDX-License-Identifier: Apache-2.0
//! A TLS client on BoringSSL (the boring crate): `boring-client PORT COUNT [--wait-for FILE]`
//! (examples/rust/loopback-client) makes COUNT connections to 127.0.0.1:PORT, each a GET of / read to its end,
//! resuming the last session the server gave it. The server's certificate is taken as it comes (a loopback
//! test client); the handshake's signature is checked with it, as any client does.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use boring::ssl::{Ssl, SslContext, SslMethod, SslSession, SslSessionCacheMode, SslVerifyMode};

fn main() {
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
    loopback_client::run("boring-client", |sock| {
        let mut ssl = Ssl::new(&context).expect("a connection");
        if let Some(session) = last.lock().expect("the session slot").as_ref() {
            // SAFETY: the session came from a connection of this same context.
            unsafe { ssl.set_session(session) }.expect("offering the session");
        }
        let mut tls = ssl.connect(sock).ok()?;
        tls.write_all(loopback_client::REQUEST).ok()?;
        let mut body = Vec::new();
        let _ = tls.read_to_end(&mut body);
        Some(tls.ssl().session_reused())
    });
}
