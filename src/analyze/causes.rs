// SPDX-License-Identifier: Apache-2.0
//! Causes within a stage: each CPU sample inside a stage goes to the cause that the frames below its stage
//! frame name (catalogue/causes.rs; analyze/attribution.rs applies the rule to each sample once), and a
//! stage's self CPU is shared out by those samples.
//!
//! The rule: the innermost frame below the stage frame whose name a row lists (the kernel's frames, with
//! --kernel, inside the user ones); memory, locks and the error queue only where no other cause encloses
//! them, since they serve that work. With nothing below the stage frame, the stage function's own code names
//! it. A sample with named frames but no listed one is `other`; one whose frames below the stage are all
//! unnamed is `unattributed`. A sample in tlsprof's own uprobe traps is left out: the probes' calibrated cost
//! is already taken out of the stage's CPU.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

pub use crate::catalogue::causes::Cause;
use crate::catalogue::causes::{is_named, is_probe_frame, Space};
use crate::catalogue::families::cause_of;

/// Frames listed under each cause, most samples first.
const TOP_FRAMES: usize = 5;

/// The cause of one sample and the frame that named it (for `other` and `unattributed`: the innermost
/// frame below the stage frame).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedCause<'a> {
    pub cause: Cause,
    pub frame: &'a str,
}

/// The cause of a sample whose stage frame is `frames[stage_index]`; None for a sample in tlsprof's own
/// uprobe traps.
pub(super) fn attribute<'a>(frames: &'a [String], kernel: &'a [String], stage_index: usize) -> Option<NamedCause<'a>> {
    if kernel.iter().any(|k| is_probe_frame(k)) {
        return None;
    }
    let below = &frames[(stage_index + 1).min(frames.len())..];
    let innermost_first = kernel
        .iter()
        .rev()
        .map(|k| (k.as_str(), Space::Kernel))
        .chain(below.iter().rev().map(|f| (f.as_str(), Space::User)));
    let mut serving: Option<NamedCause> = None;
    for (frame, space) in innermost_first {
        match cause_of(frame, space) {
            Some(cause) if !cause.serves_others() => return Some(NamedCause { cause, frame }),
            Some(cause) if serving.is_none() => serving = Some(NamedCause { cause, frame }),
            _ => {}
        }
    }
    if serving.is_some() {
        return serving;
    }
    let Some(innermost) = below.last() else {
        // The stage function's own code.
        let frame = frames
            .get(stage_index)
            .map_or("", |f| f.split(" [").next().unwrap_or(f));
        let cause = cause_of(frame, Space::User).unwrap_or(Cause::Other);
        return Some(NamedCause { cause, frame });
    };
    Some(match below.iter().rev().find(|f| is_named(f)) {
        Some(named) => NamedCause {
            cause: Cause::Other,
            frame: named,
        },
        None => NamedCause {
            cause: Cause::Unattributed,
            frame: innermost,
        },
    })
}

/// A cause of a stage's (or a call-tree node's) self CPU.
#[derive(Clone, Debug, Serialize)]
pub struct CauseSummary {
    pub name: Cause,
    /// Estimated: the stage's self CPU times the cause's share of its samples.
    pub cpu_ms: f64,
    /// The stage's interval times the share's 95% (Wilson) interval.
    pub cpu_ms_ci95: [f64; 2],
    pub samples: u64,
    /// Of the stage's samples, tlsprof's probe traps left out.
    pub share: f64,
    /// The frames that named it, most samples first; for `unattributed`, the innermost frames below the
    /// stage frame.
    pub top_frames: Vec<FrameCount>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FrameCount {
    pub name: String,
    pub samples: u64,
}

/// Samples of one stage (or call-tree node) by cause and naming frame.
#[derive(Default)]
pub struct CauseCounts {
    /// Samples attributed (probe traps left out).
    pub samples: u64,
    /// Samples in tlsprof's own uprobe traps.
    pub probe_samples: u64,
    by_cause: BTreeMap<Cause, (u64, HashMap<String, u64>)>,
}

impl CauseCounts {
    pub fn add(&mut self, attribution: Option<NamedCause>, count: u64) {
        let Some(a) = attribution else {
            self.probe_samples += count;
            return;
        };
        self.samples += count;
        let (n, frames) = self.by_cause.entry(a.cause).or_default();
        *n += count;
        *frames.entry(a.frame.to_string()).or_default() += count;
    }

    /// The causes, most samples first, with CPU shared out of `self_cpu_ms` (and its interval).
    pub fn summaries(&self, self_cpu_ms: f64, self_ci95: [f64; 2]) -> Vec<CauseSummary> {
        let n = self.samples as f64;
        let mut out: Vec<CauseSummary> = self
            .by_cause
            .iter()
            .map(|(&cause, (count, frames))| {
                let share = *count as f64 / n;
                let (lo, hi) = wilson(*count as f64, n);
                let mut top: Vec<FrameCount> = frames
                    .iter()
                    .map(|(name, &samples)| FrameCount {
                        name: name.clone(),
                        samples,
                    })
                    .collect();
                top.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
                top.truncate(TOP_FRAMES);
                CauseSummary {
                    name: cause,
                    cpu_ms: self_cpu_ms * share,
                    cpu_ms_ci95: [self_ci95[0] * lo, self_ci95[1] * hi],
                    samples: *count,
                    share,
                    top_frames: top,
                }
            })
            .collect();
        out.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.name.cmp(&b.name)));
        out
    }
}

