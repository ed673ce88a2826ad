// SPDX-License-Identifier: Apache-2.0
//! Where each CPU sample counts: its stage, its stage frame and the cause the frames below that name, found
//! once per recording. The stages' CPU and causes, the call tree, the flame graph and pprof all read this one
//! attribution, so they place every sample alike.
//!
//! A sample the probes placed (one with a stage path) counts in the innermost stage of its path; one taken
//! while they were detached, in the innermost probed stage function its frames name; else, when the record
//! layer was not probed, in its innermost record-layer frame (SSL_read, SSL_write, ...). A sample of a process
//! counted from the wire alone counts where its innermost JSSE frame says (catalogue/jsse.rs). Its cause: the
//! rule of analyze/causes.rs.

use std::collections::{HashMap, HashSet};

use super::causes::{attribute, NamedCause};
use crate::catalogue::causes::base_name;
use crate::catalogue::{families, jsse, path_stages, Stage};
use crate::model::{Recording, Sample};

/// Where one CPU sample counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place<'a> {
    pub stage: Stage,
    /// The index in the sample's frames of its stage frame.
    pub stage_frame: usize,
    /// What the frames below the stage frame name; None for a sample in tlsprof's own uprobe traps.
    pub cause: Option<NamedCause<'a>>,
}

/// The place of each CPU sample of a recording, in `rec.samples` order; None for a sample outside every stage.
pub struct Attribution<'a> {
    rec: &'a Recording,
    places: Vec<Option<Place<'a>>>,
    /// The targets counted from the wire alone, whose samples their JSSE frames place.
    from_frames: HashSet<u32>,
}

impl<'a> Attribution<'a> {
    pub fn of(rec: &'a Recording) -> Attribution<'a> {
        let stager = Stager::new(rec);
        let places = rec
            .samples
            .iter()
            .map(|s| {
                let (stage, index) = stager.stage_frame(rec, s)?;
                Some(Place {
                    stage,
                    stage_frame: index,
                    cause: attribute(&s.frames, &s.kernel, index),
                })
            })
            .collect();
        Attribution {
            rec,
            places,
            from_frames: stager.from_frames,
        }
    }

    /// Each sample with its place.
    pub fn samples(&self) -> impl Iterator<Item = (&'a Sample, Option<&Place<'a>>)> + '_ {
        self.rec.samples.iter().zip(self.places.iter().map(Option::as_ref))
    }

    /// Whether the samples of `pid` are placed by their JSSE frames: a target counted from the wire alone.
    pub fn from_frames(&self, pid: u32) -> bool {
        self.from_frames.contains(&pid)
    }

    /// The stage each sample counts in.
    pub fn stages(&self) -> Vec<Option<Stage>> {
        self.places.iter().map(|p| p.as_ref().map(|p| p.stage)).collect()
    }
}

/// Finds the stage a CPU sample counts in, probed or not.
struct Stager<'a> {
    /// Processes counted from the wire alone: their samples are placed by the frames of the JDK's own TLS
    /// (catalogue/jsse.rs), nothing of theirs being probed.
    from_frames: HashSet<u32>,
    /// The probed stage functions and the frames that stand for them, by name: they place the samples taken
    /// while the probes were detached; empty when the probes were attached throughout (a sample outside
    /// every stage path was then outside every stage).
    functions: HashMap<&'a str, Stage>,
    /// The record layer's functions of the recording's families (SSL_read, SSL_write, ...), when it was not
    /// probed: its stages come from their frames.
    record_layer: HashMap<&'static str, Stage>,
}

impl<'a> Stager<'a> {
    fn new(rec: &'a Recording) -> Stager<'a> {
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
            from_frames: rec.targets.iter().filter(|t| t.wire_only).map(|t| t.pid).collect(),
            functions,
            record_layer,
        }
    }

    /// The stage a sample counts in and the index of its stage frame: the probes' (`probed`); else, for a
    /// sample the probes did not place (taken while they were detached: default mode), the innermost frame
    /// of a probed stage function or of a stand-in for one (Family::stage_stand_ins), by name; else, when
    /// the record layer was not probed, its innermost record-layer frame.
    fn stage_frame(&self, rec: &Recording, s: &Sample) -> Option<(Stage, usize)> {
        if !s.path.is_empty() {
            return probed(rec, s);
        }
        if self.from_frames.contains(&s.pid) {
            return jsse_frame(s);
        }
        self.by_name(s).or_else(|| self.record_layer(s))
    }

    fn by_name(&self, s: &Sample) -> Option<(Stage, usize)> {
        let found: Vec<(usize, Stage)> = s
            .frames
            .iter()
            .enumerate()
            .filter_map(|(i, f)| self.functions.get(base_name(f)).map(|&st| (i, st)))
            .collect();
        let stages = path_stages(found.iter().map(|&(_, st)| Some(st)));
        let (&(index, _), &Some(stage)) = (found.last()?, stages.last()?) else {
            return None;
        };
        Some((stage, index))
    }

