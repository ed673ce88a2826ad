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

/// Where an entry-only probe on a function that takes a pointer in %rdi can sit instead of its first
/// instruction: past a leading `test %rdi,%rdi; je ...` (SSL_free's NULL check in Debian's libssl), when the
/// instruction there is emulated and the first one is not. %rdi and the stack are as at entry there, and a
/// NULL call has nothing to report. Returns the offset from the function's start.
pub fn past_null_check(code: &[u8]) -> Option<usize> {
    let after = match code {
        [0x48, 0x85, 0xff, 0x74, _, ..] => 5,
        [0x48, 0x85, 0xff, 0x0f, 0x84, _, _, _, _, ..] => 9,
        _ => return None,
    };
    (stepped(code) && code.len() > after && !stepped(&code[after..])).then_some(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_probes_skip_a_null_check_only_onto_an_emulated_instruction() {
        // Debian's OpenSSL 3.0 SSL_free: test %rdi,%rdi; je rel32; push %r13.
        let ssl_free = [0x48, 0x85, 0xff, 0x0f, 0x84, 0x97, 0x03, 0x00, 0x00, 0x41, 0x55];
        assert_eq!(past_null_check(&ssl_free), Some(9));
        assert_eq!(past_null_check(&[0x48, 0x85, 0xff, 0x74, 0x16, 0x53]), Some(5));
        // Node.js 16's: test; je rel8; mov $-1,%eax, stepped either way.
        assert_eq!(past_null_check(&[0x48, 0x85, 0xff, 0x74, 0x16, 0xb8, 0xff]), None);
        assert_eq!(past_null_check(&[0x53, 0x48, 0x85, 0xff]), None);
        assert_eq!(past_null_check(&ssl_free[..9]), None);
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
