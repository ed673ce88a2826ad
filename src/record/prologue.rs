// SPDX-License-Identifier: Apache-2.0
//! Which first instructions the kernel runs for a uprobe itself and which it single-steps. A uprobe replaces
//! the instruction with a breakpoint; after the handler, x86 Linux emulates pushes, jumps, calls and `nop`,
//! and executes anything else out of line with the trap flag set: a second trap, which in a VM costs several
//! times the first. calibrate.rs measures both kinds; this tells which kind a probed function is.

/// True if the kernel single-steps this first instruction (x86-64 machine code) rather than emulating it.
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

#[cfg(test)]
mod tests {
    use super::*;

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
