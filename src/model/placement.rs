// SPDX-License-Identifier: Apache-2.0
//! Where a process lives, as its cgroup path names it: the container (its runtime and ID), the Kubernetes
//! pod, the systemd unit. What fleets filter profiles and metrics by. A target chooses its cgroup: every
//! part is untrusted text, kept only when it has the shape its kind has.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Placement {
    /// The container runtime whose scope holds it (`docker`, `podman`, `containerd`, `cri-o`); None for a
    /// container under a cgroupfs-driven kubelet, whose path names only the ID.
    #[serde(default)]
    pub runtime: Option<String>,
    /// The container's ID, in full (hexadecimal).
    #[serde(default)]
    pub container_id: Option<String>,
    /// The Kubernetes pod's UID (`0f2a...-...`), from the kubelet's pod cgroup.
    #[serde(default)]
    pub pod_uid: Option<String>,
    /// The systemd unit (`nginx.service`) when it is not a container's.
    #[serde(default)]
    pub systemd_unit: Option<String>,
}

/// Container runtimes' scope prefixes, as systemd-driven runtimes name them.
const RUNTIMES: [(&str, &str); 5] = [
    ("docker-", "docker"),
    ("libpod-", "podman"),
    ("cri-containerd-", "containerd"),
    ("crio-", "cri-o"),
    ("containerd-", "containerd"),
];
/// A systemd unit name is at most this long (UNIT_NAME_MAX).
const UNIT_MAX: usize = 255;

impl Placement {
    /// Parses a cgroup path (`/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<UID>.slice/
    /// cri-containerd-<ID>.scope`, `/kubepods/burstable/pod<UID>/<ID>`, `/system.slice/nginx.service`).
    pub fn of_cgroup(path: &str) -> Placement {
        let mut p = Placement::default();
        let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        let kubepods = parts.first().is_some_and(|c| c.starts_with("kubepods"));
        for part in &parts {
            if let Some(uid) = kubepods.then(|| pod_uid(part)).flatten() {
                p.pod_uid = Some(uid);
            } else if let Some((runtime, id)) = container_scope(part) {
                p.runtime = Some(runtime.to_string());
                p.container_id = Some(id);
                // A unit seen above the container (a slice's service) is not the process's.
                p.systemd_unit = None;
            } else if kubepods && p.pod_uid.is_some() && p.container_id.is_none() && is_container_id(part) {
                p.container_id = Some(part.to_string());
            } else if p.container_id.is_none() && is_unit_name(part) {
                p.systemd_unit = Some(part.to_string());
            }
        }
        p
    }

    /// For people: `docker 0123456789ab`, `pod 0f2a1b3c containerd 0123456789ab`, `nginx.service`; None
    /// when it names nothing.
    pub fn display(&self) -> Option<String> {
        let short = |s: &str| s.chars().take(12).collect::<String>();
        let mut parts = Vec::new();
        if let Some(uid) = &self.pod_uid {
            parts.push(format!("pod {}", short(uid)));
        }
        if let Some(id) = &self.container_id {
            parts.push(format!(
                "{} {}",
                self.runtime.as_deref().unwrap_or("container"),
                short(id)
            ));
        }
        if let Some(unit) = &self.systemd_unit {
            parts.push(unit.clone());
        }
        (!parts.is_empty()).then(|| parts.join(" "))
    }
}

/// A service or scope unit, in the characters systemd allows in unit names.
fn is_unit_name(s: &str) -> bool {
    [".service", ".scope"].iter().any(|suffix| s.ends_with(suffix))
        && s.len() <= UNIT_MAX
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b":-_.\\@".contains(&b))
}

