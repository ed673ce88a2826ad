// SPDX-License-Identifier: Apache-2.0
//! The command line: its subcommands and options, defined once for the binary, its man pages and shell
//! completions (scripts/gen_docs.rs).

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Arg, ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::output::styled::Color;
use crate::output::Group;

/// Profile the TLS CPU of running processes, stage by stage.
///
/// tlsprof attaches to processes that are already running, probes the TLS library functions a handshake is made
/// of, samples CPU stacks, and says how much of their CPU is TLS, which stage, why, and what to do first.
/// `record` writes a recording that `report`, `flamegraph`, `diff` and `export` read; `top` is the live view;
/// `serve` runs continuously for Prometheus and pprof. Recording needs root (or CAP_BPF, CAP_PERFMON
/// and CAP_CHECKPOINT_RESTORE); `tlsprof check` says what this machine allows.
#[derive(Parser)]
#[command(
    name = "tlsprof",
    version,
    after_help = "Every subcommand: tlsprof COMMAND --help; the details: man tlsprof-COMMAND."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Colour and bars in the text (auto: on a terminal, unless NO_COLOR is set).
    ///
    /// Applies to the text of `report`, `record`, `diff`, `top` and `check`: auto when standard output is a terminal
    /// and NO_COLOR is unset or empty.
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
    /// Record running processes' TLS CPU into a file, then print its summary.
    ///
    /// Attaches to the processes given by --pid, --comm or --all, records until --duration, Ctrl-C, SIGTERM or
    /// every target exits, writes the recording (tlsprof.data) and prints the report's text.
    #[command(
        after_help = "By default: stage probes within 0.3% of the targets' CPU (figures estimated from probe \
windows, with 95% intervals; --max-overhead 100 for exact), 99 Hz stacks, hellos read a second in ten, until \
Ctrl-C; written to tlsprof.data.
Example: sudo tlsprof record --comm nginx --duration 30"
    )]
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
        /// Print only the report's first screen at the end (`tlsprof report` has the rest).
        #[arg(long)]
        brief: bool,
    },
    /// Record continuously; serve Prometheus metrics and pprof profiles over HTTP.
    ///
    /// Records until SIGTERM or Ctrl-C, serving Prometheus metrics at /metrics and pprof profiles: of the
    /// next N seconds at /debug/pprof/profile?seconds=N (as Go's net/http/pprof, for profile scrapers), of the
    /// last N seconds at /profile?seconds=N.
    #[command(after_help = "By default: the probes' budget and sampling as for `record`.
Example: sudo tlsprof serve --comm nginx --listen 127.0.0.1:9465")]
    Serve {
        #[command(flatten)]
        targets: TargetArgs,
        /// Address to serve on, e.g. 127.0.0.1:9465.
        ///
        /// Plain HTTP without authentication unless --web.config.file says otherwise: keep it on loopback or
        /// a trusted network then.
        #[arg(long, value_name = "ADDR")]
        listen: String,
        /// TLS and basic auth, in the Prometheus exporter-toolkit's web config format.
        ///
        /// `tls_server_config` (cert_file, key_file, client_auth_type NoClientCert, VerifyClientCertIfGiven
        /// or RequireAndVerifyClientCert with client_ca_file, min_version and max_version TLS12 or TLS13) and
        /// `basic_auth_users` (user: bcrypt hash, as `htpasswd -nBC 10 USER` makes). Relative paths are the
        /// file's directory's. A file that is wrong stops serve before it starts.
        #[arg(long = "web.config.file", value_name = "FILE")]
        web_config_file: Option<PathBuf>,
        #[command(flatten)]
        probes: ProbeArgs,
    },
    /// A live view, refreshed every second: a row per process with TLS code.
    ///
    /// Each row: the process's TLS share of its CPU, handshakes per second, resumption, CPU per full
    /// handshake and top stage. Off a terminal, or with --batch, a line per process and interval.
    #[command(
        after_help = "By default: every process with TLS code (--all), probes and sampling as for `record`.
