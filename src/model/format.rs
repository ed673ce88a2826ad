// SPDX-License-Identifier: Apache-2.0
//! The recording file: written whole, and read only as a whole, consistent recording tlsprof wrote.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::{file, CpuHistogram, Recording};

pub const FORMAT: &str = "tlsprof-recording";
pub const FORMAT_VERSION: u32 = 11;

/// Largest recording read: far above what a recording holds (aggregated samples, a call tree, histograms),
/// so that a file that is not one is refused before it is parsed into memory.
pub const MAX_RECORDING_BYTES: u64 = 256 << 20;

/// Largest count or nanosecond figure a recording may hold, and largest sum of them: figures stay exact as
/// f64 and no sum of them overflows.
const MAX_FIGURE: u64 = 1 << 53;

/// The two fields that say what a file is, read before the rest.
#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    format: serde_json::Value,
    #[serde(default)]
    format_version: serde_json::Value,
}

impl Recording {
    /// Writes the recording whole or not at all (file::write_atomically).
    pub fn save(&self, path: &Path) -> Result<()> {
        file::write_atomically(path, |w| Ok(serde_json::to_writer(w, self)?))
            .with_context(|| format!("cannot write recording {}", path.display()))
    }

    /// Reads a recording, refusing anything that is not a whole, consistent one tlsprof wrote: the file may
    /// come from anywhere.
    pub fn load(path: &Path) -> Result<Recording> {
        Self::from_bytes(&file::read_bounded(path, MAX_RECORDING_BYTES, "recording")?)
            .map_err(|e| anyhow::anyhow!("{} {e}", path.display()))
    }

    /// A recording from a file's bytes; errors complete a sentence that starts with the file's name.
    pub fn from_bytes(bytes: &[u8]) -> Result<Recording> {
        let header: Header = serde_json::from_slice(bytes).map_err(|_| {
            anyhow::anyhow!(
                "is not a tlsprof recording or is damaged (not valid JSON): record it again with `tlsprof record`"
            )
        })?;
        if header.format.as_str() != Some(FORMAT) {
            bail!("is not a tlsprof recording: record one with `tlsprof record`");
        }
        let version = header.format_version.as_u64();
        if version != Some(u64::from(FORMAT_VERSION)) {
            bail!(
                "has recording format {}, this tlsprof reads format {FORMAT_VERSION}: use the tlsprof that wrote it",
                version.map_or("(none)".to_string(), |v| v.to_string())
            );
        }
        let rec: Recording = serde_json::from_slice(bytes)
            .map_err(|e| anyhow::anyhow!("is a damaged tlsprof recording ({e}): record it again"))?;
        rec.check()?;
        Ok(rec)
    }

    /// Cross-references must hold and figures be in range, or derived figures would silently be wrong.
    fn check(&self) -> Result<()> {
        let nfunc = self.functions.len();
        let bad_path = |p: &[u16]| p.iter().any(|&f| usize::from(f) >= nfunc);
        if self.functions.iter().any(|f| f.library >= self.libraries.len())
            || self.tree.iter().any(|n| n.path.is_empty() || bad_path(&n.path))
            || self.samples.iter().any(|s| bad_path(&s.path))
        {
            bail!("is a damaged tlsprof recording (inconsistent function references): record it again");
        }
        if let Err(what) = self.check_figures() {
            bail!("is a damaged tlsprof recording ({what} out of range): record it again");
        }
        Ok(())
    }

