// SPDX-License-Identifier: Apache-2.0
//! The stage catalogue: which function marks which stage, one module per TLS library family (families/).
//! Adding a version or function is adding rows; adding a library is adding a family. The cause catalogue
//! (causes.rs) names what a stage's CPU went to, from the frames below it.

pub mod causes;
pub mod families;
pub mod jsse;
pub mod servers;

pub use crate::boundary::Stage;
use crate::boundary::{
    tlsprof_cookie_shift as shift, tlsprof_func_flags as ff, tlsprof_site as site, tlsprof_stage_rules as rules,
};
use families::Calls;

/// Where a function comes from: what its presence says about the binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// OpenSSL's public API: exported by every build.
    Public,
    /// OpenSSL internals: visible only when the binary exports or keeps them (Node.js does).
    Internal,
    /// The application's own TLS glue (nginx).
    App,
    /// Go's standard library and runtime, in a Go executable.
    Go,
}

/// Facts a function carries about the connection it works on (bpf/tlsprof.h, enum tlsprof_func_flags).
pub const SSL_ARG: u32 = ff::FF_SSL_ARG as u32;
pub const SERVER: u32 = ff::FF_ROLE_SERVER as u32;
pub const CLIENT: u32 = ff::FF_ROLE_CLIENT as u32;
pub const PRIVATE_KEY_OP: u32 = ff::FF_PRIVATE_KEY_OP as u32;
pub const PEER_CERT_CHECK: u32 = ff::FF_PEER_CERT_CHECK as u32;
pub const CONN_START: u32 = ff::FF_CONN_START as u32;
pub const SIG_LEN_PTR: u32 = ff::FF_SIG_LEN_PTR as u32;
pub const SIG_LEN_ARG: u32 = ff::FF_SIG_LEN_ARG as u32;
pub const SECRET_LEN_PTR: u32 = ff::FF_SECRET_LEN_PTR as u32;
pub const STEPPED: u32 = ff::FF_STEPPED as u32;
pub const CONN_END: u32 = ff::FF_CONN_END as u32;
pub const SECRET_LEN_RET: u32 = ff::FF_SECRET_LEN_RET as u32;
/// Set in the cookie only where the library's state machine is not probed (`cookie`).
pub const IO_DRIVER: u32 = ff::FF_IO_DRIVER as u32;
pub const GO_ABI: u32 = ff::FF_GO_ABI as u32;
pub const G_RUN: u32 = ff::FF_G_RUN as u32;
pub const G_STOP: u32 = ff::FF_G_STOP as u32;
pub const G_END: u32 = ff::FF_G_END as u32;
pub const SIG_RESULT: u32 = ff::FF_SIG_RESULT as u32;
pub const GO_SIG_STACK_ARG: u32 = ff::FF_GO_SIG_STACK_ARG as u32;
pub const CONN_CURRENT: u32 = ff::FF_CONN_CURRENT as u32;
pub const HS_STEP: u32 = ff::FF_HS_STEP as u32;
pub const HS_FINISH: u32 = ff::FF_HS_FINISH as u32;
pub const FATAL_ALERT: u32 = ff::FF_FATAL_ALERT as u32;
pub const FIRST_FLIGHT: u32 = ff::FF_FIRST_FLIGHT as u32;
pub const SSL_RET: u32 = ff::FF_SSL_RET as u32;
pub const GO_LEARN_RETURN: u32 = ff::FF_GO_LEARN_RETURN as u32;
pub const ANY_PROCESS: u32 = ff::FF_ANY_PROCESS as u32;
pub const QUIC_HELLO: u32 = ff::FF_QUIC_HELLO as u32;

/// Where a probe's cookie keeps the flags above (bpf/tlsprof.h, enum tlsprof_cookie_shift); its site: Site.
pub const COOKIE_FLAGS_SHIFT: u32 = shift::COOKIE_FLAGS_SHIFT as u32;

/// The stage a call counts in, given the stage its enclosing stage frame counts in: a derive inside a stage
/// of `DERIVE_ABSORBED_BY` (bpf/tlsprof.h) is that stage's HKDF. The BPF programs apply the same header
/// rule, so such a derive's secret never names the key exchange.
pub fn stage_within(own: Stage, enclosing: Option<Stage>) -> Stage {
    match enclosing {
        Some(outer) if own == Stage::Derive && rules::DERIVE_ABSORBED_BY & (1 << outer.id()) != 0 => outer,
        _ => own,
    }
}

/// The stage each frame of a stage path counts in, outermost first (see `stage_within`).
pub fn path_stages(own: impl IntoIterator<Item = Option<Stage>>) -> Vec<Option<Stage>> {
    let mut out: Vec<Option<Stage>> = Vec::new();
    for stage in own {
        let enclosing = out.last().copied().flatten();
        out.push(stage.map(|s| stage_within(s, enclosing)));
    }
    out
}

