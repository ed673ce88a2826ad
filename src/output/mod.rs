// SPDX-License-Identifier: Apache-2.0
//! Outputs: what a user reads, rendered from recordings and their summaries.

pub mod check;
pub mod diff;
pub mod first_screen;
pub mod flame;
pub mod html;
pub mod json;
pub mod mix;
pub mod pprof;
pub mod prometheus;
pub mod styled;
pub mod text;

/// How the call tree and the flame graph group what runs inside a stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Group {
    /// By stage function only (the probed call tree; whole stacks in the flame graph).
    #[default]
    Stage,
    /// A cause level under each stage function: stage → lookups / socket I/O / MAC / ... → functions.
    Cause,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::sample::Index;

    use super::styled::Color;
    use crate::analyze::analyze;
    use crate::model::tests::sample_recording;
    use crate::model::untrusted::breaks_text;
    use crate::model::Recording;

    /// Text with its colour sequences (ESC [ digits and semicolons m) taken out.
    fn without_colour(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("\x1b[") {
            out.push_str(&rest[..at]);
            let after = &rest[at + 2..];
            let params = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit() || c == ';').len();
            match after[params..].strip_prefix('m') {
                Some(tail) => rest = tail,
                // Not a colour: kept, for the check to find.
                None => {
                    out.push_str("\x1b[");
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// Whatever a recording that loads holds, every output renders it without a panic, and the text ones
    /// carry no raw control character; in colour, none but the colour sequences.
    fn render_all(rec: &Recording) -> Result<(), TestCaseError> {
        let analysis = analyze(rec);
        let summary = &analysis.summary;
        let text = super::text::text(&analysis, super::Group::Stage, Color::Off);
        prop_assert!(!text.chars().any(|c| c != '\n' && breaks_text(c)), "{text}");
        let coloured = super::text::text(&analysis, super::Group::Cause, Color::On);
        let rest = without_colour(&coloured);
        prop_assert!(!rest.chars().any(|c| c != '\n' && breaks_text(c)), "{coloured:?}");
        let json = super::json::to_string_pretty(&super::json::json(&analysis));
        prop_assert!(serde_json::from_str::<serde_json::Value>(&json).is_ok());
        prop_assert!(!json.chars().any(|c| c != '\n' && breaks_text(c)));
        for line in super::flame::folded(rec, super::Group::Cause) {
            prop_assert!(!line.chars().any(breaks_text), "{line}");
        }
        let _ = super::flame::svg(rec, super::Group::Stage, std::io::sink());
        if let Ok(diff) = super::diff::text(summary, summary, Color::On) {
            prop_assert!(
                !without_colour(&diff).chars().any(|c| c != '\n' && breaks_text(c)),
                "{diff:?}"
            );
        }
        let _ = super::html::report(rec, &analysis, &mut std::io::sink());
        let _ = super::diff::json(summary, summary);
        let _ = super::diff::svg(rec, rec, std::io::sink());
        let _ = super::html::diff((rec, summary), (rec, summary), &mut std::io::sink());
        Ok(())
    }

    proptest! {
        #![proptest_config(crate::fuzz_config(2))]

        /// A recording file damaged anywhere: refused with a reason, or read and rendered.
        #[test]
        fn fuzz_damaged_recording_bytes(
            edits in proptest::collection::vec((any::<Index>(), any::<u8>()), 0..8),
            keep in any::<Index>(),
        ) {
            let mut bytes = serde_json::to_vec(&sample_recording()).unwrap();
            for (at, value) in &edits {
                let i = at.index(bytes.len());
                bytes[i] = *value;
            }
            if keep.index(4) == 0 {
                bytes.truncate(keep.index(bytes.len() + 1));
            }
            match Recording::from_bytes(&bytes) {
                Ok(rec) => render_all(&rec)?,
                Err(e) => prop_assert!(e.to_string().ends_with("record it again") || e.to_string().contains("recording"), "{e}"),
            }
        }

        /// Hostile names and absurd figures, well formed: refused with a reason, or read and rendered.
        #[test]
        fn fuzz_hostile_recording_contents(
            names in proptest::collection::vec(any::<String>(), 6),
            counts in proptest::collection::vec(any::<u64>(), 8),
            small in proptest::collection::vec(0u64..1_000_000, 8),
            reals in proptest::collection::vec(any::<f64>(), 4),
            paths in proptest::collection::vec(proptest::collection::vec(0u16..5, 0..6), 3),
            pick_absurd: bool,
        ) {
            let mut rec = sample_recording();
            let n = if pick_absurd { &counts } else { &small };
            rec.targets[0].comm = names[0].clone();
            rec.libraries[0].path = names[1].clone();
            rec.libraries[0].version = Some(names[2].clone());
            rec.functions[1].name = names[3].clone();
            rec.samples[0].frames.push(names[4].clone());
            rec.samples[1].kernel.push(names[5].clone());
            rec.handshakes[0].kind.cipher = Some(names[5].clone());
            rec.tree[1].calls = n[0];
            rec.tree[1].cpu_ns = n[1];
            rec.tree[2].self_ns = n[2];
            rec.samples[0].count = n[3];
            rec.handshakes[0].cpu.sum_ns = n[4];
            rec.probe_hits = n[5];
            rec.lost.samples = n[6];
            rec.targets[0].connections = n[7];
            rec.tree[3].path = paths[0].clone();
            rec.samples[1].path = paths[1].clone();
            rec.tree.push(crate::model::TreeNode { pid: n[0] as u32, path: paths[2].clone(), calls: n[1], cpu_ns: n[2], self_ns: n[3] });
            if pick_absurd {
                rec.duration_s = reals[0];
                rec.targets[0].process_cpu_ms = reals[1];
                rec.targets[0].probed_cpu_ms = reals[2];
                rec.probing.live_s = reals[3];
            }
            // Through the file format, as a recording from elsewhere arrives.
            let bytes = serde_json::to_vec(&rec).unwrap();
            if let Ok(rec) = Recording::from_bytes(&bytes) {
                render_all(&rec)?;
            }
        }
    }
}
