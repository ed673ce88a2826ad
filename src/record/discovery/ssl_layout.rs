// SPDX-License-Identifier: Apache-2.0
//! Where an OpenSSL build keeps a connection's handshake state and protocol version in its SSL object, read
//! off the code of its own accessors (Family::state_accessors): each returns one 32-bit field of the object
//! its first argument points to. Offsets differ between releases and builds; the accessors always know them.

use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Instruction, OpKind, Register};

/// Byte offsets in the SSL object: the handshake state, the protocol version, and a word that must be 0 for
/// the object to be a TLS connection (OpenSSL 3.5's object type, which its accessors test first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SslLayout {
    pub state: u32,
    pub version: u32,
    pub guard: Option<u32>,
}

/// Fields farther into the object than this are not taken for an accessor's: the SSL object is a few KiB.
const MAX_OFFSET: u64 = 1 << 16;
/// Instructions decoded at most: an accessor is a handful.
const MAX_INSTRUCTIONS: usize = 32;

/// The layout from the code of the state accessor and the version accessor (each its whole code, with its
/// address): None unless both are read as one load each, guarded alike.
pub fn from_accessors(state: (&[u8], u64), version: (&[u8], u64)) -> Option<SslLayout> {
    let (state, state_guard) = returned_field(state.0, state.1)?;
    let (version, version_guard) = returned_field(version.0, version.1)?;
    (state_guard == version_guard).then_some(SslLayout {
        state,
        version,
        guard: state_guard,
    })
}

/// The offset of the field an accessor returns, and of the word it tests for 0 first if it does. Its code
/// must load the field into EAX from [RDI + offset] right before a return (`xor edi, edi` may come between),
/// once; any other load from [RDI] must be a word tested for 0 whose branch goes to that load.
fn returned_field(code: &[u8], ip: u64) -> Option<(u32, Option<u32>)> {
    let mut decoder = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut insns: Vec<Instruction> = Vec::new();
    while decoder.can_decode() && insns.len() < MAX_INSTRUCTIONS {
        let insn = decoder.decode();
        if insn.is_invalid() {
            break;
        }
        insns.push(insn);
    }
    let returns_after = |i: usize| match insns.get(i + 1) {
        Some(next) if next.flow_control() == FlowControl::Return => true,
        Some(next) if next.code() == Code::Xor_r32_rm32 || next.code() == Code::Xor_rm32_r32 => {
            next.op0_register() == Register::EDI
                && next.op1_register() == Register::EDI
                && insns
                    .get(i + 2)
                    .is_some_and(|n| n.flow_control() == FlowControl::Return)
        }
        _ => false,
    };
    let loads: Vec<(usize, u64)> = insns
        .iter()
        .enumerate()
        .filter_map(|(i, insn)| field_load(insn).map(|d| (i, d)))
        .collect();
    let returning: Vec<&(usize, u64)> = loads.iter().filter(|(i, _)| returns_after(*i)).collect();
    let [&(at, field)] = returning.as_slice() else {
        return None;
    };
    let target = insns[at].ip();
    let mut guard = None;
    for &(i, offset) in loads.iter().filter(|(i, _)| *i != at) {
        // `mov eax, [rdi + g]; test eax, eax; je <the returning load>`: the field is read only where the word
        // at g is 0.
        let tests_zero = insns.get(i + 1).is_some_and(|t| {
            t.code() == Code::Test_rm32_r32 && t.op0_register() == Register::EAX && t.op1_register() == Register::EAX
        });
        let branches_to_field = insns
            .get(i + 2)
            .is_some_and(|j| j.code() == Code::Je_rel8_64 || j.code() == Code::Je_rel32_64)
            && insns[i + 2].near_branch_target() == target;
        if !(tests_zero && branches_to_field) || guard.is_some() {
            return None;
        }
        guard = Some(offset as u32);
    }
    Some((field as u32, guard))
}

