// SPDX-License-Identifier: Apache-2.0
//! The page's pieces: escaping, figures that say whether they are exact or estimated, the skeleton with
//! its inline style, and the flame graph's SVG made fit to sit inside it.

use std::fmt::{self, Display, Write};

use anyhow::{bail, Context, Result};

/// Text safe in HTML content and in quoted attribute values: names come from the targets.
pub struct Esc<'a>(pub &'a str);

impl Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// What a printed figure is.
#[derive(Clone, Copy)]
enum Basis {
    Exact,
    /// Estimated, with its 95% interval.
    Estimated([f64; 2]),
    /// Neither: what it is in words ("mean of the handshakes seen").
    Said(&'static str),
}

/// A figure as the page prints it: its value with its unit, marked ≈ with its 95% interval where it is
/// estimated; its hover text says which. `key` names it for tests reading the page (the JSON report's
/// field where there is one).
pub struct Fig {
    value: f64,
    digits: usize,
    unit: &'static str,
    basis: Basis,
    key: Option<String>,
}

/// An exact figure until said otherwise.
pub fn fig(value: f64, digits: usize, unit: &'static str) -> Fig {
    Fig {
        value,
        digits,
        unit,
        basis: Basis::Exact,
        key: None,
    }
}

impl Fig {
    pub fn key(mut self, key: impl Into<String>) -> Fig {
        self.key = Some(key.into());
        self
    }

    /// Estimated with this interval; exact when the interval is a point.
    pub fn ci(mut self, ci: [f64; 2]) -> Fig {
        if ci[0] != ci[1] {
            self.basis = Basis::Estimated(ci);
        }
        self
    }

    /// Estimated when there is an interval, else what `said` says.
    pub fn ci_or(self, ci: Option<[f64; 2]>, said: &'static str) -> Fig {
        match ci {
            Some(ci) => self.ci(ci),
            None => self.said(said),
        }
    }

    pub fn said(mut self, what: &'static str) -> Fig {
        self.basis = Basis::Said(what);
        self
    }

    /// A share printed in percent.
    pub fn percent(mut self) -> Fig {
        self.value *= 100.0;
        self.unit = "%";
        if let Basis::Estimated(ci) = &mut self.basis {
            *ci = ci.map(|v| v * 100.0);
        }
        self
    }

    /// As plain text, for charts: "≈ 4550.1 ms [4297.2–4803.1]" where estimated.
    pub fn plain(&self) -> String {
        let d = self.digits;
        let value = format!("{:.d$}{}", self.value, self.unit_text());
        match self.basis {
            Basis::Estimated([lo, hi]) => format!("≈ {value} [{lo:.d$}–{hi:.d$}]"),
            Basis::Exact | Basis::Said(_) => value,
        }
    }

    fn unit_text(&self) -> String {
        match self.unit {
            "" | "%" => self.unit.to_string(),
            unit => format!(" {unit}"),
        }
    }
}

impl Display for Fig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.digits;
        let key = self
            .key
            .as_deref()
            .map_or(String::new(), |k| format!(" data-key=\"{}\"", Esc(k)));
        let (mark, title) = match self.basis {
            Basis::Exact => ("", "exact".to_string()),
            Basis::Estimated(_) => ("≈ ", "estimated; 95% interval in brackets".to_string()),
            Basis::Said(what) => ("", what.to_string()),
        };
        write!(
            f,
            "<span class=\"fig\"{key} title=\"{}\">{mark}{:.d$}{}</span>",
            Esc(&title),
            self.value,
            self.unit_text()
        )?;
        if let Basis::Estimated([lo, hi]) = self.basis {
            write!(f, " <span class=\"ci\">[{lo:.d$}–{hi:.d$}]</span>")?;
        }
        Ok(())
    }
}

/// The page around `body`: everything inline, nothing fetched.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        Esc(title)
    )
}

/// The page's style. Inferno's flame graph brings its own rules for `text`, `#title`, `.hide` and
/// `.parent`, which apply to the whole page once it is inline: the page's classes and ids avoid them and
/// its chart text is styled by a more specific rule.
const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1d232b;background:#fff;
  max-width:1240px;margin:0 auto;padding:12px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}
h2{font-size:18px;border-bottom:1px solid #d8dde4;padding-bottom:4px;margin:28px 0 8px}
h3{font-size:15px;margin:14px 0 4px}
p{margin:6px 0}
table{border-collapse:collapse;margin:8px 0}
th,td{padding:4px 10px;border-bottom:1px solid #e6e9ee;text-align:right;vertical-align:top}
th{background:#f3f5f8;font-weight:600}
th.name,td.name{text-align:left}
.ci{color:#66707c;font-size:12px;white-space:nowrap}
.fig{white-space:nowrap}
.lede{color:#3a434e}
.note{color:#56606c;font-size:13px}
svg.chart{display:block;max-width:100%;height:auto}
svg.chart text{font:12px system-ui,-apple-system,'Segoe UI',sans-serif;fill:#333}
svg.chart text.value{fill:#1d232b}
.advice{border-left:4px solid #2a7ae2;background:#f6f9fd;padding:6px 12px;margin:10px 0}
.advice .saving{font-weight:600}
.flamegraph{border:1px solid #e6e9ee;margin-top:8px}
.flamegraph svg{display:block;width:100%;height:auto}
details.accounting{margin-top:28px}
details.accounting > summary{font-size:18px;font-weight:600;cursor:pointer}
";

/// Inferno's SVG as an element of the page: without its XML prologue, and with its script finding the
/// flame graph's own `<svg>` rather than the page's first (a chart above it).
pub fn inline_flame_graph(svg: Vec<u8>) -> Result<String> {
    let svg = String::from_utf8(svg).context("the flame graph is not UTF-8")?;
    let Some(start) = svg.find("<svg") else {
        bail!("the flame graph has no <svg> element");
    };
    const FIRST_SVG: &str = "svg = document.getElementsByTagName(\"svg\")[0];";
    if !svg.contains(FIRST_SVG) {
        bail!("inferno's flame graph script changed: it no longer finds its <svg> as the HTML report expects");
    }
    let own_svg = "svg = document.getElementById(\"frames\").ownerSVGElement;";
    Ok(svg[start..].replacen(FIRST_SVG, own_svg, 1))
}

/// `<table>` rows from cells already rendered: the first cell is a name (left-aligned).
pub fn table(out: &mut String, head: &[&str], rows: &[Vec<String>]) -> fmt::Result {
    out.push_str("<table>\n<tr>");
    for (i, h) in head.iter().enumerate() {
        write!(
            out,
            "<th{}>{}</th>",
            if i == 0 { " class=\"name\"" } else { "" },
            Esc(h)
        )?;
    }
    out.push_str("</tr>\n");
    for row in rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            write!(out, "<td{}>{cell}</td>", if i == 0 { " class=\"name\"" } else { "" })?;
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_characters_are_escaped() {
        assert_eq!(
            Esc("<script>alert('x') & \"y\"</script>").to_string(),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }

    #[test]
    fn a_figure_says_whether_it_is_estimated() {
        let exact = fig(12.0, 1, "ms").ci([12.0, 12.0]).to_string();
        assert!(exact.contains("title=\"exact\">12.0 ms<"), "{exact}");
        let est = fig(0.5, 1, "").ci([0.4, 0.6]).percent().key("tls_share").to_string();
        assert!(est.contains("data-key=\"tls_share\""), "{est}");
        assert!(est.contains(">≈ 50.0%<") && est.contains("[40.0–60.0]"), "{est}");
    }
}
