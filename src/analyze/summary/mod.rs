// SPDX-License-Identifier: Apache-2.0
//! The summary of a recording: every figure derived from it, computed once. Text, JSON and diff render
//! it; the JSON report is its public form (output/json/schema.rs).

use std::collections::BTreeMap;

use serde::Serialize;

use super::attribution::Attribution;
use super::causes::CauseCounts;
use super::estimate::{self, Estimate};
use crate::catalogue::{jsse, Stage};
use crate::model::untrusted::Printable;
use crate::model::{CallGraph, Flavor, Hits, Lost, OwnPrograms, Recording, Sample, Symbols, Target, UnnamedFile};

mod call_tree;
mod handshakes;
mod resumption;
mod stages;
mod windows;

use call_tree::call_tree;
pub use call_tree::{CallTree, CallTreeRow, RowKind};
use handshakes::handshake_totals;
pub use handshakes::{CpuStats, HandshakeSummary, KindSummary, WireCheck};
pub use resumption::{Reason, ReasonCount, ResumptionSummary, TicketKeySummary};
use stages::{add_causes, causes_by_stage, probed_stages, record_layer_sampled, sampled_stage};
pub use stages::{ObservedStage, RecordLayerShares, StageSummary};
use windows::{probing, Windows};
pub use windows::{ProbingSummary, WindowPoint, WindowSpan};

#[derive(Clone, Debug)]
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
    /// Resumption offered, accepted and refused, per process and role, where ClientHellos were read.
    pub resumption: Vec<ResumptionSummary>,
    pub stages: Vec<StageSummary>,
    pub functions: Vec<FunctionSummary>,
    pub libraries: Vec<LibrarySummary>,
    pub all_probes: bool,
    pub sample_freq_hz: u64,
    pub samples: u64,
    pub lost: Lost,
    pub probe_cost_us_per_hit: f64,
    pub probe_cost_cold_us_per_hit: f64,
    pub probe_hits: u64,
    pub probe_stepped_hits: u64,
    /// Of probe_hits, Go's scheduler probes' (Recording::probe_scheduler_hits).
    pub probe_scheduler_hits: u64,
    pub probe_cost_cold_us_per_step: f64,
    /// Target CPU spent in the probes: the hits at their calibrated cold-cache costs, or what the samples in
    /// the probes' traps measured when that is more (ProbeCost::overhead_ms).
    pub probe_overhead_ms: f64,
    /// The hits at their calibrated costs alone.
    pub probe_overhead_calibrated_ms: f64,
    /// The probes' hits in processes that are not targets (Recording::other_process_hits), and their cost at
    /// the calibrated cost of a hit.
    pub other_process_hits: u64,
    pub other_process_ms: f64,
    /// The samples taken in the probes' traps; None where they were not counted.
    pub probe_traps: Option<TrapsMeasured>,
    /// What tlsprof's programs other than the probes cost the targets (measured in them; not taken out of
    /// the figures: they run beside the TLS code, not inside its calls).
    pub own_programs: OwnPrograms,
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
    /// Figures only the text report shows so far.
    pub stacks: StackSummary,
    pub call_tree: CallTree,
}

impl Summary {
    /// What the probes cost, as a share of the targets' CPU over the recording.
    pub fn probe_cost_share(&self) -> Option<f64> {
        (self.process_cpu_ms > 0.0).then(|| self.probe_overhead_ms / self.process_cpu_ms)
    }

    /// What tlsprof's other programs cost, as a share of the targets' CPU over the recording.
    pub fn own_programs_share(&self) -> Option<f64> {
        (self.process_cpu_ms > 0.0).then(|| self.own_programs.ms() / self.process_cpu_ms)
    }

    /// Targets whose handshakes were counted from their sockets alone (TLS code tlsprof cannot probe): their
    /// TLS CPU is not in any figure.
    pub fn wire_only(&self) -> impl Iterator<Item = &TargetSummary> {
        self.targets.iter().filter(|t| t.target.wire_only)
    }

    /// `ms` of CPU as a share of the TLS CPU over the recording.
    pub fn share_of_tls(&self, ms: f64) -> Option<f64> {
        (self.tls_cpu_ms > 0.0).then(|| ms / self.tls_cpu_ms)
    }
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
    /// Its probed stages' self CPU over the recording, in ms (estimated as the recording's stages are).
    #[serde(skip)]
    pub stage_self_ms: Vec<(Stage, f64)>,
}

