// SPDX-License-Identifier: Apache-2.0
//! The Prometheus text exposition format (version 0.0.4): metric families with their HELP and TYPE lines,
//! and samples whose label values (process names and what ServerHellos said: input from the targets) are
//! escaped so that no value can end its quotes, break its line or forge another sample.

use std::borrow::Cow;
use std::fmt::Write;

use crate::model::untrusted::printable;

/// The Content-Type of the format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Counter,
    Gauge,
    Histogram,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        }
    }
}

/// The text of one scrape, family by family.
#[derive(Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    /// Starts a family: `name` is one of tlsprof's own (a valid metric name), `help` says what it measures.
    pub fn family(&mut self, name: &str, kind: Type, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {}", kind.name());
    }

    /// One sample of the family started last (`name` with its _bucket/_sum/_count suffix for a histogram).
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{k}=\"{}\"", label_value(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {}", number(value));
    }

    pub fn finish(self) -> String {
        self.text
    }
}

/// A label value as the format quotes it: backslash, double quote and line feed escaped. Control and
/// invisible characters are first shown as `\xNN` (model::untrusted), as everywhere tlsprof prints a name.
pub fn label_value(v: &str) -> Cow<'_, str> {
    let shown = printable(v);
    if !shown.contains(['\\', '"', '\n']) {
        return shown;
    }
    let mut out = String::with_capacity(shown.len() + 8);
    for c in shown.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A sample value: Go's float syntax (`+Inf`, `NaN`), else Rust's shortest round-trip decimal.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_cannot_break_out_of_their_quotes_or_line() {
        assert_eq!(label_value("nginx"), "nginx");
        assert_eq!(label_value(r#"a"b"#), r#"a\"b"#);
        // The backslash is doubled once by printable (so an escape cannot be forged), then by the format.
        assert_eq!(label_value(r"a\b"), r"a\\\\b");
        assert_eq!(label_value("a\nb"), r"a\\x0ab");
        assert_eq!(label_value("a\u{202e}b"), r"a\\u{202e}b");
        let mut e = Exposition::default();
        e.family("tlsprof_x_total", Type::Counter, "What x is.\nSecond line");
        e.sample(
            "tlsprof_x_total",
            &[("process", "evil\"} 1\ntlsprof_x_total{process=\"forged")],
            2.0,
        );
        let text = e.finish();
        assert_eq!(
            text,
            "# HELP tlsprof_x_total What x is.\\nSecond line\n# TYPE tlsprof_x_total counter\n\
             tlsprof_x_total{process=\"evil\\\"} 1\\\\x0atlsprof_x_total{process=\\\"forged\"} 2\n"
        );
        assert_eq!(text.lines().count(), 3);
    }

    #[test]
    fn values_are_in_the_formats_syntax() {
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.000_001_5), "0.0000015");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NAN), "NaN");
    }
}
