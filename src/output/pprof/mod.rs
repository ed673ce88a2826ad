// SPDX-License-Identifier: Apache-2.0
//! pprof export: a recording's stacks as a gzipped profile.proto for go tool pprof, Pyroscope and Parca, with
//! the stage, TLS library, role, process and where the process lives (container, pod, systemd unit) of each
//! stack as labels.

mod profile;

use std::collections::HashMap;
use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use super::flame::{self, KERNEL_SUFFIX};
use crate::analyze::attribution::Attribution;
use crate::analyze::Summary;
use crate::catalogue::Stage;
use crate::model::{Recording, Role};
use profile::{Function, Label, Line, Location, Mapping, Profile, Sample, ValueType};

/// The file named for kernel frames, as perf names it.
const KERNEL_FILE: &str = "[kernel.kallsyms]";

/// The profile, gzipped as pprof files are. Values per stack: CPU samples, and CPU in ns, calibrated so that
/// each stage has the report's CPU for it (`summary`: its self CPU over the whole recording, exact or
/// estimated), shared among the stage's samples by their counts, and the samples outside every stage share the
/// rest of the targets' own CPU (their CPU clocks' figure, the probes' cost taken out). A stage the probes
/// measured but no sample landed in gets a stack of its own (its stage functions), with 0 samples. Each
/// sample's stage and stage frame are the attribution's (analyze/attribution.rs), as the stages' figures
/// count it.
pub fn pprof(rec: &Recording, summary: &Summary) -> Vec<u8> {
    let mut b = Builder::new(rec);
    let period_ns = 1e9 / rec.sample_freq_hz.max(1) as f64;
    let attribution = Attribution::of(rec);
    let stages = attribution.stages();
    let mut cpu_ns = vec![0i64; rec.samples.len()];
    let staged_ms: f64 = summary.stages.iter().map(|st| st.self_cpu_ms).sum();
    let own_ms = summary.process_cpu_ms - summary.probe_overhead_ms;
    let rest: Vec<usize> = (0..rec.samples.len()).filter(|&i| stages[i].is_none()).collect();
    let mut shares = vec![(None, ((own_ms - staged_ms).max(0.0) * 1e6).round() as i64, rest)];
    for st in &summary.stages {
        let mine: Vec<usize> = (0..rec.samples.len()).filter(|&i| stages[i] == Some(st.name)).collect();
        shares.push((Some(st.name), (st.self_cpu_ms * 1e6).round() as i64, mine));
    }
    let mut unsampled = Vec::new();
    for (stage, total, mine) in shares {
        let count: u64 = mine.iter().map(|&i| rec.samples[i].count).sum();
        if count == 0 {
            if let (Some(stage), true) = (stage, total > 0) {
                unsampled.push((stage, total));
            }
            continue;
        }
        let mut given = 0;
        for &i in &mine {
            cpu_ns[i] = (total as i128 * i128::from(rec.samples[i].count) / i128::from(count)) as i64;
            given += cpu_ns[i];
        }
        // What rounding down left, to the first (heaviest) sample: the total stays the report's.
        cpu_ns[mine[0]] += total - given;
    }
    for (i, (s, place)) in attribution.samples().enumerate() {
        let frames = flame::stack(rec, s, place);
        let library = s
            .path
            .last()
            .and_then(|&f| rec.functions.get(usize::from(f)))
            .map(|f| rec.libraries[f.library].path.clone());
        b.sample(&frames, [s.count as i64, cpu_ns[i]], s.pid, stages[i], library);
    }
    for (stage, total) in unsampled {
        b.unsampled_stage(stage, total);
    }
    let profile = b.finish(rec, period_ns);
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&profile.encode_to_vec())
        .and_then(|()| gz.finish())
        .expect("gzip into memory")
}

/// The profile's tables (strings, functions, locations, mappings) filled as samples come.
struct Builder<'a> {
    rec: &'a Recording,
    /// The one role of every handshake recorded, when they all had the same: labels TLS stacks.
    role: Option<Role>,
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    /// (frame name, file) -> location id, the same as its function's.
    locations: HashMap<(String, Option<String>), u64>,
    mappings: HashMap<String, u64>,
    profile: Profile,
}

