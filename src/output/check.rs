// SPDX-License-Identifier: Apache-2.0
//! The screen of `tlsprof check`: a line per item (its mark, what was found and, for one limited or missing,
//! what tlsprof loses and the fix), then the verdict.

use super::styled::{self, Color, Line, Tone, WIDTH};
use crate::record::check::{Check, Mark};

/// Columns of the mark and of the item's name.
const MARK: usize = 9;
const ITEM: usize = 20;

pub fn text(check: &Check, color: Color) -> String {
    let mut lines = vec![Line::toned(Tone::Heading, format!("tlsprof check: {}", check.kernel))];
    for f in &check.findings {
        let (mark, tone) = match f.mark {
            Mark::Ok => ("ok", Tone::Plain),
            Mark::Limited => ("limited", Tone::Warning),
            Mark::Missing => ("missing", Tone::Warning),
            Mark::Unknown => ("unknown", Tone::Plain),
        };
        let said = match &f.cost {
            Some(cost) => format!("{}: {cost}", f.found),
            None => f.found.clone(),
        };
        let mut rows = fill(&said, WIDTH - MARK - ITEM).into_iter();
        lines.push(Line::row("").push(tone, format!("{mark:<MARK$}")).push(
            Tone::Plain,
            format!("{:<ITEM$}{}", f.item, rows.next().unwrap_or_default()),
        ));
        lines.extend(rows.map(|rest| Line::row(format!("{:indent$}{rest}", "", indent = MARK + ITEM))));
    }
    lines.push(match check.cannot_record() {
        Some(f) => Line::toned(
            Tone::Warning,
            format!("recording cannot work: {}", f.cost.as_deref().unwrap_or(&f.found)),
        ),
        None => {
            let limits: Vec<&str> = check.limits().map(|f| f.item).collect();
            if limits.is_empty() {
                Line::toned(Tone::Key, "recording works")
            } else {
                Line::toned(Tone::Key, format!("recording works, limited by: {}", limits.join(", ")))
            }
        }
    });
    styled::render(&lines, color)
}

/// Words filled into lines of at most `width` columns; a longer word keeps a line of its own.
fn fill(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::check::Finding;

    fn finding(mark: Mark, item: &'static str, found: &str, cost: Option<&str>) -> Finding {
        Finding {
            mark,
            item,
            found: found.into(),
            cost: cost.map(Into::into),
        }
    }

    #[test]
    fn a_line_per_item_within_the_width_then_the_verdict() {
        let long = "tlsprof needs root (or CAP_BPF, CAP_PERFMON and CAP_CHECKPOINT_RESTORE) to load BPF programs \
                    and open its targets' files: run it with sudo";
        let check = Check {
            kernel: "Linux 6.6.0 x86_64".into(),
            findings: vec![
                finding(Mark::Missing, "privileges", "CapEff 0000000000000000: none", Some(long)),
                finding(Mark::Ok, "BTF", "/sys/kernel/btf/vmlinux", None),
                finding(
                    Mark::Limited,
                    "uprobe sessions",
                    "not in this kernel",
                    Some("two hits: Linux 6.13"),
                ),
            ],
        };
        let out = text(&check, Color::Off);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "tlsprof check: Linux 6.6.0 x86_64");
        assert!(lines[1].starts_with("missing  privileges          CapEff"), "{out}");
        assert!(lines[2].starts_with(&" ".repeat(MARK + ITEM)), "{out}");
        assert!(lines.iter().any(|l| l.starts_with("ok       BTF ")), "{out}");
        assert!(lines.iter().all(|l| l.chars().count() <= WIDTH), "{out}");
        assert!(out.contains("recording cannot work: tlsprof needs root"), "{out}");
        assert!(out.trim_end().ends_with("run it with sudo"), "{out}");

        let works = Check {
            findings: check.findings[1..].to_vec(),
            ..check
        };
        let out = text(&works, Color::Off);
        assert_eq!(out.lines().last(), Some("recording works, limited by: uprobe sessions"));
    }

    #[test]
    fn words_fill_lines() {
        assert_eq!(fill("a bb ccc dddd", 6), ["a bb", "ccc", "dddd"]);
        assert_eq!(
            fill("unbroken-word-longer-than-width x", 5),
            ["unbroken-word-longer-than-width", "x"]
        );
    }
}
