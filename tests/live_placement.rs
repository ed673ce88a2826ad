// SPDX-License-Identifier: Apache-2.0
//! Live: an nginx worker moved into a real cgroup shaped as a systemd-driven kubelet makes a pod's
//! (`kubepods.slice/.../kubepods-burstable-pod<UID>.slice/cri-containerd-<ID>.scope`, in the unified
//! hierarchy) is placed in that pod and container by `record`'s JSON report and by the labels of its pprof
//! profile (needs root).
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const POD_UID: &str = "3f2a1b3c-4d5e-6f70-8192-a3b4c5d6e7f8";
const CONTAINER_ID: &str = "0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9012345678ab";

/// The cgroup v2 hierarchy's mount point (the unified one on a host that mounts v1 controllers beside it).
fn unified_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mount_point = left.split_whitespace().nth(4)?;
        (right.split_whitespace().next() == Some("cgroup2")).then(|| PathBuf::from(mount_point))
    })
}

/// The pod's cgroups, made for the test; on drop, their processes go back to the root and they are removed.
struct PodCgroup {
    root: PathBuf,
    made: Vec<PathBuf>,
}

impl PodCgroup {
    fn make(root: &Path) -> PodCgroup {
        let pod = format!("kubepods-burstable-pod{}.slice", POD_UID.replace('-', "_"));
        let container = format!("cri-containerd-{CONTAINER_ID}.scope");
        let mut made = Vec::new();
        let mut dir = root.to_path_buf();
        for part in ["kubepods.slice", "kubepods-burstable.slice", &pod, &container] {
            dir = dir.join(part);
            if !dir.exists() {
                std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
                made.push(dir.clone());
            }
        }
        PodCgroup {
            root: root.to_path_buf(),
            made,
        }
    }

    fn leaf(&self) -> &Path {
        self.made.last().expect("the container's cgroup")
    }

    fn enter(&self, pid: u32) {
        std::fs::write(self.leaf().join("cgroup.procs"), pid.to_string()).unwrap();
    }
}

impl Drop for PodCgroup {
    fn drop(&mut self) {
        if let Ok(procs) = std::fs::read_to_string(self.leaf().join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
            }
        }
        for dir in self.made.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[test]
fn a_process_in_a_pods_cgroup_is_placed_in_that_pod() {
    if !require_root("a_process_in_a_pods_cgroup_is_placed_in_that_pod") {
        return;
    }
    let root = unified_mount().expect("a cgroup2 mount (the unified hierarchy)");
    let scratch = Scratch::new("placement");
    let nginx = Nginx::start(&scratch.path("nginx"), &["--workers", "1"]);
    let worker = nginx.workers()[0];
    let pod = PodCgroup::make(&root);
    pod.enter(worker);
    let cgroup = std::fs::read_to_string(format!("/proc/{worker}/cgroup")).unwrap();
    assert!(cgroup.contains(CONTAINER_ID), "the worker did not move: {cgroup}");

    let recording = scratch.path("placed.tlsprof");
    let rec = Recorder::start(&["--pid", &worker.to_string(), "-o", recording.to_str().unwrap()]);
    s_time_new(nginx.port, 2);
    let summary = rec.interrupt();
    let r = report_json(&recording);
    let target = &r["targets"][0];
    assert_eq!(target["placement"]["pod_uid"], POD_UID, "{target}\n{summary}");
    assert_eq!(target["placement"]["container_id"], CONTAINER_ID, "{target}");
    assert_eq!(target["placement"]["runtime"], "containerd", "{target}");
    assert!(target["placement"]["systemd_unit"].is_null(), "{target}");
    assert_eq!(
        target["container"], "pod 3f2a1b3c-4d5 containerd 0d1e2f3a4b5c",
        "{target}"
    );

    let Some(go) = go() else { return };
    let profile = scratch.path("placed.pb.gz");
    let exported = run(tlsprof()
        .args(["export", "--format", "pprof", "--output"])
        .arg(&profile)
        .arg(&recording));
    assert!(
        exported.status.success(),
        "export: {}",
        String::from_utf8_lossy(&exported.stderr)
    );
    let out = Command::new(go)
        .args(["tool", "pprof", "-tags"])
        .arg(&profile)
        .env("PPROF_TMPDIR", &scratch.0)
        .output()
        .unwrap();
    let tags = String::from_utf8_lossy(&out.stdout);
    for value in [POD_UID, CONTAINER_ID] {
        assert!(tags.contains(value), "go tool pprof -tags has no {value}: {tags}");
    }
    assert!(
        tags.contains("pod_uid") && tags.contains("container_id"),
        "go tool pprof -tags: {tags}"
    );
}
