// SPDX-License-Identifier: Apache-2.0
//! Causes within a stage: each CPU sample inside a stage goes to the cause that the frames below its stage
//! frame name (catalogue/causes.rs), and a stage's self CPU is shared out by those samples.
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
use crate::catalogue::causes::{base_name, is_named, is_probe_frame, Space};
use crate::catalogue::families::{self, cause_of};
use crate::catalogue::Stage;
use crate::model::{Recording, Sample};

/// Frames listed under each cause, most samples first.
const TOP_FRAMES: usize = 5;

/// The cause of one sample and the frame that named it (for `other` and `unattributed`: the innermost
/// frame below the stage frame).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attribution<'a> {
    pub cause: Cause,
    pub frame: &'a str,
}

/// Where a sample counts: its stage, and the index in its frames of the stage frame.
pub struct StageFrame {
    pub stage: Stage,
    pub index: usize,
}

/// Finds the stage a CPU sample counts in, probed or not.
pub struct Stager<'a> {
    /// The probed stage functions and the frames that stand for them, by name: they place the samples taken
    /// while the probes were detached; empty when the probes were attached throughout (a sample outside
    /// every stage path was then outside every stage).
    functions: HashMap<&'a str, Stage>,
    /// The record layer's functions of the recording's families (SSL_read, SSL_write, ...), when it was not
    /// probed: its stages come from their frames.
    record_layer: HashMap<&'static str, Stage>,
}

