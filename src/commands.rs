// SPDX-License-Identifier: Apache-2.0
//! What each subcommand does with its command line: a function per subcommand, called by the binary's
//! dispatcher (src/main.rs).

use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::analyze::{advice, analyze, summarize};
use crate::cli::{CallGraphArg, ExportFormat, GroupArg, HelloCaptureArg, ProbeArgs, TargetArgs, TopGroupArg};
use crate::model::{file, CallGraph, Recording};
use crate::output::styled::Color;
use crate::output::{diff, flame, html, json, pprof, text, Group};
use crate::record::targets::{self, Process};
use crate::record::{self, AttachOptions, HelloCapture, RecordOptions, MAX_STACK_BYTES};
use crate::{serve, top};

/// `tlsprof check`: its screen; failure when recording cannot work.
pub fn check(color: Color) -> Result<ExitCode> {
    let found = record::check::this_machine(&attach_options(ProbeArgs::defaults())?);
    print!("{}", crate::output::check::text(&found, color));
    Ok(match found.cannot_record() {
        Some(_) => ExitCode::FAILURE,
        None => ExitCode::SUCCESS,
    })
}

/// `tlsprof record`: records, writes the recording, and prints its report.
pub fn record(
    targets: TargetArgs,
    probes: ProbeArgs,
    duration: Option<f64>,
    output: &Path,
    brief: bool,
    color: Color,
) -> Result<()> {
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
    rec.save(output)?;
    let signals_when_recorded = signals.load(Ordering::Relaxed);
    // The alternatives advice will quote, measured once the recording is over so that the targets
    // did not compete with `openssl speed` for the CPU while recorded.
    let needed = advice::references_needed(&rec.handshakes);
    rec.openssl_speed = record::speed::measure(&needed, || signals.load(Ordering::Relaxed) > signals_when_recorded);
    if !rec.openssl_speed.is_empty() {
        rec.save(output)?;
    }
    print_text(&analyze(&rec), brief, Group::Stage, color);
    eprintln!("tlsprof: recording written to {}", output.display());
    Ok(())
}

/// `tlsprof serve`: records continuously, serving metrics and profiles.
pub fn serve(targets: TargetArgs, probes: ProbeArgs, listen: &str, web_config: Option<&Path>) -> Result<()> {
    let web = web_config.map(serve::web::WebConfig::load).transpose()?;
    let (procs, opts) = record_options(targets, probes, None)?;
    let (stop, _) = stop_on_signals()?;
    serve::serve(listen, web, &procs, &opts, stop)
}

/// How `tlsprof top` shows what it sees, from its options, checked.
pub fn top_options(
    interval: f64,
    group: TopGroupArg,
    batch: bool,
    once: bool,
    output: PathBuf,
    color: Color,
) -> Result<top::TopOptions> {
    if !(0.1..=3600.0).contains(&interval) {
        bail!("--interval {interval} is out of range: give 0.1 to 3600 seconds");
    }
    Ok(top::TopOptions {
        interval: Duration::from_secs_f64(interval),
        group: match group {
            TopGroupArg::Process => top::RowGroup::Process,
            TopGroupArg::Program => top::RowGroup::Program,
        },
        batch: batch || once || !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal(),
        once,
        output,
        color: color == Color::On,
    })
}

/// `tlsprof top`: the live view, of every process with TLS code unless told which.
pub fn top(mut targets: TargetArgs, probes: ProbeArgs, view: &top::TopOptions) -> Result<()> {
    if targets.pids.is_empty() && targets.comms.is_empty() {
        targets.all = true;
    }
    let (procs, opts) = record_options(targets, probes, None)?;
    let (stop, _) = stop_on_signals()?;
    top::top(&procs, &opts, view, stop)
}

