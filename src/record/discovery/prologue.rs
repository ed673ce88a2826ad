// SPDX-License-Identifier: Apache-2.0
//! Where a probe on a function sits, and whether the kernel single-steps the instruction there. A uprobe
//! replaces an instruction with a breakpoint; after the handler, x86 Linux emulates pushes, jumps, calls and
//! `nop`, and executes anything else out of line with the trap flag set: a second trap, which in a VM costs
//! several times the first. calibrate.rs measures both kinds.

use iced_x86::{Decoder, DecoderOptions, FlowControl, InstructionInfo, InstructionInfoFactory, OpAccess, Register};

/// True if the kernel single-steps this instruction (x86-64 machine code) rather than emulating it.
/// Unknown or prefixed forms count as stepped: the dearer cost is the safe one to budget with.
pub fn stepped(code: &[u8]) -> bool {
    !matches!(
        code,
        // push %rax..%rdi, and %r8..%r15 with REX.B.
        [0x50..=0x57, ..]
            | [0x41, 0x50..=0x57, ..]
            // nop, jmp rel8, jmp rel32, call rel32, jcc rel8, jcc rel32.
            | [0x90, ..]
            | [0xeb, ..]
            | [0xe9, ..]
            | [0xe8, ..]
            | [0x70..=0x7f, ..]
            | [0x0f, 0x80..=0x8f, ..]
    )
}

/// Where to probe a function whose code starts with `code`, as an offset from its start, and whether the
/// instruction there is single-stepped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeSite {
    pub offset: usize,
    pub stepped: bool,
}

/// The first instruction, unless the kernel would single-step it and it, and the few after it up to one the
/// kernel emulates, only read registers and memory, set flags and write none but the C convention's scratch
/// registers that carry no argument (RAX, R10, R11)
/// (`cmp`, `test`, `endbr64`, a long `nop`, `mov (%rdi),%rax`: Debian's EVP_PKEY_keygen opens with `cmpl`,
/// every function of a CET build with `endbr64`, a Rust trait method often with a load into RAX) while the
/// next one is emulated. There every call passes (the instructions before it do not branch), and the arguments
/// and the stack are as at entry: an entry probe reads the same arguments, and a return probe finds the
/// return address at the stack pointer. One trap instead of two. (Go's register ABI passes its first argument
/// in RAX: its code never comes here, gobin.rs places its probes.)
pub fn probe_site(code: &[u8]) -> ProbeSite {
    let reads_only = |access: OpAccess| matches!(access, OpAccess::Read | OpAccess::CondRead | OpAccess::NoMemAccess);
    let scratch = |reg: Register| matches!(reg.full_register(), Register::RAX | Register::R10 | Register::R11);
    let inert = |info: &InstructionInfo| {
        info.used_registers()
            .iter()
            .all(|r| reads_only(r.access()) || scratch(r.register()))
            && info.used_memory().iter().all(|m| reads_only(m.access()))
    };
    match first_emulated(code, MAX_SKIPPED, inert) {
        Some(offset) => ProbeSite { offset, stepped: false },
        None => ProbeSite {
            offset: 0,
            stepped: true,
        },
    }
}

/// Instructions looked past at most, to the first one the kernel emulates.
const MAX_SKIPPED: usize = 4;

