// SPDX-License-Identifier: Apache-2.0
//! The generated skeleton of bpf/tlsprof.bpf.c, and the boundary types of bpf/tlsprof.h.
#![allow(clippy::all, non_camel_case_types, non_upper_case_globals, dead_code)]

include!(concat!(env!("OUT_DIR"), "/tlsprof.skel.rs"));

// SAFETY: plain C structs of integers, valid for any bit pattern.
unsafe impl plain::Plain for types::tree_key {}
unsafe impl plain::Plain for types::tree_val {}
unsafe impl plain::Plain for types::handshake_event {}
