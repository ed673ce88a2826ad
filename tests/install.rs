// SPDX-License-Identifier: Apache-2.0
//! `make install`'s script into a scratch DESTDIR (no root): the binary, man pages that render, completions
//! that load in bash, the unit pointing at the installed binary; `--uninstall` leaves no file behind.
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn installs_binary_man_pages_and_completions_and_uninstalls_them() {
    let scratch = Scratch::new("install");
    let root = scratch.path("root");
    let script = repo().join("scripts/install.sh");
    let out = run(Command::new(&script)
        .arg(env!("CARGO_BIN_EXE_tlsprof"))
        .arg(gen_docs())
        .env("PREFIX", "/usr")
        .env("DESTDIR", &root));
    assert!(
        out.status.success(),
        "install.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let usr = root.join("usr");
    let installed = usr.join("bin/tlsprof");
    let version = run(Command::new(&installed).arg("--version"));
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("tlsprof "));

    // A page per subcommand, each rendered by man.
    let man1 = usr.join("share/man/man1");
    for page in [
        "tlsprof",
        "tlsprof-record",
        "tlsprof-top",
        "tlsprof-serve",
        "tlsprof-report",
        "tlsprof-diff",
        "tlsprof-check",
    ] {
        let path = man1.join(format!("{page}.1"));
        assert!(path.exists(), "no {}", path.display());
        let shown = run(Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(&path)
            .env("MANWIDTH", "100"));
        let text = String::from_utf8_lossy(&shown.stdout);
        assert!(
            shown.status.success() && text.contains("SYNOPSIS"),
            "man {page}: {text}"
        );
    }
    let record = String::from_utf8_lossy(
        &run(Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(man1.join("tlsprof-record.1")))
        .stdout,
    )
    .into_owned();
    assert!(record.contains("--max-overhead"), "{record}");

    // bash takes the completion in; it offers the subcommands.
    let bash = usr.join("share/bash-completion/completions/tlsprof");
    let script = format!(
        "source {}; COMP_WORDS=(tlsprof t); COMP_CWORD=1; COMP_LINE='tlsprof t'; COMP_POINT=9; \
         $(complete -p tlsprof | sed 's/.*-F \\([^ ]*\\) .*/\\1/') tlsprof t tlsprof; echo \"${{COMPREPLY[@]}}\"",
        bash.display()
    );
    let offered = run(Command::new("bash").args(["-c", &script]));
    let words = String::from_utf8_lossy(&offered.stdout);
    assert!(
        words.split_whitespace().any(|w| w == "top"),
        "bash completion of 'tlsprof t': {words}"
    );
    assert!(usr.join("share/zsh/vendor-completions/_tlsprof").exists());
    assert!(usr.join("share/fish/vendor_completions.d/tlsprof.fish").exists());

    let unit = std::fs::read_to_string(usr.join("lib/systemd/system/tlsprof.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/tlsprof serve"), "{unit}");
    assert!(usr.join("share/doc/tlsprof/examples/prometheus.yml").exists());

    let out = run(Command::new(repo().join("scripts/install.sh"))
        .arg("--uninstall")
        .env("PREFIX", "/usr")
        .env("DESTDIR", &root));
    assert!(
        out.status.success(),
        "install.sh --uninstall: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(files_under(&root), Vec::<PathBuf>::new(), "left behind by --uninstall");
}