    /// Every figure finite, not negative and within what a recording can hold; sums of counts too.
    fn check_figures(&self) -> Result<(), &'static str> {
        fn sum<'a>(what: &'static str, values: impl IntoIterator<Item = &'a u64>) -> Result<u64, &'static str> {
            values
                .into_iter()
                .try_fold(0u64, |acc, &v| acc.checked_add(v).filter(|&s| s <= MAX_FIGURE))
                .ok_or(what)
        }
        fn real<'a>(what: &'static str, values: impl IntoIterator<Item = &'a f64>) -> Result<(), &'static str> {
            // A bit over a year in ms or ns, per figure: nothing a recording measures comes near.
            let ok = |v: f64| v.is_finite() && (0.0..=1e18).contains(&v);
            values.into_iter().all(|&v| ok(v)).then_some(()).ok_or(what)
        }
        real("duration", [&self.duration_s])?;
        if !(1..=1_000_000).contains(&self.sample_freq_hz) {
            return Err("sample frequency");
        }
        real(
            "target CPU",
            self.targets.iter().flat_map(|t| {
                [
                    &t.process_cpu_ms,
                    &t.probed_cpu_ms,
                    &t.stage_slices_ms,
                    &t.stage_slices_cpu_ms,
                ]
            }),
        )?;
        let c = &self.probe_cost;
        real(
            "probe cost",
            [&c.hit_ns, &c.inside_ns, &c.cold_hit_ns, &c.step_ns, &c.cold_step_ns],
        )?;
        let p = &self.probing;
        real("probing", [&p.max_overhead_pct, &p.live_s, &p.peak_overhead])?;
        real("openssl speed", self.openssl_speed.values())?;
        let parts = || p.window_figures.iter().flat_map(|w| &w.processes);
        for w in &p.window_figures {
            real("probe window", [&w.live_s])?;
        }
        for part in parts() {
            real("probe window", [&part.own_cpu_ms])?;
            sum("probe window", part.stage_self_ns.values())?;
        }
        sum("probe window connections", parts().map(|w| &w.connections))?;
        sum("probe window handshakes", parts().map(|w| &w.handshakes.total))?;
        sum("connections", self.targets.iter().map(|t| &t.connections))?;
        sum("call tree calls", self.tree.iter().map(|n| &n.calls))?;
        sum("call tree CPU", self.tree.iter().map(|n| &n.cpu_ns))?;
        sum("call tree self CPU", self.tree.iter().map(|n| &n.self_ns))?;
        sum("samples", self.samples.iter().map(|s| &s.count))?;
        sum("probe hits", [&self.probe_hits, &self.probe_stepped_hits])?;
        if let Some(t) = &self.probe_traps {
            sum("probe traps", [&t.samples, &t.freq_hz])?;
            if t.trapped > t.samples {
                return Err("probe traps");
            }
            if let Some(ran) = &t.ran {
                real("probe traps", [&ran.cpu_ms])?;
                sum("probe traps", [&ran.hits.all, &ran.hits.stepped])?;
            }
        }
        sum("lost counts", &self.lost.values())?;
        sum("handshakes", self.handshakes.iter().map(|g| &g.cpu.count))?;
        sum("handshake CPU", self.handshakes.iter().map(|g| &g.cpu.sum_ns))?;
        for g in &self.handshakes {
            let h = &g.cpu;
            if sum("handshake histogram", h.buckets.values())? != h.count
                || h.buckets.keys().any(|&b| b > CpuHistogram::MAX_BUCKET)
            {
                return Err("handshake histogram");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::sample_recording;
    use crate::model::{Lost, TreeNode};
    use std::fs;

    #[test]
    fn recording_round_trips_and_rejects_damage() {
        let dir = std::env::temp_dir().join(format!("tlsprof-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.tlsprof");
        sample_recording().save(&good).unwrap();
        let back = Recording::load(&good).unwrap();
        assert_eq!(back.tree.len(), 5);

        let junk = dir.join("junk.tlsprof");
        fs::write(&junk, b"\x7fELF not json").unwrap();
        let err = Recording::load(&junk).unwrap_err().to_string();
        assert!(err.contains("is not a tlsprof recording"), "{err}");

        let mut broken = sample_recording();
        broken.tree.push(TreeNode {
            pid: 10,
            path: vec![99],
            calls: 1,
            cpu_ns: 1,
            self_ns: 1,
        });
        let bad = dir.join("bad.tlsprof");
        broken.save(&bad).unwrap();
        let err = Recording::load(&bad).unwrap_err().to_string();
        assert!(err.contains("damaged"), "{err}");

        let missing = Recording::load(&dir.join("missing")).unwrap_err();
        assert!(format!("{missing:#}").contains("cannot read recording"));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A recording's JSON with one field replaced.
    fn with(field: &str, value: serde_json::Value) -> Vec<u8> {
        let mut v = serde_json::to_value(sample_recording()).unwrap();
        v[field] = value;
        serde_json::to_vec(&v).unwrap()
    }

    fn refused(bytes: &[u8]) -> String {
        Recording::from_bytes(bytes).unwrap_err().to_string()
    }

    #[test]
    fn hostile_recordings_are_refused_with_one_reason() {
        use serde_json::json;
        assert!(Recording::from_bytes(&with("format", json!(FORMAT))).is_ok());
        assert!(refused(&with("format", json!(["tlsprof-recording"]))).contains("is not a tlsprof recording"));
        assert!(refused(&with("duration_s", json!("1"))).contains("damaged tlsprof recording (invalid type"));
        assert!(refused(&with("duration_s", json!(1e300))).contains("(duration out of range)"));
        assert!(refused(&with("duration_s", json!(-1.0))).contains("(duration out of range)"));
        assert!(refused(&with("sample_freq_hz", json!(0))).contains("(sample frequency out of range)"));
        let mut v = serde_json::to_value(sample_recording()).unwrap();
        v["tree"][0]["cpu_ns"] = json!(u64::MAX);
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(call tree CPU out of range)"));
        // Each below the limit, their sum above it.
        v = serde_json::to_value(sample_recording()).unwrap();
        v["samples"][0]["count"] = json!(MAX_FIGURE);
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(samples out of range)"));
        for counter in Lost::COUNTERS {
            v = serde_json::to_value(sample_recording()).unwrap();
            v["lost"][counter.name] = json!(MAX_FIGURE + 1);
            let err = refused(&serde_json::to_vec(&v).unwrap());
            assert!(err.contains("(lost counts out of range)"), "{}: {err}", counter.name);
        }
        v = serde_json::to_value(sample_recording()).unwrap();
        v["lost"]["unframed_work"] = json!(u64::MAX);
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(lost counts out of range)"));
        v = serde_json::to_value(sample_recording()).unwrap();
        v["probe_traps"] = json!({"trapped": 5, "samples": 4, "freq_hz": 1000});
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(probe traps out of range)"));
        let ran = |cpu_ms: f64| json!({"trapped": 1, "samples": 4, "freq_hz": 1000, "ran": {"cpu_ms": cpu_ms, "hits": {"all": 3, "stepped": 0}}});
        v["probe_traps"] = ran(4.0);
        assert!(Recording::from_bytes(&serde_json::to_vec(&v).unwrap()).is_ok());
        v["probe_traps"] = ran(-4.0);
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(probe traps out of range)"));
        v = serde_json::to_value(sample_recording()).unwrap();
        v["handshakes"][0]["cpu"]["count"] = json!(5);
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(handshake histogram out of range)"));
        v = serde_json::to_value(sample_recording()).unwrap();
        v["handshakes"][0]["cpu"]["buckets"] = json!({"4000000000": 4});
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(handshake histogram out of range)"));
        // Nesting far past serde_json's recursion limit: an error, not a stack overflow.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(refused(deep.as_bytes()).contains("not valid JSON"));
        let mut nested = serde_json::to_value(sample_recording()).unwrap();
        nested["extra"] = serde_json::from_str(&format!("{}1{}", "[".repeat(120), "]".repeat(120))).unwrap();
        let deep_inside = serde_json::to_vec(&nested).unwrap();
        assert!(Recording::from_bytes(&deep_inside).is_ok());
        // In a field this tlsprof does not read, skipped without recursion: no limit is needed there.
        let mut deeper = String::from_utf8(deep_inside).unwrap();
        deeper.insert_str(1, &format!("\"x\":{}{},", "[".repeat(1_000_000), "]".repeat(1_000_000)));
        assert!(Recording::from_bytes(deeper.as_bytes()).is_ok());
        let mut v = serde_json::to_value(sample_recording()).unwrap();
        v["samples"][0]["frames"] = serde_json::from_str(&format!("{}{}", "[".repeat(120), "]".repeat(120))).unwrap();
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("damaged tlsprof recording (invalid type"));
        assert!(refused(b"").contains("not valid JSON"));
        assert!(refused(b"null").contains("not valid JSON"));
    }
}