/// 95% Wilson score interval of a share `k` of `n`.
fn wilson(k: f64, n: f64) -> (f64, f64) {
    if n <= 0.0 {
        return (0.0, 0.0);
    }
    let z2 = 1.96f64 * 1.96;
    let p = k / n;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = (z2 / n * (p * (1.0 - p) + z2 / (4.0 * n))).sqrt() / (1.0 + z2 / n);
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn cause(user: &[&str], kernel: &[&str]) -> Option<(Cause, String)> {
        let (user, kernel) = (frames(user), frames(kernel));
        let index = user.iter().rposition(|f| f.ends_with(']') && f.contains(" [")).unwrap();
        attribute(&user, &kernel, index).map(|a| (a.cause, a.frame.to_string()))
    }

    const STAGE: &str = "SSL_do_handshake [handshake]";

    #[test]
    fn innermost_listed_frame_below_the_stage_names_the_cause() {
        // EVP_Q_mac fetching its MAC: the fetch is the lookup's cost, not the MAC's.
        let fetch = [
            "main",
            STAGE,
            "libssl.so.3+0x1",
            "EVP_Q_mac",
            "EVP_MAC_fetch",
            "__strcmp_evex",
        ];
        assert_eq!(cause(&fetch, &[]), Some((Cause::Lookups, "EVP_MAC_fetch".into())));
        let mac = ["main", STAGE, "EVP_Q_mac", "libcrypto.so.3+0x2"];
        assert_eq!(cause(&mac, &[]), Some((Cause::MacHash, "EVP_Q_mac".into())));
        // Frames above the stage frame say nothing about it.
        let above = ["ngx_ssl_handshake", STAGE, "libssl.so.3+0x1"];
        assert_eq!(cause(&above, &[]).unwrap().0, Cause::Unattributed);
    }

    #[test]
    fn memory_and_locks_count_only_outside_other_causes() {
        let lock_in_fetch = [
            STAGE,
            "EVP_MD_fetch",
            "CRYPTO_THREAD_read_lock",
            "__pthread_rwlock_rdlock_full64",
        ];
        assert_eq!(
            cause(&lock_in_fetch, &[]),
            Some((Cause::Lookups, "EVP_MD_fetch".into()))
        );
        let bare_malloc = [STAGE, "libssl.so.3+0x1", "CRYPTO_malloc", "_int_malloc"];
        assert_eq!(cause(&bare_malloc, &[]), Some((Cause::Memory, "_int_malloc".into())));
    }

    #[test]
    fn kernel_frames_name_socket_io_and_probe_traps_are_left_out() {
        let write = [
            STAGE,
            "libssl.so.3+0x1",
            "BIO_ctrl",
            "libcrypto.so.3+0x2",
            "__GI___libc_write",
        ];
        assert_eq!(cause(&write, &[]), Some((Cause::SocketIo, "__GI___libc_write".into())));
        let kernel = [
            "entry_SYSCALL_64",
            "ksys_write",
            "sock_write_iter",
            "tcp_sendmsg",
            "_raw_spin_unlock",
        ];
        assert_eq!(
            cause(&[STAGE, "libssl.so.3+0x1", "libcrypto.so.3+0x2"], &kernel),
            Some((Cause::SocketIo, "tcp_sendmsg".into()))
        );
        // A page fault inside session encoding is the encoding's cost.
        let fault = ["asm_exc_page_fault", "exc_page_fault", "handle_mm_fault"];
        assert_eq!(
            cause(&[STAGE, "i2d_SSL_SESSION", "__memcpy_avx512_unaligned_erms"], &fault),
            Some((Cause::Session, "i2d_SSL_SESSION".into()))
        );
        assert_eq!(
            cause(&[STAGE, "[unwind gap]"], &["asm_exc_debug", "exc_debug_user"]),
            None
        );
    }

    #[test]
    fn named_frames_no_row_lists_are_other_and_unnamed_ones_unattributed() {
        assert_eq!(
            cause(
                &[STAGE, "libssl.so.3+0x1", "some_new_function", "libcrypto.so.3+0x9"],
                &[]
            ),
            Some((Cause::Other, "some_new_function".into()))
        );
        assert_eq!(
            cause(&[STAGE, "libssl.so.3+0x1", "[unwind gap]", "libcrypto.so.3+0x9"], &[]),
            Some((Cause::Unattributed, "libcrypto.so.3+0x9".into()))
        );
        // Nothing below: the stage function's own code.
        assert_eq!(
            cause(&["main", "ossl_statem_accept [handshake]"], &[]),
            Some((Cause::TlsMessages, "ossl_statem_accept".into()))
        );
    }

    #[test]
    fn shares_split_the_stage_cpu_and_probe_samples_stay_apart() {
        let mut counts = CauseCounts::default();
        let f = frames(&[STAGE, "EVP_MD_fetch"]);
        let g = frames(&[STAGE, "RAND_bytes_ex"]);
        counts.add(attribute(&f, &[], 0), 30);
        counts.add(attribute(&g, &[], 0), 10);
        counts.add(None, 5);
        assert_eq!((counts.samples, counts.probe_samples), (40, 5));
        let causes = counts.summaries(80.0, [70.0, 90.0]);
        assert_eq!(causes[0].name, Cause::Lookups);
        assert!((causes[0].cpu_ms - 60.0).abs() < 1e-9);
        assert!((causes[1].cpu_ms - 20.0).abs() < 1e-9);
        let [lo, hi] = causes[0].cpu_ms_ci95;
        assert!(lo < 60.0 && 60.0 < hi && lo >= 0.0 && hi <= 90.0, "{lo} {hi}");
        assert_eq!(causes[0].top_frames[0].name, "EVP_MD_fetch");
        assert_eq!(causes[0].top_frames[0].samples, 30);
    }
}
