// SPDX-License-Identifier: Apache-2.0
//! The command line: its subcommands and options, defined once for the binary, its man pages and shell
//! completions (scripts/gen_docs.rs).

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::output::styled::Color;
use crate::output::Group;

#[derive(Parser)]
#[command(
    name = "tlsprof",
    version,
    about = "Profile the TLS CPU of running processes, stage by stage"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Colour and bars in the text of `report`, `record`, `diff` and `check`: auto when standard output is a
    /// terminal and NO_COLOR is unset or empty.
    #[arg(long, global = true, value_enum, default_value = "auto")]
    pub color: ColorArg,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ColorArg {
    Never,
    Always,
    Auto,
}

impl ColorArg {
    /// https://no-color.org: a NO_COLOR that is set and not empty turns colour off.
    pub fn resolve(self) -> Color {
        let wanted = match self {
            ColorArg::Never => false,
            ColorArg::Always => true,
            ColorArg::Auto => {
                std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        };
        if wanted {
            Color::On
        } else {
            Color::Off
        }
    }
}

#[derive(Subcommand)]
pub enum Command {
    /// Attach to running processes, record until the duration, Ctrl-C, or every target exits; print the summary.
    Record {
        #[command(flatten)]
        targets: TargetArgs,
        /// Stop after this many seconds.
        #[arg(long, value_name = "SECS")]
        duration: Option<f64>,
        /// Where to write the recording.
        #[arg(long, short, value_name = "FILE", default_value = "tlsprof.data")]
        output: PathBuf,
        #[command(flatten)]
        probes: ProbeArgs,
        /// Print only the first screen of the report when the recording ends (`tlsprof report` has the rest).
        #[arg(long)]
        brief: bool,
    },
    /// Record continuously until SIGTERM or Ctrl-C, serving Prometheus metrics at /metrics and pprof profiles
    /// of the last N seconds at /profile?seconds=N.
    Serve {
        #[command(flatten)]
        targets: TargetArgs,
        /// Address to serve on, e.g. 127.0.0.1:9465 (plain HTTP, no authentication: keep it on a trusted
        /// network).
        #[arg(long, value_name = "ADDR")]
        listen: String,
        #[command(flatten)]
        probes: ProbeArgs,
    },
    /// A live view, refreshed every second: a row per process with its TLS share of CPU, handshakes per
    /// second, resumption, CPU per full handshake and top stage (every process with TLS code by default;
    /// q quits). Off a terminal, or with --batch, a line per process and interval.
    Top {
        #[command(flatten)]
        targets: TargetArgs,
        /// Seconds between refreshes.
        #[arg(long, value_name = "SECS", default_value_t = 1.0)]
        interval: f64,
        /// A row per process, or per program (an nginx master and its workers as one).
        #[arg(long, value_enum, default_value = "process")]
        group: TopGroupArg,
        /// A line per process and interval on standard output, like `vmstat 1`, instead of the full screen.
        #[arg(long)]
        batch: bool,
        /// One interval's lines, then stop (implies --batch).
        #[arg(long)]
        once: bool,
        /// Where the `w` key writes what has been seen so far (then `tlsprof report` reads it).
        #[arg(long, short, value_name = "FILE", default_value = "tlsprof.data")]
        output: PathBuf,
        #[command(flatten)]
        probes: ProbeArgs,
    },
    /// Print the summary of a recording.
    Report {
        file: PathBuf,
        /// Machine-readable JSON instead of text.
        #[arg(long)]
        json: bool,
        /// One self-contained HTML page (charts and the interactive flame graph inline, nothing fetched),
        /// written to --output or, without it, to standard output.
        #[arg(long, conflicts_with = "json")]
        html: bool,
        /// Where to write the HTML page.
        #[arg(long, short, value_name = "FILE", requires = "html")]
        output: Option<PathBuf>,
        /// How the call tree groups what runs inside each stage function.
        #[arg(long, value_enum, default_value = "stage")]
        group: GroupArg,
        /// Only the first screen: how much CPU is TLS, where it goes, what to do first, how far to trust it.
        #[arg(long, conflicts_with_all = ["json", "html"])]
        brief: bool,
    },
    /// Compare two recordings (before and after a change): handshake mix, CPU per handshake and per stage.
    Diff {
        before: PathBuf,
        after: PathBuf,
        /// Also write a differential flame graph (SVG) here; with --html, the HTML page instead.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Machine-readable JSON instead of text.
        #[arg(long)]
        json: bool,
        /// One self-contained HTML page (tables, stage chart and the differential flame graph inline),
        /// written to --output or, without it, to standard output.
        #[arg(long, conflicts_with = "json")]
        html: bool,
    },
    /// Draw a flame graph (SVG) of a recording, or print its folded stacks.
    Flamegraph {
        file: PathBuf,
        /// Write here instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Folded stacks (for inferno, FlameGraph, speedscope) instead of SVG.
        #[arg(long)]
        folded: bool,
        /// How to group what runs inside each stage.
        #[arg(long, value_enum, default_value = "stage")]
        group: GroupArg,
    },
    /// Write a recording for other tools: a pprof profile (go tool pprof, Pyroscope, Parca), folded stacks,
    /// or the JSON report.
    Export {
        file: PathBuf,
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Write here instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Check what this machine and kernel let tlsprof record, and what each thing missing costs it.
    ///
    /// A line per item: privileges, BTF, uprobes and their kinds, lockdown, tracefs and the tracepoints, the
    /// CPU sampler; for one limited or missing, what tlsprof loses and the fix. It loads the BPF programs and
    /// attaches them to tlsprof itself as recording would, then detaches them; what recording would mount
    /// (tracefs) it mounts where only it sees it. Exits 1 when recording cannot work.
    Check,
}

/// Which processes to profile.
#[derive(Args)]
pub struct TargetArgs {
    /// Process id to profile (repeatable).
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Profile every process with this name, e.g. an nginx master and all its workers (repeatable).
    #[arg(long = "comm", value_name = "NAME")]
    pub comms: Vec<String>,
    /// Profile every process on the machine that runs OpenSSL, Go or rustls TLS code, containers included, and
    /// those started while recording; runs until the duration or Ctrl-C.
    #[arg(long)]
    pub all: bool,
}

/// How to probe and sample them.
#[derive(Args)]
pub struct ProbeArgs {
    /// CPU sampling frequency, per CPU.
    #[arg(long, value_name = "HZ", default_value_t = 99)]
    pub freq: u64,
    /// Also probe functions called many times per handshake or on every request (SSL_read/SSL_write for
    /// the read/write stages, EVP_KDF_derive): exact, but each probe hit costs the target microseconds.
    #[arg(long)]
    pub all_probes: bool,
    /// How to capture user stacks: copy the stack and unwind it with DWARF unwind tables, or follow
    /// frame pointers (cheaper; wrong through libraries built without them, like Debian's OpenSSL).
    #[arg(long, value_enum, default_value = "dwarf")]
    pub call_graph: CallGraphArg,
    /// Bytes of user stack copied per sample for --call-graph dwarf: deep stacks (Node.js's main thread)
    /// need tens of KiB to reach main() from a TLS handshake.
    #[arg(long, value_name = "BYTES", default_value_t = 65536)]
    pub stack_bytes: u32,
    /// Also record kernel frames (those of samples in the probes' own traps are kept without it).
    #[arg(long)]
    pub kernel: bool,
    /// When to read ServerHellos and ClientHellos off the sockets: the protocol version, cipher suite and
    /// group, and what clients offered to resume.
    #[arg(long, value_enum, default_value = "sampled")]
    pub hello_capture: HelloCaptureArg,
    /// Most the stage probes may cost the targets, in percent of their CPU. When handshakes are frequent
    /// enough to cost more, the probes are attached part of the time and counts are scaled from those
    /// windows; 100 keeps them attached throughout (exact counts, at whatever it costs). The probes' cost
    /// is what samples taken in their traps measure in the targets (their calibrated cost until they say
    /// more). The default leaves room for what a trap costs the target's own code after it (colder caches),
    /// which no sample shows, and for the CPU sampler (BENCHMARKS.md).
    #[arg(long, value_name = "PERCENT", default_value_t = 0.3)]
    pub max_overhead: f64,
}

impl ProbeArgs {
    /// The options as recording takes them when none is given.
    pub fn defaults() -> ProbeArgs {
        let cmd = ProbeArgs::augment_args(clap::Command::new("tlsprof"));
        ProbeArgs::from_arg_matches(&cmd.get_matches_from(["tlsprof"])).expect("the defaults parse")
    }
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
pub enum ExportFormat {
    /// Gzipped profile.proto: CPU samples and CPU in ns (each stage's as the report gives it) per stack,
    /// labelled with stage, library, role, process and pid.
    Pprof,
    /// One line per distinct stack with its sample count (as `flamegraph --folded`).
    Folded,
    /// The JSON report (as `report --json`).
    Json,
}

/// How the call tree and flame graph group what runs inside a stage (output::Group).
#[derive(Clone, Copy, ValueEnum)]
pub enum GroupArg {
    /// By stage function: the call tree of probed functions, whole stacks in the flame graph.
    Stage,
    /// A cause under each stage (lookups, socket I/O, MACs, random numbers, ...), then the functions that
    /// named it.
    Cause,
}

impl From<GroupArg> for Group {
    fn from(g: GroupArg) -> Group {
        match g {
            GroupArg::Stage => Group::Stage,
            GroupArg::Cause => Group::Cause,
        }
    }
}

/// What a row of `tlsprof top` is (top::RowGroup).
#[derive(Clone, Copy, ValueEnum)]
pub enum TopGroupArg {
    /// Each process on its own.
    Process,
    /// The processes of one name as one.
    Program,
}

/// How to capture user stacks (model::CallGraph).
#[derive(Clone, Copy, ValueEnum)]
pub enum CallGraphArg {
    /// Copy the user stack and unwind it with .eh_frame/.debug_frame (frame pointers for JIT code).
    Dwarf,
    /// Follow frame pointers in the kernel: cheaper, wrong through code built without them.
    Fp,
}

/// When to watch the socket calls that carry ServerHellos (record::HelloCapture).
#[derive(Clone, Copy, ValueEnum)]
pub enum HelloCaptureArg {
    /// Once every 10 s while the probes are attached and connections are being made, for up to 1 s: the
    /// handshake mix and resumption are sampled from the connections made then.
    Sampled,
    /// All the time: every handshake's version, cipher, group and offer, for a little CPU on every socket call.
    Always,
    /// Never: version, cipher suite, group and resumption offers stay unknown.
    Off,
}