    fn record_layer(&self, s: &Sample) -> Option<(Stage, usize)> {
        s.frames.iter().enumerate().rev().find_map(|(index, f)| {
            let name = f.split(' ').next().unwrap_or("");
            let &stage = self.record_layer.get(name)?;
            Some((stage, index))
        })
    }
}

/// The innermost frame of JSSE code a row of catalogue/jsse.rs names, and its stage.
fn jsse_frame(s: &Sample) -> Option<(Stage, usize)> {
    s.frames
        .iter()
        .enumerate()
        .rev()
        .find_map(|(index, f)| jsse::stage_of(f).map(|stage| (stage, index)))
}

/// The innermost stage frame the probes recorded, tagged ` [stage]`; None for a sample taken outside every
/// probed stage.
fn probed(rec: &Recording, s: &Sample) -> Option<(Stage, usize)> {
    let &Some(stage) = rec.path_stages(&s.path).last()? else {
        return None;
    };
    let tag = format!(" [{}]", stage.name());
    let index = s.frames.iter().rposition(|f| f.ends_with(&tag))?;
    Some((stage, index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::causes::Cause;

    const STAGE: &str = "SSL_do_handshake [handshake]";

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

    /// The stage and stage frame of each sample, after the recording's own.
    fn placed(rec: &Recording, extra: Vec<Sample>) -> Vec<Option<(Stage, usize)>> {
        let mut rec = rec.clone();
        let own = rec.samples.len();
        rec.samples.extend(extra);
        let attribution = Attribution::of(&rec);
        attribution
            .samples()
            .skip(own)
            .map(|(_, p)| p.map(|p| (p.stage, p.stage_frame)))
            .collect()
    }

    #[test]
    fn samples_the_probes_did_not_place_are_placed_by_their_frames() {
        let mut rec = crate::model::tests::sample_recording();
        let outside = sample(
            vec![],
            &["main", "ngx_ssl_handshake", "libssl.so.3+0x1", "EVP_MD_fetch"],
        );
        assert_eq!(
            placed(&rec, vec![outside.clone()]),
            [None],
            "probes attached throughout: outside every stage"
        );
        rec.probing.live_s = 0.5;
        // In a probe window: the probes' innermost stage frame.
        let probed = sample(vec![0, 1], &["main", STAGE, "EVP_DigestSign [sign]", "bn_mul_mont"]);
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
        // A handshake driven from SSL_read is the handshake's; the record layer is what no stage claims.
        let node = sample(vec![], &["uv_run", "SSL_read", "state_machine.part.0", "EVP_MD_fetch"]);
        let read = sample(vec![], &["uv_run", "SSL_read", "libssl.so.3+0x1"]);
        let idle = sample(vec![], &["main", "epoll_wait"]);
        assert_eq!(
            placed(&rec, vec![probed, signing, outside, node, read, idle]),
            [
                Some((Stage::Sign, 2)),
                Some((Stage::Sign, 3)),
                Some((Stage::Handshake, 1)),
                Some((Stage::Handshake, 2)),
                Some((Stage::Read, 1)),
                None
            ]
        );
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
        // QUIC's record layer: quic-go protects its 1-RTT packets itself.
        let quic = "github.com/quic-go/quic-go/internal/handshake.(*updatableAEAD)";
        let quic_read = sample(
            vec![],
            &["quic-go.(*Conn).run", &format!("{quic}.Open"), "crypto/aes.gcm"],
        );
        let quic_write = sample(vec![], &["quic-go.(*Conn).run", &format!("{quic}.EncryptHeader")]);
        let all = vec![go_read.clone(), go_write, quic_read, quic_write];
        // An OpenSSL recording knows only OpenSSL's record layer.
        assert_eq!(placed(&rec, all.clone()), [None, None, None, None]);
        rec.libraries[0].family = "go".into();
        assert_eq!(
            placed(&rec, all),
            [
                Some((Stage::Read, 1)),
                Some((Stage::Write, 1)),
                Some((Stage::Read, 1)),
                Some((Stage::Write, 1))
            ]
        );
        // Probed with --all-probes: the probes place them, not the frames.
        rec.all_probes = true;
        assert_eq!(placed(&rec, vec![go_read]), [None]);
    }

    #[test]
    fn each_place_carries_the_cause_below_its_stage_frame() {
        let rec = crate::model::tests::sample_recording();
        let attribution = Attribution::of(&rec);
        for (s, place) in attribution.samples() {
            let place = place.unwrap();
            assert_eq!(s.frames[place.stage_frame], "EVP_DigestSign [sign]");
            let cause = place.cause.as_ref().unwrap();
            assert_eq!((cause.cause, cause.frame), (Cause::PublicKey, "bn_mul_mont"));
        }
        assert_eq!(attribution.stages(), [Some(Stage::Sign), Some(Stage::Sign)]);
    }
}