#[derive(Clone, Debug)]
pub struct FunctionSummary {
    pub name: String,
    pub library: String,
    pub stage: Option<Stage>,
    pub calls: u64,
    pub cpu_ms: f64,
    pub cpu_ns: u64,
}

#[derive(Clone, Debug)]
pub struct LibrarySummary {
    pub path: String,
    pub family: String,
    pub flavor: Flavor,
    pub version: Option<String>,
    pub symbols: Symbols,
    pub pids: Vec<u32>,
    /// Replaced on disk while mapped: `pids` ran the old file.
    pub replaced: bool,
    pub functions_found: usize,
    /// Failed handshake calls were judged by the connection's handshake state (Library::handshake_state).
    pub handshake_state: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct UnnamedFileSummary {
    #[serde(flatten)]
    pub file: UnnamedFile,
    /// Samples with a frame unnamed in it.
    pub samples: u64,
    /// Samples whose innermost frame is unnamed in it: the CPU was in its unnamed code.
    pub leaf_samples: u64,
}

#[derive(Clone, Debug, Default)]
pub struct StackSummary {
    /// Samples in a handshake stage: the probes' and those a wire-only target's frames place.
    pub in_tls: u64,
    /// Of those its frames place, the samples that ran through interpreted frames inside the stage frame:
    /// methods the JIT had not compiled yet, which no perf map names.
    pub framed_interpreted: u64,
    /// Samples whose unwinding reached the root of the stack.
    pub whole: u64,
    pub call_graph: Option<CallGraph>,
    pub stack_bytes: u32,
    /// Processes whose JIT code had no perf map: (pid, comm).
    pub unnamed_jit: Vec<(u32, String)>,
}

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

/// A process counted from the wire alone has no probed stages: those its frames name (JSSE) are estimated
/// from its samples, beside the probed ones (`stages`).
fn add_framed_stages(
    stages: &mut Vec<StageSummary>,
    stage_samples: &BTreeMap<Stage, CauseCounts>,
    samples: u64,
    own_ms: f64,
) {
    for (&stage, counts) in stage_samples {
        if !stages.iter().any(|st| st.name == stage) {
            let share = (counts.samples + counts.probe_samples) as f64 / samples.max(1) as f64;
            stages.push(sampled_stage(stage, share, samples, own_ms));
        }
    }
}

/// A process counted from the wire alone: the share of its CPU samples that its frames place in a
/// handshake stage (JSSE), as CPU with its interval, and the same per stage; None when none is placed.
fn sampled_tls(attribution: &Attribution, t: &Target) -> Option<(Estimate, Vec<(Stage, f64)>)> {
    let mut n = 0u64;
    let mut by_stage: BTreeMap<Stage, u64> = BTreeMap::new();
    for (s, place) in attribution.samples().filter(|(s, _)| s.pid == t.pid) {
        n += s.count;
        if let Some(p) = place.filter(|p| !matches!(p.stage, Stage::Read | Stage::Write)) {
            *by_stage.entry(p.stage).or_default() += s.count;
        }
    }
    let k: u64 = by_stage.values().sum();
    let cpu = t.process_cpu_ms;
    let stages = by_stage
        .into_iter()
        .map(|(stage, samples)| (stage, cpu * samples as f64 / n as f64))
        .collect();
    (k > 0).then(|| (estimate::sampled_share(k as f64, n as f64, cpu), stages))
}

/// What the samples' stacks came to: how many are in TLS stages, how deep they reach, what names them.
fn stack_summary(rec: &Recording, attribution: &Attribution) -> StackSummary {
    let framed = framed_tls_samples(attribution);
    StackSummary {
        in_tls: rec
            .samples
            .iter()
            .filter(|s| !s.path.is_empty())
            .map(|s| s.count)
            .sum::<u64>()
            + framed.placed,
        framed_interpreted: framed.interpreted,
        whole: rec.samples.iter().filter(|s| s.complete).map(|s| s.count).sum(),
        call_graph: Some(rec.call_graph),
        stack_bytes: rec.stack_bytes,
        unnamed_jit: rec
            .unnamed_jit_pids
            .iter()
            .map(|&pid| (pid, rec.comm_of(pid).to_string()))
            .collect(),
    }
}

/// The samples of wire-only targets that their frames place in a handshake stage, and how many of them ran
/// through interpreted frames (a JVM's `Interpreter` region) inside their stage frame.
struct FramedSamples {
    placed: u64,
    interpreted: u64,
}

fn framed_tls_samples(attribution: &Attribution) -> FramedSamples {
    let mut framed = FramedSamples {
        placed: 0,
        interpreted: 0,
    };
    for (s, place) in attribution.samples() {
        let Some(p) = place.filter(|p| s.path.is_empty() && !matches!(p.stage, Stage::Read | Stage::Write)) else {
            continue;
        };
        if !attribution.from_frames(s.pid) {
            continue;
        }
        framed.placed += s.count;
        if s.frames[p.stage_frame..].iter().any(|f| f == jsse::INTERPRETED_FRAME) {
            framed.interpreted += s.count;
        }
    }
    framed
}

/// Each target with its part of the handshakes and TLS CPU, when the recording tells processes apart.
fn target_figures(rec: &Recording, whole: &Core, attribution: &Attribution) -> Vec<TargetSummary> {
    let attributed = rec.handshakes.iter().all(|g| g.pid.is_some());
    rec.targets
        .iter()
        .map(|t| {
            let (own, one);
            let (part, core) = if rec.targets.len() == 1 {
                (rec, whole)
            } else {
                own = rec.of_processes(&[t.pid]);
                one = Core::of(&own);
                (&own, &one)
            };
            let hs = &core.totals;
            let stages = probed_stages(part, &core.windows, hs.total_estimate.relative_error());
            // A process counted from the wire alone: its TLS CPU is what its frames show, if they name it.
            let (tls, stage_self_ms) = match t.wire_only {
                true => sampled_tls(attribution, t).map_or((None, Vec::new()), |(e, st)| (Some(e), st)),
                false => (
                    Some(core.tls.scaled(1e-6)),
                    stages.iter().map(|st| (st.name, st.self_cpu_ms)).collect(),
                ),
            };
            TargetSummary {
                target: t.clone(),
                handshakes: attributed.then_some(hs.total),
                handshakes_ci95: attributed.then_some(hs.total_ci95),
                observed_handshakes: attributed.then_some(hs.observed.total),
                tls_cpu_ms: tls.as_ref().filter(|_| attributed).map(|e| e.value),
                tls_cpu_ms_ci95: tls.as_ref().filter(|_| attributed).map(|e| e.ci95),
                stage_self_ms,
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

impl Summary {
    /// The program name of a target, "?" for a pid the recording does not hold.
    pub fn comm_of(&self, pid: u32) -> &str {
        self.targets
            .iter()
            .find(|t| t.target.pid == pid)
            .map_or("?", |t| t.target.comm.as_str())
    }

    /// A target as the reports name it, escaped for a terminal: "nginx (pid 12)", or "curl (100 processes
    /// that started during the recording)" for processes folded into one.
    pub fn process_label(&self, pid: u32) -> String {
        let comm = Printable(self.comm_of(pid));
        match self
            .targets
            .iter()
            .find(|t| t.target.pid == pid)
            .map(|t| t.target.processes)
        {
            Some(n) if n > 1 => format!("{comm} ({n} processes that started during the recording)"),
            _ => format!("{comm} (pid {pid})"),
        }
    }
}

pub fn summarize(rec: &Recording) -> Summary {
    let core = Core::of(rec);
    let attribution = Attribution::of(rec);
    let targets = target_figures(rec, &core, &attribution);
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
    let stage_samples = causes_by_stage(&attribution);
    let record_layer = record_layer_sampled(&stage_samples, samples);
    let rel = totals.total_estimate.relative_error();
    let mut stages = probed_stages(rec, &windows, rel);
    if !rec.all_probes && rec.sample_freq_hz > 0 {
        let own_ms = process_cpu_ms - probe_overhead_ms;
        for (stage, share) in [(Stage::Read, record_layer.read), (Stage::Write, record_layer.write)] {
            stages.push(sampled_stage(stage, share, samples, own_ms));
        }
    }
    if rec.targets.iter().any(|t| t.wire_only) && rec.sample_freq_hz > 0 {
        add_framed_stages(&mut stages, &stage_samples, samples, process_cpu_ms - probe_overhead_ms);
    }
    add_causes(&mut stages, stage_samples);
    let observed_tls_ms = ms(observed_tls_ns);
    let resumption = resumption::resumption(rec, &targets, tls.value / 1e6);
    Summary {
        resumption,
        duration_s: rec.duration_s,
        targets,
        process_cpu_ms,
        probed_cpu_ms,
        probing,
        tls_cpu_ms: tls.value / 1e6,
        tls_cpu_ms_ci95: tls.scaled(1e-6).ci95,
        observed_tls_cpu_ms: observed_tls_ms,
        // The CPU of targets counted from the wire alone holds TLS work no probe saw.
        tls_share: if probed_cpu_ms > 0.0 && !rec.targets.iter().any(|t| t.wire_only) {
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
                family: l.family.clone(),
                replaced: l.replaced,
                flavor: l.flavor,
                version: l.version.clone(),
                symbols: l.symbols,
                pids: l.pids.clone(),
                functions_found: l.functions_found,
                handshake_state: l.handshake_state,
            })
            .collect(),
        all_probes: rec.all_probes,
        sample_freq_hz: rec.sample_freq_hz,
        samples,
        lost: rec.lost.clone(),
        probe_cost_us_per_hit: rec.probe_cost.hit_ns / 1e3,
        probe_cost_cold_us_per_hit: rec.probe_cost.cold_hit_ns / 1e3,
        probe_hits: rec.probe_hits,
        probe_stepped_hits: rec.probe_stepped_hits,
        probe_scheduler_hits: rec.probe_scheduler_hits,
        probe_cost_cold_us_per_step: rec.probe_cost.cold_step_ns / 1e3,
        probe_overhead_ms,
        probe_overhead_calibrated_ms: rec.probe_cost.calibrated_ms(probe_hits(rec)),
        other_process_hits: rec.other_process_hits,
        other_process_ms: rec.probe_cost.calibrated_ms(Hits {
            all: rec.other_process_hits,
            stepped: 0,
        }),
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
        own_programs: rec.own_programs(),
        stolen_share: stolen_share(rec),
        record_layer_sampled: record_layer,
        unnamed_files: unnamed_files(rec),
        debug_files: rec.debug_files.clone(),
        stacks: stack_summary(rec, &attribution),
        call_tree: call_tree(rec, &attribution, observed_tls_ns),
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

/// The files frames stayed unnamed in, with the samples that have such a frame (`file+0xOFFSET` or `[file]`),
/// and those whose innermost frame is one.
fn unnamed_files(rec: &Recording) -> Vec<UnnamedFileSummary> {
    rec.unnamed_files
        .iter()
        .map(|f| {
            let base = f.path.rsplit('/').next().unwrap_or(&f.path);
            let (offset, whole) = (format!("{base}+0x"), format!("[{base}]"));
            let unnamed = |frame: &String| {
                (frame.starts_with(&offset) || *frame == whole) && rec.frame_files.get(frame) == Some(&f.path)
            };
            let count = |with: &dyn Fn(&Sample) -> bool| -> u64 {
                rec.samples.iter().filter(|s| with(s)).map(|s| s.count).sum()
            };
            UnnamedFileSummary {
                file: f.clone(),
                samples: count(&|s| s.frames.iter().any(unnamed)),
                leaf_samples: count(&|s| s.frames.last().is_some_and(unnamed)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::sample_recording;

    /// A file every stack passes through (a server's event loop) is not where the CPU went.
    #[test]
    fn unnamed_files_count_the_samples_that_ran_in_them_apart() {
        let mut rec = sample_recording();
        let unnamed = |path: &str| crate::model::UnnamedFile {
            path: path.into(),
            build_id: None,
            package: None,
            reason: crate::model::UnnamedReason::NoDebugInfo,
        };
        rec.unnamed_files = vec![unnamed("/usr/sbin/nginx"), unnamed("/usr/lib/libcrypto.so.3")];
        for (frame, file) in [
            ("nginx+0x10", "/usr/sbin/nginx"),
            ("libcrypto.so.3+0x20", "/usr/lib/libcrypto.so.3"),
        ] {
            rec.frame_files.insert(frame.into(), file.into());
        }
        rec.samples[0].frames[1] = "nginx+0x10".into();
        rec.samples[1].frames[3] = "libcrypto.so.3+0x20".into();
        let s = summarize(&rec);
        let counts: Vec<(u64, u64)> = s.unnamed_files.iter().map(|u| (u.samples, u.leaf_samples)).collect();
        assert_eq!(counts, [(3, 0), (2, 2)]);
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
    fn function_figures_count_every_call() {
        let s = summarize(&sample_recording());
        let fin = s.functions.iter().find(|f| f.name == "EVP_DigestSignFinal").unwrap();
        assert_eq!(fin.calls, 6);
        assert_eq!(fin.cpu_ns, 4_320_000);
    }
}
