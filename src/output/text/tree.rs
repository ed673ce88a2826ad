// SPDX-License-Identifier: Apache-2.0
//! The call tree of probed functions, with their CPU and calls; with `--group cause`, a cause level under
//! each stage function.

use super::pct;
use crate::analyze::{RowKind, Summary};
use crate::model::untrusted::Printable;
use crate::output::styled::Line;
use crate::output::Group;

pub fn lines(s: &Summary, group: Group) -> Vec<Line> {
    let proc_ms = s.probed_cpu_ms;
    let by_cause = group == Group::Cause;
    let mut out = vec![
        Line::prose(format!(
            "(CPU; % of process CPU{})",
            if by_cause {
                "; [cause] rows and the frames that named them: the function's self CPU shared out by its CPU samples, estimated"
            } else {
                ""
            }
        )),
        Line::row(format!(
            "{:>11}{:>8}{:>11}{:>10}  frame",
            "total ms", "%", "self ms", "calls"
        )),
    ];
    for row in &s.call_tree.rows {
        let frame = match row.kind {
            RowKind::Cause(_) | RowKind::CauseFrame if !by_cause => continue,
            RowKind::Cause(c) => format!("{} [cause]", c.name()),
            _ => row.frame.clone(),
        };
        let dash = || "-".to_string();
        let stage = row.stage.map_or(String::new(), |st| format!(" [{}]", st.name()));
        out.push(Line::row(format!(
            "{:>11.1}{:>7.1}%{:>11}{:>10}  {}{}{}",
            row.total_ms,
            pct(row.total_ms, proc_ms),
            row.self_ms.map_or_else(dash, |v| format!("{v:.1}")),
            row.calls.map_or_else(dash, |v| v.to_string()),
            "  ".repeat(row.depth),
            Printable(&frame),
            stage
        )));
    }
    if s.call_tree.hidden > 0 {
        out.push(Line::prose(format!(
            "  ({} nodes under {:.1}% of TLS CPU not shown)",
            s.call_tree.hidden,
            s.call_tree.min_share * 100.0
        )));
    }
    out
}