impl<'a> Stager<'a> {
    pub fn new(rec: &'a Recording) -> Stager<'a> {
        let families = families::of_ids(rec.libraries.iter().map(|l| l.family.as_str()));
        let mut functions: HashMap<&str, Stage> = HashMap::new();
        if rec.probed_part_time() {
            functions.extend(families.iter().flat_map(|f| f.stage_stand_ins()).copied());
            functions.extend(
                rec.functions
                    .iter()
                    .filter_map(|f| f.stage.map(|s| (f.name.as_str(), s))),
            );
        }
        let record_layer = if rec.all_probes {
            HashMap::new()
        } else {
            families.iter().flat_map(|f| f.record_layer()).copied().collect()
        };
        Stager {
            functions,
            record_layer,
        }
    }

    /// The innermost stage frame the probes recorded, tagged ` [stage]`; None for a sample taken outside
    /// every probed stage, or while the probes were detached.
    pub fn probed(rec: &Recording, s: &Sample) -> Option<StageFrame> {
        let &Some(stage) = rec.path_stages(&s.path).last()? else {
            return None;
        };
        let tag = format!(" [{}]", stage.name());
        let index = s.frames.iter().rposition(|f| f.ends_with(&tag))?;
        Some(StageFrame { stage, index })
    }

    /// The stage a sample counts in: the probes' (`probed`); else, for a sample the probes did not place
    /// (taken while they were detached: default mode), the innermost frame of a probed stage function or of
    /// a stand-in for one (Family::stage_stand_ins), by name; else, when the record layer was not probed, its
    /// innermost record-layer frame (SSL_read, SSL_write, ...).
    pub fn stage_frame(&self, rec: &Recording, s: &Sample) -> Option<StageFrame> {
        if !s.path.is_empty() {
            return Self::probed(rec, s);
        }
        self.by_name(s).or_else(|| self.record_layer(s))
    }

    fn by_name(&self, s: &Sample) -> Option<StageFrame> {
        let found: Vec<(usize, Stage)> = s
            .frames
            .iter()
            .enumerate()
            .filter_map(|(i, f)| self.functions.get(base_name(f)).map(|&st| (i, st)))
            .collect();
        let stages = crate::catalogue::path_stages(found.iter().map(|&(_, st)| Some(st)));
        let (&(index, _), &Some(stage)) = (found.last()?, stages.last()?) else {
            return None;
        };
        Some(StageFrame { stage, index })
    }

    fn record_layer(&self, s: &Sample) -> Option<StageFrame> {
        s.frames.iter().enumerate().rev().find_map(|(index, f)| {
            let name = f.split(' ').next().unwrap_or("");
            let &stage = self.record_layer.get(name)?;
            Some(StageFrame { stage, index })
        })
    }
}

/// The cause of a sample whose stage frame is `frames[stage_index]`; None for a sample in tlsprof's own
/// uprobe traps.
pub fn attribute<'a>(frames: &'a [String], kernel: &'a [String], stage_index: usize) -> Option<Attribution<'a>> {
    if kernel.iter().any(|k| is_probe_frame(k)) {
        return None;
    }
    let below = &frames[(stage_index + 1).min(frames.len())..];
    let innermost_first = kernel
        .iter()
        .rev()
        .map(|k| (k.as_str(), Space::Kernel))
        .chain(below.iter().rev().map(|f| (f.as_str(), Space::User)));
    let mut serving: Option<Attribution> = None;
    for (frame, space) in innermost_first {
        match cause_of(frame, space) {
            Some(cause) if !cause.serves_others() => return Some(Attribution { cause, frame }),
            Some(cause) if serving.is_none() => serving = Some(Attribution { cause, frame }),
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
        return Some(Attribution { cause, frame });
    };
    Some(match below.iter().rev().find(|f| is_named(f)) {
        Some(named) => Attribution {
            cause: Cause::Other,
            frame: named,
        },
        None => Attribution {
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
    pub fn add(&mut self, attribution: Option<Attribution>, count: u64) {
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

/// Samples per stage by cause, over the whole recording (samples cover it all, probed or not).
pub fn by_stage(rec: &Recording) -> BTreeMap<Stage, CauseCounts> {
    let stager = Stager::new(rec);
    let mut out: BTreeMap<Stage, CauseCounts> = BTreeMap::new();
    for s in &rec.samples {
        if let Some(sf) = stager.stage_frame(rec, s) {
            out.entry(sf.stage)
                .or_default()
                .add(attribute(&s.frames, &s.kernel, sf.index), s.count);
        }
    }
    out
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

    fn sample(path: Vec<u16>, frames: &[&str]) -> Sample {
        Sample {
            pid: 10,
            path,
            frames: frames.iter().map(|s| s.to_string()).collect(),
            kernel: Vec::new(),
            complete: true,
            count: 1,
        }
    }

    #[test]
    fn samples_the_probes_did_not_place_are_placed_by_their_frames() {
        let mut rec = crate::model::tests::sample_recording();
        let outside = sample(
            vec![],
            &["main", "ngx_ssl_handshake", "libssl.so.3+0x1", "EVP_MD_fetch"],
        );
        assert!(
            Stager::new(&rec).stage_frame(&rec, &outside).is_none(),
            "probes attached throughout: outside every stage"
        );
        rec.probing.live_s = 0.5;
        let stager = Stager::new(&rec);
        let place = |s: &Sample| stager.stage_frame(&rec, s).map(|sf| (sf.stage, sf.index));
        // In a probe window: the probes' innermost stage frame.
        let probed = sample(vec![0, 1], &["main", STAGE, "EVP_DigestSign [sign]", "bn_mul_mont"]);
        assert_eq!(place(&probed), Some((Stage::Sign, 2)));
        // Outside the windows: a probed function by name, or nginx's caller of SSL_do_handshake's tail call.
        let signing = sample(
            vec![],
            &[
                "main",
                "ngx_ssl_handshake",
                "libssl.so.3+0x1",
                "EVP_DigestSignFinal",
                "x",
            ],
        );
        assert_eq!(place(&signing), Some((Stage::Sign, 3)));
        let lookup = sample(
            vec![],
            &["main", "ngx_ssl_handshake", "libssl.so.3+0x1", "EVP_MD_fetch"],
        );
        assert_eq!(place(&lookup), Some((Stage::Handshake, 1)));
        // A handshake driven from SSL_read is the handshake's; the record layer is what no stage claims.
        let node = sample(vec![], &["uv_run", "SSL_read", "state_machine.part.0", "EVP_MD_fetch"]);
        assert_eq!(place(&node), Some((Stage::Handshake, 2)));
        let read = sample(vec![], &["uv_run", "SSL_read", "libssl.so.3+0x1"]);
        assert_eq!(place(&read), Some((Stage::Read, 1)));
        assert!(place(&sample(vec![], &["main", "epoll_wait"])).is_none());
    }

    #[test]
    fn each_family_s_record_layer_is_sampled_as_read_and_write() {
        let mut rec = crate::model::tests::sample_recording();
        let go_read = sample(
            vec![],
            &[
                "net/http.(*conn).serve",
                "crypto/tls.(*Conn).Read",
                "crypto/tls.(*halfConn).decrypt",
            ],
        );
        let go_write = sample(vec![], &["main.handler", "crypto/tls.(*Conn).Write", "syscall.write"]);
        let place = |rec: &Recording, s: &Sample| Stager::new(rec).stage_frame(rec, s).map(|sf| (sf.stage, sf.index));
        // An OpenSSL recording knows only OpenSSL's record layer.
        assert_eq!(place(&rec, &go_read), None);
        rec.libraries[0].family = "go".into();
        assert_eq!(place(&rec, &go_read), Some((Stage::Read, 1)));
        assert_eq!(place(&rec, &go_write), Some((Stage::Write, 1)));
        // Probed with --all-probes: the probes place them, not the frames.
        rec.all_probes = true;
        assert_eq!(place(&rec, &go_read), None);
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
