// SPDX-License-Identifier: Apache-2.0
//! The JSON report: an analysis in the form of its schema (schema.rs), keys sorted.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::{Formatter, PrettyFormatter};
use serde_json::Value;

use crate::analyze::Analysis;
use crate::model::untrusted::breaks_text;

mod schema;

pub fn json(analysis: &Analysis) -> Value {
    serde_json::to_value(schema::Report::from(analysis)).expect("a report serializes")
}

/// Pretty JSON in which strings hold no character a terminal would act on: serde_json escapes C0 controls,
/// this escapes DEL, C1 controls and bidirectional overrides as well (`\u009b`), which JSON allows for any
/// character. A target's name parses back unchanged, and never reaches the operator's terminal raw.
pub fn to_string_pretty(value: &impl Serialize) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, EscapingFormatter(PrettyFormatter::new()));
    value.serialize(&mut ser).expect("serializes into memory");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

struct EscapingFormatter<'a>(PrettyFormatter<'a>);

impl Formatter for EscapingFormatter<'_> {
    fn write_string_fragment<W: ?Sized + Write>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()> {
        let mut rest = fragment;
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| breaks_text(c)) {
            writer.write_all(&rest.as_bytes()[..at])?;
            // Every such character is in the Basic Multilingual Plane: one \u escape.
            write!(writer, "\\u{:04x}", c as u32)?;
            rest = &rest[at + c.len_utf8()..];
        }
        writer.write_all(rest.as_bytes())
    }

    fn begin_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_array(writer)
    }
    fn end_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array(writer)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(writer, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array_value(writer)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object(writer)
    }
    fn end_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object(writer)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(writer, first)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object_value(writer)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object_value(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::analyze;
    use crate::catalogue::Stage;
    use crate::model::tests::sample_recording;

    #[test]
    fn json_has_the_documented_fields() {
        let j = json(&analyze(&sample_recording()));
        for field in [
            "duration_s",
            "process_cpu_ms",
            "tls_cpu_ms",
            "handshakes",
            "stages",
            "functions",
            "libraries",
            "samples",
            "lost",
        ] {
            assert!(j.get(field).is_some(), "missing {field}");
        }
        for field in ["total", "full", "resumed", "server", "client"] {
            assert!(j["handshakes"].get(field).is_some(), "missing handshakes.{field}");
        }
        let sign = j["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "sign")
            .unwrap();
        assert_eq!(sign["calls"], 6);
        assert!((sign["cpu_us_per_call"].as_f64().unwrap() - 4420.0 / 6.0).abs() < 1e-6);
        let f = &j["functions"][0];
        for field in ["name", "library", "stage", "calls", "cpu_ms"] {
            assert!(f.get(field).is_some(), "missing functions[].{field}");
        }
        for field in ["path", "family", "flavor", "version", "symbols"] {
            assert!(j["libraries"][0].get(field).is_some(), "missing libraries[].{field}");
        }
        assert_eq!(j["stages"][0]["name"], Stage::Handshake.name());
    }

    #[test]
    fn hostile_names_stay_valid_json_without_raw_controls() {
        let mut rec = sample_recording();
        let name = "\x1b]0;pwned\x07\u{9b}2J\u{202e}x\n\"\\";
        rec.targets[0].comm = name.into();
        let text = to_string_pretty(&json(&analyze(&rec)));
        assert!(!text.chars().any(|c| c != '\n' && breaks_text(c)), "{text}");
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["targets"][0]["comm"], name);
        // The same document as serde_json's own pretty printer gives, read back the same way.
        let plain = serde_json::to_string_pretty(&json(&analyze(&rec))).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(&plain).unwrap());
    }
}
