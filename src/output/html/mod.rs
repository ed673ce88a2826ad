// SPDX-License-Identifier: Apache-2.0
//! The HTML report and diff: one self-contained page each (style and the flame graph's script inline,
//! nothing fetched), rendered from the same analysis as the text and JSON reports.

mod accounting;
mod charts;
mod diff;
mod page;
mod report;

use std::io::Write;

use anyhow::{Context, Result};

use super::{diff as compare, flame, Group};
use crate::analyze::{Analysis, Summary};
use crate::model::Recording;

/// The report page of a recording and its analysis.
pub fn report(rec: &Recording, analysis: &Analysis, out: &mut dyn Write) -> Result<()> {
    let flame_graph = if rec.samples.is_empty() {
        "<p class=\"note\">The recording has no CPU samples, so there is no flame graph.</p>".to_string()
    } else {
        let mut svg = Vec::new();
        flame::svg(rec, Group::Stage, &mut svg)?;
        page::inline_flame_graph(svg)?
    };
    let body = report::body(analysis, &flame_graph).context("render the HTML report")?;
    write_page(out, "tlsprof report", &body)
}

/// The diff page of two recordings and their summaries.
pub fn diff(before: (&Recording, &Summary), after: (&Recording, &Summary), out: &mut dyn Write) -> Result<()> {
    let sides = compare::sides(before.1, after.1)?;
    let mut svg = Vec::new();
    compare::svg(before.0, after.0, &mut svg)?;
    let flame_graph = page::inline_flame_graph(svg)?;
    let body = diff::body(before.1, after.1, sides, &flame_graph).context("render the HTML diff")?;
    write_page(out, "tlsprof diff", &body)
}

fn write_page(out: &mut dyn Write, title: &str, body: &str) -> Result<()> {
    out.write_all(page::page(title, body).as_bytes())
        .with_context(|| format!("write the {title}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::{analyze, summarize};
    use crate::model::tests::sample_recording;

    const HOSTILE: &str = "<script>alert(1)</script>";

    /// A recording whose process, library, function, frame and cipher names are markup.
    fn hostile_recording() -> Recording {
        let mut rec = sample_recording();
        rec.targets[0].comm = HOSTILE.into();
        rec.libraries[0].path = format!("/lib/{HOSTILE}.so");
        rec.functions[1].name = format!("f{HOSTILE}\"'&");
        rec.samples[0].frames.push(HOSTILE.into());
        rec.handshakes[0].kind.cipher = Some(HOSTILE.into());
        rec
    }

    fn render_report(rec: &Recording) -> String {
        let mut out = Vec::new();
        report(rec, &analyze(rec), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn hostile_names_are_escaped() {
        let rec = hostile_recording();
        let page = render_report(&rec);
        assert!(!page.contains(HOSTILE), "raw markup from a name in the page");
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "the name is not shown escaped"
        );
        let s = summarize(&rec);
        let mut out = Vec::new();
        diff((&rec, &s), (&rec, &s), &mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(!page.contains(HOSTILE));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    }

    /// The only scripts are the flame graph's: inferno's, inline.
    #[test]
    fn the_page_fetches_nothing_and_runs_only_the_flame_graph_script() {
        let page = render_report(&sample_recording());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert_eq!(page.matches("<script").count(), 1, "one script element");
        for fetch in ["src=", "href=", "@import"] {
            assert!(!page.contains(fetch), "{fetch} in the page");
        }
        // The flame graph's background is a gradient of its own: a reference within the page.
        assert!(page.split("url(").skip(1).all(|rest| rest.starts_with('#')));
        assert!(page.contains("getElementById(\"frames\").ownerSVGElement"));
        assert!(page.contains("EVP_DigestSign [sign]"));
    }
}