/// The offset of `mov eax, dword [rdi + offset]`.
fn field_load(insn: &Instruction) -> Option<u64> {
    let plain = insn.code() == Code::Mov_r32_rm32
        && insn.op0_register() == Register::EAX
        && insn.op1_kind() == OpKind::Memory
        && insn.memory_base() == Register::RDI
        && insn.memory_index() == Register::None
        && insn.segment_prefix() == Register::None;
    let offset = insn.memory_displacement64();
    (plain && offset < MAX_OFFSET).then_some(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    // OpenSSL 3.0 (Debian 12's libssl.so.3): SSL_get_state, SSL_version.
    const GET_STATE_30: &[u8] = &[0x8b, 0x47, 0x5c, 0x31, 0xff, 0xc3];
    const VERSION_30: &[u8] = &[0x8b, 0x07, 0x31, 0xff, 0xc3];

    // OpenSSL 3.5 (Node.js 24): the object's type is tested first; a QUIC object's handshake layer is another
    // object.
    #[rustfmt::skip]
    const GET_STATE_35: &[u8] = &[
        0x48, 0x85, 0xff,                   // test rdi, rdi
        0x74, 0x33,                         // je +0x38
        0x8b, 0x07,                         // mov eax, [rdi]
        0x85, 0xc0,                         // test eax, eax
        0x74, 0x1d,                         // je +0x28
        0xa8, 0x80,                         // test al, 0x80
        0x74, 0x29,                         // je +0x38
        0x55,                               // push rbp
        0x48, 0x89, 0xe5,                   // mov rbp, rsp
        0xe8, 0x98, 0x65, 0xfc, 0xff,       // call ossl_quic_obj_get0_handshake_layer
        0x48, 0x85, 0xc0,                   // test rax, rax
        0x74, 0x13,                         // je +0x30
        0x8b, 0x80, 0xac, 0x00, 0x00, 0x00, // mov eax, [rax + 0xac]
        0x5d,                               // pop rbp
        0xc3,                               // ret
        0x0f, 0x1f, 0x00,                   // nop
        0x8b, 0x87, 0xac, 0x00, 0x00, 0x00, // +0x28: mov eax, [rdi + 0xac]
        0xc3,                               // ret
        0x90,                               // nop
        0x31, 0xc0,                         // +0x30: xor eax, eax
        0x5d,                               // pop rbp
        0xc3,                               // ret
    ];
    #[rustfmt::skip]
    const VERSION_35: &[u8] = &[
        0x48, 0x85, 0xff,                   // test rdi, rdi
        0x74, 0x23,                         // je +0x28
        0x8b, 0x07,                         // mov eax, [rdi]
        0x85, 0xc0,                         // test eax, eax
        0x74, 0x15,                         // je +0x20
        0xa8, 0x80,                         // test al, 0x80
        0x75, 0x29,                         // jne +0x38
        0x83, 0xc0, 0x80,                   // add eax, -0x80
        0x83, 0xf8, 0x01,                   // cmp eax, 1
        0x0f, 0x96, 0xc0,                   // setbe al
        0x0f, 0xb6, 0xc0,                   // movzx eax, al
        0xc3,                               // ret
        0x0f, 0x1f, 0x40, 0x00,             // nop
        0x8b, 0x47, 0x48,                   // +0x20: mov eax, [rdi + 0x48]
        0xc3,                               // ret
    ];

    #[test]
    fn openssl_30_accessors_are_plain_loads() {
        let layout = from_accessors((GET_STATE_30, 0x65d20), (VERSION_30, 0x37b70));
        assert_eq!(
            layout,
            Some(SslLayout {
                state: 0x5c,
                version: 0,
                guard: None
            })
        );
    }

    #[test]
    fn openssl_35_accessors_test_the_object_type_first() {
        let layout = from_accessors((GET_STATE_35, 0x1cbe5a0), (VERSION_35, 0x1c494a0));
        assert_eq!(
            layout,
            Some(SslLayout {
                state: 0xac,
                version: 0x48,
                guard: Some(0)
            })
        );
    }

    #[test]
    fn other_code_is_not_taken_for_an_accessor() {
        // Two loads from the object before a return, neither tested for 0.
        let two_loads = [0x8b, 0x47, 0x08, 0x8b, 0x47, 0x0c, 0xc3];
        assert_eq!(returned_field(&two_loads, 0), None);
        // A load that is not returned.
        let not_returned = [0x8b, 0x47, 0x08, 0x48, 0x89, 0xc7, 0xe8, 0, 0, 0, 0, 0xc3];
        assert_eq!(returned_field(&not_returned, 0), None);
        // Accessors guarded differently do not make one layout.
        assert_eq!(from_accessors((GET_STATE_30, 0), (VERSION_35, 0x1c494a0)), None);
        assert_eq!(returned_field(&[], 0), None);
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzz_config(1))]

        /// A target's code is untrusted input.
        #[test]
        fn fuzz_accessor_code(code in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..96), ip in 0u64..1 << 47) {
            if let Some((field, guard)) = returned_field(&code, ip) {
                proptest::prop_assert!(u64::from(field) < MAX_OFFSET);
                proptest::prop_assert!(guard.is_none_or(|g| u64::from(g) < MAX_OFFSET));
            }
        }
    }
}