#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub symbol: &'static str,
    /// None: the function only carries facts (role, end of connection) and opens no stage.
    pub stage: Option<Stage>,
    pub origin: Origin,
    /// 1-based argument that is NULL when the call only asks for an output length (not an operation).
    pub length_query_arg: u8,
    pub flags: u32,
    /// Called many times per handshake or on every request: each probe hit costs microseconds, so it is
    /// attached only with --all-probes, or (IO_DRIVER rows) once a process's handshakes are seen to run
    /// inside them.
    pub frequent: bool,
}

pub(crate) const fn row(symbol: &'static str, stage: Stage, origin: Origin, flags: u32) -> Row {
    Row {
        symbol,
        stage: Some(stage),
        origin,
        length_query_arg: 0,
        flags,
        frequent: false,
    }
}

/// An operation whose output buffer (argument 2) is NULL on the length query libssl makes first.
pub(crate) const fn op(symbol: &'static str, stage: Stage, flags: u32) -> Row {
    Row {
        symbol,
        stage: Some(stage),
        origin: Origin::Public,
        length_query_arg: 2,
        flags,
        frequent: false,
    }
}

pub(crate) const fn fact(symbol: &'static str, flags: u32) -> Row {
    Row {
        symbol,
        stage: None,
        origin: Origin::Public,
        length_query_arg: 0,
        flags,
        frequent: false,
    }
}

/// A library's own function (Origin::Internal) that only tells a fact: no stage, entry only.
pub(crate) const fn internal_fact(symbol: &'static str, flags: u32) -> Row {
    Row {
        origin: Origin::Internal,
        ..fact(symbol, flags)
    }
}

pub(crate) const fn frequent(symbol: &'static str, stage: Stage, flags: u32) -> Row {
    Row {
        symbol,
        stage: Some(stage),
        origin: Origin::Public,
        length_query_arg: 0,
        flags,
        frequent: true,
    }
}

/// Where a probe sits in its function (bpf/tlsprof.h, enum tlsprof_site).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site {
    Entry,
    /// A return instruction or a jump out of Go code: an entry-style probe that closes the call.
    Exit,
    /// Where a direct call of Go code has returned, in its caller: the exit of a function whose every call
    /// is known, without a return instruction's single step.
    Returned,
    /// Where a caller learned while recording resumes: the exit of whichever Go function returned there.
    Learned,
}

impl Site {
    const ALL: [Site; 4] = [Site::Entry, Site::Exit, Site::Returned, Site::Learned];

    fn id(self) -> u64 {
        match self {
            Site::Entry => site::SITE_ENTRY,
            Site::Exit => site::SITE_EXIT,
            Site::Returned => site::SITE_RETURNED,
            Site::Learned => site::SITE_LEARNED,
        }
    }

    /// The site a probe's cookie names.
    pub fn of_cookie(cookie: u64) -> Option<Site> {
        let id = cookie >> shift::COOKIE_SITE_SHIFT;
        Site::ALL.into_iter().find(|s| s.id() == id)
    }
}

/// Builds the BPF attach cookie of a probe (bpf/tlsprof.h, COOKIE_*) of a function its family calls as
/// `calls` says; `stepped`: see record/discovery/prologue.rs. `state_machine_probed`: the library's internal handshake
/// functions are probed (Node.js), so a handshake inside SSL_read/SSL_write is seen there, and those are
/// plain record-layer calls.
pub fn cookie(func_id: u16, row: &Row, calls: Calls, stepped: bool, state_machine_probed: bool, at: Site) -> u64 {
    let stage = row.stage.map_or(0, |s| u64::from(s.id()));
    let mut flags = row.flags | calls.cookie_flags() | if stepped { STEPPED } else { 0 };
    if state_machine_probed {
        flags &= !IO_DRIVER;
    }
    u64::from(func_id)
        | stage << shift::COOKIE_STAGE_SHIFT
        | u64::from(row.length_query_arg) << shift::COOKIE_NULL_ARG_SHIFT
        | u64::from(flags) << shift::COOKIE_FLAGS_SHIFT
        | at.id() << shift::COOKIE_SITE_SHIFT
}

/// The cookie of a probe whose link is its file's in every process that maps it (FF_ANY_PROCESS).
pub fn any_process(cookie: u64) -> u64 {
    cookie | u64::from(ANY_PROCESS) << shift::COOKIE_FLAGS_SHIFT
}

/// The cookie of an entry probe of Go code that reports where it is called from (FF_GO_LEARN_RETURN).
pub fn learning_returns(entry_cookie: u64) -> u64 {
    entry_cookie | u64::from(GO_LEARN_RETURN) << shift::COOKIE_FLAGS_SHIFT
}

/// The cookie of a probe where a learned caller resumes: it names no function, it ends the call that returned.
pub fn learned_site_cookie() -> u64 {
    u64::from(GO_ABI) << shift::COOKIE_FLAGS_SHIFT | Site::Learned.id() << shift::COOKIE_SITE_SHIFT
}

#[cfg(test)]
mod tests {
    use super::families::{go, openssl, BUILT_IN};
    use super::*;

    #[test]
    fn every_stage_has_a_public_marker() {
        for stage in Stage::ALL {
            assert!(
                openssl::ROWS
                    .iter()
                    .any(|r| r.stage == Some(stage) && r.origin == Origin::Public),
                "{} has no function in OpenSSL's public API",
                stage.name()
            );
        }
    }

