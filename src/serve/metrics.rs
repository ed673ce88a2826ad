// SPDX-License-Identifier: Apache-2.0
//! The metrics of continuous mode: each interval's summary (the default mode's whole-interval figures,
//! estimated from its probe windows as the report gives them) added into counters that only grow, rendered
//! in the Prometheus text format.

use std::collections::BTreeMap;

use crate::analyze::{summarize, Estimate, Summary};
use crate::model::lost::Kind as LostKind;
use crate::model::{Lost, Outcome, Recording, Role};
use crate::output::prometheus::{Exposition, Type};

/// Label sets per metric at most: beyond, new ones are counted under labels that all say OTHER, so that
/// what targets send (ServerHellos, process names) cannot grow the scrape without bound.
const MAX_SERIES: usize = 256;
const OTHER: &str = "other";
/// Upper bounds of the CPU-per-handshake histogram's buckets, in seconds.
const CPU_BUCKETS_S: [f64; 12] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];

type Labels = Vec<(&'static str, String)>;

/// A counter family: a total per label set. Every addition is finite and not negative.
#[derive(Default)]
struct Counter(BTreeMap<Labels, f64>);

impl Counter {
    fn add(&mut self, mut labels: Labels, value: f64) {
        // The last place is OTHER's.
        if !self.0.contains_key(&labels) && self.0.len() + 1 >= MAX_SERIES {
            labels = labels.into_iter().map(|(k, _)| (k, OTHER.to_string())).collect();
        }
        *self.0.entry(labels).or_default() += if value.is_finite() { value.max(0.0) } else { 0.0 };
    }

    fn render(&self, e: &mut Exposition, name: &str, help: &str) {
        if self.0.is_empty() {
            return;
        }
        e.family(name, Type::Counter, help);
        for (labels, value) in &self.0 {
            e.sample(name, &borrowed(labels), *value);
        }
    }
}

fn borrowed(labels: &Labels) -> Vec<(&str, &str)> {
    labels.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The CPU of handshakes the probes saw, in CPU_BUCKETS_S (and +Inf at the end).
#[derive(Default)]
struct Histogram {
    buckets: [u64; CPU_BUCKETS_S.len() + 1],
    sum_s: f64,
    count: u64,
}

/// The whole-serve 95% interval of a process group's handshakes: the intervals' own, added as independent
/// errors, but for those of intervals whose window stood in from an earlier one: their error is that
/// window's, so they add in full.
#[derive(Default)]
struct Interval {
    value: f64,
    below_sq: f64,
    above_sq: f64,
    below_shared: f64,
    above_shared: f64,
}

impl Interval {
    fn add(&mut self, e: &Estimate, shared: bool) {
        let (below, above) = ((e.value - e.ci95[0]).max(0.0), (e.ci95[1] - e.value).max(0.0));
        self.value += e.value.max(0.0);
        if shared {
            self.below_shared += below;
            self.above_shared += above;
        } else {
            self.below_sq += below.powi(2);
            self.above_sq += above.powi(2);
        }
    }

    fn bounds(&self) -> [f64; 2] {
        [
            (self.value - self.below_sq.sqrt() - self.below_shared).max(0.0),
            self.value + self.above_sq.sqrt() + self.above_shared,
        ]
    }
}

#[derive(Default)]
pub struct Metrics {
    handshakes: Counter,
    handshakes_interval: BTreeMap<Labels, Interval>,
    /// Each process group's handshakes by kind in the last interval that saw some: the labels of each kind
    /// and its share, for an interval whose window stood in.
    kind_shares: BTreeMap<Labels, Vec<(Labels, f64)>>,
    abandoned: Counter,
    stage_cpu: Counter,
    tls_cpu: Counter,
    target_cpu: Counter,
    probe_cpu: Counter,
    own_cpu: Counter,
    probed_seconds: Counter,
    connections: Counter,
    samples: Counter,
    lost: Counter,
    intervals: Counter,
    resumption_offered: Counter,
    resumption_not_offered: Counter,
    resumption_accepted: Counter,
    resumption_refused: Counter,
    handshake_cpu: BTreeMap<Labels, Histogram>,
    /// From the last interval: the probes' estimated cost over the targets' own CPU, and the budget.
    overhead: Option<(f64, f64)>,
    /// The processes profiled in the last interval.
    targets: usize,
}

/// The targets of an interval by their labels: the process name, where its cgroup places it (the container
/// as people read it, the container's ID, the Kubernetes pod's UID, the systemd unit; each empty when
/// none) and the TLS library families it runs (`openssl`, `go`, `rustls`, `boringssl`; `+` between several).
/// Label values are escaped where every one is (output::prometheus).
fn process_groups(rec: &Recording) -> BTreeMap<Labels, Vec<u32>> {
    let mut groups: BTreeMap<Labels, Vec<u32>> = BTreeMap::new();
    for t in &rec.targets {
        let mut families: Vec<&str> = rec
            .libraries
            .iter()
            .filter(|l| l.pids.contains(&t.pid))
            .map(|l| l.family.as_str())
            .collect();
        families.sort_unstable();
        families.dedup();
        let at = &t.placement;
        let labels = vec![
            ("process", t.comm.clone()),
            ("container", t.container.clone().unwrap_or_default()),
            ("container_id", at.container_id.clone().unwrap_or_default()),
            ("pod_uid", at.pod_uid.clone().unwrap_or_default()),
            ("systemd_unit", at.systemd_unit.clone().unwrap_or_default()),
            ("library", families.join("+")),
        ];
        groups.entry(labels).or_default().push(t.pid);
    }
    groups
}

fn or_unknown(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "unknown".into())
}

impl Metrics {
    /// Adds one interval: `summary` is `rec`'s. Each process group's figures are its part of the interval,
    /// estimated as the report estimates each process's.
    pub fn add(&mut self, rec: &Recording, summary: &Summary) {
        let groups = process_groups(rec);
        if groups.len() == 1 {
            let (labels, _) = groups.iter().next().expect("one group");
            self.add_group(labels, rec, summary);
        } else {
            for (labels, pids) in &groups {
                let part = rec.of_processes(pids);
                self.add_group(labels, &part, &summarize(&part));
            }
        }
        for (counter, n) in summary.lost.iter().filter(|(c, _)| c.kind != LostKind::Taken) {
            self.lost.add(vec![("event", counter.name.to_string())], n as f64);
        }
        self.targets = rec.targets.len();
        let estimated = if summary.handshakes.estimated { "true" } else { "false" };
        self.intervals.add(vec![("estimated", estimated.to_string())], 1.0);
        let own_ms = summary.process_cpu_ms - summary.probe_overhead_ms;
        if own_ms > 0.0 {
            self.overhead = Some((
                summary.probe_overhead_ms / own_ms,
                summary.probing.max_overhead_pct / 100.0,
            ));
        }
    }

    /// Adds one process group's part of an interval: `summary` is `rec`'s.
    fn add_group(&mut self, group: &Labels, rec: &Recording, summary: &Summary) {
        let p = || group.clone();
        let hs = &summary.handshakes;
        // The kinds seen share the estimated total as they share what the windows saw (as in the report).
        let kinds: Vec<_> = hs
            .kinds
            .iter()
            .filter(|k| k.outcome == Outcome::Completed && k.role != Role::Partial)
            .collect();
        let seen: u64 = kinds.iter().map(|k| k.count).sum();
        let total = hs.total_estimate;
        let stood_in = rec.probing.window_figures.iter().any(|w| w.stands_in);
        if seen > 0 {
            let mut shares = Vec::new();
            for k in kinds {
                let mut labels = p();
                labels.extend([
                    (
                        "role",
                        if k.role == Role::Server { "server" } else { "client" }.to_string(),
                    ),
                    ("kind", if k.resumed { "resumed" } else { "full" }.to_string()),
                    ("version", or_unknown(&k.version)),
                    ("cipher", or_unknown(&k.cipher)),
                    ("group", or_unknown(&k.key_exchange)),
                    ("certificate_key", or_unknown(&k.certificate_key)),
                ]);
                let share = k.count as f64 / seen as f64;
                self.handshakes.add(labels.clone(), total.value * share);
                shares.push((labels, share));
            }
            if self.kind_shares.len() < MAX_SERIES || self.kind_shares.contains_key(group) {
                self.kind_shares.insert(p(), shares);
            }
        } else if let Some(shares) = self.kind_shares.get(group).filter(|_| stood_in && total.value > 0.0) {
            // No window saw this interval's handshakes: the one that stood in for it gives their kinds too.
            for (labels, share) in shares {
                self.handshakes.add(labels.clone(), total.value * share);
            }
        } else if total.value > 0.0 {
            // Only handshakes under way at attach were seen: nothing says what they were.
            let mut labels = p();
            for k in ["role", "kind", "version", "cipher", "group", "certificate_key"] {
                labels.push((k, "unknown".into()));
            }
            self.handshakes.add(labels, total.value);
        }
        self.handshakes_interval.entry(p()).or_default().add(&total, stood_in);
        self.abandoned.add(p(), hs.abandoned as f64);
        for st in &summary.stages {
            let mut labels = p();
            labels.push(("stage", st.name.name().to_string()));
            self.stage_cpu.add(labels, st.self_cpu_ms / 1e3);
        }
        self.tls_cpu.add(p(), summary.tls_cpu_ms / 1e3);
        self.target_cpu.add(p(), summary.process_cpu_ms / 1e3);
        self.probe_cpu.add(p(), summary.probe_overhead_ms / 1e3);
        for (name, runs) in summary.own_programs.kinds() {
            let mut labels = p();
            labels.push(("program", name.replace(' ', "_")));
            self.own_cpu.add(labels, runs.ms / 1e3);
        }
        self.probed_seconds.add(p(), summary.probing.live_s);
        self.connections.add(p(), rec.connections() as f64);
        self.samples.add(p(), summary.samples as f64);
        self.add_resumption(group, summary);
        if self.handshake_cpu.len() < MAX_SERIES || self.handshake_cpu.contains_key(group) {
            let h = self.handshake_cpu.entry(p()).or_default();
            for (&bucket, &n) in &hs.cpu.buckets {
                // The bucket's middle: within 1% of each value in it (model::CpuHistogram).
                let s = 1.01f64.powf(f64::from(bucket) + 0.5) / 1e9;
                let i = CPU_BUCKETS_S
                    .iter()
                    .position(|&le| s <= le)
                    .unwrap_or(CPU_BUCKETS_S.len());
                h.buckets[i] += n;
            }
            h.sum_s += hs.cpu.sum_ns as f64 / 1e9;
            h.count += hs.cpu.count;
        }
    }

    /// Resumption by role, each ClientHello read standing for its share of the interval's handshakes.
    fn add_resumption(&mut self, group: &Labels, summary: &Summary) {
        for r in &summary.resumption {
            let mut labels = group.clone();
            labels.push((
                "role",
                if r.role == Role::Client { "client" } else { "server" }.to_string(),
            ));
            for (offer, n) in [
                ("session_id", r.offered_session_id),
                ("ticket", r.offered_ticket),
                ("psk", r.offered_psk),
            ] {
                let mut l = labels.clone();
                l.push(("offer", offer.to_string()));
                self.resumption_offered.add(l, n as f64 * r.scale);
            }
            self.resumption_not_offered
                .add(labels.clone(), r.offered_nothing as f64 * r.scale);
            self.resumption_accepted
                .add(labels.clone(), r.accepted as f64 * r.scale);
            for c in &r.refused_by {
                let mut l = labels.clone();
                l.push(("reason", c.reason.id().to_string()));
                self.resumption_refused.add(l, c.count as f64 * r.scale);
            }
        }
    }

    /// The text of a scrape.
    pub fn render(&self) -> String {
        let mut e = Exposition::default();
        self.handshakes.render(
            &mut e,
            "tlsprof_handshakes_total",
            "TLS handshakes completed by the targets since tlsprof serve started, by process, role, full or \
             resumed, and what the ServerHello and signature said (unknown: not seen). Estimated, as the \
             report estimates them: from the probe windows scaled by the connections counted throughout; \
             exact in intervals the probes were attached throughout.",
        );
        self.render_handshake_intervals(&mut e);
        self.render_resumption(&mut e);
        self.abandoned.render(
            &mut e,
            "tlsprof_abandoned_handshakes_total",
            "Handshakes that did work but whose connection ended before they completed. Estimated like \
             tlsprof_handshakes_total.",
        );
        self.stage_cpu.render(
            &mut e,
            "tlsprof_stage_cpu_seconds_total",
            "CPU in each TLS stage and no deeper one (the report's self CPU), the probes' cost taken out. \
             Estimated from the probe windows; read and write are estimated from CPU samples unless \
             --all-probes.",
        );
        self.tls_cpu.render(
            &mut e,
            "tlsprof_tls_cpu_seconds_total",
            "CPU inside any TLS stage, each nanosecond once. Estimated from the probe windows.",
        );
        self.target_cpu.render(
            &mut e,
            "tlsprof_target_cpu_seconds_total",
            "CPU the targets used (all threads, user and system), from their CPU clocks. Exact.",
        );
        self.render_handshake_cpu(&mut e);
        self.probe_cpu.render(
            &mut e,
            "tlsprof_probe_cpu_seconds_total",
            "CPU the stage probes cost the targets. Estimated: probe hits (exact) times their cost calibrated \
             at start, or more where the samples taken in their traps measured more.",
        );
        self.own_cpu.render(
            &mut e,
            "tlsprof_own_cpu_seconds_total",
            "CPU tlsprof's programs besides the probes (samplers, scheduler switches, connection counter, hello \
             capture) took in the targets. Measured in each run by the BPF clock, without their interrupts' and \
             tracepoints' own entry.",
        );
        self.render_overhead(&mut e);
        e.family(
            "tlsprof_targets",
            Type::Gauge,
            "Processes profiled in the last interval (those that exited before it are forgotten).",
        );
        e.sample("tlsprof_targets", &[], self.targets as f64);
        self.probed_seconds.render(
            &mut e,
            "tlsprof_probes_attached_seconds_total",
            "Time the stage probes were attached (the probe windows). Exact.",
        );
        self.connections.render(
            &mut e,
            "tlsprof_connections_total",
            "Connections the targets accepted or opened, counted without the stage probes. Exact.",
        );
        self.samples.render(
            &mut e,
            "tlsprof_cpu_samples_total",
            "CPU samples taken on the targets. Exact.",
        );
        self.lost.render(
            &mut e,
            "tlsprof_lost_events_total",
            &format!(
                "Events tlsprof could not count or keep, by what was lost (samples: no room in the ring buffer; \
                 {}: as in the report's Lost line). Exact.",
                Lost::COUNTERS
                    .iter()
                    .filter(|c| c.kind != LostKind::Taken && c.name != "samples")
                    .map(|c| c.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        self.intervals.render(
            &mut e,
            "tlsprof_intervals_total",
            "Intervals added into the counters, by whether their figures were estimated.",
        );
        e.finish()
    }

    fn render_resumption(&self, e: &mut Exposition) {
        let read = "From the ClientHellos read on the sockets (--hello-capture), each standing for its share of \
                    the handshakes (estimated as tlsprof_handshakes_total; exact when every one was read and the \
                    probes were attached throughout).";
        self.resumption_offered.render(
            e,
            "tlsprof_resumption_offered_total",
            &format!("Handshakes whose client offered a session to resume, by what it offered. {read}"),
        );
        self.resumption_not_offered.render(
            e,
            "tlsprof_resumption_not_offered_total",
            &format!("Handshakes whose client offered no session. {read}"),
        );
        self.resumption_accepted.render(
            e,
            "tlsprof_resumption_accepted_total",
            &format!("Offered sessions that were resumed. {read}"),
        );
        self.resumption_refused.render(
            e,
            "tlsprof_resumption_refused_total",
            &format!(
                "Offered sessions that were not resumed (a full handshake instead), by the reason the wire \
                 shows: ticket_key_unknown, ticket_unusable, session_not_cached, version_changed, unknown. {read}"
            ),
        );
    }

    /// The 95% interval of each process's handshakes, as two gauges.
    fn render_handshake_intervals(&self, e: &mut Exposition) {
        if !self.handshakes_interval.is_empty() {
            let help = |bound| {
                format!(
                    "The {bound} end of the 95% interval of sum by (process) (tlsprof_handshakes_total): the \
                 intervals' own, as independent errors (an interval whose probe window stood in from an \
                 earlier one: in full)."
                )
            };
            for (name, bound, end) in [
                ("tlsprof_handshakes_ci95_lower", "lower", 0),
                ("tlsprof_handshakes_ci95_upper", "upper", 1),
            ] {
                e.family(name, Type::Gauge, &help(bound));
                for (labels, i) in &self.handshakes_interval {
                    e.sample(name, &borrowed(labels), i.bounds()[end]);
                }
            }
        }
    }

    /// CPU per handshake, as a histogram.
    fn render_handshake_cpu(&self, e: &mut Exposition) {
        if !self.handshake_cpu.is_empty() {
            let name = "tlsprof_handshake_cpu_seconds";
            e.family(
                name,
                Type::Histogram,
                "CPU per completed handshake, the probes' cost taken out: every handshake the probes saw \
             (a sample of all), each placed within 1% of its value.",
            );
            for (labels, h) in &self.handshake_cpu {
                let labels = borrowed(labels);
                let mut cumulative = 0;
                for (i, n) in h.buckets.iter().enumerate() {
                    cumulative += n;
                    let le = CPU_BUCKETS_S.get(i).map_or("+Inf".to_string(), |b| b.to_string());
                    let mut with_le = labels.clone();
                    with_le.push(("le", &le));
                    e.sample(&format!("{name}_bucket"), &with_le, cumulative as f64);
                }
                e.sample(&format!("{name}_sum"), &labels, h.sum_s);
                e.sample(&format!("{name}_count"), &labels, h.count as f64);
            }
        }
    }

    /// The probes' cost in the last interval, and the budget.
    fn render_overhead(&self, e: &mut Exposition) {
        if let Some((overhead, budget)) = self.overhead {
            e.family(
                "tlsprof_probe_overhead_ratio",
                Type::Gauge,
                "The probes' estimated cost over the targets' own CPU, in the last interval.",
            );
            e.sample("tlsprof_probe_overhead_ratio", &[], overhead);
            e.family(
                "tlsprof_probe_overhead_budget_ratio",
                Type::Gauge,
                "The most the stage probes may cost, over the targets' CPU (--max-overhead).",
            );
            e.sample("tlsprof_probe_overhead_budget_ratio", &[], budget);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::tests::sample_recording;
    use crate::model::ProbeWindow;

    /// Every sample line of a scrape: (name with labels, value).
    fn samples(text: &str) -> BTreeMap<String, f64> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').unwrap();
                (k.to_string(), v.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn resumption_is_counted_by_offer_and_reason_over_intervals() {
        let rec = crate::model::tests::recording_with_refusals();
        let mut m = Metrics::default();
        for _ in 0..2 {
            m.add(&rec, &summarize(&rec));
        }
        let s = samples(&m.render());
        let labels = r#"process="nginx",container="",container_id="",pod_uid="",systemd_unit="",library="openssl",role="server""#;
        assert_eq!(
            s[&format!("tlsprof_resumption_offered_total{{{labels},offer=\"psk\"}}")],
            18.0
        );
        assert_eq!(s[&format!("tlsprof_resumption_not_offered_total{{{labels}}}")], 2.0);
        assert_eq!(s[&format!("tlsprof_resumption_accepted_total{{{labels}}}")], 12.0);
        assert_eq!(
            s[&format!("tlsprof_resumption_refused_total{{{labels},reason=\"ticket_key_unknown\"}}")],
            6.0
        );
    }

    #[test]
    fn counters_add_intervals_and_never_go_down() {
        let rec = sample_recording();
        let mut quiet = sample_recording();
        quiet.handshakes.clear();
        quiet.tree.clear();
        let mut m = Metrics::default();
        let mut before: BTreeMap<String, f64> = BTreeMap::new();
        for r in [&rec, &quiet, &rec] {
            m.add(r, &summarize(r));
            let now = samples(&m.render());
            for (k, v) in &before {
                if k.contains("_total") || k.contains("_bucket") || k.contains("_count") || k.contains("_sum") {
                    assert!(now[k] >= *v, "{k} went from {v} to {}", now[k]);
                }
            }
            before = now;
        }
        // Two intervals of 4 full server handshakes each (the sample recording's).
        let key = "tlsprof_handshakes_total{process=\"nginx\",container=\"\",container_id=\"\",pod_uid=\"\",systemd_unit=\"\",library=\"openssl\",role=\"server\",kind=\"full\",version=\"TLSv1.3\",\
                   cipher=\"TLS_AES_256_GCM_SHA384\",group=\"x25519\",certificate_key=\"RSA-2048\"}";
        assert_eq!(before[key], 8.0);
        assert_eq!(
            before["tlsprof_handshake_cpu_seconds_count{process=\"nginx\",container=\"\",container_id=\"\",pod_uid=\"\",systemd_unit=\"\",library=\"openssl\"}"],
            8.0
        );
        assert_eq!(
            before["tlsprof_handshake_cpu_seconds_bucket{process=\"nginx\",container=\"\",container_id=\"\",pod_uid=\"\",systemd_unit=\"\",library=\"openssl\",le=\"0.0025\"}"],
            8.0
        );
        assert_eq!(
            before["tlsprof_handshake_cpu_seconds_bucket{process=\"nginx\",container=\"\",container_id=\"\",pod_uid=\"\",systemd_unit=\"\",library=\"openssl\",le=\"0.001\"}"],
            0.0
        );
        let sign = before
            ["tlsprof_stage_cpu_seconds_total{process=\"nginx\",container=\"\",container_id=\"\",pod_uid=\"\",systemd_unit=\"\",library=\"openssl\",stage=\"sign\"}"];
        let expected: f64 = summarize(&rec)
            .stages
            .iter()
            .filter(|s| s.name.name() == "sign")
            .map(|s| s.self_cpu_ms)
            .sum();
        assert!((sign - 2.0 * expected / 1e3).abs() < 1e-12, "{sign} {expected}");
        assert_eq!(before["tlsprof_intervals_total{estimated=\"false\"}"], 3.0);
    }

    #[test]
    fn every_lost_event_has_a_series() {
        let mut rec = sample_recording();
        (rec.lost.samples_taken, rec.lost.unframed_work) = (100, 2);
        let mut m = Metrics::default();
        m.add(&rec, &summarize(&rec));
        let text = m.render();
        let now = samples(&text);
        let events: Vec<&str> = now
            .keys()
            .filter_map(|k| k.strip_prefix("tlsprof_lost_events_total{event=\""))
            .collect();
        assert_eq!(
            events.len(),
            Lost::COUNTERS.len() - 1,
            "all but samples_taken: {events:?}"
        );
        assert_eq!(now["tlsprof_lost_events_total{event=\"unframed_work\"}"], 2.0);
        assert!(text.contains(
            "(samples: no room in the ring buffer; unreadable_stacks, cut_stacks, handshake_events, tree_nodes, \
             depth_overflow, missed_returns, threads, connections, unframed_work, processes, wire_handshakes: as in \
             the report's Lost line). Exact."
        ));
    }

    #[test]
    fn each_process_has_its_own_series_with_its_own_estimate() {
        let rec = crate::model::tests::two_process_recording();
        let mut m = Metrics::default();
        m.add(&rec, &summarize(&rec));
        let now = samples(&m.render());
        let total = |process: &str| -> f64 {
            now.iter()
                .filter(|(k, _)| {
                    k.starts_with("tlsprof_handshakes_total{") && k.contains(&format!("process=\"{process}\""))
                })
                .map(|(_, v)| v)
                .sum()
        };
        assert_eq!((total("nginx"), total("node")), (40.0, 100.0));
        assert_eq!(
            now["tlsprof_connections_total{process=\"node\",container=\"\",container_id=\"\",pod_uid=\"\",systemd_unit=\"\",library=\"openssl\"}"],
            100.0
        );
        assert!(
            now["tlsprof_stage_cpu_seconds_total{process=\"node\",container=\"\",container_id=\"\",pod_uid=\"\",systemd_unit=\"\",library=\"openssl\",stage=\"sign\"}"]
                > 0.0
        );
    }

    #[test]
    fn an_interval_whose_window_stood_in_takes_its_kinds_and_its_whole_error() {
        let seen = crate::model::tests::two_process_recording();
        let mut unseen = seen.clone();
        unseen.handshakes.clear();
        unseen.probing.window_figures = vec![ProbeWindow {
            stands_in: true,
            ..seen.probing.window_figures[1].clone()
        }];
        let mut m = Metrics::default();
        m.add(&seen, &summarize(&seen));
        m.add(&unseen, &summarize(&unseen));
        let text = m.render();
        assert!(!text.contains("role=\"unknown\""), "{text}");
        let now = samples(&text);
        let node = r#"process="node",container="",container_id="",pod_uid="",systemd_unit="",library="openssl""#;
        let total: f64 = now
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("tlsprof_handshakes_total{{{node},")))
            .map(|(_, v)| v)
            .sum();
        assert_eq!(total, 200.0);
        assert_eq!(now["tlsprof_intervals_total{estimated=\"true\"}"], 2.0);
        let estimate = |r: &Recording| summarize(&r.of_processes(&[20])).handshakes.total_estimate;
        let (a, b) = (estimate(&seen), estimate(&unseen));
        assert!(!b.exact && b.ci95[1] > b.value, "{b:?}");
        let upper = now[&format!("tlsprof_handshakes_ci95_upper{{{node}}}")];
        let expected = a.value + b.value + (a.ci95[1] - a.value) + (b.ci95[1] - b.value);
        assert!((upper - expected).abs() < 1e-6, "{upper} {expected}");
    }

    #[test]
    fn label_sets_are_bounded_and_names_escaped() {
        let mut m = Metrics::default();
        for i in 0..(MAX_SERIES + 50) {
            let mut rec = sample_recording();
            rec.targets[0].comm = format!("n\"{i}\n");
            m.add(&rec, &summarize(&rec));
        }
        let text = m.render();
        let lines = text
            .lines()
            .filter(|l| l.starts_with("tlsprof_stage_cpu_seconds_total"))
            .count();
        assert!(lines <= MAX_SERIES, "{lines}");
        assert!(text.contains("process=\"other\""));
        assert!(text.contains(r#"process="n\"7\\x0a""#), "{}", &text[..2000]);
        assert!(!m.render().contains("NaN"));
    }

    #[test]
    fn non_finite_or_negative_figures_add_nothing() {
        let mut c = Counter::default();
        let l = || vec![("process", "x".to_string())];
        c.add(l(), 2.0);
        c.add(l(), f64::NAN);
        c.add(l(), -1.0);
        c.add(l(), f64::INFINITY);
        assert_eq!(c.0[&l()], 2.0);
    }
}
