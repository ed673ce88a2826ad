// SPDX-License-Identifier: Apache-2.0
//! The summary of a recording: every figure derived from it, computed once. Text, JSON and diff render
//! it; its serialized form, with the advice, is the JSON schema (`tlsprof report --json`, keys sorted).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::causes::{self, Cause, CauseCounts, CauseSummary};
use super::estimate::{self, Estimate, Spread};
use crate::catalogue::{stage_within, Stage};
use crate::model::{
    CallGraph, CpuHistogram, Flavor, HandshakeCounts, Hits, Lost, Outcome, Recording, Role, Symbols, Target,
    UnnamedFile, WindowPart,
};

/// Call-tree nodes below this share of TLS CPU are folded into a count, to keep the tree readable.
const TREE_MIN_SHARE: f64 = 0.001;

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub duration_s: f64,
    pub targets: Vec<TargetSummary>,
    /// The targets' CPU over the whole recording.
    pub process_cpu_ms: f64,
    /// The targets' CPU while the stage probes were attached: what stage figures and `tls_share` compare with.
    pub probed_cpu_ms: f64,
    pub probing: ProbingSummary,
    /// Everything inside any stage over the whole recording, each nanosecond counted once (the sum of self
    /// times): exact, or estimated from the probe windows.
    pub tls_cpu_ms: f64,
    pub tls_cpu_ms_ci95: [f64; 2],
    /// What the probe windows saw.
    pub observed_tls_cpu_ms: f64,
    /// TLS CPU as a share of the targets' CPU while probed.
    pub tls_share: Option<f64>,
    pub handshakes: HandshakeSummary,
    pub stages: Vec<StageSummary>,
    pub functions: Vec<FunctionSummary>,
    pub libraries: Vec<LibrarySummary>,
    pub all_probes: bool,
    pub sample_freq_hz: u64,
    pub samples: u64,
    pub lost_samples: u64,
    pub lost: Lost,
    pub probe_cost_us_per_hit: f64,
    pub probe_cost_cold_us_per_hit: f64,
    pub probe_hits: u64,
    pub probe_stepped_hits: u64,
    pub probe_cost_cold_us_per_step: f64,
    /// Target CPU spent in the probes: the hits at their calibrated cold-cache costs, or what the samples in
    /// the probes' traps measured when that is more (ProbeCost::overhead_ms).
    pub probe_overhead_ms: f64,
    /// The hits at their calibrated costs alone.
    pub probe_overhead_calibrated_ms: f64,
    /// The samples taken in the probes' traps; None where they were not counted.
    pub probe_traps: Option<TrapsMeasured>,
    /// The part of the stage threads' time on a CPU that the kernel left out of their task clock (the
    /// hypervisor's steal time), which stage and handshake CPU leave out too; None when no scheduler slice of
    /// theirs was measured.
    pub stolen_share: Option<f64>,
    pub record_layer_sampled: RecordLayerShares,
    /// Files some sampled frames have no names in (stripped, their debug information not found), and how
    /// many samples have such a frame.
    pub unnamed_files: Vec<UnnamedFileSummary>,
    /// Stripped files named from separate debug information: path -> where it was found.
    pub debug_files: BTreeMap<String, String>,
    /// What the probe windows saw of TLS CPU, in ns: what shares of TLS CPU are of.
    #[serde(skip)]
    pub observed_tls_ns: u64,
    /// Figures only the text report shows so far.
    #[serde(skip)]
    pub stacks: StackSummary,
    #[serde(skip)]
    pub call_tree: CallTree,
}

/// The trap sampler's samples in the probes' traps (the kernel's uprobe code), of all it took of the
/// targets, and the CPU they stand for: the cost of the `hits` made while it ran, measured in the targets
/// (estimated, with its 95% interval), beside their calibrated cost.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct TrapsMeasured {
    pub samples: u64,
    pub of_samples: u64,
    pub freq_hz: u64,
    /// The targets' CPU while it ran.
    pub sampled_cpu_ms: f64,
    pub hits: u64,
    pub calibrated_ms: f64,
    pub cpu_ms: f64,
    pub cpu_ms_ci95: [f64; 2],
}