/// `tlsprof report`: a recording's report as text, JSON or an HTML page.
pub fn report(
    file: &Path,
    as_json: bool,
    as_html: bool,
    output: Option<&Path>,
    group: GroupArg,
    brief: bool,
    color: Color,
) -> Result<()> {
    let rec = Recording::load(file)?;
    let analysis = analyze(&rec);
    if as_html {
        emit(output, |out| html::report(&rec, &analysis, out))?;
    } else if as_json {
        println!("{}", json::to_string_pretty(&json::json(&analysis)));
    } else {
        print_text(&analysis, brief, group.into(), color);
    }
    Ok(())
}

/// `tlsprof diff`: two recordings compared as text or JSON (their differential flame graph to --output), or
/// as an HTML page.
pub fn diff(
    before: &Path,
    after: &Path,
    output: Option<&Path>,
    as_json: bool,
    as_html: bool,
    color: Color,
) -> Result<()> {
    let (b, a) = (Recording::load(before)?, Recording::load(after)?);
    let (bs, as_) = (summarize(&b), summarize(&a));
    if as_html {
        return emit(output, |out| html::diff((&b, &bs), (&a, &as_), out));
    }
    if as_json {
        println!("{}", json::to_string_pretty(&diff::json(&bs, &as_)?));
    } else {
        print!("{}", diff::text(&bs, &as_, color)?);
    }
    if let Some(p) = output {
        file::write_atomically(p, |w| diff::svg(&b, &a, w)).with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}

/// `tlsprof flamegraph`: a recording's flame graph, or its folded stacks.
pub fn flamegraph(file: &Path, output: Option<&Path>, folded: bool, group: GroupArg) -> Result<()> {
    let rec = Recording::load(file)?;
    let group: Group = group.into();
    emit(output, |out| {
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

/// `tlsprof export`: a recording for other tools.
pub fn export(file: &Path, format: ExportFormat, output: Option<&Path>) -> Result<()> {
    if format == ExportFormat::Pprof && output.is_none() && std::io::stdout().is_terminal() {
        bail!("a pprof profile is binary: give --output FILE or redirect standard output");
    }
    let rec = Recording::load(file)?;
    let analysis = analyze(&rec);
    emit(output, |out| {
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

/// The text report, or its first screen alone.
fn print_text(analysis: &crate::analyze::Analysis, brief: bool, group: Group, color: Color) {
    if brief {
        print!("{}", text::brief(analysis, color));
    } else {
        print!("{}", text::text(analysis, group, color));
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
    if p.wire_only && selection.all {
        bail!("--wire-only counts the processes --pid and --comm name: --all takes those with TLS code it can probe");
    }
    if p.wire_only && matches!(p.hello_capture, HelloCaptureArg::Off) {
        bail!("--wire-only counts handshakes from the sockets, which --hello-capture off leaves unread: drop one");
    }
    if !(p.max_overhead > 0.0 && p.max_overhead <= 100.0) {
        bail!(
            "--max-overhead {} is out of range: give a percentage above 0 and at most 100 (100: probes always attached)",
            p.max_overhead
        );
    }
    let max_overhead_pct = p.max_overhead;
    let attach = attach_options(p)?;
    let procs = selection.resolve()?;
    let opts = RecordOptions {
        duration,
        selection,
        attach,
        max_overhead_pct,
    };
    Ok((procs, opts))
}

/// How to probe and sample, from the command line, checked.
fn attach_options(p: ProbeArgs) -> Result<AttachOptions> {
    if !(1..=10_000).contains(&p.freq) {
        bail!("--freq {} is out of range: use 1 to 10000 Hz", p.freq);
    }
    if !(8..=MAX_STACK_BYTES).contains(&p.stack_bytes) || p.stack_bytes % 8 != 0 {
        bail!(
            "--stack-bytes {} is out of range: use a multiple of 8 from 8 to {MAX_STACK_BYTES}",
            p.stack_bytes
        );
    }
    Ok(AttachOptions {
        families: crate::catalogue::families::BUILT_IN.to_vec(),
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
        wire_only: p.wire_only,
        jvm_perf_maps: !p.no_jvm_perf_map,
    })
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