/// The offset of the first instruction of `code` the kernel emulates, looking past at most `max_past` others,
/// each of which must run straight on and pass `passable`. None when there is none so.
pub fn first_emulated(code: &[u8], max_past: usize, passable: impl Fn(&InstructionInfo) -> bool) -> Option<usize> {
    let mut decoder = Decoder::new(64, code, DecoderOptions::NONE);
    let mut factory = InstructionInfoFactory::new();
    let mut at = 0;
    for _ in 0..=max_past {
        if !stepped(code.get(at..)?) {
            return Some(at);
        }
        let insn = decoder.decode();
        if insn.is_invalid() || insn.flow_control() != FlowControl::Next || !passable(factory.info(&insn)) {
            return None;
        }
        at += insn.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(offset: usize, stepped: bool) -> ProbeSite {
        ProbeSite { offset, stepped }
    }

    #[test]
    fn a_stepped_first_instruction_that_only_reads_is_skipped_onto_an_emulated_one() {
        // Debian's OpenSSL 3.0 EVP_PKEY_keygen: cmpl $0x4,(%rdi); jne rel8.
        assert_eq!(probe_site(&[0x83, 0x3f, 0x04, 0x75, 0x0b]), site(3, false));
        // Its SSL_free: test %rdi,%rdi; je rel32; and Node.js 16's: test; je rel8.
        assert_eq!(
            probe_site(&[0x48, 0x85, 0xff, 0x0f, 0x84, 0x97, 3, 0, 0]),
            site(3, false)
        );
        assert_eq!(probe_site(&[0x48, 0x85, 0xff, 0x74, 0x16, 0xb8]), site(3, false));
        // A CET build: endbr64; push %rbp.
        assert_eq!(probe_site(&[0xf3, 0x0f, 0x1e, 0xfa, 0x55]), site(4, false));
        // webpki's AwsLcRsAlgorithm::verify_signature: mov (%rdi),%rax; mov 0x8(%rdi),%r10; cmp $0x10,%r10;
        // je rel32. RAX and R10 carry no argument.
        assert_eq!(
            probe_site(&[0x48, 0x8b, 0x07, 0x4c, 0x8b, 0x57, 0x08, 0x49, 0x83, 0xfa, 0x10, 0x0f, 0x84, 0xbd, 0, 0]),
            site(11, false)
        );
    }

    #[test]
    fn the_probe_stays_on_the_first_instruction_otherwise() {
        // Emulated already: push %rbx.
        assert_eq!(probe_site(&[0x53, 0x48, 0x83, 0xec]), site(0, false));
        // The first one moves the stack (sub $0x18,%rsp) or writes an argument's register (mov %rax,%rdi).
        assert_eq!(probe_site(&[0x48, 0x83, 0xec, 0x18, 0x53]), site(0, true));
        assert_eq!(probe_site(&[0x48, 0x89, 0xc7, 0x53]), site(0, true));
        // It writes memory: addl $1,(%rdi).
        assert_eq!(probe_site(&[0x83, 0x07, 0x01, 0x53]), site(0, true));
        // The next one is stepped too: test %rdi,%rdi; mov $-1,%eax.
        assert_eq!(
            probe_site(&[0x48, 0x85, 0xff, 0xb8, 0xff, 0xff, 0xff, 0xff]),
            site(0, true)
        );
        // Nothing after it in the bytes read, or nothing decodable.
        assert_eq!(probe_site(&[0x48, 0x85, 0xff]), site(0, true));
        assert_eq!(probe_site(&[0x0f, 0xff]), site(0, true));
        assert_eq!(probe_site(&[]), site(0, true));
    }

    #[test]
    fn pushes_and_branches_are_emulated_everything_else_stepped() {
        // Prologues of Debian's OpenSSL 3.0: EVP_PKEY_derive, EVP_DigestSign, EVP_PKEY_keygen, SSL_read.
        assert!(!stepped(&[0x53, 0x48, 0x83, 0xec]));
        assert!(!stepped(&[0x41, 0x54, 0x49, 0x89]));
        assert!(stepped(&[0x83, 0x3f, 0x04]));
        assert!(stepped(&[0x48, 0x83, 0xec, 0x18]));
        // endbr64, as every function of a CET-enabled build begins.
        assert!(stepped(&[0xf3, 0x0f, 0x1e, 0xfa]));
        assert!(!stepped(&[0xe9, 0, 0, 0, 0]));
        assert!(!stepped(&[0x0f, 0x84, 0, 0, 0, 0]));
        assert!(stepped(&[0x0f, 0x1f, 0x44, 0x00]));
        assert!(stepped(&[]));
    }
}
