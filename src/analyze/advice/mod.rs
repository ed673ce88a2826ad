// SPDX-License-Identifier: Apache-2.0
//! Advice: rules that turn a recording's summary into concrete changes, each with its evidence and an
//! estimate computed from costs measured in the same recording or by `openssl speed` on this machine. A
//! rule is a file here and a line in `RULES`; what it says to each kind of server is in `wording`.

use serde::Serialize;

use super::causes::{Cause, CauseSummary};
use super::{StageSummary, Summary};
use crate::catalogue::families;
use crate::catalogue::servers::Server;
use crate::catalogue::{jsse, Stage};
use crate::model::speed_ops as speed;
use crate::model::{CpuHistogram, HandshakeGroup, Recording, Role, Target};
use wording::Phrase;

mod algorithm_lookups;
mod client_connection_reuse;
mod ecdsa_certificate;
mod handshake_flight_size;
mod hybrid_key_exchange;
mod key_exchange;
mod resumption_refused;
mod session_resumption;
mod tls_not_the_cost;
mod wording;

#[derive(Clone, Debug, Serialize)]
pub struct Advice {
    pub id: &'static str,
    /// The change in a few words, for the first screen ("Serve an ECDSA P-256 certificate").
    pub title: &'static str,
    pub evidence: String,
    pub change: String,
    pub estimated_saving: String,
    /// The saving as a share of TLS CPU, which ranks the advice; None where it was not measured.
    pub saving: Option<Saving>,
}

/// How much of the TLS CPU a change would save, by the figures of the recording.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Saving {
    pub tls_cpu_pct: f64,
    /// An upper bound (the cost would have to vanish), not an estimate.
    pub at_most: bool,
}

impl Saving {
    fn about(tls_cpu_pct: f64) -> Option<Saving> {
        Some(Saving {
            tls_cpu_pct,
            at_most: false,
        })
    }

    fn at_most(tls_cpu_pct: f64) -> Option<Saving> {
        Some(Saving {
            tls_cpu_pct,
            at_most: true,
        })
    }
}

/// A rule: its advice on a recording, or None when it does not apply.
type Rule = fn(&Context) -> Option<Advice>;

/// The rules whose advice is listed, in this order, when handshakes are a cost worth tuning.
const RULES: &[Rule] = &[
    ecdsa_certificate::advise,
    resumption_refused::advise,
    session_resumption::advise,
    key_exchange::advise,
    hybrid_key_exchange::advise,
    algorithm_lookups::advise,
    handshake_flight_size::advise,
    client_connection_reuse::advise,
];

/// The advice on a recording from its summary: only `tls_not_the_cost` when handshakes are too small a
/// part of the CPU for any other rule's change to matter, else each rule's that applies.
pub fn advise(rec: &Recording, summary: &Summary) -> Vec<Advice> {
    let cx = Context::new(rec, summary);
    if let Some(advice) = tls_not_the_cost::advise(&cx) {
        return vec![advice];
    }
    RULES.iter().filter_map(|rule| rule(&cx)).collect()
}

/// The kind of server a target is, which decides how advice words a change: the one a family of its
/// libraries implies (a Go program), else the one its name says.
fn kind_of(rec: &Recording, target: &Target) -> Server {
    rec.libraries
        .iter()
        .filter(|l| l.pids.contains(&target.pid))
        .find_map(|l| families::named(&l.family)?.server())
        .unwrap_or_else(|| Server::of_program(&target.comm))
}

/// What the rules read: the recording, its summary, and figures several rules share.
struct Context<'a> {
    rec: &'a Recording,
    summary: &'a Summary,
    /// The targets' kinds, each once, in `Server` order.
    kinds: Vec<Server>,
    /// TLS CPU as the probes saw it, in ns: what shares of TLS CPU are of. Where every target was counted
    /// from the wire alone, what their frames show (JSSE).
    tls_ns: f64,
    /// Every target counted from the wire alone: stage CPU is what the frames of its samples show, and no
    /// handshake has a CPU of its own.
    by_frames: bool,
}

