// SPDX-License-Identifier: Apache-2.0
//! The facts of bpf/tlsprof.h that the pure layers use (stage ids, function flags, the attach cookie
//! layout), generated from the header by build.rs: one definition, on the BPF side.

include!(concat!(env!("OUT_DIR"), "/boundary.rs"));
