// SPDX-License-Identifier: Apache-2.0
//! The generated skeleton of bpf/tlsprof.bpf.c, and the boundary types of bpf/tlsprof.h.
#![allow(clippy::all, non_camel_case_types, non_upper_case_globals, dead_code)]

include!(concat!(env!("OUT_DIR"), "/tlsprof.skel.rs"));

// SAFETY: plain C structs of integers, valid for any bit pattern.
unsafe impl plain::Plain for types::tree_key {}
unsafe impl plain::Plain for types::tree_val {}
unsafe impl plain::Plain for types::target_state {}
unsafe impl plain::Plain for types::handshake_event {}
unsafe impl plain::Plain for types::hello_event {}
unsafe impl plain::Plain for types::wire_event {}
unsafe impl plain::Plain for types::go_return_event {}
unsafe impl plain::Plain for types::go_calls_key {}
unsafe impl plain::Plain for types::stack_sample {}
unsafe impl plain::Plain for types::trap_sample {}
unsafe impl plain::Plain for types::ssl_layout {}
unsafe impl plain::Plain for types::process_event {}
unsafe impl plain::Plain for types::file_key {}

/// Copies the fixed head of a variable-length ring-buffer record (the fields before its byte array) into
/// `out`; the bytes stay in `data`. False when the record is shorter than the head.
pub fn copy_head<T: plain::Plain>(out: &mut T, data: &[u8], head_len: usize) -> bool {
    let Some(head) = data.get(..head_len) else { return false };
    // SAFETY: T is Plain: any bytes are a valid T.
    let bytes = unsafe { plain::as_mut_bytes(out) };
    match bytes.get_mut(..head_len) {
        Some(dst) => {
            dst.copy_from_slice(head);
            true
        }
        None => false,
    }
}