fn is_container_id(s: &str) -> bool {
    (12..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `docker-<ID>.scope` and the like.
fn container_scope(part: &str) -> Option<(&'static str, String)> {
    let stem = part.strip_suffix(".scope")?;
    RUNTIMES.iter().find_map(|&(prefix, runtime)| {
        let id = stem.strip_prefix(prefix)?;
        is_container_id(id).then(|| (runtime, id.to_string()))
    })
}

/// A kubelet's pod cgroup: `kubepods-burstable-pod<UID with _>.slice` (systemd driver) or `pod<UID>`
/// (cgroupfs driver); the UID with its dashes.
fn pod_uid(part: &str) -> Option<String> {
    let stem = part.strip_suffix(".slice").unwrap_or(part);
    let uid = stem
        .rsplit_once("-pod")
        .map_or_else(|| stem.strip_prefix("pod"), |(_, uid)| Some(uid))?;
    let uid = uid.replace('_', "-");
    let shaped = uid.len() == 36
        && uid.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    shaped.then_some(uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "3f2a1b3c-4d5e-6f70-8192-a3b4c5d6e7f8";
    const ID: &str = "3f4e5d6c7b8a9f0e1d2c3b4a5968778695a4b3c2d1e0f9e8d7c6b5a493827160";

    #[test]
    fn a_pod_under_a_systemd_driven_kubelet() {
        let path = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{ID}.scope",
            UID.replace('-', "_")
        );
        let p = Placement::of_cgroup(&path);
        assert_eq!(p.pod_uid.as_deref(), Some(UID));
        assert_eq!(p.container_id.as_deref(), Some(ID));
        assert_eq!(p.runtime.as_deref(), Some("containerd"));
        assert_eq!(p.systemd_unit, None);
        assert_eq!(p.display().as_deref(), Some("pod 3f2a1b3c-4d5 containerd 3f4e5d6c7b8a"));
        // A guaranteed pod sits right under kubepods.slice.
        let guaranteed = format!(
            "/kubepods.slice/kubepods-pod{}.slice/crio-{ID}.scope",
            UID.replace('-', "_")
        );
        let p = Placement::of_cgroup(&guaranteed);
        assert_eq!((p.pod_uid.as_deref(), p.runtime.as_deref()), (Some(UID), Some("cri-o")));
    }

    #[test]
    fn a_pod_under_a_cgroupfs_driven_kubelet() {
        let p = Placement::of_cgroup(&format!("/kubepods/besteffort/pod{UID}/{ID}"));
        assert_eq!(p.pod_uid.as_deref(), Some(UID));
        assert_eq!(p.container_id.as_deref(), Some(ID));
        assert_eq!(p.runtime, None);
        assert_eq!(p.display().as_deref(), Some("pod 3f2a1b3c-4d5 container 3f4e5d6c7b8a"));
    }

    #[test]
    fn containers_and_services() {
        let docker = Placement::of_cgroup(&format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(docker.display().as_deref(), Some("docker 3f4e5d6c7b8a"));
        assert_eq!(docker.systemd_unit, None);
        let nested = Placement::of_cgroup(&format!(
            "/system.slice/containerd.service/cri-containerd-{ID}.scope/init"
        ));
        assert_eq!(nested.display().as_deref(), Some("containerd 3f4e5d6c7b8a"));
        let podman = "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-0011aabbccdd.scope/container";
        assert_eq!(
            Placement::of_cgroup(podman).display().as_deref(),
            Some("podman 0011aabbccdd")
        );
        let nginx = Placement::of_cgroup("/system.slice/nginx.service");
        assert_eq!(nginx.systemd_unit.as_deref(), Some("nginx.service"));
        assert_eq!(nginx.display().as_deref(), Some("nginx.service"));
        assert_eq!(Placement::of_cgroup("/"), Placement::default());
        assert_eq!(Placement::of_cgroup("/user.slice/user-0.slice"), Placement::default());
    }

    #[test]
    fn parts_of_the_wrong_shape_are_not_taken() {
        // Not a UID, not hexadecimal, outside kubepods.
        assert_eq!(Placement::of_cgroup("/kubepods/podnot-a-uid/abc").pod_uid, None);
        assert_eq!(
            Placement::of_cgroup("/x/docker-\x1b[31mred.scope"),
            Placement::default()
        );
        assert_eq!(
            Placement::of_cgroup(&format!("/elsewhere/pod{UID}/{ID}")),
            Placement::default()
        );
        let long = format!("/system.slice/{}.service", "a".repeat(300));
        assert_eq!(Placement::of_cgroup(&long).systemd_unit, None);
    }
}
