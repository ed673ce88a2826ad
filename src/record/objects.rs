// SPDX-License-Identifier: Apache-2.0
//! Inspecting a mapped file: which catalogue functions it defines, where, and which OpenSSL it is.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::prologue;
use crate::catalogue::{self, Origin, Row};
use crate::model::{Flavor, Symbols};
use anyhow::{Context, Result};
use blazesym::inspect::{source::Elf, Inspector};
use blazesym::SymType;

/// A catalogue function found in a file, and where its probes go, as a file offset (what uprobes take): its
/// start or, past a first instruction that only reads, its second (prologue.rs).
#[derive(Clone, Debug)]
pub struct FoundFunction {
    pub row: &'static Row,
    pub file_offset: u64,
    /// The kernel single-steps the instruction there: every entry costs a second trap.
    pub stepped: bool,
}

#[derive(Clone, Debug)]
pub struct TlsObject {
    pub flavor: Flavor,
    pub symbols: Symbols,
    pub version: Option<String>,
    pub functions: Vec<FoundFunction>,
}

/// Looks up every catalogue function in the file at `path`. None when it defines none of them.
pub fn inspect(path: &Path, is_executable: bool) -> Result<Option<TlsObject>> {
    let names: Vec<&str> = catalogue::rows().map(|r| r.symbol).collect();
    let mut src = Elf::new(path);
    src.debug_syms = false;
    let inspector = Inspector::new();
    let results = inspector
        .lookup(&src.into(), &names)
        .with_context(|| format!("cannot read symbols of {}", path.display()))?;
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut functions = Vec::new();
    for (row, syms) in catalogue::rows().zip(results) {
        let defined = syms.iter().find(|s| s.sym_type == SymType::Function && s.addr != 0);
        if let Some(offset) = defined.and_then(|s| s.file_offset) {
            let mut code = [0u8; 16];
            let read = file.read_at(&mut code, offset).unwrap_or(0);
            let code = &code[..read];
            let site = prologue::probe_site(code);
            functions.push(FoundFunction {
                row,
                file_offset: offset + site.offset as u64,
                stepped: site.stepped,
            });
        }
    }
    if functions.is_empty() {
        return Ok(None);
    }
    let has = |o: Origin| functions.iter().any(|f| f.row.origin == o);
    let symbols = if has(Origin::Internal) {
        Symbols::Internal
    } else if has(Origin::Public) {
        Symbols::Exported
    } else {
        Symbols::None
    };
    let flavor = match (symbols, is_executable) {
        (Symbols::None, _) => Flavor::App,
        (_, true) => Flavor::Static,
        (_, false) => Flavor::Shared,
    };
    let version = if flavor == Flavor::App {
        None
    } else {
        openssl_version(path)
    };
    Ok(Some(TlsObject {
        flavor,
        symbols,
        version,
        functions,
    }))
}

/// The OpenSSL version string compiled into the file ("OpenSSL 3.0.19 27 Jan 2026"), if any.
pub fn openssl_version(path: &Path) -> Option<String> {
    let bytes = fs::read(path).ok()?;
    find_version(&bytes)
}

fn find_version(bytes: &[u8]) -> Option<String> {
    for at in memchr::memmem::find_iter(bytes, b"OpenSSL ") {
        let rest = &bytes[at + 8..];
        let len = rest.iter().take(64).position(|&b| b == 0)?;
        let text = std::str::from_utf8(&rest[..len]).ok()?;
        // "3.0.19 27 Jan 2026": a dotted version, then the release date.
        let mut words = text.split(' ');
        let version = words.next()?;
        let dotted = version.split('.').count() == 3 && version.starts_with(|c: char| c.is_ascii_digit());
        if dotted && words.count() == 3 {
            return Some(format!("OpenSSL {text}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_string_is_found_among_other_text() {
        let blob = b"\0OpenSSL %s\0OpenSSL 3.0.19 27 Jan 2026\0more";
        assert_eq!(find_version(blob).as_deref(), Some("OpenSSL 3.0.19 27 Jan 2026"));
        assert_eq!(find_version(b"OpenSSL support\0"), None);
    }

    #[test]
    fn system_libcrypto_exports_the_public_api_only() {
        let path = Path::new("/usr/lib/x86_64-linux-gnu/libcrypto.so.3");
        if !path.exists() {
            eprintln!("skipped: {} not installed", path.display());
            return;
        }
        let obj = inspect(path, false)
            .unwrap()
            .expect("libcrypto defines EVP_PKEY_derive");
        assert_eq!(obj.flavor, Flavor::Shared);
        assert_eq!(obj.symbols, Symbols::Exported);
        assert!(obj.version.as_deref().unwrap_or("").starts_with("OpenSSL 3."));
        assert!(obj.functions.iter().any(|f| f.row.symbol == "EVP_PKEY_derive"));
        // Its first instructions as Debian builds them: `push %rbx`, and `cmpl $0x4,(%rdi)` with a `jne` after
        // it, where the probe goes.
        let found = |name: &str| obj.functions.iter().find(|f| f.row.symbol == name).unwrap();
        assert!(!found("EVP_PKEY_derive").stepped);
        let keygen = found("EVP_PKEY_keygen");
        assert!(!keygen.stepped, "{keygen:?}");
        let mut code = [0u8; 2];
        std::fs::File::open(path)
            .unwrap()
            .read_exact_at(&mut code, keygen.file_offset)
            .unwrap();
        assert_eq!(code[0], 0x75, "a jne rel8 at {keygen:?}");
        // libcrypto imports nothing from libssl: SSL_do_handshake must not appear.
        assert!(!obj.functions.iter().any(|f| f.row.symbol == "SSL_do_handshake"));
    }

    #[test]
    fn debian_ssl_free_is_probed_on_an_emulated_instruction() {
        let path = Path::new("/usr/lib/x86_64-linux-gnu/libssl.so.3");
        if !path.exists() {
            eprintln!("skipped: {} not installed", path.display());
            return;
        }
        let obj = inspect(path, false).unwrap().expect("libssl defines SSL_free");
        let free = obj.functions.iter().find(|f| f.row.symbol == "SSL_free").unwrap();
        assert!(!free.stepped, "{free:?}");
    }
}
