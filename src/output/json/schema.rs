// SPDX-License-Identifier: Apache-2.0
//! The JSON report's schema (`tlsprof report --json`, documented in docs/json-report.md): the public form of an
//! analysis, apart from the summary so that an internal figure cannot reach the report unseen. A summary
//! struct that also holds internal figures has its own struct here; the leaves of plain public figures
//! (per-target figures, CPU statistics, handshake kinds, causes, advice...) are serialized as they are, as
//! every field of theirs is public.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analyze::causes::CauseSummary;
use crate::analyze::{
    Advice, Analysis, CpuStats, FunctionSummary, HandshakeSummary, KindSummary, LibrarySummary, ObservedStage,
    ProbingSummary, RecordLayerShares, ResumptionSummary, StageSummary, TargetSummary, TrapsMeasured,
    UnnamedFileSummary, WindowSpan, WireCheck,
};
use crate::catalogue;
use crate::model::{Flavor, HandshakeCounts, Lost, OwnPrograms, Symbols};

#[derive(Serialize)]
pub struct Report<'a> {
    duration_s: f64,
    targets: &'a [TargetSummary],
    process_cpu_ms: f64,
    probed_cpu_ms: f64,
    probing: Probing<'a>,
    tls_cpu_ms: f64,
    tls_cpu_ms_ci95: [f64; 2],
    observed_tls_cpu_ms: f64,
    tls_share: Option<f64>,
    handshakes: Handshakes<'a>,
    resumption: &'a [ResumptionSummary],
    stages: Vec<Stage<'a>>,
    functions: Vec<Function<'a>>,
    libraries: Vec<Library<'a>>,
    all_probes: bool,
    sample_freq_hz: u64,
    samples: u64,
    lost: &'a Lost,
    probe_cost_us_per_hit: f64,
    probe_cost_cold_us_per_hit: f64,
    probe_hits: u64,
    probe_stepped_hits: u64,
    probe_scheduler_hits: u64,
    probe_cost_cold_us_per_step: f64,
    probe_overhead_ms: f64,
    probe_overhead_calibrated_ms: f64,
    other_process_hits: u64,
    other_process_ms: f64,
    probe_traps: Option<TrapsMeasured>,
    own_programs: OwnPrograms,
    own_programs_ms: f64,
    stolen_share: Option<f64>,
    record_layer_sampled: RecordLayerShares,
    unnamed_files: &'a [UnnamedFileSummary],
    debug_files: &'a BTreeMap<String, String>,
    advice: &'a [Advice],
}

impl<'a> From<&'a Analysis> for Report<'a> {
    fn from(a: &'a Analysis) -> Report<'a> {
        let s = &a.summary;
        Report {
            duration_s: s.duration_s,
            targets: &s.targets,
            process_cpu_ms: s.process_cpu_ms,
            probed_cpu_ms: s.probed_cpu_ms,
            probing: Probing::from(&s.probing),
            tls_cpu_ms: s.tls_cpu_ms,
            tls_cpu_ms_ci95: s.tls_cpu_ms_ci95,
            observed_tls_cpu_ms: s.observed_tls_cpu_ms,
            tls_share: s.tls_share,
            handshakes: Handshakes::from(&s.handshakes),
            resumption: &s.resumption,
            stages: s.stages.iter().map(Stage::from).collect(),
            functions: s.functions.iter().map(Function::from).collect(),
            libraries: s.libraries.iter().map(Library::from).collect(),
            all_probes: s.all_probes,
            sample_freq_hz: s.sample_freq_hz,
            samples: s.samples,
            lost: &s.lost,
            probe_cost_us_per_hit: s.probe_cost_us_per_hit,
            probe_cost_cold_us_per_hit: s.probe_cost_cold_us_per_hit,
            probe_hits: s.probe_hits,
            probe_stepped_hits: s.probe_stepped_hits,
            probe_scheduler_hits: s.probe_scheduler_hits,
            probe_cost_cold_us_per_step: s.probe_cost_cold_us_per_step,
            probe_overhead_ms: s.probe_overhead_ms,
            probe_overhead_calibrated_ms: s.probe_overhead_calibrated_ms,
            other_process_hits: s.other_process_hits,
            other_process_ms: s.other_process_ms,
            probe_traps: s.probe_traps,
            own_programs: s.own_programs,
            own_programs_ms: s.own_programs.ms(),
            stolen_share: s.stolen_share,
            record_layer_sampled: s.record_layer_sampled,
            unnamed_files: &s.unnamed_files,
            debug_files: &s.debug_files,
            advice: &a.advice,
        }
    }
}