/// A target, and its part of the recording's handshakes and TLS CPU, estimated as the recording's are (from
/// its part of each probe window). None in recordings that did not tell processes' handshakes apart.
#[derive(Clone, Debug, Serialize)]
pub struct TargetSummary {
    #[serde(flatten)]
    pub target: Target,
    pub handshakes: Option<u64>,
    pub handshakes_ci95: Option<[u64; 2]>,
    /// Completed handshakes the probes saw in it (exact, in the probe windows).
    pub observed_handshakes: Option<u64>,
    pub tls_cpu_ms: Option<f64>,
    pub tls_cpu_ms_ci95: Option<[f64; 2]>,
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct WindowSpan {
    pub start_unix_ns: u64,
    pub live_s: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProbingSummary {
    /// The budget, in percent of the targets' CPU; 100: attached throughout.
    pub max_overhead_pct: f64,
    pub live_s: f64,
    /// Share of the recording's time the stage probes were attached.
    pub fraction: f64,
    /// Share of the targets' own CPU (without the probes' cost) used while they were attached.
    pub cpu_share: f64,
    pub windows: u32,
    pub peak_overhead: f64,
    /// When each window opened (ns since the Unix epoch) and how long it stayed: the moments the stage
    /// figures come from. Windows of recordings that did not date them are left out.
    pub window_spans: Vec<WindowSpan>,
    /// The duty cycle paused the stage probes at some point.
    #[serde(skip)]
    pub part_time: bool,
}

/// Handshakes over the whole recording (exact when the probes were attached throughout, else estimated
/// from the probe windows, with 95% intervals), and what the windows saw.
#[derive(Clone, Debug, Serialize)]
pub struct HandshakeSummary {
    pub estimated: bool,
    /// Completed handshakes (server and client, whose start was seen); the figures up to `rate_ci95` are
    /// theirs.
    pub total: u64,
    pub total_ci95: [u64; 2],
    pub full: u64,
    pub full_ci95: [u64; 2],
    pub resumed: u64,
    pub resumed_ci95: [u64; 2],
    pub server: u64,
    pub server_ci95: [u64; 2],
    pub client: u64,
    pub client_ci95: [u64; 2],
    pub rate_per_s: f64,
    pub rate_ci95: [f64; 2],
    /// Exact counts of the handshakes the probes saw complete.
    pub observed: HandshakeCounts,
    /// CPU per handshake seen.
    pub cpu_ms: CpuStats,
    /// Handshakes that did work (keygen, sign, ...) but whose connection ended before they completed (the
    /// peer went away after the server's flight, or they failed), whose start was seen; and their CPU.
    pub abandoned: u64,
    pub abandoned_ci95: [u64; 2],
    pub abandoned_cpu_ms: CpuStats,
    pub kinds: Vec<KindSummary>,
    #[serde(skip)]
    pub cpu: CpuHistogram,
    #[serde(skip)]
    pub abandoned_cpu: CpuHistogram,
    #[serde(skip)]
    pub total_estimate: Estimate,
}

#[derive(Clone, Debug, Serialize)]
pub struct CpuStats {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
}

impl CpuStats {
    /// In ms.
    fn of(h: &CpuHistogram) -> CpuStats {
        CpuStats {
            mean: h.mean_ns() / 1e6,
            p50: h.quantile_ns(0.5) / 1e6,
            p99: h.quantile_ns(0.99) / 1e6,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct KindSummary {
    pub outcome: Outcome,
    pub role: Role,
    pub resumed: bool,
    pub resumption: Option<String>,
    pub version: Option<String>,
    pub cipher: Option<String>,
    pub key_exchange: Option<String>,
    pub certificate_key: Option<String>,
    pub count: u64,
    pub cpu_ms: CpuStats,
}

/// A stage over the whole recording (exact, or estimated like the handshakes), and what the probes saw.
#[derive(Clone, Debug, Serialize)]
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
    #[serde(skip_serializing_if = "std::ops::Not::not")]
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
    #[serde(skip)]
    pub cpu_ns: u64,
    #[serde(skip)]
    pub self_ns: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ObservedStage {
    pub calls: u64,
    pub cpu_ms: f64,
    pub self_cpu_ms: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct FunctionSummary {
    pub name: String,
    pub library: String,
    pub stage: Option<Stage>,
    pub calls: u64,
    pub cpu_ms: f64,
    #[serde(skip)]
    pub cpu_ns: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LibrarySummary {
    pub path: String,
    pub flavor: Flavor,
    pub version: Option<String>,
    pub symbols: Symbols,
    pub pids: Vec<u32>,
    /// Replaced on disk while mapped: `pids` ran the old file.
    pub replaced: bool,
    #[serde(skip)]
    pub functions_found: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct UnnamedFileSummary {
    #[serde(flatten)]
    pub file: UnnamedFile,
    pub samples: u64,
}

/// Shares of the CPU samples in the record layer's stages (read, write), as the causes place them.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RecordLayerShares {
    pub read: f64,
    pub write: f64,
}

#[derive(Clone, Debug, Default)]
pub struct StackSummary {
    pub in_tls: u64,
    /// Samples whose unwinding reached the root of the stack.
    pub whole: u64,
    pub call_graph: Option<CallGraph>,
    pub stack_bytes: u32,
    /// Processes whose JIT code had no perf map: (pid, comm).
    pub unnamed_jit: Vec<(u32, String)>,
}

/// The call tree per process name, in print order, with nodes under TREE_MIN_SHARE of TLS CPU left out.
#[derive(Clone, Debug, Default)]
pub struct CallTree {
    pub rows: Vec<CallTreeRow>,
    /// Nodes left out.
    pub hidden: usize,
    pub min_share: f64,
}

#[derive(Clone, Debug)]
pub struct CallTreeRow {
    /// 0: a process name; 1: an outermost stage function; deeper: called from the row above.
    pub depth: usize,
    pub kind: RowKind,
    pub frame: String,
    pub stage: Option<Stage>,
    pub total_ms: f64,
    pub self_ms: Option<f64>,
    pub calls: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    Process,
    /// A probed stage function.
    Function,
    /// A cause of the self CPU of the function row above (`--group cause`), estimated from its samples.
    Cause(Cause),
    /// A frame that named the cause row above.
    CauseFrame,
}

/// Frames shown under each cause in the call tree.
const TREE_CAUSE_FRAMES: usize = 3;

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The figures every part of the summary starts from: the targets' CPU, the probe windows, and the
/// handshakes and TLS CPU over the whole recording.
struct Core {
    process_cpu_ms: f64,
    probed_cpu_ms: f64,
    probe_overhead_ms: f64,
    observed_tls_ns: u64,
    probing: ProbingSummary,
    windows: Windows,
    totals: HandshakeSummary,
    /// TLS CPU over the recording, in ns.
    tls: Estimate,
}

impl Core {
    fn of(rec: &Recording) -> Core {
        let process_cpu_ms: f64 = rec.targets.iter().map(|t| t.process_cpu_ms).sum();
        let probed_cpu_ms: f64 = rec.targets.iter().map(|t| t.probed_cpu_ms).sum();
        let probe_overhead_ms = rec
            .probe_cost
            .overhead_ms(probe_hits(rec), rec.probe_traps, probed_cpu_ms);
        let observed_tls_ns: u64 = rec.tree.iter().map(|n| n.self_ns).sum();
        let probing = probing(rec, process_cpu_ms, probed_cpu_ms, probe_overhead_ms);
        let windows = Windows::of(
            rec,
            &probing,
            process_cpu_ms - probe_overhead_ms,
            probed_cpu_ms - probe_overhead_ms,
        );
        let totals = handshake_totals(rec, &windows);
        let tls = windows
            .estimate(|w| w.stage_self_ns.values().sum::<u64>() as f64, observed_tls_ns as f64)
            .at_least(totals.total_estimate.relative_error());
        Core {
            process_cpu_ms,
            probed_cpu_ms,
            probe_overhead_ms,
            observed_tls_ns,
            probing,
            windows,
            totals,
            tls,
        }
    }
}

/// Each target with its part of the handshakes and TLS CPU, when the recording tells processes apart.
fn target_figures(rec: &Recording, whole: &Core) -> Vec<TargetSummary> {
    let attributed = rec.handshakes.iter().all(|g| g.pid.is_some());
    rec.targets
        .iter()
        .map(|t| {
            let one;
            let core = if rec.targets.len() == 1 {
                whole
            } else {
                one = Core::of(&rec.of_processes(&[t.pid]));
                &one
            };
            let hs = &core.totals;
            TargetSummary {
                target: t.clone(),
                handshakes: attributed.then_some(hs.total),
                handshakes_ci95: attributed.then_some(hs.total_ci95),
                observed_handshakes: attributed.then_some(hs.observed.total),
                tls_cpu_ms: attributed.then_some(core.tls.value / 1e6),
                tls_cpu_ms_ci95: attributed.then_some(core.tls.scaled(1e-6).ci95),
            }
        })
        .collect()
}

/// The targets' probe hits as the recording holds them.
fn probe_hits(rec: &Recording) -> Hits {
    Hits {
        all: rec.probe_hits,
        stepped: rec.probe_stepped_hits,
    }
}

pub fn summarize(rec: &Recording) -> Summary {
    let core = Core::of(rec);
    let targets = target_figures(rec, &core);
    let Core {
        process_cpu_ms,
        probed_cpu_ms,
        probe_overhead_ms,
        observed_tls_ns,
        probing,
        windows,
        totals,
        tls,
    } = core;
    let samples: u64 = rec.samples.iter().map(|s| s.count).sum();
    let stage_samples = causes::by_stage(rec);
    let record_layer = record_layer_sampled(&stage_samples, samples);
    let rel = totals.total_estimate.relative_error();
    let mut stages = probed_stages(rec, &windows, rel);
    if !rec.all_probes && rec.sample_freq_hz > 0 {
        let own_ms = process_cpu_ms - probe_overhead_ms;
        for (stage, share) in [(Stage::Read, record_layer.read), (Stage::Write, record_layer.write)] {
            stages.push(sampled_stage(stage, share, samples, own_ms));
        }
    }
    add_causes(&mut stages, stage_samples);
    let observed_tls_ms = ms(observed_tls_ns);
    Summary {
        duration_s: rec.duration_s,
        targets,
        process_cpu_ms,
        probed_cpu_ms,
        probing,
        tls_cpu_ms: tls.value / 1e6,
        tls_cpu_ms_ci95: tls.scaled(1e-6).ci95,
        observed_tls_cpu_ms: observed_tls_ms,
        tls_share: if probed_cpu_ms > 0.0 {
            Some(observed_tls_ms / probed_cpu_ms)
        } else {
            None
        },
        functions: function_figures(rec),
        libraries: rec
            .libraries
            .iter()
            .map(|l| LibrarySummary {
                path: l.path.clone(),
                replaced: l.replaced,
                flavor: l.flavor,
                version: l.version.clone(),
                symbols: l.symbols,
                pids: l.pids.clone(),
                functions_found: l.functions_found,
            })
            .collect(),
        all_probes: rec.all_probes,
        sample_freq_hz: rec.sample_freq_hz,
        samples,
        lost_samples: rec.lost.samples,
        lost: rec.lost.clone(),
        probe_cost_us_per_hit: rec.probe_cost.hit_ns / 1e3,
        probe_cost_cold_us_per_hit: rec.probe_cost.cold_hit_ns / 1e3,
        probe_hits: rec.probe_hits,
        probe_stepped_hits: rec.probe_stepped_hits,
        probe_cost_cold_us_per_step: rec.probe_cost.cold_step_ns / 1e3,
        probe_overhead_ms,
        probe_overhead_calibrated_ms: rec.probe_cost.calibrated_ms(probe_hits(rec)),
        probe_traps: rec.probe_traps.map(|t| {
            let ran = t.ran_or(probed_cpu_ms, probe_hits(rec));
            let cpu = estimate::sampled_share(t.trapped as f64, t.samples as f64, ran.cpu_ms);
            TrapsMeasured {
                samples: t.trapped,
                of_samples: t.samples,
                freq_hz: t.freq_hz,
                sampled_cpu_ms: ran.cpu_ms,
                hits: ran.hits.all,
                calibrated_ms: rec.probe_cost.calibrated_ms(ran.hits),
                cpu_ms: cpu.value,
                cpu_ms_ci95: cpu.ci95,
            }
        }),
        stolen_share: stolen_share(rec),
        record_layer_sampled: record_layer,
        unnamed_files: unnamed_files(rec),
        debug_files: rec.debug_files.clone(),
        observed_tls_ns,
        stacks: StackSummary {
            in_tls: rec.samples.iter().filter(|s| !s.path.is_empty()).map(|s| s.count).sum(),
            whole: rec.samples.iter().filter(|s| s.complete).map(|s| s.count).sum(),
            call_graph: Some(rec.call_graph),
            stack_bytes: rec.stack_bytes,
            unnamed_jit: rec
                .unnamed_jit_pids
                .iter()
                .map(|&pid| (pid, rec.comm_of(pid).to_string()))
                .collect(),
        },
        call_tree: call_tree(rec, observed_tls_ns),
        stages,
        handshakes: totals,
    }
}

fn stolen_share(rec: &Recording) -> Option<f64> {
    let slices: f64 = rec.targets.iter().map(|t| t.stage_slices_ms).sum();
    let stolen: f64 = rec
        .targets
        .iter()
        .map(|t| (t.stage_slices_ms - t.stage_slices_cpu_ms).max(0.0))
        .sum();
    (slices > 0.0).then(|| stolen / slices)
}

/// The probe windows as the estimates see them: each window's own CPU, against the targets' own CPU over
/// the recording (the probes' estimated cost taken out of both).
struct Windows {
    /// Each window's figures for all the recording's processes together; None when the probes were
    /// attached throughout: every figure is exact.
    windows: Option<Vec<WindowPart>>,
    /// For recordings that kept no windows one by one: all windows as one.
    merged: Option<WindowPart>,
    total_cpu_ms: f64,
    /// Connections the targets accepted or opened over the recording.
    connections: f64,
}

impl Windows {
    fn of(rec: &Recording, probing: &ProbingSummary, total_cpu_ms: f64, probed_cpu_ms: f64) -> Windows {
        if !probing.part_time {
            return Windows {
                windows: None,
                merged: None,
                total_cpu_ms,
                connections: 0.0,
            };
        }
        let merged = rec.probing.window_figures.is_empty().then(|| WindowPart {
            // Without the windows' own CPU, the probed share of the CPU stands for it.
            own_cpu_ms: probing.cpu_share * total_cpu_ms.max(probed_cpu_ms),
            ..WindowPart::default()
        });
        Windows {
            windows: Some(rec.probing.window_figures.iter().map(|w| w.whole()).collect()),
            merged,
            total_cpu_ms,
            connections: rec.connections() as f64,
        }
    }

    /// A count over the whole recording: scaled by the connections the targets accepted or opened (each
    /// carries one handshake at most, so the windows' ratio is steady), or by CPU when no connection was
    /// counted (recordings from before, sockets not made by accept or connect).
    fn count(&self, per_window: impl Fn(&WindowPart) -> f64, observed: f64) -> Estimate {
        if let (Some(windows), None) = (&self.windows, &self.merged) {
            let connections: Vec<f64> = windows.iter().map(|w| w.connections as f64).collect();
            if connections.iter().sum::<f64>() > 0.0 && self.connections > 0.0 {
                let seen: Vec<f64> = windows.iter().map(&per_window).collect();
                // One handshake under way at each edge of each window.
                let edges = 2.0 * windows.len() as f64;
                return estimate::ratio(&seen, &connections, self.connections, Spread::PerUnit, edges);
            }
        }
        self.estimate(per_window, observed)
    }

    /// A figure over the whole recording from what each window saw of it (`per_window`), or from `observed`
    /// when the probes saw everything or kept no windows one by one.
    fn estimate(&self, per_window: impl Fn(&WindowPart) -> f64, observed: f64) -> Estimate {
        let Some(windows) = &self.windows else {
            return Estimate::exact(observed);
        };
        if let Some(merged) = &self.merged {
            return estimate::ratio(
                &[observed],
                &[merged.own_cpu_ms],
                self.total_cpu_ms,
                Spread::Arrivals,
                0.0,
            );
        }
        let seen: Vec<f64> = windows.iter().map(per_window).collect();
        let cpu: Vec<f64> = windows.iter().map(|w| w.own_cpu_ms).collect();
        estimate::ratio(&seen, &cpu, self.total_cpu_ms, Spread::Arrivals, 0.0)
    }
}

fn probing(rec: &Recording, process_cpu_ms: f64, probed_cpu_ms: f64, probe_overhead_ms: f64) -> ProbingSummary {
    let fraction = (rec.probing.live_s / rec.duration_s.max(1e-9)).min(1.0);
    // The windows' share of the targets' own CPU; the time share when no CPU was seen.
    let total_ms = process_cpu_ms - probe_overhead_ms;
    let probed_ms = probed_cpu_ms - probe_overhead_ms;
    let cpu_share = if total_ms > 0.0 && probed_ms > 0.0 {
        (probed_ms / total_ms).min(1.0)
    } else {
        fraction
    };
    ProbingSummary {
        max_overhead_pct: rec.probing.max_overhead_pct,
        live_s: rec.probing.live_s,
        fraction,
        cpu_share,
        windows: rec.probing.windows,
        peak_overhead: rec.probing.peak_overhead,
        window_spans: rec
            .probing
            .window_figures
            .iter()
            .filter_map(|w| {
                w.start_unix_ns.map(|start_unix_ns| WindowSpan {
                    start_unix_ns,
                    live_s: w.live_s,
                })
            })
            .collect(),
        part_time: rec.probed_part_time(),
    }
}

/// `rel`: the relative error of the handshake count, which no stage's CPU estimate is surer than.
fn probed_stages(rec: &Recording, windows: &Windows, rel: f64) -> Vec<StageSummary> {
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
fn sampled_stage(stage: Stage, share: f64, samples: u64, own_ms: f64) -> StageSummary {
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

/// Each stage's causes: its self CPU (over the whole recording, with its interval) shared out by its samples.
fn add_causes(stages: &mut [StageSummary], mut counts: BTreeMap<Stage, CauseCounts>) {
    for st in stages {
        if let Some(c) = counts.remove(&st.name) {
            st.causes = c.summaries(st.self_cpu_ms, st.self_cpu_ms_ci95);
            st.probe_samples = c.probe_samples;
        }
    }
}

fn function_figures(rec: &Recording) -> Vec<FunctionSummary> {
    let mut figs: Vec<FunctionSummary> = rec
        .functions
        .iter()
        .map(|f| FunctionSummary {
            name: f.name.clone(),
            library: rec.libraries[f.library].path.clone(),
            stage: f.stage,
            calls: 0,
            cpu_ms: 0.0,
            cpu_ns: 0,
        })
        .collect();
    for n in &rec.tree {
        let (&func, ancestors) = n.path.split_last().expect("checked non-empty");
        let fig = &mut figs[usize::from(func)];
        fig.calls += n.calls;
        if !ancestors.contains(&func) {
            fig.cpu_ns += n.cpu_ns;
        }
    }
    figs.retain(|f| f.calls > 0);
    figs.sort_by(|a, b| b.cpu_ns.cmp(&a.cpu_ns).then(a.name.cmp(&b.name)));
    for f in &mut figs {
        f.cpu_ms = ms(f.cpu_ns);
    }
    figs
}

fn handshake_totals(rec: &Recording, windows: &Windows) -> HandshakeSummary {
    let mut observed = HandshakeCounts::default();
    let mut cpu = CpuHistogram::default();
    let mut abandoned_cpu = CpuHistogram::default();
    for g in &rec.handshakes {
        observed.add(&g.kind, g.cpu.count);
        if g.kind.outcome == Outcome::Abandoned {
            abandoned_cpu.merge(&g.cpu);
        } else if g.kind.role != Role::Partial {
            cpu.merge(&g.cpu);
        }
    }
    // A window counts every handshake completed in it; those under way when it opened (partial) have no
    // role or resumption seen, so they count in the total, and the kinds share it as the others do.
    let classified: f64 = windows
        .windows
        .as_ref()
        .map_or(0.0, |ws| ws.iter().map(|w| w.handshakes.total as f64).sum());
    let all: f64 = windows.windows.as_ref().map_or(0.0, |ws| {
        ws.iter()
            .map(|w| (w.handshakes.total + w.handshakes.partial) as f64)
            .sum()
    });
    let boundary = if windows.merged.is_none() && classified > 0.0 {
        all / classified
    } else {
        1.0
    };
    let count = |field: fn(&HandshakeCounts) -> u64| {
        windows
            .count(|w| field(&w.handshakes) as f64, field(&observed) as f64)
            .scaled(boundary)
    };
    let round = |e: &Estimate| [e.ci95[0].round() as u64, e.ci95[1].round() as u64];
    let (total, full, resumed, server, client) = (
        count(|c| c.total),
        count(|c| c.full),
        count(|c| c.resumed),
        count(|c| c.server),
        count(|c| c.client),
    );
    // Abandoned handshakes are seen when they end, a while after their work: each window's are weighted
    // for their chance to end inside it (those under way as it opened did their work before it, unseen),
    // which stands in for the boundary scaling of the completed ones. Seen throughout, they are counted as
    // they are.
    let abandoned = match windows.count(WindowPart::abandoned_seen, observed.abandoned as f64) {
        e if e.exact => Estimate::exact(observed.abandoned as f64),
        e => e,
    };
    let rate = total.scaled(1.0 / rec.duration_s.max(1e-9));
    HandshakeSummary {
        estimated: !total.exact,
        total: total.value.round() as u64,
        total_ci95: round(&total),
        full: full.value.round() as u64,
        full_ci95: round(&full),
        resumed: resumed.value.round() as u64,
        resumed_ci95: round(&resumed),
        server: server.value.round() as u64,
        server_ci95: round(&server),
        client: client.value.round() as u64,
        client_ci95: round(&client),
        rate_per_s: rate.value,
        rate_ci95: rate.ci95,
        observed,
        total_estimate: total,
        cpu_ms: CpuStats::of(&cpu),
        abandoned: abandoned.value.round() as u64,
        abandoned_ci95: round(&abandoned),
        abandoned_cpu_ms: CpuStats::of(&abandoned_cpu),
        kinds: rec
            .handshakes
            .iter()
            .map(|g| KindSummary {
                outcome: g.kind.outcome,
                role: g.kind.role,
                resumed: g.kind.resumed,
                resumption: g.kind.resumption.clone(),
                version: g.kind.version.clone(),
                cipher: g.kind.cipher.clone(),
                key_exchange: g.kind.key_exchange.clone(),
                certificate_key: g.kind.certificate_key.clone(),
                count: g.cpu.count,
                cpu_ms: CpuStats::of(&g.cpu),
            })
            .collect(),
        cpu,
        abandoned_cpu,
    }
}

/// The files frames stayed unnamed in, with the samples that have such a frame (`file+0xOFFSET` or `[file]`).
fn unnamed_files(rec: &Recording) -> Vec<UnnamedFileSummary> {
    rec.unnamed_files
        .iter()
        .map(|f| {
            let base = f.path.rsplit('/').next().unwrap_or(&f.path);
            let (offset, whole) = (format!("{base}+0x"), format!("[{base}]"));
            let unnamed = |frame: &String| {
                (frame.starts_with(&offset) || *frame == whole) && rec.frame_files.get(frame) == Some(&f.path)
            };
            UnnamedFileSummary {
                file: f.clone(),
                samples: rec
                    .samples
                    .iter()
                    .filter(|s| s.frames.iter().any(unnamed))
                    .map(|s| s.count)
                    .sum(),
            }
        })
        .collect()
}

/// The stage each CPU sample's time counts in, in `rec.samples` order: the innermost probed stage it was
/// taken in, as the call tree counts self CPU; for a sample the probes did not place, the stage its frames
/// name, or the record layer's (causes::Stager).
pub fn sample_stages(rec: &Recording) -> Vec<Option<Stage>> {
    let stager = causes::Stager::new(rec);
    rec.samples
        .iter()
        .map(|s| {
            if s.path.is_empty() {
                stager.stage_frame(rec, s).map(|sf| sf.stage)
            } else {
                rec.path_stages(&s.path).last().copied().flatten()
            }
        })
        .collect()
}

/// Share of the CPU samples in the read and write stages: the samples whose causes those stages list
/// (causes::Stager places both), so a sampled row and its causes count the same samples. Sampled, so
/// available without probing those per-request functions.
fn record_layer_sampled(stage_samples: &BTreeMap<Stage, CauseCounts>, samples: u64) -> RecordLayerShares {
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

#[derive(Default)]
struct Node {
    calls: u64,
    cpu_ns: u64,
    self_ns: u64,
    /// The samples whose stage path ends here.
    causes: CauseCounts,
    children: BTreeMap<u16, Node>,
}

fn call_tree(rec: &Recording, tls_cpu_ns: u64) -> CallTree {
    let mut roots: BTreeMap<&str, (f64, Node)> = BTreeMap::new();
    for t in &rec.targets {
        roots.entry(&t.comm).or_default().0 += t.probed_cpu_ms;
    }
    for n in &rec.tree {
        let (_, root) = roots.entry(rec.comm_of(n.pid)).or_default();
        let mut node = root;
        for f in &n.path {
            node = node.children.entry(*f).or_default();
        }
        node.calls += n.calls;
        node.cpu_ns += n.cpu_ns;
        node.self_ns += n.self_ns;
    }
    for s in &rec.samples {
        let Some(sf) = causes::Stager::probed(rec, s) else {
            continue;
        };
        let Some((_, root)) = roots.get_mut(rec.comm_of(s.pid)) else {
            continue;
        };
        let mut node = Some(root);
        for f in &s.path {
            node = node.and_then(|n| n.children.get_mut(f));
        }
        if let Some(node) = node {
            node.causes
                .add(causes::attribute(&s.frames, &s.kernel, sf.index), s.count);
        }
    }
    let mut tree = CallTree {
        min_share: TREE_MIN_SHARE,
        ..CallTree::default()
    };
    let min_ns = (tls_cpu_ns as f64 * TREE_MIN_SHARE) as u64;
    for (comm, (cpu_ms, root)) in &roots {
        tree.rows.push(CallTreeRow {
            depth: 0,
            kind: RowKind::Process,
            frame: comm.to_string(),
            stage: None,
            total_ms: *cpu_ms,
            self_ms: None,
            calls: None,
        });
        add_children(rec, root, 1, None, min_ns, &mut tree);
    }
    tree
}

/// `enclosing`: the stage `node` counts in (None for a process).
fn add_children(
    rec: &Recording,
    node: &Node,
    depth: usize,
    enclosing: Option<Stage>,
    min_ns: u64,
    tree: &mut CallTree,
) {
    let mut kids: Vec<(&u16, &Node)> = node.children.iter().collect();
    kids.sort_by_key(|(_, n)| std::cmp::Reverse(n.cpu_ns));
    for (f, n) in kids {
        if n.cpu_ns < min_ns {
            tree.hidden += 1 + count_nodes(n);
            continue;
        }
        let func = &rec.functions[usize::from(*f)];
        let stage = func.stage.map(|s| stage_within(s, enclosing));
        tree.rows.push(CallTreeRow {
            depth,
            kind: RowKind::Function,
            frame: func.name.clone(),
            stage,
            total_ms: ms(n.cpu_ns),
            self_ms: Some(ms(n.self_ns)),
            calls: Some(n.calls),
        });
        add_causes_rows(n, depth + 1, tree);
        add_children(rec, n, depth + 1, stage.or(enclosing), min_ns, tree);
    }
}

/// The causes of a node's self CPU, each with the frames that named it: the rows `--group cause` shows.
fn add_causes_rows(n: &Node, depth: usize, tree: &mut CallTree) {
    let self_ms = ms(n.self_ns);
    let per_sample = self_ms / n.causes.samples.max(1) as f64;
    for c in n.causes.summaries(self_ms, [self_ms, self_ms]) {
        tree.rows.push(CallTreeRow {
            depth,
            kind: RowKind::Cause(c.name),
            frame: c.name.name().to_string(),
            stage: None,
            total_ms: c.cpu_ms,
            self_ms: None,
            calls: None,
        });
        for f in c.top_frames.iter().take(TREE_CAUSE_FRAMES) {
            tree.rows.push(CallTreeRow {
                depth: depth + 1,
                kind: RowKind::CauseFrame,
                frame: f.name.clone(),
                stage: None,
                total_ms: f.samples as f64 * per_sample,
                self_ms: None,
                calls: None,
            });
        }
    }
}

fn count_nodes(n: &Node) -> usize {
    n.children.values().map(|c| 1 + count_nodes(c)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn each_target_gets_its_own_estimate_from_its_part_of_the_windows() {
        let rec = crate::model::tests::two_process_recording();
        let s = summarize(&rec);
        assert!(s.handshakes.estimated);
        // One handshake per connection in every window: 40 + 100 connections over the recording.
        assert_eq!(s.handshakes.total, 140);
        let of = |pid| s.targets.iter().find(|t| t.target.pid == pid).unwrap();
        assert_eq!((of(10).handshakes, of(10).observed_handshakes), (Some(40), Some(4)));
        assert_eq!((of(20).handshakes, of(20).observed_handshakes), (Some(100), Some(10)));
        let ci = of(20).handshakes_ci95.unwrap();
        assert!(ci[0] <= 100 && ci[1] >= 100 && ci[0] >= 10, "{ci:?}");
        // Sign CPU per ms of the process's own CPU in the windows, times its own CPU over the recording.
        let tls = of(20).tls_cpu_ms.unwrap();
        assert!(tls > 0.0 && tls < s.tls_cpu_ms, "{tls} of {}", s.tls_cpu_ms);
        // A recording that did not tell processes' handshakes apart says nothing per process.
        let mut old = rec.clone();
        old.handshakes.iter_mut().for_each(|g| g.pid = None);
        assert!(summarize(&old).targets.iter().all(|t| t.handshakes.is_none()));
    }

    #[test]
    fn abandoned_handshakes_are_counted_apart_with_their_cpu() {
        let mut rec = sample_recording();
        let mut group = rec.handshakes[0].clone();
        group.kind.outcome = Outcome::Abandoned;
        group.cpu = CpuHistogram::default();
        group.cpu.add(900_000);
        rec.handshakes.push(group);
        let s = summarize(&rec);
        assert_eq!(
            (s.handshakes.total, s.handshakes.full, s.handshakes.abandoned),
            (4, 4, 1)
        );
        assert!((s.handshakes.abandoned_cpu_ms.mean - 0.9).abs() < 0.01);
        assert!(s.handshakes.cpu_ms.mean > 1.2, "completed handshakes' CPU only");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["handshakes"]["kinds"][1]["outcome"], "abandoned");
    }

    /// The moments the stage figures come from, for judging them against what ran then: dated windows only.
    #[test]
    fn the_probe_windows_are_listed_with_their_dates() {
        let mut rec = crate::model::tests::two_process_recording();
        let n = rec.probing.window_figures.len();
        assert!(n >= 2);
        rec.probing.window_figures[0].start_unix_ns = Some(1_700_000_000_000_000_000);
        let spans = summarize(&rec).probing.window_spans;
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].start_unix_ns, 1_700_000_000_000_000_000);
        assert_eq!(spans[0].live_s, rec.probing.window_figures[0].live_s);
        let json = serde_json::to_value(summarize(&rec)).unwrap();
        assert_eq!(
            json["probing"]["window_spans"][0]["start_unix_ns"],
            1_700_000_000_000_000_000u64
        );
    }

    /// Windows that saw 2 abandoned handshakes per 7 connections, weighted for their chance to end inside
    /// the window: the whole recording's 140 connections carry 40 of them, or 50 weighted by 1.25.
    #[test]
    fn abandoned_handshakes_are_estimated_from_their_weighted_count_when_windowed() {
        let mut rec = crate::model::tests::two_process_recording();
        let abandon = |rec: &mut Recording, weighted: Option<f64>| {
            for w in &mut rec.probing.window_figures {
                for p in &mut w.processes {
                    p.handshakes.abandoned = 1;
                    p.abandoned_weighted = weighted;
                }
            }
        };
        abandon(&mut rec, None);
        assert_eq!(summarize(&rec).handshakes.abandoned, 40);
        abandon(&mut rec, Some(1.25));
        let s = summarize(&rec).handshakes;
        assert_eq!(s.abandoned, 50);
        assert!(
            s.abandoned_ci95[0] <= 50 && s.abandoned_ci95[1] >= 50,
            "{:?}",
            s.abandoned_ci95
        );
        // Probes attached throughout: the handshakes seen, as counted.
        let mut exact = sample_recording();
        exact.probing.window_figures = vec![crate::model::ProbeWindow {
            start_unix_ns: None,
            live_s: exact.duration_s,
            processes: vec![WindowPart {
                pid: 10,
                connections: exact.connections(),
                handshakes: HandshakeCounts {
                    abandoned: 3,
                    ..HandshakeCounts::default()
                },
                abandoned_weighted: Some(3.3),
                ..WindowPart::default()
            }],
        }];
        let mut group = exact.handshakes[0].clone();
        group.kind.outcome = Outcome::Abandoned;
        group.cpu = CpuHistogram::default();
        (0..3).for_each(|_| group.cpu.add(900_000));
        exact.handshakes.push(group);
        let s = summarize(&exact).handshakes;
        assert_eq!((s.abandoned, s.abandoned_ci95), (3, [3, 3]));
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
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["stages"][0]["causes"][0]["name"], "lookups");
        assert_eq!(json["stages"][0]["causes"][2]["name"], "unattributed");
    }

    #[test]
    fn call_tree_rows_by_cause_follow_their_function() {
        let s = summarize(&sample_recording());
        let rows: Vec<(usize, RowKind, &str)> = s
            .call_tree
            .rows
            .iter()
            .map(|r| (r.depth, r.kind, r.frame.as_str()))
            .collect();
        let sign = rows.iter().position(|r| r.2 == "EVP_DigestSign").unwrap();
        assert_eq!(rows[sign + 1], (3, RowKind::Cause(Cause::PublicKey), "public_key"));
        assert_eq!(rows[sign + 2], (4, RowKind::CauseFrame, "bn_mul_mont"));
        let public_key = &s.call_tree.rows[sign + 1];
        assert!((public_key.total_ms - s.call_tree.rows[sign].self_ms.unwrap()).abs() < 1e-12);
    }

    #[test]
    fn function_figures_count_every_call() {
        let s = summarize(&sample_recording());
        let fin = s.functions.iter().find(|f| f.name == "EVP_DigestSignFinal").unwrap();
        assert_eq!(fin.calls, 6);
        assert_eq!(fin.cpu_ns, 4_320_000);
    }

    #[test]
    fn call_tree_rows_nest_under_their_process() {
        let s = summarize(&sample_recording());
        let rows: Vec<(usize, &str)> = s
            .call_tree
            .rows
            .iter()
            .filter(|r| matches!(r.kind, RowKind::Process | RowKind::Function))
            .map(|r| (r.depth, r.frame.as_str()))
            .collect();
        assert_eq!(
            rows,
            vec![
                (0, "nginx"),
                (1, "SSL_do_handshake"),
                (2, "EVP_DigestSign"),
                (3, "EVP_DigestSignFinal"),
                (2, "EVP_PKEY_derive"),
                (1, "EVP_DigestSignFinal"),
            ]
        );
    }
}
