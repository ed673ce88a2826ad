// SPDX-License-Identifier: Apache-2.0
//! `--help` of tlsprof and of each subcommand fits a screen at 100 columns, says what the default does, and
//! gives every option a one-line meaning (the man pages carry the rest).
mod common;

use std::process::Command;

use common::*;

const COLUMNS: usize = 100;
const SCREEN_LINES: usize = 50;
/// Subcommands that do something by default worth saying: their help ends with "By default: ...".
const WITH_DEFAULTS: &[&str] = &["record", "serve", "top", "report", "diff", "flamegraph"];

fn help(args: &[&str]) -> String {
    let out = run(Command::new(env!("CARGO_BIN_EXE_tlsprof"))
        .args(args)
        .arg("--help")
        .env("COLUMNS", COLUMNS.to_string()));
    assert!(out.status.success(), "tlsprof {args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_help_fits_a_screen_and_says_its_defaults() {
    let cmd = tlsprof::cli::command();
    let mut pages = vec![vec![]];
    pages.extend(cmd.get_subcommands().map(|s| vec![s.get_name()]));
    assert!(pages.len() > 6, "the subcommands are listed");
    for args in pages {
        let text = help(&args);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines.len() <= SCREEN_LINES,
            "tlsprof {args:?} --help: {} lines\n{text}",
            lines.len()
        );
        let wide: Vec<&&str> = lines.iter().filter(|l| l.chars().count() > COLUMNS).collect();
        assert!(
            wide.is_empty(),
            "tlsprof {args:?} --help: lines over {COLUMNS} columns: {wide:?}"
        );
        assert_eq!(text, help_short(&args), "tlsprof {args:?}: -h and --help differ");
        if let Some(name) = args.first() {
            assert_eq!(
                WITH_DEFAULTS.contains(name),
                text.contains("By default:"),
                "tlsprof {name} --help: says its defaults\n{text}"
            );
            assert!(
                text.contains(&format!("man tlsprof-{name}")),
                "tlsprof {name} --help names its man page"
            );
        }
    }
}

fn help_short(args: &[&str]) -> String {
    let out = run(Command::new(env!("CARGO_BIN_EXE_tlsprof"))
        .args(args)
        .arg("-h")
        .env("COLUMNS", COLUMNS.to_string()));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_option_has_a_one_line_meaning() {
    let cmd = tlsprof::cli::command();
    let mut commands = vec![&cmd];
    commands.extend(cmd.get_subcommands());
    for c in commands {
        let about = c.get_about().map(|a| a.to_string()).unwrap_or_default();
        assert!(
            !about.is_empty() && !about.contains('\n'),
            "{}: a one-line about",
            c.get_name()
        );
        for arg in c.get_arguments() {
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(
                !help.is_empty() && !help.contains('\n') && help.chars().count() <= 80,
                "{} {}: help {help:?} is not one line of at most 80 characters",
                c.get_name(),
                arg.get_id()
            );
        }
    }
}
