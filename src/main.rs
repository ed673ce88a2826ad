// SPDX-License-Identifier: Apache-2.0
//! tlsprof: attach to running processes, attribute their TLS CPU to handshake stages, report it.

use std::process::ExitCode;

use anyhow::Result;

use tlsprof::cli::{Cli, Command};
use tlsprof::commands;
use tlsprof::model::untrusted::printable;

fn main() -> ExitCode {
    match run(tlsprof::cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            // Errors quote paths and names that targets control: escaped, the message stays one line.
            eprintln!("tlsprof: error: {}", printable(&one_line(&e)));
            ExitCode::FAILURE
        }
    }
}

/// The outermost context, then the root cause when it adds something: one line, no backtrace.
fn one_line(e: &anyhow::Error) -> String {
    let top = e.to_string();
    let root = e.root_cause().to_string();
    if root == top || top.contains(&root) {
        top
    } else {
        format!("{top}: {root}")
    }
}

/// Hands each subcommand's arguments to its function (tlsprof::commands).
fn run(cli: Cli) -> Result<ExitCode> {
    let color = cli.color.resolve();
    let done = match cli.command {
        Command::Check => return commands::check(color),
        Command::Record {
            targets,
            duration,
            output,
            probes,
            brief,
        } => commands::record(targets, probes, duration, &output, brief, color),
        Command::Serve {
            targets,
            listen,
            web_config_file,
            probes,
        } => commands::serve(targets, probes, &listen, web_config_file.as_deref()),
        Command::Top {
            targets,
            interval,
            group,
            batch,
            once,
            output,
            probes,
        } => commands::top(
            targets,
            probes,
            &commands::top_options(interval, group, batch, once, output, color)?,
        ),
        Command::Report {
            file,
            json,
            html,
            output,
            group,
            brief,
        } => commands::report(&file, json, html, output.as_deref(), group, brief, color),
        Command::Diff {
            before,
            after,
            output,
            json,
            html,
        } => commands::diff(&before, &after, output.as_deref(), json, html, color),
        Command::Flamegraph {
            file,
            output,
            folded,
            group,
        } => commands::flamegraph(&file, output.as_deref(), folded, group),
        Command::Export { file, format, output } => commands::export(&file, format, output.as_deref()),
    };
    done.map(|()| ExitCode::SUCCESS)
}
