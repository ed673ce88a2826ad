// SPDX-License-Identifier: Apache-2.0
//! What is found in the targets' files: each file inspected once, the recording's libraries and functions,
//! and what a process's TLS code leaves unseen.

use anyhow::{Context, Result};

use super::TargetSet;
use crate::catalogue;
use crate::catalogue::families::{self, Flavor};
use crate::model::untrusted::Printable;
use crate::model::{Function, Library};
use crate::record::discovery::objects::{self, TlsObject};
use crate::record::discovery::targets::{Mapping, Process};
use crate::record::status;
use crate::record::AttachOptions;

/// The TLS libraries tlsprof recognizes but does not profile that a process's executable carries, if any
/// ("rustls 0.23.46, aws-lc-rs 1.19.0"): said by name rather than "no TLS code".
pub(super) fn unsupported_in(p: &Process) -> Option<String> {
    let found = objects::unsupported_in(&std::path::PathBuf::from(format!("/proc/{}/exe", p.pid)));
    (!found.is_empty()).then(|| found.join(", "))
}

/// What the families' functions in one process's files leave unseen, by family: stages without a function
/// (their CPU stays in the calling stage's), and, for a library driven message by message (rustls), a
/// handshake step that completes it (without one, no handshake would ever count). Said once, never left to
/// read as zero.
pub(super) fn unfound(objs: &[TlsObject]) -> Vec<(&'static str, String)> {
    use catalogue::Stage::{Derive, Handshake, Keygen, Sign};
    let mut out = Vec::new();
    let mut families: Vec<&'static dyn families::Family> = Vec::new();
    for o in objs.iter().filter(|o| o.flavor != Flavor::App) {
        if !families.iter().any(|f| f.id() == o.family.id()) {
            families.push(o.family);
        }
    }
    for family in families {
        let found: Vec<&catalogue::Row> = objs
            .iter()
            .filter(|o| o.family.id() == family.id())
            .flat_map(|o| o.functions.iter().map(|f| f.row))
            .collect();
        let missing: Vec<&str> = [Handshake, Keygen, Derive, Sign]
            .into_iter()
            .filter(|&s| !found.iter().any(|r| r.stage == Some(s)))
            .map(|s| s.name())
            .collect();
        if !missing.is_empty() {
            out.push((
                family.name(),
                format!(
                    "no function found for {}: their CPU stays in their callers'",
                    missing.join(", ")
                ),
            ));
        }
        let steps = |flag| family.rows().iter().any(|r| r.flags & flag != 0);
        if steps(catalogue::HS_STEP)
            && steps(catalogue::HS_FINISH)
            && !found.iter().any(|r| r.flags & catalogue::HS_FINISH != 0)
        {
            out.push((
                family.name(),
                "no handshake step that completes a handshake found: handshakes are not counted".to_string(),
            ));
        }
    }
    out
}

impl TargetSet {
    /// What file m (of process pid; `executable`: its program) holds, looked at once: None where it has no TLS
    /// code, and where it could not be read because the process is gone (then it is looked at again later).
    pub(super) fn inspect(
        &mut self,
        m: &Mapping,
        pid: u32,
        executable: bool,
        opts: &AttachOptions,
    ) -> Option<TlsObject> {
        let key = (m.dev.clone(), m.inode);
        if let Some(known) = self.inspected.get(&key) {
            return known.clone();
        }
        // The target chose what it maps under these names: a file that does not parse is skipped, and the rest
        // of the process (a real libssl beside it) is still profiled.
        let gone = |e: &anyhow::Error| {
            e.chain()
                .filter_map(|c| c.downcast_ref::<std::io::Error>())
                .any(|io| io.kind() == std::io::ErrorKind::NotFound)
        };
        let obj = match objects::inspect(&m.open_path(pid), executable, &opts.families) {
            Ok(obj) => obj,
            // The process is gone, or its mapping (it ran exec): nothing to say of the file.
            Err(e) if gone(&e) || (pid != std::process::id() && !Process::from_pid(pid).is_some_and(|p| p.alive())) => {
                return None
            }
            Err(e) => {
                status::warn_once(
                    &format!("{}:{}", m.dev, m.inode),
                    &format!("skipping {} in process {pid}: {e:#}", Printable(m.display_path())),
                );
                None
            }
        };
        self.inspected.insert(key, obj.clone());
        obj
    }

