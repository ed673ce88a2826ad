// SPDX-License-Identifier: Apache-2.0
//! Stages: each one's CPU over the whole recording, probed or estimated from CPU samples, and its causes.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::ms;
use super::windows::Windows;
use crate::analyze::attribution::Attribution;
use crate::analyze::causes::{CauseCounts, CauseSummary};
use crate::analyze::estimate;
use crate::catalogue::Stage;
use crate::model::Recording;

/// A stage over the whole recording (exact, or estimated like the handshakes), and what the probes saw.
#[derive(Clone, Debug)]
pub struct StageSummary {
    pub name: Stage,
    /// CPU of outermost entries, including nested stages.
    pub cpu_ms: f64,
    /// CPU in this stage and no deeper one.
    pub self_cpu_ms: f64,
    pub self_cpu_ms_ci95: [f64; 2],
    /// Outermost entries; None for a stage estimated from CPU samples.
    pub calls: Option<u64>,
    /// Self CPU per outermost entry, as seen.
    pub cpu_us_per_call: Option<f64>,
    /// Estimated from CPU samples (the record layer without --all-probes), not probed.
    pub sampled: bool,
    /// Exact figures of the probe windows; None for a sampled stage.
    pub observed: Option<ObservedStage>,
    /// What the self CPU went to, from the CPU samples whose innermost stage this is (analyze/causes.rs),
    /// most samples first; `unattributed` holds the samples with no named frame below the stage frame.
    pub causes: Vec<CauseSummary>,
    /// The stage's samples in tlsprof's own uprobe traps (their kernel frames are always kept): left out of
    /// the causes' shares, as the probes' calibrated cost is out of the stage's CPU.
    pub probe_samples: u64,
    /// What the probes saw, in ns.
    pub cpu_ns: u64,
    pub self_ns: u64,
}

