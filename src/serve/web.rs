// SPDX-License-Identifier: Apache-2.0
//! `serve --web.config.file`: TLS and basic auth for the HTTP server, in the Prometheus exporter-toolkit's
//! file format (`tls_server_config`, `basic_auth_users` with bcrypt hashes), so that the configuration a
//! fleet keeps for its exporters serves tlsprof too. A root daemon's profiles and metrics say what its
//! targets run and how busy they are: without such a file, serve says that anyone who reaches it reads them.
//!
//! With TLS, the HTTP server listens on a Unix socket in a directory only root can enter, and a front
//! accepts the TCP connections, makes the TLS handshake (and checks the client's certificate where asked)
//! and passes each connection's one request and its response through.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection, StreamOwned};
use serde::Deserialize;

/// What the file asks for.
pub struct WebConfig {
    pub tls: Option<Arc<ServerConfig>>,
    pub auth: Option<BasicAuth>,
}

/// The file, as the exporter-toolkit reads it: what it does not know is an error, not ignored.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WebConfigFile {
    tls_server_config: Option<TlsFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: PathBuf,
    key_file: PathBuf,
    #[serde(default)]
    client_auth_type: Option<String>,
    #[serde(default)]
    client_ca_file: Option<PathBuf>,
    #[serde(default)]
    min_version: Option<String>,
    #[serde(default)]
    max_version: Option<String>,
}

/// The file's size limit: a configuration, not data.
const MAX_FILE_BYTES: u64 = 1 << 20;

impl WebConfig {
    /// Reads and checks the file; every fault is one line naming what is wrong.
    pub fn load(path: &Path) -> Result<WebConfig> {
        let len = std::fs::metadata(path)
            .with_context(|| format!("--web.config.file {}", path.display()))?
            .len();
        if len > MAX_FILE_BYTES {
            bail!(
                "--web.config.file {}: {len} bytes, more than a configuration has",
                path.display()
            );
        }
        let text = std::fs::read_to_string(path).with_context(|| format!("--web.config.file {}", path.display()))?;
        let file: WebConfigFile =
            serde_yaml_ng::from_str(&text).map_err(|e| anyhow::anyhow!("--web.config.file {}: {e}", path.display()))?;
        // Relative paths are the file's directory's, as the exporter-toolkit reads them.
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = file
            .tls_server_config
            .map(|t| tls_config(&t, dir))
            .transpose()
            .with_context(|| format!("--web.config.file {}: tls_server_config", path.display()))?;
        let auth = file
            .basic_auth_users
            .map(BasicAuth::new)
            .transpose()
            .with_context(|| format!("--web.config.file {}: basic_auth_users", path.display()))?;
        Ok(WebConfig { tls, auth })
    }
}