#[derive(Serialize)]
struct Probing<'a> {
    max_overhead_pct: f64,
    live_s: f64,
    fraction: f64,
    cpu_share: f64,
    windows: u32,
    peak_overhead: f64,
    window_spans: &'a [WindowSpan],
}

impl<'a> From<&'a ProbingSummary> for Probing<'a> {
    fn from(p: &'a ProbingSummary) -> Probing<'a> {
        Probing {
            max_overhead_pct: p.max_overhead_pct,
            live_s: p.live_s,
            fraction: p.fraction,
            cpu_share: p.cpu_share,
            windows: p.windows,
            peak_overhead: p.peak_overhead,
            window_spans: &p.window_spans,
        }
    }
}

#[derive(Serialize)]
struct Handshakes<'a> {
    estimated: bool,
    total: u64,
    total_ci95: [u64; 2],
    full: u64,
    full_ci95: [u64; 2],
    resumed: u64,
    resumed_ci95: [u64; 2],
    server: u64,
    server_ci95: [u64; 2],
    client: u64,
    client_ci95: [u64; 2],
    rate_per_s: f64,
    rate_ci95: [f64; 2],
    observed: &'a HandshakeCounts,
    cpu_ms: &'a CpuStats,
    abandoned: u64,
    abandoned_ci95: [u64; 2],
    abandoned_cpu_ms: &'a CpuStats,
    kinds: &'a [KindSummary],
    #[serde(skip_serializing_if = "Option::is_none")]
    wire: Option<&'a WireCheck>,
}

impl<'a> From<&'a HandshakeSummary> for Handshakes<'a> {
    fn from(h: &'a HandshakeSummary) -> Handshakes<'a> {
        Handshakes {
            estimated: h.estimated,
            total: h.total,
            total_ci95: h.total_ci95,
            full: h.full,
            full_ci95: h.full_ci95,
            resumed: h.resumed,
            resumed_ci95: h.resumed_ci95,
            server: h.server,
            server_ci95: h.server_ci95,
            client: h.client,
            client_ci95: h.client_ci95,
            rate_per_s: h.rate_per_s,
            rate_ci95: h.rate_ci95,
            observed: &h.observed,
            cpu_ms: &h.cpu_ms,
            abandoned: h.abandoned,
            abandoned_ci95: h.abandoned_ci95,
            abandoned_cpu_ms: &h.abandoned_cpu_ms,
            kinds: &h.kinds,
            wire: h.wire.as_ref(),
        }
    }
}

#[derive(Serialize)]
struct Stage<'a> {
    name: catalogue::Stage,
    cpu_ms: f64,
    self_cpu_ms: f64,
    self_cpu_ms_ci95: [f64; 2],
    calls: Option<u64>,
    cpu_us_per_call: Option<f64>,
    /// Only on the rows estimated from CPU samples.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    sampled: bool,
    observed: Option<&'a ObservedStage>,
    causes: &'a [CauseSummary],
    probe_samples: u64,
}

impl<'a> From<&'a StageSummary> for Stage<'a> {
    fn from(s: &'a StageSummary) -> Stage<'a> {
        Stage {
            name: s.name,
            cpu_ms: s.cpu_ms,
            self_cpu_ms: s.self_cpu_ms,
            self_cpu_ms_ci95: s.self_cpu_ms_ci95,
            calls: s.calls,
            cpu_us_per_call: s.cpu_us_per_call,
            sampled: s.sampled,
            observed: s.observed.as_ref(),
            causes: &s.causes,
            probe_samples: s.probe_samples,
        }
    }
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    library: &'a str,
    stage: Option<catalogue::Stage>,
    calls: u64,
    cpu_ms: f64,
}

impl<'a> From<&'a FunctionSummary> for Function<'a> {
    fn from(f: &'a FunctionSummary) -> Function<'a> {
        Function {
            name: &f.name,
            library: &f.library,
            stage: f.stage,
            calls: f.calls,
            cpu_ms: f.cpu_ms,
        }
    }
}

#[derive(Serialize)]
struct Library<'a> {
    path: &'a str,
    family: &'a str,
    flavor: Flavor,
    version: Option<&'a str>,
    symbols: Symbols,
    pids: &'a [u32],
    replaced: bool,
    handshake_state: bool,
}

impl<'a> From<&'a LibrarySummary> for Library<'a> {
    fn from(l: &'a LibrarySummary) -> Library<'a> {
        Library {
            path: &l.path,
            family: &l.family,
            flavor: l.flavor,
            version: l.version.as_deref(),
            symbols: l.symbols,
            pids: &l.pids,
            replaced: l.replaced,
            handshake_state: l.handshake_state,
        }
    }
}
