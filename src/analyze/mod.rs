// SPDX-License-Identifier: Apache-2.0
//! Analysis: the figures derived from a recording, and advice drawn from them.

pub mod advice;
