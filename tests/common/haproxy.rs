// SPDX-License-Identifier: Apache-2.0
//! haproxy targets: Debian's haproxy terminating TLS on loopback, answering every request itself.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, self_signed_cert, Running, Scratch};

/// haproxy in the foreground (killed on drop) with `threads` threads on an ECDSA P-256 certificate, TLS
/// tickets on, answering "ok" to every request; and its port.
pub fn start_haproxy(scratch: &Scratch, threads: u32) -> (Running, u16) {
    let (cert, key) = self_signed_cert(scratch);
    let pem = scratch.path("haproxy.pem");
    let mut both = std::fs::read(&cert).unwrap();
    both.extend(std::fs::read(&key).unwrap());
    std::fs::write(&pem, both).unwrap();
    let port = free_port();
    let config = scratch.path("haproxy.cfg");
    std::fs::write(
        &config,
        format!(
            "global\n  nbthread {threads}\n  maxconn 512\n\
             defaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\
             frontend tls\n  bind 127.0.0.1:{port} ssl crt {}\n  \
             http-request return status 200 content-type text/plain string \"ok\\n\"\n",
            pem.display()
        ),
    )
    .unwrap();
    let child = Command::new("haproxy")
        .args(["-db", "-f"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy (scripts/install-deps.sh installs it)");
    let server = Running(child);
    wait_listening(port, Path::new("haproxy"));
    (server, port)
}

/// Waits up to 10 s for a server to accept on loopback `port`.
pub fn wait_listening(port: u16, what: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{} does not listen on {port}",
            what.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