fn tls_config(t: &TlsFile, dir: &Path) -> Result<Arc<ServerConfig>> {
    let file = |p: &Path| dir.join(p);
    let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(file(&t.cert_file))
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| anyhow::anyhow!("cert_file {}: {e}", t.cert_file.display()))?;
    if certs.is_empty() {
        bail!("cert_file {}: no certificate in it", t.cert_file.display());
    }
    let key = PrivateKeyDer::from_pem_file(file(&t.key_file))
        .map_err(|e| anyhow::anyhow!("key_file {}: {e}", t.key_file.display()))?;
    let supported = [&rustls::version::TLS12, &rustls::version::TLS13];
    let rank = |v: &Option<String>, default: usize| match v.as_deref() {
        None => Ok(default),
        Some("TLS12") => Ok(0),
        Some("TLS13") => Ok(1),
        Some(other) => bail!("{other:.20}: tlsprof serves TLS12 and TLS13"),
    };
    let min = rank(&t.min_version, 0).context("min_version")?;
    let max = rank(&t.max_version, 1).context("max_version")?;
    if min > max {
        bail!("min_version is above max_version");
    }
    let versions = &supported[min..=max];
    let builder = ServerConfig::builder_with_protocol_versions(versions);
    let roots = || -> Result<Arc<RootCertStore>> {
        let ca = t
            .client_ca_file
            .as_ref()
            .context("client_auth_type verifies client certificates: give client_ca_file")?;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(file(ca))
            .map_err(|e| anyhow::anyhow!("client_ca_file {}: {e}", ca.display()))?
        {
            let cert = cert.map_err(|e| anyhow::anyhow!("client_ca_file {}: {e}", ca.display()))?;
            roots
                .add(cert)
                .map_err(|e| anyhow::anyhow!("client_ca_file {}: {e}", ca.display()))?;
        }
        Ok(Arc::new(roots))
    };
    let builder = match t.client_auth_type.as_deref().unwrap_or("NoClientCert") {
        "NoClientCert" => builder.with_no_client_auth(),
        "RequireAndVerifyClientCert" => builder.with_client_cert_verifier(WebPkiClientVerifier::builder(roots()?).build()?),
        "VerifyClientCertIfGiven" => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder(roots()?)
                .allow_unauthenticated()
                .build()?,
        ),
        "RequestClientCert" | "RequireAnyClientCert" => bail!(
            "client_auth_type {}: a client certificate nobody verifies proves nothing; use RequireAndVerifyClientCert with client_ca_file",
            t.client_auth_type.as_deref().unwrap_or_default()
        ),
        other => bail!(
            "client_auth_type {other:.40}: one of NoClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert"
        ),
    };
    let config = builder
        .with_single_cert(certs, key)
        .context("cert_file and key_file do not make a certificate and its key")?;
    Ok(Arc::new(config))
}

/// Basic auth against bcrypt hashes. A bcrypt check costs tens of milliseconds by design: the credentials
/// that passed are remembered (as a hash of user and password), so a scraper's every request does not pay it.
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    passed: Mutex<HashSet<[u8; 32]>>,
}

/// Credentials remembered at most; beyond, each new one is checked again.
const MAX_REMEMBERED: usize = 256;
/// Checked against for a user that does not exist, so that a wrong name costs what a wrong password does.
const NO_USER_HASH: &str = "$2y$10$KHD6NikwsGxrk1GfAofXbuDQhlGouJgPQZSYUDfLy1zZUu0b3beGO";

impl BasicAuth {
    fn new(users: BTreeMap<String, String>) -> Result<BasicAuth> {
        for (user, hash) in &users {
            let shaped = ["$2a$", "$2b$", "$2x$", "$2y$"].iter().any(|p| hash.starts_with(p)) && hash.len() == 60;
            if !shaped || hash.parse::<bcrypt::HashParts>().is_err() {
                bail!("{user:.40}: not a bcrypt hash (htpasswd -nBC 10 USER makes one)");
            }
        }
        Ok(BasicAuth {
            users,
            passed: Mutex::new(HashSet::new()),
        })
    }

    /// Whether an `Authorization` header's value names a user with their password.
    pub fn allows(&self, header: Option<&str>) -> bool {
        let Some((user, password)) = header.and_then(basic_credentials) else {
            return false;
        };
        let key = ring::digest::digest(&ring::digest::SHA256, format!("{user}\0{password}").as_bytes());
        let key: [u8; 32] = key.as_ref().try_into().expect("SHA-256");
        let mut passed = self.passed.lock().unwrap_or_else(|e| e.into_inner());
        if passed.contains(&key) {
            return true;
        }
        let hash = self.users.get(&user);
        let ok =
            bcrypt::verify(&password, hash.map_or(NO_USER_HASH, String::as_str)).unwrap_or(false) && hash.is_some();
        if ok && passed.len() < MAX_REMEMBERED {
            passed.insert(key);
        }
        ok
    }
}

