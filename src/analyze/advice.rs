// SPDX-License-Identifier: Apache-2.0
//! Advice: rules that turn a recording's measurements into concrete changes, each with its evidence and an
//! estimate computed from costs measured in the same recording or by `openssl speed` on this machine.

use serde::Serialize;

use super::causes::Cause;
use super::summary::Basis;
use crate::catalogue::families::{go::Go, Family};
use crate::catalogue::Stage;
use crate::model::speed_ops as speed;
use crate::model::{CpuHistogram, Function, HandshakeGroup, Recording, Role};

#[derive(Clone, Debug, Serialize)]
pub struct Advice {
    pub id: &'static str,
    pub evidence: String,
    pub change: String,
    pub estimated_saving: String,
}

/// TLS below this share of the process's CPU is not worth tuning.
const SMALL_TLS_SHARE: f64 = 0.10;
/// Signing above this share of TLS CPU makes the certificate key worth changing.
const SIGN_HEAVY_SHARE: f64 = 0.20;
/// Resumption below this share of a server's handshakes leaves full handshakes to save.
const LOW_RESUMPTION: f64 = 0.5;
/// A client making handshakes this often, spending this share of its CPU in them, opens connections per request.
const BUSY_CLIENT_RATE: f64 = 1.0;
const BUSY_CLIENT_SHARE: f64 = 0.05;
/// Algorithm lookups above this share of TLS CPU are worth a library change.
const LOOKUPS_HEAVY_SHARE: f64 = 0.10;
/// Socket I/O above this share of TLS CPU, and the handshake's largest named cause, points at the flight.
const SOCKET_IO_HEAVY_SHARE: f64 = 0.10;

#[derive(Clone, Copy, PartialEq)]
enum Software {
    Nginx,
    Node,
    /// A Go program: crypto/tls, configured through tls.Config.
    Go,
    Other,
}

fn software(rec: &Recording) -> Software {
    if rec.libraries.iter().any(|l| l.family == Go.id()) {
        return Software::Go;
    }
    match rec.targets.first().map(|t| t.comm.as_str()) {
        Some("nginx") => Software::Nginx,
        Some("node") => Software::Node,
        _ => Software::Other,
    }
}

/// Go's hybrid post-quantum group, the default from Go 1.24.
const GO_HYBRID_GROUP: &str = "X25519MLKEM768";

/// Self CPU of the call-tree nodes whose innermost function `leaf` accepts, in ns as the probes saw it.
fn tree_self_ns(rec: &Recording, leaf: impl Fn(&Function) -> bool) -> u64 {
    rec.tree
        .iter()
        .filter(|n| {
            n.path
                .last()
                .and_then(|&id| rec.functions.get(usize::from(id)))
                .is_some_and(&leaf)
        })
        .map(|n| n.self_ns)
        .sum()
}

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

/// The most common value of a handshake field among full handshakes of a role.
fn most_common(
    rec: &Recording,
    role: Role,
    field: impl Fn(&crate::model::HandshakeGroup) -> Option<&String>,
) -> Option<String> {
    let mut best: Option<(&String, u64)> = None;
    for g in rec.handshakes.iter().filter(|g| g.kind.role == role && !g.kind.resumed) {
        if let Some(v) = field(g) {
            if best.is_none_or(|(_, n)| g.cpu.count > n) {
                best = Some((v, g.cpu.count));
            }
        }
    }
    best.map(|(v, _)| v.clone())
}

fn finite_field_dh(kx: &str) -> bool {
    kx.starts_with("DHE") || kx.starts_with("ffdhe")
}

/// Finite-field Diffie-Hellman, or a curve slower than X25519 and P-256.
fn slow_key_exchange(kx: &str) -> bool {
    finite_field_dh(kx) || kx.contains("P-384") || kx.contains("P-521") || kx.to_lowercase().contains("x448")
}

/// The CPU histogram of a role's handshakes, resumed or full or both (None).
fn handshakes(rec: &Recording, role: Role, resumed: Option<bool>) -> CpuHistogram {
    let mut all = CpuHistogram::default();
    for g in rec
        .handshakes
        .iter()
        .filter(|g| g.kind.role == role && resumed.is_none_or(|r| g.kind.resumed == r))
    {
        all.merge(&g.cpu);
    }
    all
}