impl<'a> Context<'a> {
    fn new(rec: &'a Recording, summary: &'a Summary) -> Context<'a> {
        let mut kinds: Vec<Server> = rec.targets.iter().map(|t| kind_of(rec, t)).collect();
        kinds.sort();
        kinds.dedup();
        if kinds.is_empty() {
            kinds.push(Server::Other);
        }
        let by_frames = !summary.targets.is_empty() && summary.targets.iter().all(|t| t.target.wire_only);
        let tls_ns = match by_frames {
            true => summary.wire_only().filter_map(|t| t.tls_cpu_ms).sum::<f64>() * 1e6,
            false => summary.observed_tls_cpu_ms * 1e6,
        };
        Context {
            rec,
            summary,
            kinds,
            tls_ns,
            by_frames,
        }
    }

    /// A phrase as the targets' kinds need it: as it is for one kind; for several, each kind's wording after
    /// its name, kinds worded alike together.
    fn wording(&self, phrase: Phrase) -> String {
        wording::for_kinds(phrase, &self.kinds)
    }

    /// A probed stage's self CPU in ns, 0 when it was not seen.
    fn stage_self_ns(&self, stage: Stage) -> f64 {
        self.summary
            .stages
            .iter()
            .find(|s| s.name == stage && (!s.sampled || self.by_frames && !matches!(stage, Stage::Read | Stage::Write)))
            .map_or(0.0, |s| s.self_ns as f64)
    }

    /// The certificate key of a role's full handshakes as the wire named it; else, for a JVM's server whose
    /// samples show it signing with an RSA private key, "RSA" (the wire does not show a TLS 1.3 certificate).
    fn certificate_key(&self, role: Role) -> Option<String> {
        self.most_common(role, |g| g.kind.certificate_key.as_ref()).or_else(|| {
            let rsa = self.by_frames
                && role == Role::Server
                && self
                    .rec
                    .samples
                    .iter()
                    .any(|s| s.frames.iter().any(|f| jsse::signs_with_rsa(f)));
            rsa.then(|| "RSA (by its signing frames)".to_string())
        })
    }

    /// The CPU histogram of a role's handshakes, resumed or full or both (None).
    fn handshakes(&self, role: Role, resumed: Option<bool>) -> CpuHistogram {
        let mut all = CpuHistogram::default();
        for g in self
            .rec
            .handshakes
            .iter()
            .filter(|g| g.kind.role == role && resumed.is_none_or(|r| g.kind.resumed == r))
        {
            all.merge(&g.cpu);
        }
        all
    }

    /// The most common value of a handshake field among full handshakes of a role.
    fn most_common(&self, role: Role, field: impl Fn(&HandshakeGroup) -> Option<&String>) -> Option<String> {
        let mut best: Option<(&String, u64)> = None;
        for g in self
            .rec
            .handshakes
            .iter()
            .filter(|g| g.kind.role == role && !g.kind.resumed)
        {
            if let Some(v) = field(g) {
                if best.is_none_or(|(_, n)| g.cpu.count > n) {
                    best = Some((v, g.cpu.count));
                }
            }
        }
        best.map(|(v, _)| v.clone())
    }

    /// What the probed stages' own CPU went to, from the samples below the stage frames: the figures of a
    /// cause in each stage that has it.
    fn cause_in_stages(&self, cause: Cause) -> impl Iterator<Item = (&StageSummary, &CauseSummary)> {
        self.summary
            .stages
            .iter()
            .filter(|st| !st.sampled)
            .flat_map(move |st| st.causes.iter().filter(move |c| c.name == cause).map(move |c| (st, c)))
    }

    /// A cause's share of the probed stages' self CPU, in ns.
    fn cause_ns(&self, cause: Cause) -> f64 {
        self.cause_in_stages(cause)
            .map(|(st, c)| st.self_ns as f64 * c.share)
            .sum()
    }

    fn cause_samples(&self, cause: Cause) -> u64 {
        self.cause_in_stages(cause).map(|(_, c)| c.samples).sum()
    }

    /// The three frames that named a cause in most samples, over all stages.
    fn top_frames(&self, cause: Cause) -> String {
        let mut frames: Vec<(&str, u64)> = Vec::new();
        for f in self.cause_in_stages(cause).flat_map(|(_, c)| &c.top_frames) {
            match frames.iter_mut().find(|(n, _)| *n == f.name) {
                Some((_, k)) => *k += f.samples,
                None => frames.push((&f.name, f.samples)),
            }
        }
        frames.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        frames.iter().take(3).map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    }
}

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

/// The `openssl speed` operations (model::speed_ops) whose cost advice on these handshakes would quote: an
/// ECDSA signature for RSA certificates, X25519 for finite-field or slow-curve exchanges.
pub fn references_needed(handshakes: &[HandshakeGroup]) -> Vec<&'static str> {
    let rsa = handshakes
        .iter()
        .any(|g| g.kind.certificate_key.as_deref().is_some_and(ecdsa_certificate::rsa));
    let slow = handshakes
        .iter()
        .any(|g| g.kind.key_exchange.as_deref().is_some_and(key_exchange::slow));
    [(rsa, speed::ECDSA_P256_SIGN), (slow, speed::X25519_DERIVE)]
        .into_iter()
        .filter_map(|(needed, op)| needed.then_some(op))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::hybrid_key_exchange::HYBRID_GROUP;
    use super::*;
    use crate::model::tests::{sample_recording, two_process_recording};
    use crate::model::Function;

    fn advise(rec: &Recording) -> Vec<Advice> {
        crate::analyze::analyze(rec).advice
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
        rec.libraries[0].family = "go".into();
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
        rec.handshakes[0].kind.key_exchange = Some(HYBRID_GROUP.into());
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

    /// Targets of two kinds: each kind's wording after its name, in a stable order; a Go library decides
    /// only for the processes it lists.
    #[test]
    fn each_kind_of_target_gets_its_own_wording() {
        let mut rec = two_process_recording();
        let ecdsa = |rec: &Recording| advise(rec).into_iter().find(|a| a.id == "ecdsa_certificate").unwrap();
        let one = |comm: &str| {
            let mut single = sample_recording();
            single.targets[0].comm = comm.into();
            ecdsa(&single).change
        };
        let (nginx, node) = (one("nginx"), one("node"));
        assert_eq!(
            ecdsa(&rec).change,
            format!(
                "nginx: {}; Node.js: {}.",
                nginx.trim_end_matches('.'),
                node.trim_end_matches('.')
            )
        );
        rec.targets.swap(0, 1);
        assert!(ecdsa(&rec).change.starts_with("nginx: "));
        let mut go = rec.libraries[0].clone();
        (go.family, go.pids) = ("go".into(), vec![20]);
        rec.libraries.push(go);
        let change = ecdsa(&rec).change;
        assert!(
            change.starts_with("nginx: ") && change.contains("; Go: Serve"),
            "{change}"
        );
        assert!(!change.contains("Node.js"), "{change}");
    }
}
