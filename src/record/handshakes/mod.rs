// SPDX-License-Identifier: Apache-2.0
//! Handshakes: the kernel side's events, what each handshake was made of, and the ServerHellos read off
//! the sockets while the hello windows are open.

pub(super) mod anatomy;
pub(super) mod events;
pub(super) mod hello;
pub(super) mod quic;
pub(super) mod wire;
pub(super) mod x509;