/// The CPU a resumed handshake saved over a full one, as measured: the difference of their means, when the
/// lower end of its 95% interval (each mean's standard error from its histogram; a lone resumed handshake
/// taken to vary as the full ones do) is above zero; None when the two are not clearly apart.
fn measured_saving_ns(full: &CpuHistogram, resumed: &CpuHistogram) -> Option<f64> {
    let resumed_var = if resumed.count < 2 {
        full.variance_ns2()
    } else {
        resumed.variance_ns2()
    };
    let se = (full.variance_ns2() / full.count.max(1) as f64 + resumed_var / resumed.count.max(1) as f64).sqrt();
    let saved = full.mean_ns() - resumed.mean_ns();
    (saved - 1.96 * se > 0.0).then_some(saved)
}

/// The `openssl speed` operations (model::speed_ops) whose cost advice on these handshakes would quote: an
/// ECDSA signature for RSA certificates, X25519 for finite-field or slow-curve exchanges.
pub fn references_needed(handshakes: &[HandshakeGroup]) -> Vec<&'static str> {
    let rsa = handshakes
        .iter()
        .any(|g| g.kind.certificate_key.as_deref().is_some_and(|c| c.starts_with("RSA")));
    let slow = handshakes
        .iter()
        .any(|g| g.kind.key_exchange.as_deref().is_some_and(slow_key_exchange));
    [(rsa, speed::ECDSA_P256_SIGN), (slow, speed::X25519_DERIVE)]
        .into_iter()
        .filter_map(|(needed, op)| needed.then_some(op))
        .collect()
}