fn basic_credentials(header: &str) -> Option<(String, String)> {
    let (scheme, encoded) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// TLS connections being served at once, at most; more wait in the kernel's accept queue.
const MAX_CONNECTIONS: usize = 64;
/// A request's head, at most.
const MAX_HEAD_BYTES: usize = 16 << 10;
/// How long a client may take to make its handshake and send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a response may take: a profile of the next N seconds answers after them.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(super::MAX_PROFILE_S + 30);

/// The TLS front: accepts on `listener` until `stop`, passing each connection's request to the HTTP server
/// on the Unix socket `backend` and its response back.
pub fn front(listener: TcpListener, config: Arc<ServerConfig>, backend: PathBuf, stop: Arc<AtomicBool>) -> Result<()> {
    listener.set_nonblocking(true)?;
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        let tcp = match listener.accept() {
            Ok((tcp, _)) => tcp,
            // Nothing to accept, or an error that may last (out of file descriptors): not a busy loop.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        if active.load(Ordering::Acquire) >= MAX_CONNECTIONS {
            continue;
        }
        active.fetch_add(1, Ordering::AcqRel);
        let (config, backend, active) = (config.clone(), backend.clone(), active.clone());
        std::thread::spawn(move || {
            let _ = pass_through(tcp, config, &backend);
            active.fetch_sub(1, Ordering::AcqRel);
        });
    }
    Ok(())
}

fn pass_through(tcp: TcpStream, config: Arc<ServerConfig>, backend: &Path) -> Result<()> {
    tcp.set_nonblocking(false)?;
    tcp.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    tcp.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let mut tls = StreamOwned::new(ServerConnection::new(config)?, tcp);
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tls.read(&mut buf)?;
        if n == 0 || head.len() + n > MAX_HEAD_BYTES {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let end = head.windows(4).position(|w| w == b"\r\n\r\n").expect("found above") + 4;
    // Only GETs are served: whatever follows the head is not read.
    let mut app = UnixStream::connect(backend)?;
    app.set_read_timeout(Some(RESPONSE_TIMEOUT))?;
    app.write_all(&one_request(&head[..end]))?;
    tls.sock.set_write_timeout(Some(RESPONSE_TIMEOUT))?;
    loop {
        let n = app.read(&mut buf)?;
        if n == 0 {
            break;
        }
        tls.write_all(&buf[..n])?;
    }
    tls.conn.send_close_notify();
    tls.flush()?;
    Ok(())
}

/// The request head with its Connection header replaced by `Connection: close`: the HTTP server then ends
/// the connection after its response, which ends the pass-through.
fn one_request(head: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let mut out = String::new();
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        let is_connection = line
            .split_once(':')
            .is_some_and(|(name, _)| name.trim().eq_ignore_ascii_case("connection"));
        if !is_connection {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tlsprof-web-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn basic_auth_takes_the_right_password_only() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let auth = BasicAuth::new(BTreeMap::from([("scraper".to_string(), hash)])).unwrap();
        let header = |user: &str, pass: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
            )
        };
        assert!(auth.allows(Some(&header("scraper", "s3cret"))));
        assert!(auth.allows(Some(&header("scraper", "s3cret"))), "remembered");
        assert!(!auth.allows(Some(&header("scraper", "wrong"))));
        assert!(!auth.allows(Some(&header("nobody", "s3cret"))));
        assert!(!auth.allows(Some("Bearer abc")));
        assert!(!auth.allows(Some("Basic !!!")));
        assert!(!auth.allows(None));
    }

    #[test]
    fn a_file_that_is_wrong_is_one_clear_error() {
        let dir = scratch("errors");
        let err = |text: &str| {
            let path = write(&dir, "web.yml", text);
            format!("{:#}", WebConfig::load(&path).err().expect("refused"))
        };
        assert!(err("basic_auth_users:\n  me: plaintext\n").contains("not a bcrypt hash"));
        assert!(err("tls_server_config:\n  cert_file: missing.pem\n  key_file: missing.key\n").contains("missing.pem"));
        assert!(err("tls_server_confg: {}\n").contains("unknown field"));
        assert!(err(": : :\n").contains("web.yml"));
        let missing = format!("{:#}", WebConfig::load(&dir.join("none.yml")).err().unwrap());
        assert!(missing.contains("none.yml"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_one_request_closes_its_connection() {
        let head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nAuthorization: Basic eA==\r\n\r\n";
        assert_eq!(
            String::from_utf8(one_request(head)).unwrap(),
            "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic eA==\r\nConnection: close\r\n\r\n"
        );
    }
}
