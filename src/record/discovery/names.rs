// SPDX-License-Identifier: Apache-2.0
//! Function names as the catalogue writes them, from symbol names that carry marks of one build: Rust's
//! mangling and its hash (`_ZN6rustls12common_state11CommonState21process_main_protocol17h1b26...E`), C++'s
//! mangling with its parameter types (`_ZN4bssl17ssl_run_handshakeEPNS_13SSL_HANDSHAKEEPb` is
//! `bssl::ssl_run_handshake`), a C library's version prefix (`aws_lc_0_47_0_EVP_DigestSign`, which lets two
//! builds share a process). A compiler's partial copies (`.cold`, `.part.0`, `[clone ...]`) keep a name no
//! row has: they are not the function's start.

use std::borrow::Cow;

/// `raw` demangled (Rust without its hash, C++ without parameters or return type), and stripped of the first
/// of `prefixes` it starts with when a version (digits and underscores, ending in `_`) follows the prefix.
pub fn plain_name<'a>(raw: &'a str, prefixes: &[&str]) -> Cow<'a, str> {
    if raw.starts_with("_R") || raw.starts_with("_ZN") {
        if let Ok(d) = rustc_demangle::try_demangle(raw) {
            // `{:#}` leaves out the hash.
            return Cow::Owned(format!("{d:#}"));
        }
    }
    if raw.starts_with("_Z") {
        if raw.contains('.') {
            return Cow::Borrowed(raw);
        }
        let options = cpp_demangle::DemangleOptions::new().no_params().no_return_type();
        if let Some(name) = cpp_demangle::Symbol::new(raw)
            .ok()
            .and_then(|sym| sym.demangle_with_options(&options).ok())
        {
            return Cow::Owned(name);
        }
    }
    for prefix in prefixes {
        if let Some(rest) = raw.strip_prefix(prefix) {
            if let Some(name) = without_version(rest) {
                return Cow::Borrowed(name);
            }
        }
    }
    Cow::Borrowed(raw)
}

/// `0_47_0_EVP_DigestSign` -> `EVP_DigestSign`: a version of one or more numbers, each ended by `_`.
fn without_version(rest: &str) -> Option<&str> {
    let mut at = 0;
    let bytes = rest.as_bytes();
    let mut numbers = 0;
    loop {
        let digits = bytes[at..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || bytes.get(at + digits) != Some(&b'_') {
            break;
        }
        at += digits + 1;
        numbers += 1;
    }
    (numbers > 0 && at < rest.len()).then(|| &rest[at..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rust_names_lose_their_mangling_and_hash() {
        assert_eq!(
            plain_name(
                "_ZN6rustls12common_state11CommonState21process_main_protocol17h1b263b61f9d53df0E",
                &[]
            ),
            "rustls::common_state::CommonState::process_main_protocol"
        );
        // v0 mangling: `<rustls::conn::connection::Reader as std::io::Read>::read`'s shape.
        let v0 = "_RNvXCs1234_6rustlsNtB2_6ReaderNtNtCs5678_3std2io4Read4read";
        assert_eq!(plain_name(v0, &[]), "<rustls::Reader as std::io::Read>::read");
        // Not a name: left as it is.
        assert_eq!(plain_name("_ZN3foo", &[]), "_ZN3foo");
        assert_eq!(plain_name("SSL_do_handshake", &[]), "SSL_do_handshake");
    }

    #[test]
    fn cpp_names_lose_their_mangling_and_parameters_and_copies_keep_theirs() {
        assert_eq!(
            plain_name("_ZN4bssl17ssl_run_handshakeEPNS_13SSL_HANDSHAKEEPb", &[]),
            "bssl::ssl_run_handshake"
        );
        assert_eq!(
            plain_name("_ZN4bssl12_GLOBAL__N_114X25519KeyShare8GenerateEP6cbb_st", &[]),
            "bssl::(anonymous namespace)::X25519KeyShare::Generate"
        );
        let cold = "_ZN4bssl22tls13_server_handshakeEPNS_13SSL_HANDSHAKEE.cold";
        assert_eq!(plain_name(cold, &[]), cold);
    }

    #[test]
    fn version_prefixes_are_stripped_only_before_a_version() {
        let p = ["aws_lc_", "ring_core_"];
        assert_eq!(plain_name("aws_lc_0_47_0_EVP_DigestSign", &p), "EVP_DigestSign");
        assert_eq!(
            plain_name("ring_core_0_17_14__x25519_ge_scalarmult_base_adx", &p),
            "_x25519_ge_scalarmult_base_adx"
        );
        assert_eq!(plain_name("aws_lc_fips_0_13_0_HKDF", &p), "aws_lc_fips_0_13_0_HKDF");
        assert_eq!(plain_name("aws_lc_0_47_0_", &p), "aws_lc_0_47_0_");
        assert_eq!(plain_name("aws_lc_x_EVP", &p), "aws_lc_x_EVP");
    }

    proptest! {
        #![proptest_config(crate::fuzz_config(1))]

        #[test]
        fn fuzz_plain_names(raw in "(_ZN|_Z|_R|aws_lc_)?[0-9a-zA-Z_$.]{0,80}") {
            let plain = plain_name(&raw, &["aws_lc_"]);
            // Only Rust and C++ names are rewritten; any other loses at most a prefix.
            if !(raw.starts_with("_R") || raw.starts_with("_Z")) {
                prop_assert!(raw.ends_with(&*plain) && !plain.is_empty() || raw.is_empty());
            }
        }
    }
}