pub fn advise(rec: &Recording, basis: &Basis) -> Vec<Advice> {
    let proc_ms = basis.probed_cpu_ms;
    let tls_ns = basis.tls_cpu_ns as f64;
    let share = if proc_ms > 0.0 { ms(tls_ns) / proc_ms } else { 0.0 };
    let hs = &basis.totals;
    let sw = software(rec);
    let mut out = Vec::new();

    if proc_ms > 0.0 && share < SMALL_TLS_SHARE {
        let (read, write) = (basis.record_layer.read, basis.record_layer.write);
        out.push(Advice {
            id: "tls_not_the_cost",
            evidence: format!(
                "TLS handshakes are {:.1}% of the process's CPU ({:.0} of {:.0} ms; {} handshakes in {:.0} s of probes); the record layer is {:.0}% of CPU samples (SSL_write {:.0}%, SSL_read {:.0}%)",
                share * 100.0,
                ms(tls_ns),
                proc_ms,
                hs.observed.total,
                rec.probing.live_s,
                100.0 * (read + write),
                100.0 * write,
                100.0 * read
            ),
            change: "Handshakes are not the cost, so tuning certificates, key exchange or resumption will not help. What remains is the record layer's bulk encryption and the rest of the flame graph (`tlsprof flamegraph`).".into(),
            estimated_saving: format!("at most {:.1}% of CPU, even if handshakes cost nothing", share * 100.0),
        });
        return out;
    }

    let stage_self = |stage: Stage| basis.stage_self_ns(stage);
    let server_full_cpu = handshakes(rec, Role::Server, Some(false));
    let server_full = server_full_cpu.count;
    let server_total = handshakes(rec, Role::Server, None).count;

    // An RSA certificate whose signatures dominate.
    let cert = most_common(rec, Role::Server, |g| g.kind.certificate_key.as_ref());
    let sign_ns = stage_self(Stage::Sign);
    if let (Some(cert), true) = (&cert, server_full > 0 && tls_ns > 0.0) {
        if cert.starts_with("RSA") && sign_ns / tls_ns >= SIGN_HEAVY_SHARE {
            let sign_us = sign_ns / 1e3 / server_full as f64;
            let estimate = match rec.openssl_speed.get(speed::ECDSA_P256_SIGN) {
                Some(&ecdsa_us) => {
                    let saved = (sign_us - ecdsa_us).max(0.0) * server_full as f64 * 1e3;
                    format!(
                        "an ECDSA P-256 signature costs {ecdsa_us:.0} µs here (openssl speed{}) instead of {sign_us:.0} µs: about -{:.0}% TLS CPU",
                        if sw == Software::Go { ", OpenSSL's: Go's own ECDSA is not measured here" } else { "" },
                        100.0 * saved / tls_ns
                    )
                }
                None => "unknown: `openssl speed ecdsap256` could not be run to measure the alternative".into(),
            };
            out.push(Advice {
                id: "ecdsa_certificate",
                evidence: format!(
                    "sign is {:.0}% of TLS CPU ({cert}, {:.2} ms per full handshake, {server_full} full handshakes)",
                    100.0 * sign_ns / tls_ns,
                    sign_us / 1e3
                ),
                change: match sw {
                    Software::Nginx => "Serve an ECDSA P-256 certificate: add a second `ssl_certificate`/`ssl_certificate_key` pair with the ECDSA key (nginx picks it for clients that support it and keeps RSA for the rest).".into(),
                    Software::Node => "Serve an ECDSA P-256 certificate: tls.createServer({ key: [ecdsaKey, rsaKey], cert: [ecdsaCert, rsaCert] }) (Node.js picks ECDSA for clients that support it).".into(),
                    Software::Go => "Serve an ECDSA P-256 certificate: put a tls.Certificate with an ECDSA key first in tls.Config.Certificates, before the RSA one (Go serves the first one the client supports), or pick it in tls.Config.GetCertificate with ClientHelloInfo.SupportsCertificate.".into(),
                    Software::Other => "Serve an ECDSA P-256 certificate (SSL_CTX_use_certificate/SSL_CTX_use_PrivateKey with an EC key, alongside the RSA one).".into(),
                },
                estimated_saving: estimate,
            });
        }
    }

    // Servers that resume few handshakes.
    if server_full > 0 {
        let resumed = server_total - server_full;
        let resumed_share = resumed as f64 / server_total as f64;
        if resumed_share < LOW_RESUMPTION {
            let full_us = server_full_cpu.mean_ns() / 1e3;
            // A resumed handshake skips the certificate's work: measured here if any were resumed.
            let resumed_cpu = handshakes(rec, Role::Server, Some(true));
            let saved_us = if resumed_cpu.count > 0 {
                measured_saving_ns(&server_full_cpu, &resumed_cpu).map(|ns| ns / 1e3)
            } else {
                Some((stage_self(Stage::Sign) + stage_self(Stage::Verify)) / 1e3 / server_full as f64)
            };
            // Advice states only a saving it measured clearly above zero, and one that rounds to a percent at least.
            let saved = saved_us.map_or(0.0, |us| us * server_full as f64 * 0.9 * 1e3);
            let saved_pct = 100.0 * saved / tls_ns.max(1.0);
            if let Some(saved_us) = saved_us.filter(|_| saved_pct >= 0.5) {
                let resumed_us = full_us - saved_us;
                out.push(Advice {
                    id: "session_resumption",
                    evidence: format!(
                        "{:.0}% of {server_total} server handshakes seen were resumed; a full one costs {:.2} ms, a resumed one {:.2} ms{}",
                        resumed_share * 100.0,
                        full_us / 1e3,
                        resumed_us / 1e3,
                        if resumed_cpu.count > 0 {
                            ""
                        } else {
                            " (derived: no resumed handshake was seen, so a full one less its sign and verify CPU)"
                        }
                    ),
                    change: match sw {
                        Software::Nginx => "Let clients resume: `ssl_session_cache shared:SSL:10m; ssl_session_timeout 1h; ssl_session_tickets on;` and, with several instances behind a balancer, the same `ssl_session_ticket_key` on all of them.".into(),
                        Software::Node => "Let clients resume: keep session tickets on (the default) and give every worker the same `ticketKeys` (tls.createServer({ ticketKeys })), or handle 'newSession'/'resumeSession' with a shared cache.".into(),
                        Software::Go => "Let clients resume: keep session tickets on (tls.Config.SessionTicketsDisabled false, the default) and, with several instances behind a balancer, give them all the same ticket keys with tls.Config.SetSessionTicketKeys (rotated together): each instance otherwise makes its own, and a ticket from one is a full handshake on another.".into(),
                        Software::Other => "Let clients resume: enable the session cache (SSL_CTX_set_session_cache_mode) and session tickets, with ticket keys shared across instances.".into(),
                    },
                    estimated_saving: format!(
                        "if 90% of returning clients resume: about -{saved_pct:.0}% TLS CPU ({:.2} ms saved per resumed handshake)",
                        saved_us / 1e3
                    ),
                });
            }
        }
    }

    // Finite-field Diffie-Hellman, or a slow curve.
    if let Some(kx) = most_common(rec, Role::Server, |g| g.kind.key_exchange.as_ref())
        .or_else(|| most_common(rec, Role::Client, |g| g.kind.key_exchange.as_ref()))
    {
        let kx_ns = stage_self(Stage::Keygen) + stage_self(Stage::Derive);
        let kx_us = kx_ns / 1e3 / hs.observed.total.max(1) as f64;
        let dhe = finite_field_dh(&kx);
        let slow = slow_key_exchange(&kx);
        if slow && hs.observed.total > 0 {
            let estimate = match rec.openssl_speed.get(speed::X25519_DERIVE) {
                // An X25519 exchange is one key generation and one derivation, each a scalar multiplication.
                Some(&x25519_us) => format!(
                    "X25519 costs about {:.0} µs per handshake here (2 × openssl speed ecdhx25519) instead of {kx_us:.0} µs: about -{:.0}% TLS CPU",
                    2.0 * x25519_us,
                    100.0 * (kx_us - 2.0 * x25519_us).max(0.0) * hs.observed.total as f64 * 1e3 / tls_ns.max(1.0)
                ),
                None => "unknown: `openssl speed ecdhx25519` could not be run to measure the alternative".into(),
            };
            out.push(Advice {
                id: if dhe { "dhe_key_exchange" } else { "curve_choice" },
                evidence: format!(
                    "the key exchange is {kx}: key generation and derivation cost {kx_us:.0} µs per handshake ({:.0}% of TLS CPU)",
                    100.0 * kx_ns / tls_ns.max(1.0)
                ),
                change: match sw {
                    Software::Nginx => "Use an elliptic-curve exchange: put ECDHE suites first in `ssl_ciphers` (or drop DHE ones and `ssl_dhparam`), offer TLSv1.3 in `ssl_protocols`, and `ssl_ecdh_curve X25519:prime256v1;`.".into(),
                    Software::Node => "Use an elliptic-curve exchange: tls.createServer({ ecdhCurve: 'X25519:P-256', ciphers: ECDHE suites first, minVersion: 'TLSv1.2' }) and allow TLSv1.3.".into(),
                    Software::Go => "Use X25519 or P-256: tls.Config.CurvePreferences = []tls.CurveID{tls.X25519, tls.CurveP256}.".into(),
                    Software::Other => "Use an elliptic-curve exchange: prefer ECDHE suites and X25519 (SSL_CTX_set1_groups_list(ctx, \"X25519:P-256\")).".into(),
                },
                estimated_saving: estimate,
            });
        }
    }

    // Go's default hybrid group: its ML-KEM half, measured beside the X25519 half in the same handshakes.
    let hybrid: u64 = rec
        .handshakes
        .iter()
        .filter(|g| g.kind.key_exchange.as_deref() == Some(GO_HYBRID_GROUP))
        .map(|g| g.cpu.count)
        .sum();
    let kx_seen = tree_self_ns(rec, |f| matches!(f.stage, Some(Stage::Keygen | Stage::Derive)));
    let mlkem_seen = tree_self_ns(rec, |f| f.name.contains("/mlkem."));
    if sw == Software::Go && hybrid > 0 && kx_seen > 0 && mlkem_seen > 0 && tls_ns > 0.0 {
        let kx_ns = stage_self(Stage::Keygen) + stage_self(Stage::Derive);
        let mlkem_ns = kx_ns * mlkem_seen as f64 / kx_seen as f64;
        let per = |ns: f64| ns / 1e3 / hybrid as f64;
        out.push(Advice {
            id: "hybrid_key_exchange",
            evidence: format!(
                "the key exchange is {GO_HYBRID_GROUP} (Go's default from 1.24) in {hybrid} handshakes: key generation and derivation cost {:.0} µs per handshake, of which ML-KEM {:.0} µs and X25519 {:.0} µs; ML-KEM is {:.0}% of TLS CPU",
                per(kx_ns),
                per(mlkem_ns),
                per(kx_ns - mlkem_ns),
                100.0 * mlkem_ns / tls_ns
            ),
            change: "The hybrid group protects recorded traffic against a future quantum computer, at the cost measured here. Where that is not needed, tls.Config.CurvePreferences = []tls.CurveID{tls.X25519, tls.CurveP256} (or GODEBUG=tlsmlkem=0) makes the exchange X25519 alone; Go clients send an X25519 share beside the hybrid one, so they need no extra round trip.".into(),
            estimated_saving: format!(
                "about -{:.0}% TLS CPU ({:.0} µs per handshake: the ML-KEM functions' share of key generation and derivation in this recording)",
                100.0 * mlkem_ns / tls_ns,
                per(mlkem_ns)
            ),
        });
    }

    // What the probed stages' own CPU went to, from the samples below the stage frames.
    let cause_in_stages = |cause: Cause| {
        basis
            .stages
            .iter()
            .filter(|st| !st.sampled)
            .flat_map(move |st| st.causes.iter().filter(move |c| c.name == cause).map(move |c| (st, c)))
    };
    let cause_ns = |cause: Cause| -> f64 { cause_in_stages(cause).map(|(st, c)| st.self_ns as f64 * c.share).sum() };
    let cause_samples = |cause: Cause| -> u64 { cause_in_stages(cause).map(|(_, c)| c.samples).sum() };
    let top_frames = |cause: Cause| -> String {
        let mut frames: Vec<(&str, u64)> = Vec::new();
        for f in cause_in_stages(cause).flat_map(|(_, c)| &c.top_frames) {
            match frames.iter_mut().find(|(n, _)| *n == f.name) {
                Some((_, k)) => *k += f.samples,
                None => frames.push((&f.name, f.samples)),
            }
        }
        frames.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        frames.iter().take(3).map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    };
    let lookups_ns = cause_ns(Cause::Lookups);
    if tls_ns > 0.0 && lookups_ns / tls_ns >= LOOKUPS_HEAVY_SHARE {
        let openssl3 = rec
            .libraries
            .iter()
            .filter_map(|l| l.version.as_deref())
            .find(|v| v.starts_with("OpenSSL 3."));
        out.push(Advice {
            id: "algorithm_lookups",
            evidence: format!(
                "algorithm lookups (fetches, name maps, parameters, EVP contexts) are {:.0}% of TLS CPU ({:.1} ms, estimated from {} CPU samples below the stage frames; most named by {}){}",
                100.0 * lookups_ns / tls_ns,
                ms(lookups_ns),
                cause_samples(Cause::Lookups),
                top_frames(Cause::Lookups),
                openssl3.map_or(String::new(), |v| format!("; the library is {v}"))
            ),
            change: format!(
                "This is the provider machinery of OpenSSL 3, which looks algorithms up by name, with locks, for each handshake's operations: not the cryptography, so keys, certificates and the protocol version do not change it. Later OpenSSL 3 releases cut this per-operation overhead (see their release notes), and libraries without run-time algorithm lookups (BoringSSL, AWS-LC) do none: {}.",
                match sw {
                    Software::Nginx => "build nginx against one of them (nginx supports BoringSSL and AWS-LC) and compare with `tlsprof diff`",
                    Software::Node => "a newer Node.js release links a newer OpenSSL; compare with `tlsprof diff`",
                    Software::Go | Software::Other => "link against one of them and compare with `tlsprof diff`",
                }
            ),
            estimated_saving: format!(
                "at most -{:.0}% TLS CPU, if lookups cost nothing; how much a given release or library saves is not measured here",
                100.0 * lookups_ns / tls_ns
            ),
        });
    }

    // Socket I/O the largest cause in the handshake's own CPU.
    let handshake_causes = basis
        .stages
        .iter()
        .find(|st| st.name == Stage::Handshake && !st.sampled)
        .map(|st| st.causes.as_slice())
        .unwrap_or_default();
    let largest_named = handshake_causes
        .iter()
        .find(|c| !matches!(c.name, Cause::Unattributed | Cause::Other));
    let io_ns = cause_ns(Cause::SocketIo);
    if tls_ns > 0.0
        && io_ns / tls_ns >= SOCKET_IO_HEAVY_SHARE
        && largest_named.is_some_and(|c| c.name == Cause::SocketIo)
    {
        out.push(Advice {
            id: "handshake_flight_size",
            evidence: format!(
                "socket I/O (the BIO layer, system calls{}) is {:.0}% of TLS CPU ({:.1} ms, estimated from {} CPU samples; most named by {}), the largest named cause of the handshake's own CPU",
                if rec.samples.iter().any(|s| !s.kernel.is_empty()) { " and the kernel's network stack" } else { "; add --kernel to see the kernel's part" },
                100.0 * io_ns / tls_ns,
                ms(io_ns),
                cause_samples(Cause::SocketIo),
                top_frames(Cause::SocketIo)
            ),
            change: format!(
                "Send less per handshake: only the leaf certificate and the intermediates it needs (never the root or extra cross-signed certificates), and, with TLS 1.3, no more session tickets than clients use ({}). On loopback the kernel's part includes the receiver's network processing, so a benchmark over loopback overstates it.",
                match sw {
                    Software::Nginx => "`ssl_certificate` holds the chain nginx sends; each ticket OpenSSL sends after the handshake is another write",
                    Software::Node => "the `cert` chain given to tls.createServer is what is sent; each ticket is another write",
                    Software::Go => "the tls.Certificate's Certificate chain is what is sent; Go sends one ticket per TLS 1.3 handshake",
                    Software::Other => "SSL_CTX_set_num_tickets; each ticket is another write",
                }
            ),
            estimated_saving: format!(
                "at most -{:.0}% TLS CPU, if sending the flight cost nothing; a shorter chain saves in proportion to the bytes it removes",
                100.0 * io_ns / tls_ns
            ),
        });
    }

    // Clients that open a new connection (and a full handshake) for their requests.
    let client = handshakes(rec, Role::Client, None);
    let (client_total, client_ns) = (client.count, client.sum_ns);
    let rate = client_total as f64 / rec.probing.live_s.max(1e-9);
    if rate >= BUSY_CLIENT_RATE && ms(client_ns as f64) >= BUSY_CLIENT_SHARE * proc_ms {
        let resumed = handshakes(rec, Role::Client, Some(true)).count;
        out.push(Advice {
            id: "client_connection_reuse",
            evidence: format!(
                "this client made {client_total} handshakes ({rate:.1}/s, {:.0}% resumed) costing {:.0}% of its TLS CPU and {:.0}% of its CPU",
                100.0 * resumed as f64 / client_total as f64,
                100.0 * client_ns as f64 / tls_ns.max(1.0),
                100.0 * ms(client_ns as f64) / proc_ms.max(1e-9)
            ),
            change: match sw {
                Software::Node => "Reuse connections: new https.Agent({ keepAlive: true, maxSockets: N }) for outbound requests; connections that must be new can still resume sessions (the Agent caches them: maxCachedSessions).".into(),
                Software::Go => "Reuse connections: share one http.Client (its http.Transport keeps connections alive unless DisableKeepAlives is set) and raise http.Transport.MaxIdleConnsPerHost (2 by default) to the number of concurrent requests per host; connections that must be new can resume: tls.Config.ClientSessionCache = tls.NewLRUClientSessionCache(0).".into(),
                _ => "Reuse connections (HTTP keep-alive, a connection pool) and resume TLS sessions on the new ones (SSL_set_session with the previous session).".into(),
            },
            estimated_saving: format!(
                "every handshake avoided saves {:.2} ms of CPU; with keep-alive, up to -{:.0}% TLS CPU",
                client_ns as f64 / client_total as f64 / 1e6,
                100.0 * client_ns as f64 / tls_ns.max(1.0)
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::sample_recording;

    fn advise(rec: &Recording) -> Vec<Advice> {
        crate::analyze::summarize(rec).advice
    }

    fn ids(rec: &Recording) -> Vec<&'static str> {
        advise(rec).iter().map(|a| a.id).collect()
    }

    #[test]
    fn rsa_signing_without_resumption_gets_ecdsa_and_session_cache() {
        let rec = sample_recording();
        let advice = advise(&rec);
        assert_eq!(ids(&rec), vec!["ecdsa_certificate", "session_resumption"]);
        let ecdsa = &advice[0];
        assert!(
            ecdsa.evidence.contains("RSA-2048") && ecdsa.change.contains("ssl_certificate"),
            "{ecdsa:?}"
        );
        // 4 full handshakes signing 1105 µs each; ECDSA at 40 µs: 4 × 1065 µs of 5170 µs TLS CPU.
        assert!(ecdsa.estimated_saving.contains("about -82% TLS CPU"), "{ecdsa:?}");
        assert!(advice[1].change.contains("ssl_session_cache"), "{:?}", advice[1]);
    }

    #[test]
    fn resumption_advice_states_only_a_saving_it_measured() {
        let with_resumed = |ns: &[u64]| {
            let mut rec = sample_recording();
            let mut group = rec.handshakes[0].clone();
            group.kind.resumed = true;
            group.cpu = crate::model::CpuHistogram::default();
            for &v in ns {
                group.cpu.add(v);
            }
            rec.handshakes.push(group);
            advise(&rec).into_iter().find(|a| a.id == "session_resumption")
        };
        // Resumed handshakes costing what the full ones cost (1.2–1.4 ms): no saving measured, no advice.
        assert!(with_resumed(&[1_250_000, 1_350_000]).is_none());
        assert!(with_resumed(&[1_300_000]).is_none());
        // Clearly cheaper ones: the measured difference.
        let advice = with_resumed(&[300_000, 320_000, 310_000]).expect("resumption advice");
        assert!(advice.estimated_saving.contains("0.98 ms saved"), "{advice:?}");
        assert!(!advice.estimated_saving.contains("-0%"), "{advice:?}");
    }

    #[test]
    fn lookups_and_socket_io_are_advised_on_with_their_figures() {
        let mut rec = sample_recording();
        let sample = |leaf: &str, count| crate::model::Sample {
            pid: 10,
            path: vec![0],
            frames: ["main", "SSL_do_handshake [handshake]", "libssl.so.3+0x1", leaf]
                .map(String::from)
                .to_vec(),
            kernel: Vec::new(),
            complete: true,
            count,
        };
        // The handshake's own 0.65 ms of 5.17 ms TLS CPU: 80% lookups, 20% socket I/O.
        rec.samples = vec![sample("EVP_MD_fetch", 8), sample("__GI___libc_write", 2)];
        let advice = advise(&rec);
        let lookups = advice
            .iter()
            .find(|a| a.id == "algorithm_lookups")
            .expect("lookups advice");
        assert!(lookups.evidence.contains("are 10% of TLS CPU"), "{lookups:?}");
        assert!(lookups.evidence.contains("OpenSSL 3.0.19"), "{lookups:?}");
        assert!(lookups.estimated_saving.contains("at most -10%"), "{lookups:?}");
        assert!(
            !ids(&rec).contains(&"handshake_flight_size"),
            "socket I/O is not the largest cause"
        );
        rec.samples = vec![sample("EVP_MD_fetch", 2), sample("__GI___libc_write", 8)];
        let advice = advise(&rec);
        let flight = advice
            .iter()
            .find(|a| a.id == "handshake_flight_size")
            .expect("flight advice");
        assert!(flight.evidence.contains("is 10% of TLS CPU"), "{flight:?}");
        assert!(flight.change.contains("ssl_certificate"), "{flight:?}");
        assert!(!ids(&rec).contains(&"algorithm_lookups"));
    }

    /// The sample recording as a Go server's: an ECDH derive and an ML-KEM one under the handshake.
    fn go_recording() -> Recording {
        let mut rec = sample_recording();
        rec.libraries[0].family = Go.id().into();
        rec.libraries[0].version = Some("go1.26.8".into());
        rec.targets[0].comm = "server".into();
        rec.functions.push(Function {
            name: "crypto/internal/fips140/mlkem.parseEK".into(),
            library: 0,
            stage: Some(Stage::Derive),
        });
        // Derive: 100 µs of ECDH (sample_recording's) and 300 µs of ML-KEM, over 4 handshakes.
        rec.tree.push(crate::model::TreeNode {
            pid: 10,
            path: vec![0, 4],
            calls: 4,
            cpu_ns: 300_000,
            self_ns: 300_000,
        });
        rec.handshakes[0].kind.key_exchange = Some(GO_HYBRID_GROUP.into());
        rec
    }

    #[test]
    fn go_programs_get_advice_in_go_terms_from_measured_figures() {
        let rec = go_recording();
        let advice = advise(&rec);
        let find = |id: &str| {
            advice
                .iter()
                .find(|a| a.id == id)
                .unwrap_or_else(|| panic!("no {id}: {advice:?}"))
        };
        assert!(find("ecdsa_certificate").change.contains("tls.Config.Certificates"));
        assert!(find("session_resumption").change.contains("SetSessionTicketKeys"));
        let hybrid = find("hybrid_key_exchange");
        assert!(hybrid.change.contains("CurvePreferences"), "{hybrid:?}");
        // The derive stage's self CPU, less the probes' cost inside it, split 1:3 as the tree saw it.
        let summary = crate::analyze::summarize(&rec);
        let derive = summary.stages.iter().find(|s| s.name == Stage::Derive).unwrap();
        let mlkem_us = derive.self_ns as f64 * 0.75 / 1e3 / 4.0;
        assert!(
            hybrid.evidence.contains(&format!("of which ML-KEM {mlkem_us:.0} µs")),
            "{hybrid:?} vs {mlkem_us}"
        );
        assert!(
            hybrid
                .estimated_saving
                .contains(&format!("({mlkem_us:.0} µs per handshake")),
            "{hybrid:?}"
        );
        // X25519 alone: no hybrid advice.
        let mut plain = go_recording();
        plain.handshakes[0].kind.key_exchange = Some("x25519".into());
        assert!(!ids(&plain).contains(&"hybrid_key_exchange"));
        // A Go client opening connections per request.
        let mut client = go_recording();
        client.handshakes[0].kind.role = Role::Client;
        let advice = advise(&client);
        let reuse = advice
            .iter()
            .find(|a| a.id == "client_connection_reuse")
            .expect("client advice");
        assert!(
            reuse.change.contains("MaxIdleConnsPerHost") && reuse.change.contains("ClientSessionCache"),
            "{reuse:?}"
        );
    }

    #[test]
    fn small_tls_share_says_tuning_tls_will_not_help() {
        let mut rec = sample_recording();
        rec.targets[0].probed_cpu_ms = 1000.0;
        assert_eq!(ids(&rec), vec!["tls_not_the_cost"]);
    }

    #[test]
    fn dhe_and_busy_clients_are_named() {
        let mut rec = sample_recording();
        rec.handshakes[0].kind.key_exchange = Some("DHE-2048".into());
        assert!(ids(&rec).contains(&"dhe_key_exchange"));
        rec.handshakes[0].kind.role = Role::Client;
        rec.targets[0].comm = "node".into();
        let advice = advise(&rec);
        let reuse = advice
            .iter()
            .find(|a| a.id == "client_connection_reuse")
            .expect("client advice");
        assert!(reuse.change.contains("keepAlive: true"), "{reuse:?}");
    }
}
