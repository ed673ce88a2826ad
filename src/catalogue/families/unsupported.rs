// SPDX-License-Identifier: Apache-2.0
//! TLS libraries tlsprof recognizes in a file but does not profile yet: a process that runs one is told
//! so by name ("rustls 0.23.46"), not "no TLS code". Each is known by bytes its builds carry: the source
//! paths Rust keeps for panic locations (`.../rustls-0.23.46/src/conn.rs`), or a library's name as a string
//! of its own (BoringSSL's and AWS-LC's version strings).

/// A library recognized by a marker.
pub struct Unsupported {
    /// Its name for people.
    pub name: &'static str,
    pub marker: Marker,
}

pub enum Marker {
    /// A crate's source path: `/NAME-VERSION/src/`, which gives its version.
    Crate(&'static str),
    /// The library's name as a string of its own: no letter, digit or `_` right before or after it.
    Word(&'static [u8]),
}

pub static UNSUPPORTED: &[Unsupported] = &[
    Unsupported {
        name: "rustls",
        marker: Marker::Crate("rustls"),
    },
    Unsupported {
        name: "aws-lc-rs",
        marker: Marker::Crate("aws-lc-rs"),
    },
    Unsupported {
        name: "ring",
        marker: Marker::Crate("ring"),
    },
    Unsupported {
        name: "the boring crate",
        marker: Marker::Crate("boring"),
    },
    Unsupported {
        name: "BoringSSL",
        marker: Marker::Word(b"BoringSSL"),
    },
    Unsupported {
        name: "AWS-LC",
        marker: Marker::Word(b"AWS-LC"),
    },
];

/// The longest stretch a marker and its version take: how much of a file a scan keeps between chunks.
pub const MARKER_LEN: usize = 64;

/// "NAME VERSION" from the source path Rust keeps of crate NAME (`.../NAME-0.23.46/src/conn.rs`), if `bytes`
/// hold one.
pub fn crate_version(bytes: &[u8], name: &str) -> Option<String> {
    let prefix = format!("/{name}-");
    memchr::memmem::find_iter(bytes, prefix.as_bytes()).find_map(|at| {
        let rest = &bytes[at + prefix.len()..];
        let len = rest.iter().take(MARKER_LEN).position(|&b| b == b'/')?;
        let version = std::str::from_utf8(&rest[..len]).ok()?;
        let dotted = version.split('.').count() == 3
            && version
                .split('.')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        (dotted && rest[len..].starts_with(b"/src/")).then(|| format!("{name} {version}"))
    })
}

impl Unsupported {
    /// Whether `bytes` carry this library, and its version where the marker gives one ("rustls 0.23.46").
    pub fn find(&self, bytes: &[u8]) -> Option<String> {
        match self.marker {
            Marker::Crate(name) => crate_version(bytes, name).map(|v| v.replacen(name, self.name, 1)),
            Marker::Word(word) => {
                let part_of_a_name = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
                memchr::memmem::find_iter(bytes, word)
                    .any(|at| {
                        !part_of_a_name(at.checked_sub(1).and_then(|i| bytes.get(i)))
                            && !part_of_a_name(bytes.get(at + word.len()))
                    })
                    .then(|| self.name.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(bytes: &[u8]) -> Vec<String> {
        UNSUPPORTED.iter().filter_map(|u| u.find(bytes)).collect()
    }

    #[test]
    fn crates_are_found_with_their_versions_and_names_only_as_words() {
        let rustls = b"\0/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustls-0.23.46/src/conn.rs\0\
            /x/aws-lc-rs-1.19.0/src/digest.rs\0aws_lc_0_47_0_kBoringSSLRSASqrtTwo\0AWS-LC KEM method\0";
        assert_eq!(found(rustls), ["rustls 0.23.46", "aws-lc-rs 1.19.0", "AWS-LC"]);
        assert_eq!(found(b"\0BoringSSL\0"), ["BoringSSL"]);
        // Not a crate's source path, not a version, a word inside another.
        assert!(found(b"/rustls-0.23/src/ /rustls-a.b.c/src/ /rustls-0.23.1/lib/ BoringSSLx xAWS-LC").is_empty());
    }
}