Keys: up/down select, s sort, p pause, r reset, w write a recording, q quit.
Example: sudo tlsprof top --comm nginx"
    )]
    Top {
        #[command(flatten)]
        targets: TargetArgs,
        /// Seconds between refreshes.
        #[arg(long, value_name = "SECS", default_value_t = 1.0)]
        interval: f64,
        /// A row per process, or per program (an nginx master and its workers as one).
        #[arg(long, value_enum, default_value = "process")]
        group: TopGroupArg,
        /// A line per process and interval on standard output (like `vmstat 1`), no screen.
        #[arg(long)]
        batch: bool,
        /// One interval's lines, then stop (implies --batch).
        #[arg(long)]
        once: bool,
        /// Where the `w` key writes what was seen so far, for `tlsprof report`.
        #[arg(long, short, value_name = "FILE", default_value = "tlsprof.data")]
        output: PathBuf,
        #[command(flatten)]
        probes: ProbeArgs,
    },
    /// Print the summary of a recording: text, JSON or one HTML page.
    #[command(after_help = "By default: the whole text report on standard output.
Example: tlsprof report tlsprof.data --html -o report.html")]
    Report {
        /// The recording (`tlsprof record`'s output).
        file: PathBuf,
        /// Machine-readable JSON instead of text.
        #[arg(long)]
        json: bool,
        /// One self-contained HTML page (charts and flame graph inline, nothing fetched).
        ///
        /// Written to --output or, without it, to standard output.
        #[arg(long, conflicts_with = "json")]
        html: bool,
        /// Where to write the HTML page (default: standard output).
        #[arg(long, short, value_name = "FILE", requires = "html")]
        output: Option<PathBuf>,
        /// How the call tree groups what runs inside each stage function.
        #[arg(long, value_enum, default_value = "stage")]
        group: GroupArg,
        /// Only the first screen: TLS CPU, stages, what to do first, how far to trust it.
        #[arg(long, conflicts_with_all = ["json", "html"])]
        brief: bool,
    },
    /// Compare two recordings: handshake mix, CPU per handshake and per stage.
    #[command(after_help = "By default: the comparison as text on standard output.
Example: tlsprof diff before.data after.data -o diff.svg")]
    Diff {
        /// The recording before the change.
        before: PathBuf,
        /// The recording after it.
        after: PathBuf,
        /// Also write a differential flame graph (SVG) here; with --html, the page.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Machine-readable JSON instead of text.
        #[arg(long)]
        json: bool,
        /// One self-contained HTML page (tables, charts, differential flame graph inline).
        ///
        /// Written to --output or, without it, to standard output.
        #[arg(long, conflicts_with = "json")]
        html: bool,
    },
    /// Draw a flame graph (SVG) of a recording, or print its folded stacks.
    #[command(after_help = "By default: SVG on standard output, stacks grouped by stage function.