impl<'a> Builder<'a> {
    fn new(rec: &'a Recording) -> Self {
        let mut roles = rec
            .handshakes
            .iter()
            .map(|g| g.kind.role)
            .filter(|r| *r != Role::Partial);
        let first = roles.next();
        let mut b = Builder {
            rec,
            role: first.filter(|r| roles.all(|o| o == *r)),
            strings: Vec::new(),
            string_ids: HashMap::new(),
            locations: HashMap::new(),
            mappings: HashMap::new(),
            profile: Profile::default(),
        };
        b.string("");
        b
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), id);
        id
    }

    /// The file a frame of process `pid` was found in: recorded by name, or the library of the stage function
    /// it names in that process.
    fn file_of(&self, frame: &str, pid: u32) -> Option<String> {
        if frame.ends_with(KERNEL_SUFFIX) {
            return Some(KERNEL_FILE.to_string());
        }
        let bare = frame.split(" [").next().unwrap_or(frame);
        let rec = self.rec;
        rec.frame_files
            .get(frame)
            .or_else(|| rec.frame_files.get(bare))
            .cloned()
            .or_else(|| {
                rec.functions
                    .iter()
                    .map(|f| &rec.libraries[f.library])
                    .zip(&rec.functions)
                    .find(|(lib, f)| f.name == bare && lib.pids.contains(&pid))
                    .map(|(lib, _)| lib.path.clone())
            })
    }

    /// One function and one location per frame name and file.
    fn location(&mut self, frame: &str, pid: u32) -> u64 {
        let file = self.file_of(frame, pid);
        let key = (frame.to_string(), file.clone());
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        let mapping_id = file.as_deref().map_or(0, |f| self.mapping(f));
        let name = self.string(frame);
        let filename = file.as_deref().map_or(0, |f| self.string(f));
        self.profile.function.push(Function {
            id,
            name,
            system_name: name,
            filename,
            start_line: 0,
        });
        self.profile.location.push(Location {
            id,
            mapping_id,
            address: 0,
            line: vec![Line {
                function_id: id,
                line: 0,
            }],
            is_folded: false,
        });
        self.locations.insert(key, id);
        id
    }

    fn mapping(&mut self, file: &str) -> u64 {
        if let Some(&id) = self.mappings.get(file) {
            return id;
        }
        let id = self.mappings.len() as u64 + 1;
        let filename = self.string(file);
        self.profile.mapping.push(Mapping {
            id,
            filename,
            // Frames arrive named: consumers must not try to symbolize addresses.
            has_functions: true,
            ..Mapping::default()
        });
        self.mappings.insert(file.to_string(), id);
        id
    }

    /// `frames` outermost first; `values` (samples, CPU ns).
    fn sample(&mut self, frames: &[String], values: [i64; 2], pid: u32, stage: Option<Stage>, library: Option<String>) {
        let location_id = frames.iter().rev().map(|f| self.location(f, pid)).collect();
        let mut labels = vec![("process", self.rec.comm_of(pid).to_string()), ("pid", pid.to_string())];
        if let Some(t) = self.rec.targets.iter().find(|t| t.pid == pid) {
            let at = &t.placement;
            let placed = [
                ("container", &t.container),
                ("container_id", &at.container_id),
                ("pod_uid", &at.pod_uid),
                ("systemd_unit", &at.systemd_unit),
            ];
            labels.extend(placed.into_iter().filter_map(|(k, v)| Some((k, v.clone()?))));
        }
        if let Some(stage) = stage {
            labels.push(("stage", stage.name().to_string()));
            if let Some(role) = self.role {
                labels.push(("role", format!("{role:?}").to_lowercase()));
            }
        }
        if let Some(library) = library {
            labels.push(("library", library));
        }
        let label = labels
            .iter()
            .map(|(k, v)| Label {
                key: self.string(k),
                str: self.string(v),
                ..Label::default()
            })
            .collect();
        self.profile.sample.push(Sample {
            location_id,
            value: values.to_vec(),
            label,
        });
    }

    /// A stage's CPU that no sample saw, on the stage functions' heaviest call path the probes recorded.
    fn unsampled_stage(&mut self, stage: Stage, cpu_ns: i64) {
        let rec = self.rec;
        let Some(node) = rec
            .tree
            .iter()
            .filter(|n| rec.path_stages(&n.path).last().copied().flatten() == Some(stage))
            .max_by_key(|n| n.self_ns)
        else {
            return;
        };
        let mut frames = vec![rec.comm_of(node.pid).to_string()];
        for (&f, counted) in node.path.iter().zip(rec.path_stages(&node.path)) {
            let name = &rec.functions[usize::from(f)].name;
            frames.push(counted.map_or(name.clone(), |s| format!("{name} [{}]", s.name())));
        }
        let library = node
            .path
            .last()
            .map(|&f| rec.libraries[rec.functions[usize::from(f)].library].path.clone());
        self.sample(&frames, [0, cpu_ns], node.pid, Some(stage), library);
    }

    fn finish(mut self, rec: &Recording, period_ns: f64) -> Profile {
        let samples = ValueType {
            r#type: self.string("samples"),
            unit: self.string("count"),
        };
        let cpu = ValueType {
            r#type: self.string("cpu"),
            unit: self.string("nanoseconds"),
        };
        let comment = self.string(
            "tlsprof: cpu = each stage's CPU as tlsprof report gives it, shared among its samples; the targets' other CPU (CPU clocks) shared among the samples outside the stages, which include TLS code run while the probes were detached",
        );
        self.profile.default_sample_type = cpu.r#type;
        self.profile.period_type = Some(cpu);
        self.profile.sample_type = vec![samples, cpu];
        self.profile.period = period_ns.round() as i64;
        self.profile.duration_nanos = (rec.duration_s * 1e9).round() as i64;
        self.profile.time_nanos = rec.start_unix_ns.map_or(0, |ns| ns as i64);
        self.profile.comment = vec![comment];
        self.profile.string_table = self.strings;
        self.profile
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use flate2::read::GzDecoder;

    use super::*;
    use crate::analyze::summarize;
    use crate::model::tests::sample_recording;

    fn decode(bytes: &[u8]) -> Profile {
        let mut raw = Vec::new();
        GzDecoder::new(bytes).read_to_end(&mut raw).unwrap();
        Profile::decode(raw.as_slice()).unwrap()
    }

    fn label<'p>(p: &'p Profile, s: &Sample, key: &str) -> Option<&'p str> {
        s.label
            .iter()
            .find(|l| p.string_table[l.key as usize] == key)
            .map(|l| p.string_table[l.str as usize].as_str())
    }

    #[test]
    fn profile_time_is_the_recordings_wall_clock_start_and_length() {
        let mut rec = sample_recording();
        let p = decode(&pprof(&rec, &summarize(&rec)));
        assert_eq!(p.time_nanos, 1_700_000_000_000_000_000);
        assert_eq!(p.duration_nanos, 2_000_000_000);
        // A recording made before the start was kept: no time rather than a wrong one.
        rec.start_unix_ns = None;
        assert_eq!(decode(&pprof(&rec, &summarize(&rec))).time_nanos, 0);
    }

    #[test]
    fn stage_cpu_is_the_reports_and_stacks_are_the_flame_graphs() {
        let mut rec = sample_recording();
        // Outside every stage: shares the targets' CPU that the stages do not account for.
        rec.samples.push(crate::model::Sample {
            pid: 10,
            path: Vec::new(),
            frames: vec!["main".into(), "ngx_process_events".into()],
            kernel: Vec::new(),
            complete: true,
            count: 4,
        });
        let summary = summarize(&rec);
        let p = decode(&pprof(&rec, &summary));
        assert_eq!(p.string_table[0], "");
        let stage_ns = |name: &str| -> i64 {
            p.sample
                .iter()
                .filter(|s| label(&p, s, "stage") == Some(name))
                .map(|s| s.value[1])
                .sum()
        };
        for st in &summary.stages {
            assert_eq!(
                stage_ns(st.name.name()),
                (st.self_cpu_ms * 1e6).round() as i64,
                "{:?}",
                st.name
            );
        }
        // All of it: the targets' CPU without the probes' cost.
        let total: i64 = p.sample.iter().map(|s| s.value[1]).sum();
        let own_ms = summary.process_cpu_ms - summary.probe_overhead_ms;
        assert!((total as f64 - own_ms * 1e6).abs() <= 1.0, "{total} {own_ms}");
        // The derive stage has CPU but no sample: it gets its own stack, with 0 samples.
        let derive = p
            .sample
            .iter()
            .find(|s| label(&p, s, "stage") == Some("derive"))
            .unwrap();
        assert_eq!(derive.value[0], 0);
        let names = |s: &Sample| -> Vec<String> {
            s.location_id
                .iter()
                .rev()
                .map(|&l| p.string_table[p.function[l as usize - 1].name as usize].clone())
                .collect()
        };
        assert_eq!(
            names(derive),
            ["nginx", "SSL_do_handshake [handshake]", "EVP_PKEY_derive [derive]"]
        );
        // The recording's samples first, in order, then the unsampled stages'.
        let mut folded: Vec<String> = p.sample[..rec.samples.len()]
            .iter()
            .map(|s| format!("{} {}", names(s).join(";"), s.value[0]))
            .collect();
        folded.sort();
        assert_eq!(folded, flame::folded(&rec, crate::output::Group::Stage));
        let first = &p.sample[0];
        assert_eq!(label(&p, first, "process"), Some("nginx"));
        assert_eq!(label(&p, first, "role"), Some("server"));
        assert_eq!(
            label(&p, first, "library"),
            Some("/usr/lib/x86_64-linux-gnu/libssl.so.3")
        );
        // Files: recorded per frame name, a stage function's library, the kernel's.
        let file_of = |frame: &str| -> String {
            let f = p
                .function
                .iter()
                .find(|f| p.string_table[f.name as usize] == frame)
                .unwrap();
            p.string_table[f.filename as usize].clone()
        };
        assert_eq!(file_of("bn_mul_mont"), "/usr/lib/x86_64-linux-gnu/libcrypto.so.3");
        assert_eq!(
            file_of("EVP_DigestSign [sign]"),
            "/usr/lib/x86_64-linux-gnu/libssl.so.3"
        );
        assert_eq!(file_of("asm_sysvec_apic_timer_interrupt_[k]"), KERNEL_FILE);
    }
}
