// SPDX-License-Identifier: Apache-2.0
//! Flame graphs: folded stacks (process; stage frames; leaf) and SVG drawn by inferno.

use std::io::Write;

use anyhow::{bail, Context, Result};
use inferno::flamegraph::{self, Options};

use super::Group;
use crate::analyze::attribution::{Attribution, Place};
use crate::model::untrusted::printable;
use crate::model::{Recording, Sample};

/// One line per distinct stack:
/// `nginx;main;...;ngx_ssl_handshake;SSL_do_handshake [handshake];EVP_DigestSign [sign];...;leaf 42`.
/// Grouped by cause, a `[cause: NAME]` frame follows each sample's stage frame (analyze/attribution.rs).
pub fn folded(rec: &Recording, group: Group) -> Vec<String> {
    let line = |s: &Sample, place: Option<&Place>| {
        let mut frames = stack(rec, s, place);
        if let (Group::Cause, Some(p)) = (group, place) {
            let label = p.cause.as_ref().map_or_else(
                || "[tlsprof's probe traps]".to_string(),
                |c| format!("[cause: {}]", c.cause.name()),
            );
            // After the process name and the frames up to the stage frame.
            frames.insert(p.stage_frame + 2, label);
        }
        format!("{} {}", frames.join(";"), s.count)
    };
    let mut lines: Vec<String> = Attribution::of(rec).samples().map(|(s, p)| line(s, p)).collect();
    lines.sort();
    lines
}

/// A sample's frames as every profile output draws them, outermost first: the process name, the user frames,
/// then the kernel frames marked `_[k]`. The stage frame of its `place` is tagged ` [stage]` where the
/// probes did not tag it (a sample taken while they were detached, placed by its frames' names), so that a
/// profile store that keeps frames but not labels still tells the stages apart. Frames are separated by `;`
/// in the folded format and the count by the last space: a name keeps neither its `;` (written `:`) nor
/// anything a terminal or an SVG viewer would act on.
pub fn stack(rec: &Recording, s: &Sample, place: Option<&Place>) -> Vec<String> {
    let clean = |s: &str| printable(s).replace(';', ":");
    let mut frames = vec![clean(rec.comm_of(s.pid))];
    frames.extend(s.frames.iter().enumerate().map(|(i, f)| {
        let mut name = clean(f);
        if let Some(p) = place.filter(|p| p.stage_frame == i) {
            let tag = format!(" [{}]", p.stage.name());
            if !name.ends_with(&tag) {
                name.push_str(&tag);
            }
        }
        name
    }));
    frames.extend(s.kernel.iter().map(|k| format!("{}{KERNEL_SUFFIX}", clean(k))));
    frames
}

/// Marks a kernel frame, as perf's stackcollapse scripts do.
pub const KERNEL_SUFFIX: &str = "_[k]";

pub fn svg(rec: &Recording, group: Group, out: impl Write) -> Result<()> {
    let lines = folded(rec, group);
    if lines.is_empty() {
        bail!("the recording has no CPU samples, so there is no flame graph: record for longer or raise --freq");
    }
    let mut opts = Options::default();
    opts.title = "tlsprof: CPU of the recorded processes, by TLS stage".into();
    opts.count_name = "samples".into();
    // Colours from a hash of the frame name instead of a random draw: the same recording draws the same SVG.
    opts.deterministic = true;
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out).context("draw the flame graph")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::sample_recording;

    #[test]
    fn folded_lines_join_process_frames_and_kernel_frames() {
        assert_eq!(
            folded(&sample_recording(), Group::Stage),
            vec![
                "nginx;[truncated];SSL_do_handshake [handshake];EVP_DigestSign [sign];bn_mul_mont;asm_sysvec_apic_timer_interrupt_[k] 2",
                "nginx;main;ngx_ssl_handshake;SSL_do_handshake [handshake];EVP_DigestSign [sign];bn_mul_mont 3",
            ]
        );
    }

    #[test]
    fn grouped_by_cause_a_cause_frame_follows_the_stage_frame() {
        assert_eq!(
            folded(&sample_recording(), Group::Cause),
            vec![
                "nginx;[truncated];SSL_do_handshake [handshake];EVP_DigestSign [sign];[cause: public_key];bn_mul_mont;asm_sysvec_apic_timer_interrupt_[k] 2",
                "nginx;main;ngx_ssl_handshake;SSL_do_handshake [handshake];EVP_DigestSign [sign];[cause: public_key];bn_mul_mont 3",
            ]
        );
    }

    #[test]
    fn svg_names_the_stage_functions() {
        let mut out = Vec::new();
        svg(&sample_recording(), Group::Stage, &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.contains("EVP_DigestSign [sign]"));
    }

    #[test]
    fn empty_recording_is_a_clear_error() {
        let mut rec = sample_recording();
        rec.samples.clear();
        let err = svg(&rec, Group::Stage, Vec::new()).unwrap_err().to_string();
        assert!(err.contains("no CPU samples"), "{err}");
    }
}