Example: tlsprof flamegraph tlsprof.data -o flame.svg")]
    Flamegraph {
        /// The recording (`tlsprof record`'s output).
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
    /// Write a recording for other tools: pprof (go tool pprof, Parca), folded or JSON.
    #[command(after_help = "Example: tlsprof export tlsprof.data --format pprof -o tls.pb.gz")]
    Export {
        /// The recording (`tlsprof record`'s output).
        file: PathBuf,
        /// What to write.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Write here instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Check what this machine lets tlsprof record, and what each missing thing costs.
    ///
    /// Like `bpftrace --info`. A line per item: privileges, BTF, uprobes and their kinds, lockdown, tracefs and the tracepoints, the
    /// CPU sampler; for one limited or missing, what tlsprof loses and the fix. It loads the BPF programs and
    /// attaches them to tlsprof itself as recording would, then detaches them; what recording would mount
    /// (tracefs) it mounts where only it sees it. Exits 1 when recording cannot work.
    #[command(after_help = "Exits 1 when recording cannot work.\nExample: sudo tlsprof check")]
    Check,
}

/// Which processes to profile.
#[derive(Args)]
pub struct TargetArgs {
    /// Process id to profile, with the children it starts (repeatable).
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Every process with this name, e.g. nginx's master and workers (repeatable).
    ///
    /// Processes of that name that start while recording are taken in before their first handshake.
    #[arg(long = "comm", value_name = "NAME")]
    pub comms: Vec<String>,
    /// Every process with TLS code, containers included, and those that start.
    ///
    /// Every process on the machine that runs OpenSSL, Go crypto/tls, rustls, BoringSSL or AWS-LC code, and
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
    /// Also probe the record layer and other hot functions (exact, but costly).
    ///
    /// Functions called many times per handshake or on every request (SSL_read/SSL_write for the read/write
    /// stages, EVP_KDF_derive): exact, but each probe hit costs the target microseconds.
    #[arg(long)]
    pub all_probes: bool,
    /// How to capture user stacks: unwind a copy (dwarf) or follow frame pointers (fp).
    ///
    /// Copy the stack and unwind it with DWARF unwind tables, or follow frame pointers (cheaper; wrong
    /// through libraries built without them, like Debian's OpenSSL).
    #[arg(long, value_enum, value_name = "HOW", default_value = "dwarf")]
    pub call_graph: CallGraphArg,
    /// Bytes of user stack copied per sample for --call-graph dwarf.
    ///
    /// Deep stacks (Node.js's main thread) need tens of KiB to reach main() from a TLS handshake.
    #[arg(long, value_name = "BYTES", default_value_t = 65536)]
    pub stack_bytes: u32,
    /// Also record kernel frames (the probes' own traps are kept without it).
    #[arg(long)]
    pub kernel: bool,
    /// When to read hellos off the sockets: version, cipher, group, resumption offers.
    ///
    /// ServerHellos and ClientHellos give the protocol version, cipher suite and group, and what clients
    /// offered to resume.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "sampled")]
    pub hello_capture: HelloCaptureArg,
    /// Do not ask JVMs to name their JIT-compiled code (jcmd Compiler.perfmap).
    ///
    /// By default a HotSpot JVM among the targets is asked, through its attach mechanism (the one jcmd uses), to
    /// write /tmp/perf-PID.map before each batch of stacks is named: the names of its JIT-compiled Java methods,
    /// which place the JDK's own TLS (JSSE) in its stages. A JVM without an attach listener starts one.
    #[arg(long)]
    pub no_jvm_perf_map: bool,
    /// Count handshakes from the targets' sockets alone, without stage probes.
    ///
    /// Every --pid and --comm target is counted from the wire, as a process whose TLS code tlsprof cannot probe
    /// is: full, resumed and abandoned handshakes with their version, cipher, group and resumption, but no TLS
    /// CPU and no stages. Not with --all or --hello-capture off.
    #[arg(long)]
    pub wire_only: bool,
    /// Most the stage probes may cost the targets, in % of their CPU (100: exact).
    ///
    /// When handshakes are frequent enough to cost more, the probes are attached part of the time and counts are scaled from those
    /// windows; 100 keeps them attached throughout (exact counts, at whatever it costs). The probes' cost
    /// is what samples taken in their traps measure in the targets (their calibrated cost until they say
    /// more). The default leaves room for what a trap costs the target's own code after it (colder caches),
    /// which no sample shows, and for the CPU sampler (docs/overhead.md).
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
    /// Gzipped profile.proto: CPU samples and CPU in ns per stack, labelled by stage,
    /// library, role, process and pid.
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
    /// A cause under each stage (lookups, socket I/O, MACs, ...), then its functions.
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
    /// Up to 1 s in every 10 s while connections are made: the mix is sampled from those.
    Sampled,
    /// All the time: every handshake's, for a little CPU on every socket call.
    Always,
    /// Never: version, cipher, group and resumption offers stay unknown.
    Off,
}

/// The command line as parsed and documented: `-h` and `--help` both print the one-screen help (each item's
/// first line); the man pages carry every item's whole text.
pub fn command() -> clap::Command {
    fn short_help(cmd: clap::Command) -> clap::Command {
        let page = match cmd.get_name() {
            "tlsprof" => "man tlsprof".to_string(),
            name => format!("man tlsprof-{name}"),
        };
        cmd.disable_help_flag(true).help_expected(true).arg(
            Arg::new("help")
                .short('h')
                .long("help")
                .action(ArgAction::HelpShort)
                .help(format!("Print this help (every detail: {page})")),
        )
    }
    short_help(Cli::command().disable_help_subcommand(true)).mut_subcommands(short_help)
}

/// The command line of this process, parsed; clap prints help, versions and usage errors and exits.
pub fn parse() -> Cli {
    Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit())
}
