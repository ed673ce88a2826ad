// SPDX-License-Identifier: Apache-2.0
//! Writes tlsprof's man pages (`man1/tlsprof.1`, `man1/tlsprof-SUBCOMMAND.1`) and its bash, zsh and fish
//! completions (`completions/`) under OUTDIR, from the command line's one definition (src/cli.rs), so that
//! they cannot drift from `--help`. `make install` runs it.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap_complete::Shell;

fn main() -> Result<()> {
    let out = PathBuf::from(std::env::args_os().nth(1).context("usage: gen-docs OUTDIR")?);
    let cmd = tlsprof::cli::command();
    let man = out.join("man1");
    std::fs::create_dir_all(&man).with_context(|| format!("cannot make {}", man.display()))?;
    clap_mangen::generate_to(cmd.clone(), &man).with_context(|| format!("cannot write into {}", man.display()))?;
    let completions = out.join("completions");
    std::fs::create_dir_all(&completions).with_context(|| format!("cannot make {}", completions.display()))?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd.clone(), "tlsprof", &completions)
            .with_context(|| format!("cannot write {shell} completions"))?;
    }
    Ok(())
}
