// SPDX-License-Identifier: Apache-2.0
//! Ground-truth fixture for rustls: `rustls-ops [--derive x25519|p256] [--sign rsa2048|p256] [--no-twin]
//! [--op-log PATH] N_DERIVE M_SIGN` makes exactly N key exchanges and M signatures through rustls' crypto
//! provider (aws-lc-rs) as a handshake makes them: a fresh key share completed against the peer's
//! (`ActiveKeyExchange::complete`), a fresh signer for the certificate key signing a CertificateVerify-sized
//! message (`Signer::sign`). It times each with its thread's CPU clock, prints "ready", waits for a line on
//! stdin, runs, and prints one JSON line with the same fields as tests/fixtures/crypto_ops.c. An unprobed twin,
//! forked before any profiler attaches, makes the same operations in turn with it: its clock, read in the same
//! milliseconds, is the ground truth.

use std::fs::File;
use std::io::{BufRead, Read, Write};
use std::os::fd::FromRawFd;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use rustls::crypto::{aws_lc_rs as provider, ActiveKeyExchange, SupportedKxGroup};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::{CertifiedKey, SigningKey};
use rustls::{NamedGroup, SignatureScheme};

fn fail(what: &str) -> ! {
    eprintln!("rustls-ops: {what} failed");
    std::process::exit(1);
}

fn usage() -> ! {
    eprintln!(
        "usage: rustls-ops [--derive x25519|p256] [--sign rsa2048|p256] [--no-twin] [--op-log PATH] N_DERIVE M_SIGN"
    );
    std::process::exit(2);
}