impl StageSummary {
    /// The cause with the most samples that names something (not `other` or `unattributed`).
    pub fn largest_named_cause(&self) -> Option<&CauseSummary> {
        self.causes
            .iter()
            .find(|c| !matches!(c.name.name(), "other" | "unattributed"))
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ObservedStage {
    pub calls: u64,
    pub cpu_ms: f64,
    pub self_cpu_ms: f64,
}

/// Shares of the CPU samples in the record layer's stages (read, write), as the causes place them.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RecordLayerShares {
    pub read: f64,
    pub write: f64,
}

/// `rel`: the relative error of the handshake count, which no stage's CPU estimate is surer than.
pub(super) fn probed_stages(rec: &Recording, windows: &Windows, rel: f64) -> Vec<StageSummary> {
    let mut by_stage: HashMap<Stage, (u64, u64, u64)> = HashMap::new();
    for n in &rec.tree {
        let stages = rec.path_stages(&n.path);
        let (Some(stage), ancestors) = stages.split_last().expect("checked non-empty") else {
            continue;
        };
        let stage = *stage;
        let (calls, cpu_ns, self_ns) = by_stage.entry(stage).or_default();
        *self_ns += n.self_ns;
        // Outermost entry: no ancestor is in the same stage (EVP_DigestSign calling EVP_DigestSignFinal is one).
        if !ancestors.contains(&Some(stage)) {
            *calls += n.calls;
            *cpu_ns += n.cpu_ns;
        }
    }
    Stage::ALL
        .iter()
        .filter_map(|s| by_stage.remove(s).map(|fig| (*s, fig)))
        .map(|(stage, (calls, cpu_ns, self_ns))| {
            let est = windows
                .estimate(
                    |w| w.stage_self_ns.get(&stage).copied().unwrap_or(0) as f64,
                    self_ns as f64,
                )
                .at_least(rel);
            // Calls and total CPU go with the stage's self CPU.
            let k = if self_ns > 0 { est.value / self_ns as f64 } else { 1.0 };
            StageSummary {
                name: stage,
                cpu_ms: ms(cpu_ns) * k,
                self_cpu_ms: est.value / 1e6,
                self_cpu_ms_ci95: est.scaled(1e-6).ci95,
                calls: Some((calls as f64 * k).round() as u64),
                cpu_us_per_call: Some(if calls == 0 {
                    0.0
                } else {
                    self_ns as f64 / 1e3 / calls as f64
                }),
                sampled: false,
                causes: Vec::new(),
                probe_samples: 0,
                observed: Some(ObservedStage {
                    calls,
                    cpu_ms: ms(cpu_ns),
                    self_cpu_ms: ms(self_ns),
                }),
                cpu_ns,
                self_ns,
            }
        })
        .collect()
}

/// The read and write stages estimated from CPU samples when SSL_read/SSL_write were not probed: their share
/// of the samples times the targets' own CPU, which their CPU clocks give exactly. Not samples × the sampling
/// period: a VM can deliver the sampling interrupt late and lose most samples of a process that often sleeps
/// (a keep-alive server between requests).
pub(super) fn sampled_stage(stage: Stage, share: f64, samples: u64, own_ms: f64) -> StageSummary {
    let n = samples as f64;
    let estimate = estimate::sampled_share((share * n).round(), n, own_ms);
    let cpu_ms = estimate.value;
    let ns = (cpu_ms * 1e6) as u64;
    StageSummary {
        name: stage,
        cpu_ms,
        self_cpu_ms: cpu_ms,
        self_cpu_ms_ci95: estimate.ci95,
        calls: None,
        cpu_us_per_call: None,
        sampled: true,
        observed: None,
        causes: Vec::new(),
        probe_samples: 0,
        cpu_ns: ns,
        self_ns: ns,
    }
}

/// Samples per stage by cause, over the whole recording (samples cover it all, probed or not).
pub(super) fn causes_by_stage(attribution: &Attribution) -> BTreeMap<Stage, CauseCounts> {
    let mut out: BTreeMap<Stage, CauseCounts> = BTreeMap::new();
    for (s, place) in attribution.samples() {
        if let Some(p) = place {
            out.entry(p.stage).or_default().add(p.cause.clone(), s.count);
        }
    }
    out
}

/// Each stage's causes: its self CPU (over the whole recording, with its interval) shared out by its samples.
pub(super) fn add_causes(stages: &mut [StageSummary], mut counts: BTreeMap<Stage, CauseCounts>) {
    for st in stages {
        if let Some(c) = counts.remove(&st.name) {
            st.causes = c.summaries(st.self_cpu_ms, st.self_cpu_ms_ci95);
            st.probe_samples = c.probe_samples;
        }
    }
}

/// Share of the CPU samples in the read and write stages: the samples whose causes those stages list
/// (analyze/attribution.rs places both), so a sampled row and its causes count the same samples. Sampled, so
/// available without probing those per-request functions.
pub(super) fn record_layer_sampled(stage_samples: &BTreeMap<Stage, CauseCounts>, samples: u64) -> RecordLayerShares {
    let share = |stage| {
        stage_samples
            .get(&stage)
            .map_or(0.0, |c| (c.samples + c.probe_samples) as f64 / samples.max(1) as f64)
    };
    RecordLayerShares {
        read: share(Stage::Read),
        write: share(Stage::Write),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::causes::Cause;
    use crate::analyze::summarize;
    use crate::model::tests::sample_recording;

    #[test]
    fn stage_calls_count_outermost_entries_and_self_sums_to_tls_cpu() {
        let s = summarize(&sample_recording());
        let sign = s.stages.iter().find(|s| s.name == Stage::Sign).unwrap();
        // 4 EVP_DigestSign (Final nested inside is the same call) + 2 bare EVP_DigestSignFinal.
        assert_eq!(sign.calls, Some(6));
        assert_eq!(sign.self_ns, 100_000 + 4_300_000 + 20_000);
        assert_eq!(sign.cpu_ns, 4_400_000 + 20_000);
        let self_sum: u64 = s.stages.iter().filter(|s| !s.sampled).map(|s| s.self_ns).sum();
        let tls_ns = 650_000 + 100_000 + 4_300_000 + 100_000 + 20_000;
        assert_eq!(self_sum, tls_ns);
        assert_eq!(s.tls_cpu_ms, ms(tls_ns));
    }

    #[test]
    fn a_derive_inside_the_key_schedule_counts_as_key_schedule() {
        let mut rec = sample_recording();
        rec.functions.push(crate::model::Function {
            name: "tls13_hkdf_expand".into(),
            library: 0,
            stage: Some(Stage::KeySchedule),
        });
        let node = |path: Vec<u16>, calls, ns| crate::model::TreeNode {
            pid: 10,
            path,
            calls,
            cpu_ns: ns,
            self_ns: ns / 2,
        };
        // SSL_do_handshake > tls13_hkdf_expand > EVP_PKEY_derive, 20 times.
        rec.tree.push(node(vec![0, 4], 20, 200_000));
        rec.tree.push(node(vec![0, 4, 3], 20, 100_000));
        let s = summarize(&rec);
        let stage = |name| s.stages.iter().find(|st| st.name == name).unwrap().clone();
        assert_eq!(stage(Stage::Derive).calls, Some(4), "only the key exchange's derives");
        assert_eq!(stage(Stage::KeySchedule).calls, Some(20));
        assert_eq!(stage(Stage::KeySchedule).self_ns, 100_000 + 50_000);
        let tagged: Vec<(&str, Option<Stage>)> = s
            .call_tree
            .rows
            .iter()
            .filter(|r| r.depth == 3)
            .map(|r| (r.frame.as_str(), r.stage))
            .collect();
        assert!(
            tagged.contains(&("EVP_PKEY_derive", Some(Stage::KeySchedule))),
            "{tagged:?}"
        );
    }

    #[test]
    fn sampled_record_layer_rows_count_the_samples_their_causes_list() {
        let mut rec = sample_recording();
        // SSL_read is a catalogue function (probed with --all-probes or as a handshake driver): outside the
        // probe windows its frame places a sample by name, as the record layer's frame would.
        rec.functions.push(crate::model::Function {
            name: "SSL_read".into(),
            library: 0,
            stage: Some(Stage::Read),
        });
        rec.probing.live_s = 1.0;
        let sample = |frames: &[&str], count| crate::model::Sample {
            pid: 10,
            path: vec![],
            frames: frames.iter().map(|s| s.to_string()).collect(),
            kernel: Vec::new(),
            complete: true,
            count,
        };
        rec.samples.push(sample(
            &["main", "ngx_ssl_recv", "SSL_read", "BIO_read", "__GI___libc_read"],
            3,
        ));
        rec.samples.push(sample(&["main", "SSL_write", "libssl.so.3+0x1"], 1));
        let s = summarize(&rec);
        let total: u64 = rec.samples.iter().map(|s| s.count).sum();
        for (stage, share) in [
            (Stage::Read, s.record_layer_sampled.read),
            (Stage::Write, s.record_layer_sampled.write),
        ] {
            let row = s.stages.iter().find(|st| st.name == stage && st.sampled).unwrap();
            let listed: u64 = row.causes.iter().map(|c| c.samples).sum::<u64>() + row.probe_samples;
            assert!(listed > 0, "{stage:?}");
            assert_eq!(share, listed as f64 / total as f64, "{stage:?}");
            assert!(row.self_cpu_ms > 0.0, "{stage:?}: a row with causes has CPU");
        }
    }

    #[test]
    fn causes_share_out_each_stage_self_cpu_from_its_samples() {
        let mut rec = sample_recording();
        let sample = |path: Vec<u16>, frames: &[&str], count| crate::model::Sample {
            pid: 10,
            path,
            frames: frames.iter().map(|s| s.to_string()).collect(),
            kernel: Vec::new(),
            complete: true,
            count,
        };
        rec.samples.push(sample(
            vec![0],
            &[
                "main",
                "SSL_do_handshake [handshake]",
                "libssl.so.3+0x1",
                "EVP_MD_fetch",
                "strcmp",
            ],
            3,
        ));
        // Taken while the probes were detached (they were, part of the time): placed by its frames.
        rec.probing.live_s = 1.0;
        rec.samples.push(sample(
            vec![],
            &["main", "SSL_do_handshake", "BIO_ctrl", "__GI___libc_write"],
            1,
        ));
        rec.samples.push(sample(
            vec![0],
            &["main", "SSL_do_handshake [handshake]", "libssl.so.3+0x1"],
            1,
        ));
        let s = summarize(&rec);
        let handshake = s.stages.iter().find(|st| st.name == Stage::Handshake).unwrap();
        let names: Vec<(Cause, u64)> = handshake.causes.iter().map(|c| (c.name, c.samples)).collect();
        assert_eq!(
            names,
            vec![(Cause::Lookups, 3), (Cause::SocketIo, 1), (Cause::Unattributed, 1)]
        );
        let lookups = &handshake.causes[0];
        assert!((lookups.cpu_ms - handshake.self_cpu_ms * 3.0 / 5.0).abs() < 1e-12);
        let total: f64 = handshake.causes.iter().map(|c| c.cpu_ms).sum();
        assert!(
            (total - handshake.self_cpu_ms).abs() < 1e-9,
            "the causes add up to the stage"
        );
        assert_eq!(handshake.causes[2].top_frames[0].name, "libssl.so.3+0x1");
        // The sign samples (bn_mul_mont below EVP_DigestSign) are public-key arithmetic.
        let sign = s.stages.iter().find(|st| st.name == Stage::Sign).unwrap();
        assert_eq!(sign.causes[0].name, Cause::PublicKey);
        assert_eq!(sign.causes[0].samples, 5);
        let causes = serde_json::to_value(&s.stages[0].causes).unwrap();
        assert_eq!(causes[0]["name"], "lookups");
        assert_eq!(causes[2]["name"], "unattributed");
    }
}
