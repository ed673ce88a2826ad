// SPDX-License-Identifier: Apache-2.0
//! tlsprof: attach to running processes, attribute their TLS CPU to handshake stages, report it.

use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};

use clap::ValueEnum;
use tlsprof::analyze::{advice, analyze, summarize};
use tlsprof::model::untrusted::printable;
use tlsprof::model::{file, CallGraph, Recording};
use tlsprof::output::styled::Color;
use tlsprof::output::{diff, flame, html, json, pprof, text, Group};
use tlsprof::record::targets::{self, Process};
use tlsprof::record::{self, AttachOptions, HelloCapture, RecordOptions, MAX_STACK_BYTES};
use tlsprof::{serve, top};

#[derive(Parser)]
#[command(
    name = "tlsprof",
    version,
    about = "Profile the TLS CPU of running processes, stage by stage"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Colour and bars in the text of `report`, `record` and `diff`: auto when standard output is a
    /// terminal and NO_COLOR is unset or empty.
    #[arg(long, global = true, value_enum, default_value = "auto")]
    color: ColorArg,
}

#[derive(Clone, Copy, ValueEnum)]
enum ColorArg {
    Never,
    Always,
    Auto,
}

impl ColorArg {
    /// https://no-color.org: a NO_COLOR that is set and not empty turns colour off.
    fn resolve(self) -> Color {
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
enum Command {
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
}

/// Which processes to profile.
#[derive(Args)]
struct TargetArgs {
    /// Process id to profile (repeatable).
    #[arg(long = "pid", value_name = "PID")]
    pids: Vec<u32>,
    /// Profile every process with this name, e.g. an nginx master and all its workers (repeatable).
    #[arg(long = "comm", value_name = "NAME")]
    comms: Vec<String>,
    /// Profile every process on the machine that runs OpenSSL, Go or rustls TLS code, containers included, and
    /// those started while recording; runs until the duration or Ctrl-C.
    #[arg(long)]
    all: bool,
}

/// How to probe and sample them.
#[derive(Args)]
struct ProbeArgs {
    /// CPU sampling frequency, per CPU.
    #[arg(long, value_name = "HZ", default_value_t = 99)]
    freq: u64,
    /// Also probe functions called many times per handshake or on every request (SSL_read/SSL_write for
    /// the read/write stages, EVP_KDF_derive): exact, but each probe hit costs the target microseconds.
    #[arg(long)]
    all_probes: bool,
    /// How to capture user stacks: copy the stack and unwind it with DWARF unwind tables, or follow
    /// frame pointers (cheaper; wrong through libraries built without them, like Debian's OpenSSL).
    #[arg(long, value_enum, default_value = "dwarf")]
    call_graph: CallGraphArg,
    /// Bytes of user stack copied per sample for --call-graph dwarf: deep stacks (Node.js's main thread)
    /// need tens of KiB to reach main() from a TLS handshake.
    #[arg(long, value_name = "BYTES", default_value_t = 65536)]
    stack_bytes: u32,
    /// Also record kernel frames (those of samples in the probes' own traps are kept without it).
    #[arg(long)]
    kernel: bool,
    /// When to read ServerHellos and ClientHellos off the sockets: the protocol version, cipher suite and
    /// group, and what clients offered to resume.
    #[arg(long, value_enum, default_value = "sampled")]
    hello_capture: HelloCaptureArg,
    /// Most the stage probes may cost the targets, in percent of their CPU. When handshakes are frequent
    /// enough to cost more, the probes are attached part of the time and counts are scaled from those
    /// windows; 100 keeps them attached throughout (exact counts, at whatever it costs). The probes' cost
    /// is what samples taken in their traps measure in the targets (their calibrated cost until they say
    /// more). The default leaves room for what a trap costs the target's own code after it (colder caches),
    /// which no sample shows, and for the CPU sampler (BENCHMARKS.md).
    #[arg(long, value_name = "PERCENT", default_value_t = 0.3)]
    max_overhead: f64,
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum ExportFormat {
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
enum GroupArg {
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
enum TopGroupArg {
    /// Each process on its own.
    Process,
    /// The processes of one name as one.
    Program,
}

/// How to capture user stacks (model::CallGraph).
#[derive(Clone, Copy, ValueEnum)]
enum CallGraphArg {
    /// Copy the user stack and unwind it with .eh_frame/.debug_frame (frame pointers for JIT code).
    Dwarf,
    /// Follow frame pointers in the kernel: cheaper, wrong through code built without them.
    Fp,
}

/// When to watch the socket calls that carry ServerHellos (record::HelloCapture).
#[derive(Clone, Copy, ValueEnum)]
enum HelloCaptureArg {
    /// Once every 10 s while the probes are attached and connections are being made, for up to 1 s: the
    /// handshake mix and resumption are sampled from the connections made then.
    Sampled,
    /// All the time: every handshake's version, cipher, group and offer, for a little CPU on every socket call.
    Always,
    /// Never: version, cipher suite, group and resumption offers stay unknown.
    Off,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
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

/// The text report, or its first screen alone.
fn print_text(analysis: &tlsprof::analyze::Analysis, brief: bool, group: Group, color: Color) {
    if brief {
        print!("{}", text::brief(analysis, color));
    } else {
        print!("{}", text::text(analysis, group, color));
    }
}

fn run(cli: Cli) -> Result<()> {
    let color = cli.color.resolve();
    match cli.command {
        Command::Record {
            targets,
            duration,
            output,
            probes,
            brief,
        } => {
            let duration = match duration {
                Some(d) if !(d > 0.0 && d.is_finite()) => {
                    bail!("--duration {d} is not a positive number of seconds")
                }
                d => d.map(Duration::from_secs_f64),
            };
            let (procs, opts) = record_options(targets, probes, duration)?;
            let (stop, signals) = stop_on_signals()?;
            let mut rec = record::record(&procs, &opts, stop)?;
            // Written at once, and again with the speed figures: a stop never waits for `openssl speed`
            // to find its data on disk.
            rec.save(&output)?;
            let signals_when_recorded = signals.load(Ordering::Relaxed);
            // The alternatives advice will quote, measured once the recording is over so that the targets
            // did not compete with `openssl speed` for the CPU while recorded.
            let needed = advice::references_needed(&rec.handshakes);
            rec.openssl_speed =
                record::speed::measure(&needed, || signals.load(Ordering::Relaxed) > signals_when_recorded);
            if !rec.openssl_speed.is_empty() {
                rec.save(&output)?;
            }
            print_text(&analyze(&rec), brief, Group::Stage, color);
            eprintln!("tlsprof: recording written to {}", output.display());
            Ok(())
        }
        Command::Serve {
            targets,
            listen,
            probes,
        } => {
            let (procs, opts) = record_options(targets, probes, None)?;
            let (stop, _) = stop_on_signals()?;
            serve::serve(&listen, &procs, &opts, stop)
        }
        Command::Top {
            mut targets,
            interval,
            group,
            batch,
            once,
            output,
            probes,
        } => {
            if !(0.1..=3600.0).contains(&interval) {
                bail!("--interval {interval} is out of range: give 0.1 to 3600 seconds");
            }
            if targets.pids.is_empty() && targets.comms.is_empty() {
                targets.all = true;
            }
            let (procs, opts) = record_options(targets, probes, None)?;
            let top_opts = top::TopOptions {
                interval: Duration::from_secs_f64(interval),
                group: match group {
                    TopGroupArg::Process => top::RowGroup::Process,
                    TopGroupArg::Program => top::RowGroup::Program,
                },
                batch: batch || once || !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal(),
                once,
                output,
                color: color == Color::On,
            };
            let (stop, _) = stop_on_signals()?;
            top::top(&procs, &opts, &top_opts, stop)
        }
        Command::Report {
            file,
            json: as_json,
            html: as_html,
            output,
            group,
            brief,
        } => {
            let rec = Recording::load(&file)?;
            let analysis = analyze(&rec);
            if as_html {
                emit(output.as_deref(), |out| html::report(&rec, &analysis, out))?;
            } else if as_json {
                println!("{}", json::to_string_pretty(&json::json(&analysis)));
            } else {
                print_text(&analysis, brief, group.into(), color);
            }
            Ok(())
        }
        Command::Diff {
            before,
            after,
            output,
            json,
            html: as_html,
        } => {
            let (b, a) = (Recording::load(&before)?, Recording::load(&after)?);
            let (bs, as_) = (summarize(&b), summarize(&a));
            if as_html {
                return emit(output.as_deref(), |out| html::diff((&b, &bs), (&a, &as_), out));
            }
            if json {
                println!("{}", json::to_string_pretty(&diff::json(&bs, &as_)?));
            } else {
                print!("{}", diff::text(&bs, &as_, color)?);
            }
            if let Some(p) = output {
                file::write_atomically(&p, |w| diff::svg(&b, &a, w))
                    .with_context(|| format!("cannot write {}", p.display()))?;
            }
            Ok(())
        }
        Command::Flamegraph {
            file,
            output,
            folded,
            group,
        } => {
            let rec = Recording::load(&file)?;
            let group: Group = group.into();
            emit(output.as_deref(), |out| {
                if folded {
                    for line in flame::folded(&rec, group) {
                        writeln!(out, "{line}")?;
                    }
                    Ok(())
                } else {
                    flame::svg(&rec, group, out)
                }
            })
        }
        Command::Export { file, format, output } => {
            if format == ExportFormat::Pprof && output.is_none() && std::io::stdout().is_terminal() {
                bail!("a pprof profile is binary: give --output FILE or redirect standard output");
            }
            let rec = Recording::load(&file)?;
            let analysis = analyze(&rec);
            emit(output.as_deref(), |out| {
                match format {
                    ExportFormat::Pprof => out.write_all(&pprof::pprof(&rec, &analysis.summary))?,
                    ExportFormat::Folded => {
                        for line in flame::folded(&rec, Group::Stage) {
                            writeln!(out, "{line}")?;
                        }
                    }
                    ExportFormat::Json => writeln!(out, "{}", json::to_string_pretty(&json::json(&analysis)))?,
                }
                Ok(())
            })
        }
    }
}

/// The targets and recording options from the command line, checked.
fn record_options(
    targets: TargetArgs,
    p: ProbeArgs,
    duration: Option<Duration>,
) -> Result<(Vec<Process>, RecordOptions)> {
    let TargetArgs { pids, comms, all } = targets;
    let selection = targets::Selection { pids, comms, all };
    if selection.is_empty() {
        bail!("no target: give --pid PID, --comm NAME or --all");
    }
    if !(p.max_overhead > 0.0 && p.max_overhead <= 100.0) {
        bail!(
            "--max-overhead {} is out of range: give a percentage above 0 and at most 100 (100: probes always attached)",
            p.max_overhead
        );
    }
    if !(1..=10_000).contains(&p.freq) {
        bail!("--freq {} is out of range: use 1 to 10000 Hz", p.freq);
    }
    if !(8..=MAX_STACK_BYTES).contains(&p.stack_bytes) || p.stack_bytes % 8 != 0 {
        bail!(
            "--stack-bytes {} is out of range: use a multiple of 8 from 8 to {MAX_STACK_BYTES}",
            p.stack_bytes
        );
    }
    let procs = selection.resolve()?;
    let attach = AttachOptions {
        families: tlsprof::catalogue::families::BUILT_IN.to_vec(),
        hello_capture: match p.hello_capture {
            HelloCaptureArg::Sampled => HelloCapture::Sampled,
            HelloCaptureArg::Always => HelloCapture::Always,
            HelloCaptureArg::Off => HelloCapture::Off,
        },
        freq_hz: p.freq,
        all_probes: p.all_probes,
        call_graph: match p.call_graph {
            CallGraphArg::Dwarf => CallGraph::Dwarf,
            CallGraphArg::Fp => CallGraph::Fp,
        },
        stack_bytes: p.stack_bytes,
        kernel_stacks: p.kernel,
    };
    let opts = RecordOptions {
        duration,
        selection,
        attach,
        max_overhead_pct: p.max_overhead,
    };
    Ok((procs, opts))
}

/// Ctrl-C, SIGTERM or SIGHUP sets the flag (stop) and counts: one that comes after a recording has ended (a
/// second one, or the first after --duration) also skips `openssl speed`.
fn stop_on_signals() -> Result<(Arc<AtomicBool>, Arc<AtomicUsize>)> {
    let stop = Arc::new(AtomicBool::new(false));
    let signals = Arc::new(AtomicUsize::new(0));
    let (flag, count) = (stop.clone(), signals.clone());
    ctrlc::set_handler(move || {
        flag.store(true, Ordering::Relaxed);
        count.fetch_add(1, Ordering::Relaxed);
    })
    .context("install the Ctrl-C and SIGTERM handler")?;
    Ok((stop, signals))
}

/// Writes to the file (atomically: a temporary file renamed into place) or to standard output.
fn emit(output: Option<&Path>, draw: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    match output {
        Some(p) => file::write_atomically(p, draw).with_context(|| format!("cannot write {}", p.display())),
        None => {
            let mut out = BufWriter::new(std::io::stdout().lock());
            draw(&mut out)?;
            out.flush().context("cannot write standard output")
        }
    }
}