    /// The recording's entry of file m holding `obj`, made on first sight.
    pub(super) fn library(&mut self, m: &Mapping, obj: &TlsObject) -> usize {
        let path = m.display_path().to_string();
        let file = (m.dev.clone(), m.inode);
        match self.library_of.get(&file) {
            Some(&i) => i,
            None => {
                // Another file under a path seen before: one of them was replaced on disk (the deleted one,
                // or else the one seen first).
                let deleted = m.path.ends_with(" (deleted)");
                if !deleted {
                    for l in self.libraries.iter_mut().filter(|l| l.path == path) {
                        l.replaced = true;
                    }
                }
                self.libraries.push(Library {
                    path: path.clone(),
                    family: obj.family.id().into(),
                    flavor: obj.flavor,
                    version: obj.version.clone(),
                    symbols: obj.symbols,
                    functions_found: obj.functions.len(),
                    handshake_state: obj.ssl_layout.is_some(),
                    pids: Vec::new(),
                    replaced: deleted,
                });
                self.library_of.insert(file, self.libraries.len() - 1);
                self.libraries.len() - 1
            }
        }
    }

    /// Process pid maps library `lib`.
    pub(super) fn maps_library(&mut self, lib: usize, pid: u32) {
        if !self.libraries[lib].pids.contains(&pid) {
            self.libraries[lib].pids.push(pid);
        }
    }

    /// The function's id in the cookies and the recording's function table.
    pub(super) fn function_id(&mut self, lib: usize, row: &'static catalogue::Row) -> Result<u16> {
        let id = match self
            .functions
            .iter()
            .position(|x| x.library == lib && x.name == row.symbol)
        {
            Some(i) => i,
            None => {
                self.functions.push(Function {
                    name: row.symbol.into(),
                    library: lib,
                    stage: row.stage,
                });
                self.functions.len() - 1
            }
        };
        u16::try_from(id).context("too many functions")
    }
}

/// libssl carries no version string of its own: it is the version of the libcrypto it ships with, the one
/// the same processes map (an upgrade on disk leaves two).
pub(super) fn fill_library_versions(libs: &mut [Library]) {
    let cryptos: Vec<(Vec<u32>, Option<String>)> = libs
        .iter()
        .filter(|l| l.path.contains("libcrypto"))
        .map(|l| (l.pids.clone(), l.version.clone()))
        .collect();
    for l in libs
        .iter_mut()
        .filter(|l| l.version.is_none() && l.path.contains("libssl"))
    {
        l.version = cryptos
            .iter()
            .find(|(pids, _)| pids.iter().any(|p| l.pids.contains(p)))
            .and_then(|(_, v)| v.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::families::{openssl, rustls, Symbols};
    use crate::record::discovery::objects::FoundFunction;

    fn object(family: &'static dyn families::Family, rows: &'static [catalogue::Row], names: &[&str]) -> TlsObject {
        let functions = rows
            .iter()
            .filter(|r| names.contains(&r.symbol))
            .map(|row| FoundFunction {
                row,
                file_offset: 0,
                stepped: false,
                exits: Vec::new(),
            })
            .collect();
        TlsObject {
            family,
            flavor: Flavor::Static,
            symbols: Symbols::Internal,
            version: None,
            functions,
            ssl_layout: None,
        }
    }

    #[test]
    fn stages_and_completion_left_unfound_are_said() {
        // libssl and libcrypto together leave nothing out.
        let ssl = object(&openssl::OpenSsl, openssl::ROWS, &["SSL_do_handshake", "SSL_free"]);
        let crypto = object(
            &openssl::OpenSsl,
            openssl::ROWS,
            &["EVP_PKEY_keygen", "EVP_PKEY_derive", "EVP_DigestSign"],
        );
        assert!(unfound(&[ssl.clone(), crypto]).is_empty());
        let alone = unfound(&[ssl]);
        assert_eq!(alone.len(), 1);
        assert!(alone[0].1.contains("keygen, derive, sign"), "{alone:?}");
        // A rustls whose ExpectFinished steps were not found could never count a handshake.
        let client_hello = rustls::ROWS
            .iter()
            .find(|r| r.flags & catalogue::CONN_START != 0)
            .unwrap()
            .symbol;
        let partial = unfound(&[object(
            &rustls::Rustls,
            rustls::ROWS,
            &[
                client_hello,
                "EVP_PKEY_keygen",
                "EVP_DigestSign",
                "<rustls::crypto::aws_lc_rs::kx::KeyExchange as rustls::crypto::ActiveKeyExchange>::complete",
            ],
        )]);
        assert_eq!(partial.len(), 1, "{partial:?}");
        assert!(partial[0].1.contains("handshakes are not counted"));
    }
}