    #[test]
    fn cookie_packs_the_header_layout() {
        let find = |rows: &'static [Row], symbol: &str| rows.iter().find(|r| r.symbol == symbol).unwrap();
        let r = find(openssl::ROWS, "EVP_PKEY_decrypt");
        let c = cookie(513, r, Calls::Native, false, false, Site::Entry);
        assert_eq!(c & 0xffff, 513);
        assert_eq!((c >> 16) & 0xff, u64::from(Stage::Derive.id()));
        assert_eq!((c >> 24) & 0xff, 2);
        assert_eq!((c >> 32) & 0xfff_ffff, u64::from(PRIVATE_KEY_OP));
        assert_eq!(c >> 60, 0);
        let stepped = cookie(513, r, Calls::Native, true, false, Site::Entry);
        assert_eq!((stepped >> 32) & 0xfff_ffff, u64::from(PRIVATE_KEY_OP | STEPPED));
        let exit = cookie(
            7,
            find(go::ROWS, "crypto/ecdsa.(*PrivateKey).Sign"),
            Calls::GoRegisters,
            false,
            false,
            Site::Exit,
        );
        assert_eq!(exit >> 60, 1);
        assert_eq!(
            (exit >> 32) & 0xfff_ffff,
            u64::from(PRIVATE_KEY_OP | SIG_RESULT | GO_ABI)
        );
        let end = cookie(
            8,
            find(go::ROWS, "runtime.goexit1"),
            Calls::GoRegisters,
            false,
            false,
            Site::Entry,
        );
        assert_eq!((end >> 32) & 0xfff_ffff, u64::from(G_END | GO_ABI));
        assert_eq!(end >> 60, 0);
        for at in Site::ALL {
            assert_eq!(Site::of_cookie(cookie(8, r, Calls::Native, true, false, at)), Some(at));
        }
        assert_eq!(Site::of_cookie(4 << 60), None);
        assert_eq!(Site::of_cookie(learned_site_cookie()), Some(Site::Learned));
        assert_eq!(learned_site_cookie() & 0xffff_ffff, 0);
        let learns = learning_returns(end);
        assert_eq!((learns >> 32) & 0xfff_ffff, u64::from(G_END | GO_ABI | GO_LEARN_RETURN));
    }

    #[test]
    fn function_flags_fit_the_cookie() {
        let all = [
            SSL_ARG,
            SERVER,
            CLIENT,
            PRIVATE_KEY_OP,
            PEER_CERT_CHECK,
            CONN_START,
            SIG_LEN_PTR,
            SIG_LEN_ARG,
            SECRET_LEN_PTR,
            STEPPED,
            CONN_END,
            SECRET_LEN_RET,
            IO_DRIVER,
            GO_ABI,
            G_RUN,
            G_STOP,
            G_END,
            SIG_RESULT,
            GO_SIG_STACK_ARG,
            CONN_CURRENT,
            HS_STEP,
            HS_FINISH,
            FATAL_ALERT,
            FIRST_FLIGHT,
            SSL_RET,
            GO_LEARN_RETURN,
        ];
        let width = shift::COOKIE_SITE_SHIFT - shift::COOKIE_FLAGS_SHIFT;
        let mut seen = 0;
        for flag in all {
            assert_eq!(flag.count_ones(), 1);
            assert_eq!(seen & flag, 0, "flag {flag:#x} used twice");
            assert!(
                u64::from(flag) < 1 << width,
                "flag {flag:#x} past the cookie's flags field"
            );
            seen |= flag;
        }
        // A family's calling convention is the family's to set, never a row's.
        for f in BUILT_IN {
            assert!(f.rows().iter().all(|r| r.flags & GO_ABI == 0), "{}", f.id());
        }
    }

    #[test]
    fn stage_names_round_trip_through_json() {
        for stage in Stage::ALL {
            let json = serde_json::to_string(&stage).unwrap();
            assert_eq!(json, format!("\"{}\"", stage.name()));
            assert_eq!(serde_json::from_str::<Stage>(&json).unwrap(), stage);
        }
    }

    #[test]
    fn derive_inside_the_key_schedule_is_key_schedule_work() {
        use Stage::*;
        assert_eq!(stage_within(Derive, Some(KeySchedule)), KeySchedule);
        assert_eq!(stage_within(Derive, Some(Resume)), Resume);
        // The key exchange itself: ssl_derive > EVP_PKEY_derive, or straight from the handshake.
        assert_eq!(stage_within(Derive, Some(Derive)), Derive);
        assert_eq!(stage_within(Derive, Some(Handshake)), Derive);
        assert_eq!(stage_within(Sign, Some(KeySchedule)), Sign);
        // ssl_derive > tls13_generate_handshake_secret > EVP_PKEY_derive (1.1.1's HKDF-Extract).
        let path = path_stages([Some(Handshake), Some(Derive), Some(KeySchedule), Some(Derive)]);
        assert_eq!(
            path,
            vec![Some(Handshake), Some(Derive), Some(KeySchedule), Some(KeySchedule)]
        );
    }
}