fn clock_us(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

/// One operation in the --op-log: its kind (d or s), start (ns since the Unix epoch) and thread CPU (µs),
/// so that a profiler's figures for its sampling windows can be judged against the operations made in them.
struct Op {
    kind: char,
    start_ns: u128,
    cpu_us: f64,
}

/// The thread CPU and wall time of the measured calls of a kind only.
#[derive(Default)]
struct Meter {
    cpu_us: f64,
    wall_us: f64,
}

struct Run {
    ops: Option<Vec<Op>>,
    derive: Meter,
    sign: Meter,
}

impl Run {
    fn timed<T>(&mut self, kind: char, call: impl FnOnce() -> T) -> T {
        let start_ns = self
            .ops
            .as_ref()
            .map(|_| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        let wall0 = clock_us(libc::CLOCK_MONOTONIC);
        let cpu0 = clock_us(libc::CLOCK_THREAD_CPUTIME_ID);
        let out = std::hint::black_box(call());
        let cpu_us = clock_us(libc::CLOCK_THREAD_CPUTIME_ID) - cpu0;
        let meter = if kind == 'd' { &mut self.derive } else { &mut self.sign };
        meter.cpu_us += cpu_us;
        meter.wall_us += clock_us(libc::CLOCK_MONOTONIC) - wall0;
        if let (Some(ops), Some(start_ns)) = (self.ops.as_mut(), start_ns) {
            ops.push(Op { kind, start_ns, cpu_us });
        }
        out
    }

    fn write_op_log(&self, path: Option<&str>) {
        let (Some(ops), Some(path)) = (&self.ops, path) else {
            return;
        };
        let mut text = String::new();
        for op in ops {
            text += &format!("{} {} {:.3}\n", op.kind, op.start_ns, op.cpu_us);
        }
        std::fs::write(path, text).unwrap_or_else(|_| fail("writing the op log"));
    }
}

/// The main process and its unprobed twin take turns, one operation each, through two pipes.
struct Lockstep {
    to_twin: [File; 2],
    to_main: [File; 2],
    is_twin: bool,
    started: bool,
}

fn pipe() -> [File; 2] {
    let mut fds = [0; 2];
    // SAFETY: pipe fills two descriptors that nothing else owns.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        fail("pipe");
    }
    fds.map(|fd| unsafe { File::from_raw_fd(fd) })
}

impl Lockstep {
    fn byte(&self, mut file: &File, write: bool) {
        let ok = if write {
            file.write_all(&[0]).is_ok()
        } else {
            file.read_exact(&mut [0]).is_ok()
        };
        if !ok {
            if self.is_twin {
                // The main process is gone.
                unsafe { libc::_exit(0) };
            }
            fail("lockstep pipe");
        }
    }

    fn begin(&mut self) {
        if self.is_twin {
            self.byte(&self.to_twin[0], false);
        } else if self.started {
            self.byte(&self.to_main[0], false);
        }
        self.started = true;
    }

    fn end(&self) {
        self.byte(
            if self.is_twin {
                &self.to_main[1]
            } else {
                &self.to_twin[1]
            },
            true,
        );
    }
}

struct Keys {
    group: &'static dyn SupportedKxGroup,
    peer_share: Vec<u8>,
    signer: Arc<dyn SigningKey>,
    scheme: SignatureScheme,
}

// A TLS 1.3 CertificateVerify signs 64 spaces, a 33-byte context string, a zero byte and a SHA-256 transcript hash.
const SIGNED_LEN: usize = 64 + 33 + 1 + 32;

/// Exactly n exchanges and m signatures, interleaved one by one as handshakes mix them.
fn run_ops(keys: &Keys, n: u64, m: u64, run: &mut Run, mut lockstep: Option<&mut Lockstep>) {
    let message = [0x20u8; SIGNED_LEN];
    let (mut d, mut s) = (0, 0);
    while d < n || s < m {
        if let Some(l) = lockstep.as_deref_mut() {
            l.begin();
        }
        if d < n && (s >= m || d * m <= s * n) {
            // A server's key share, then the shared secret with the client's: only the latter is timed.
            let share: Box<dyn ActiveKeyExchange> = keys.group.start().unwrap_or_else(|_| fail("key share"));
            run.timed('d', || share.complete(&keys.peer_share))
                .unwrap_or_else(|_| fail("key exchange"));
            d += 1;
        } else {
            // rustls chooses a signer for each handshake.
            let signer = keys
                .signer
                .choose_scheme(&[keys.scheme])
                .unwrap_or_else(|| fail("choosing the scheme"));
            run.timed('s', || signer.sign(&message))
                .unwrap_or_else(|_| fail("signing"));
            s += 1;
        }
        if let Some(l) = lockstep.as_deref() {
            l.end();
        }
    }
}

fn keys(derive_alg: &str, sign_alg: &str) -> Keys {
    let group_name = if derive_alg == "p256" {
        NamedGroup::secp256r1
    } else {
        NamedGroup::X25519
    };
    let group = *provider::ALL_KX_GROUPS
        .iter()
        .find(|g| g.name() == group_name)
        .unwrap_or_else(|| fail("finding the key exchange group"));
    let peer_share = group
        .start()
        .unwrap_or_else(|_| fail("the peer's key share"))
        .pub_key()
        .to_vec();
    let (pkcs8, scheme) = if sign_alg == "p256" {
        let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap_or_else(|_| fail("key generation"));
        (
            key.to_pkcs8v1()
                .unwrap_or_else(|_| fail("key encoding"))
                .as_ref()
                .to_vec(),
            SignatureScheme::ECDSA_NISTP256_SHA256,
        )
    } else {
        let key = RsaKeyPair::generate(KeySize::Rsa2048).unwrap_or_else(|_| fail("key generation"));
        (
            key.as_der().unwrap_or_else(|_| fail("key encoding")).as_ref().to_vec(),
            SignatureScheme::RSA_PSS_SHA256,
        )
    };
    let signer = provider::sign::any_supported_type(&PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pkcs8)))
        .unwrap_or_else(|_| fail("loading the signing key"));
    Keys {
        group,
        peer_share,
        signer,
        scheme,
    }
}

#[derive(Debug)]
struct NoCertificate;

impl ResolvesServerCert for NoCertificate {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        None
    }
}

