// SPDX-License-Identifier: Apache-2.0
//! The JSON report: the serialized form of the summary, keys sorted (its schema is analyze::Summary).

use serde_json::Value;

use crate::analyze::Summary;

pub fn json(s: &Summary) -> Value {
    serde_json::to_value(s).expect("a summary serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::summarize;
    use crate::catalogue::Stage;
    use crate::model::tests::sample_recording;

    #[test]
    fn json_has_the_documented_fields() {
        let j = json(&summarize(&sample_recording()));
        for field in [
            "duration_s",
            "process_cpu_ms",
            "tls_cpu_ms",
            "handshakes",
            "stages",
            "functions",
            "libraries",
            "samples",
            "lost_samples",
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
        for field in ["path", "flavor", "version", "symbols"] {
            assert!(j["libraries"][0].get(field).is_some(), "missing libraries[].{field}");
        }
        assert_eq!(j["stages"][0]["name"], Stage::Handshake.name());
    }
}
