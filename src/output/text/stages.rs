// SPDX-License-Identifier: Apache-2.0
//! Where the TLS CPU went: the per-stage table (with a bar per stage in colour), and under each stage
//! with samples, the causes its self CPU went to.

use super::{families_of, pct};
use crate::analyze::causes::{Cause, FrameCount};
use crate::analyze::Summary;
use crate::catalogue::Stage;
use crate::output::styled::{bar, Line, Tone};

/// Cells a bar of all the TLS CPU would take: a table row and its bar stay within 100 columns.
const BAR_CELLS: usize = 20;

/// The stages table.
pub fn table(s: &Summary) -> Vec<Line> {
    let tls_ms = s.tls_cpu_ms;
    let estimated = s.probing.part_time;
    let mut out = Vec::new();
    if estimated {
        out.push(Line::prose(
            "Over the whole recording (≈: estimated from the probe windows, ±: 95% interval; µs/call as seen):",
        ));
    }
    out.push(Line::row(format!(
        "{:<14}{:>11}{:>10}{:>8}{:>12}{:>10}{:>12}",
        "stage", "self ms", "±", "% TLS", "total ms", "calls", "µs/call"
    )));
    for st in &s.stages {
        let half = (st.self_cpu_ms_ci95[1] - st.self_cpu_ms_ci95[0]) / 2.0;
        let row = match (st.calls, st.cpu_us_per_call) {
            (Some(calls), Some(per_call)) => Line::row(format!(
                "{:<14}{:>11.1}{:>10}{:>7.1}%{:>12.1}{:>10}{:>12.1}",
                st.name.name(),
                st.self_cpu_ms,
                if estimated {
                    format!("{half:.1}")
                } else {
                    "exact".into()
                },
                pct(st.self_cpu_ms, tls_ms),
                st.cpu_ms,
                calls,
                per_call
            ))
            .push(
                Tone::Bar,
                format!(" {}", bar(pct(st.self_cpu_ms, tls_ms) / 100.0, BAR_CELLS)).trim_end(),
            ),
            _ => Line::row(format!(
                "{:<14}{:>11.1}{:>10.1}   (sampled: {})",
                st.name.name(),
                st.cpu_ms,
                half,
                match st.name {
                    Stage::Read | Stage::Write => "record-layer frames in CPU samples; --all-probes counts calls",
                    _ => "its frames in CPU samples of processes counted from the wire",
                }
            )),
        };
        out.push(row);
    }
    out
}

/// Under each stage with samples, what its self CPU went to.
pub fn causes(s: &Summary) -> Vec<Line> {
    if s.stages.iter().all(|st| st.causes.is_empty()) {
        return Vec::new();
    }
    // Whose own code tls_messages names: the library families of the targets, each once.
    let own_code: Vec<&str> = families_of(s).iter().map(|f| f.own_code()).collect();
    let mut out = vec![Line::prose(
        "From the CPU samples below each stage frame; CPU estimated: the stage's self CPU × the cause's share of its samples, 95% interval; the frames that named it:",
    )];
    for st in s.stages.iter().filter(|st| !st.causes.is_empty()) {
        let samples: u64 = st.causes.iter().map(|c| c.samples).sum();
        let probes = if st.probe_samples > 0 {
            format!(
                ", {} more in tlsprof's probe traps left out (their cost is out of the stage's CPU)",
                st.probe_samples
            )
        } else {
            String::new()
        };
        out.push(Line::prose(format!(
            "  {}: {:.1} ms self, {} samples{probes}",
            st.name.name(),
            st.self_cpu_ms,
            samples
        )));
        for c in &st.causes {
            let frames: Vec<String> = c
                .top_frames
                .iter()
                .map(|f| format!("{} {}", f.name, f.samples))
                .collect();
            out.push(Line::row(format!(
                "    {:<15}{:>6.1}%{:>10.1} ms [{:.1}–{:.1}]{:>6}  {}: {}",
                c.name.name(),
                100.0 * c.share,
                c.cpu_ms,
                c.cpu_ms_ci95[0],
                c.cpu_ms_ci95[1],
                c.samples,
                c.name.describe(&own_code),
                frames.join(", ")
            )));
            if c.name == Cause::Unattributed {
                out.push(Line::prose(format!("{:>8}{}", "", naming_hint(&c.top_frames))));
            }
        }
    }
    out
}

/// How to name the frames of unattributed samples.
fn naming_hint(frames: &[FrameCount]) -> String {
    let mut libraries: Vec<&str> = frames
        .iter()
        .filter_map(|f| f.name.split_once("+0x").map(|(lib, _)| lib))
        .collect();
    libraries.sort_unstable();
    libraries.dedup();
    let mut hints = Vec::new();
    if !libraries.is_empty() {
        hints.push(format!(
            "code of {} without symbols: install their debug symbols (Debian: the -dbgsym packages), which tlsprof finds by build-id",
            libraries.join(", ")
        ));
    }
    if frames
        .iter()
        .any(|f| f.name == "[unwind gap]" || f.name == "[truncated]")
    {
        hints.push("[unwind gap]: frames the unwinder lost in assembly without unwind tables".to_string());
    }
    if frames.iter().any(|f| f.name == "[anon]") {
        hints.push("[anon]: JIT code without a perf map (Node.js: start it with --perf-basic-prof; a JVM is asked for one unless --no-jvm-perf-map)".to_string());
    }
    format!("(to name them: {})", hints.join("; "))
}