/// One ClientHello through a server connection before the clock starts: the binary holds rustls' handshake code
/// as a server's does (tlsprof recognises rustls by it), and first-use costs are paid.
fn warm_up() {
    let client_config = rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let server_config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(NoCertificate));
    let name = ServerName::try_from("localhost").unwrap_or_else(|_| fail("server name"));
    let mut client =
        rustls::ClientConnection::new(Arc::new(client_config), name).unwrap_or_else(|_| fail("client connection"));
    let mut server =
        rustls::ServerConnection::new(Arc::new(server_config)).unwrap_or_else(|_| fail("server connection"));
    let mut hello = Vec::new();
    client
        .write_tls(&mut hello)
        .unwrap_or_else(|_| fail("writing the ClientHello"));
    server
        .read_tls(&mut hello.as_slice())
        .unwrap_or_else(|_| fail("reading the ClientHello"));
    // No certificate: the server refuses, as it should.
    if server.process_new_packets().is_ok() {
        fail("refusing a handshake without a certificate");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut derive_alg, mut sign_alg, mut op_log_path, mut twin_off) = ("x25519", "rsa2048", None, false);
    let mut i = 0;
    while i < args.len() && args[i].starts_with("--") {
        match (args[i].as_str(), args.get(i + 1).map(String::as_str)) {
            ("--no-twin", _) => {
                twin_off = true;
                i += 1;
                continue;
            }
            ("--derive", Some(v @ ("x25519" | "p256"))) => derive_alg = v,
            ("--sign", Some(v @ ("rsa2048" | "p256"))) => sign_alg = v,
            ("--op-log", Some(v)) => op_log_path = Some(v.to_string()),
            _ => usage(),
        }
        i += 2;
    }
    let counts: Vec<u64> = args[i..].iter().filter_map(|a| a.parse().ok()).collect();
    let [n_derive, m_sign] = counts[..] else { usage() };
    if args.len() - i != 2 {
        usage();
    }

    warm_up();
    let keys = keys(derive_alg, sign_alg);
    let new_run = || Run {
        ops: op_log_path
            .as_ref()
            .map(|_| Vec::with_capacity((n_derive + m_sign) as usize)),
        derive: Meter::default(),
        sign: Meter::default(),
    };
    let mut lockstep = (!twin_off).then(|| Lockstep {
        to_twin: pipe(),
        to_main: pipe(),
        is_twin: false,
        started: false,
    });
    let mut twin_pid = None;
    if let Some(l) = lockstep.as_mut() {
        std::io::stdout().flush().unwrap_or_else(|_| fail("stdout"));
        // SAFETY: one thread; the child runs only this program's code and leaves with _exit.
        match unsafe { libc::fork() } {
            -1 => fail("fork"),
            0 => {
                l.is_twin = true;
                let mut run = new_run();
                run_ops(&keys, n_derive, m_sign, &mut run, Some(l));
                run.write_op_log(op_log_path.map(|p| p + ".twin").as_deref());
                let meters = [run.derive.cpu_us, run.sign.cpu_us].map(f64::to_le_bytes).concat();
                let ok = (&l.to_main[1]).write_all(&meters).is_ok();
                unsafe { libc::_exit(if ok { 0 } else { 1 }) };
            }
            pid => twin_pid = Some(pid),
        }
    }

    println!("ready");
    std::io::stdout().flush().unwrap_or_else(|_| fail("stdout"));
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .unwrap_or_else(|_| fail("reading stdin"));

    let mut run = new_run();
    run_ops(&keys, n_derive, m_sign, &mut run, lockstep.as_mut());
    run.write_op_log(op_log_path.as_deref());
    let (nd, ns) = (n_derive.max(1) as f64, m_sign.max(1) as f64);
    let twin_json = match (lockstep.as_ref(), twin_pid) {
        (Some(l), Some(pid)) => {
            // The twin's last operation, then its meters.
            if n_derive + m_sign > 0 {
                l.byte(&l.to_main[0], false);
            }
            let mut meters = [0u8; 16];
            let mut status = 0;
            if (&l.to_main[0]).read_exact(&mut meters).is_err()
                || unsafe { libc::waitpid(pid, &mut status, 0) } != pid
                || !libc::WIFEXITED(status)
                || libc::WEXITSTATUS(status) != 0
            {
                fail("the unprobed twin");
            }
            let meter = |k: usize| f64::from_le_bytes(meters[k * 8..k * 8 + 8].try_into().unwrap_or([0; 8]));
            format!(
                "\"unprobed_derive_cpu_us\":{:.2},\"unprobed_sign_cpu_us\":{:.2},\"twin_pid\":{pid}",
                meter(0) / nd,
                meter(1) / ns
            )
        }
        _ => "\"unprobed_derive_cpu_us\":null,\"unprobed_sign_cpu_us\":null,\"twin_pid\":null".to_string(),
    };
    println!(
        "{{\"derives\":{n_derive},\"signs\":{m_sign},\"derive_cpu_us\":{:.2},\"sign_cpu_us\":{:.2},\
         \"derive_wall_us\":{:.2},\"sign_wall_us\":{:.2},{twin_json},\"pid\":{},\"derive_alg\":\"{derive_alg}\",\
         \"sign_alg\":\"{sign_alg}\",\"as_speed\":false,\"library\":\"rustls\"}}",
        run.derive.cpu_us / nd,
        run.sign.cpu_us / ns,
        run.derive.wall_us / nd,
        run.sign.wall_us / ns,
        std::process::id()
    );
}
