// SPDX-License-Identifier: Apache-2.0
//! The stage catalogue: which function marks which stage, one table per TLS library family. Adding a
//! library, version or function is adding rows. The cause catalogue (causes.rs) names what a stage's CPU
//! went to, from the frames below it.

pub mod causes;
pub mod openssl;

pub use crate::boundary::Stage;
use crate::boundary::{tlsprof_cookie_shift as shift, tlsprof_func_flags as ff, tlsprof_stage_rules as rules};

/// Where a function comes from: what its presence says about the binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// OpenSSL's public API: exported by every build.
    Public,
    /// OpenSSL internals: visible only when the binary exports or keeps them (Node.js does).
    Internal,
    /// The application's own TLS glue (nginx).
    App,
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

/// Every row of every library family.
pub fn rows() -> impl Iterator<Item = &'static Row> {
    openssl::ROWS.iter()
}

/// Builds the BPF attach cookie of a function (bpf/tlsprof.h, COOKIE_*); `stepped`: see record/prologue.rs.
/// `state_machine_probed`: the library's internal handshake functions are probed (Node.js), so a handshake
/// inside SSL_read/SSL_write is seen there, and those are plain record-layer calls.
pub fn cookie(func_id: u16, row: &Row, stepped: bool, state_machine_probed: bool) -> u64 {
    let stage = row.stage.map_or(0, |s| u64::from(s.id()));
    let mut flags = row.flags | if stepped { STEPPED } else { 0 };
    if state_machine_probed {
        flags &= !IO_DRIVER;
    }
    u64::from(func_id)
        | stage << shift::COOKIE_STAGE_SHIFT
        | u64::from(row.length_query_arg) << shift::COOKIE_NULL_ARG_SHIFT
        | u64::from(flags) << shift::COOKIE_FLAGS_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn find(symbol: &str) -> Option<&'static Row> {
        rows().find(|r| r.symbol == symbol)
    }

    #[test]
    fn symbols_are_unique() {
        let mut seen = HashSet::new();
        for r in rows() {
            assert!(seen.insert(r.symbol), "{} listed twice", r.symbol);
        }
    }

    #[test]
    fn every_stage_has_a_public_marker() {
        for stage in Stage::ALL {
            assert!(
                rows().any(|r| r.stage == Some(stage) && r.origin == Origin::Public),
                "{} has no function in the public API",
                stage.name()
            );
        }
    }

    #[test]
    fn cookie_packs_the_header_layout() {
        let r = find("EVP_PKEY_decrypt").unwrap();
        let c = cookie(513, r, false, false);
        assert_eq!(c & 0xffff, 513);
        assert_eq!((c >> 16) & 0xff, u64::from(Stage::Derive.id()));
        assert_eq!((c >> 24) & 0xff, 2);
        assert_eq!((c >> 32) & 0xffff, u64::from(PRIVATE_KEY_OP));
        let stepped = cookie(513, r, true, false);
        assert_eq!((stepped >> 32) & 0xffff, u64::from(PRIVATE_KEY_OP | STEPPED));
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

    #[test]
    fn record_layer_is_probed_only_on_request() {
        for r in rows().filter(|r| matches!(r.stage, Some(Stage::Read | Stage::Write))) {
            assert!(r.frequent, "{} would cost a probe hit on every request", r.symbol);
        }
    }
}
