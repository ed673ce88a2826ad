// SPDX-License-Identifier: Apache-2.0
//! The profile model: what a recording holds and its file format. Pure data: nothing here touches the
//! kernel, the targets or the command line.

pub mod file;
mod histogram;
pub mod lost;
mod merge;
mod probe_cost;
mod resumption;
pub mod untrusted;

pub use histogram::CpuHistogram;
pub use lost::Lost;
pub use probe_cost::{
    corrected_tree, Hits, OwnPrograms, ProbeCost, ProgramRuns, RawNode, SamplerRan, TrapSamples, CALIBRATION_AS_SAMPLES,
};
pub use resumption::{Offer, Refusal, TicketKey};

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

pub use crate::catalogue::families::{Flavor, Symbols};
use crate::catalogue::Stage;

/// The operations `openssl speed` measures for advice: the keys of [`Recording::openssl_speed`].
pub mod speed_ops {
    pub const ECDSA_P256_SIGN: &str = "ecdsap256_sign";
    pub const X25519_DERIVE: &str = "ecdhx25519_derive";
}

pub const FORMAT: &str = "tlsprof-recording";
pub const FORMAT_VERSION: u32 = 11;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Recording {
    pub format: String,
    pub format_version: u32,
    pub tlsprof_version: String,
    /// When the recording started, on the wall clock (Unix time, ns); None in recordings made before it
    /// was kept.
    #[serde(default)]
    pub start_unix_ns: Option<u64>,
    pub duration_s: f64,
    pub sample_freq_hz: u64,
    pub call_graph: CallGraph,
    pub stack_bytes: u32,
    /// Processes whose JIT code ran without a perf map, so its frames have no names.
    pub unnamed_jit_pids: Vec<u32>,
    pub all_probes: bool,
    pub targets: Vec<Target>,
    pub libraries: Vec<Library>,
    /// Indexed by function id (the id in tree paths and sample paths).
    pub functions: Vec<Function>,
    pub tree: Vec<TreeNode>,
    pub samples: Vec<Sample>,
    /// The file each user frame name was found in (the target's path for it): for outputs that name files.
    /// Empty in recordings made before it was kept.
    #[serde(default)]
    pub frame_files: BTreeMap<String, String>,
    /// Files some sampled frames had no names in, and why. Empty in recordings made before it was kept.
    #[serde(default)]
    pub unnamed_files: Vec<UnnamedFile>,
    /// Stripped files named from separate debug information: path -> where it was found (a debug
    /// directory, ".gnu_debugdata", a debuginfod server's URL).
    #[serde(default)]
    pub debug_files: BTreeMap<String, String>,
    pub handshakes: Vec<HandshakeGroup>,
    /// Ticket key names offered to the targets as servers, in the handshakes whose ClientHello was read.
    #[serde(default)]
    pub ticket_keys: Vec<TicketKey>,
    pub lost: Lost,
    /// Measured at attach; tree and handshake CPU figures are already corrected with it.
    pub probe_cost: ProbeCost,
    /// Probe hits on the targets, and the single-stepped ones among them: what their CPU paid for the
    /// probes (probe_overhead_ms).
    pub probe_hits: u64,
    pub probe_stepped_hits: u64,
    /// Hits of the probes placed in every process that maps their file (--comm, --all, a target with
    /// children), in processes that are not targets: what the recording cost processes outside it.
    #[serde(default)]
    pub other_process_hits: u64,
    /// The trap sampler's samples of the targets and those of them in the probes' traps: the probes' cost
    /// measured in the targets. None when the kernel hides its symbols' addresses, and in recordings made
    /// before they were counted.
    #[serde(default)]
    pub probe_traps: Option<TrapSamples>,
    pub probing: Probing,
    /// µs per operation of alternatives advice compares with (`openssl speed` on this machine at record time).
    pub openssl_speed: BTreeMap<String, f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    pub pid: u32,
    pub comm: String,
    /// CPU the whole process used while recorded (all threads, user + system), from its CPU-time clock.
    pub process_cpu_ms: f64,
    /// The part of it used while the stage probes were attached: what stage figures compare with.
    pub probed_cpu_ms: f64,
    /// Seconds into the recording from which its SSL_read/SSL_write were probed as handshake drivers: its
    /// handshake stages ran outside any handshake call (a public-API-only libssl, the handshake left to
    /// SSL_read/SSL_write). None: not needed.
    #[serde(default)]
    pub io_driven_from_s: Option<f64>,
    /// The container or service its cgroup names (`docker 0123456789ab`, `nginx.service`); chosen by the
    /// target's environment: untrusted text.
    #[serde(default)]
    pub container: Option<String>,
    /// Connections it accepted or opened over the recording, counted without probes: what the handshakes
    /// seen in the probe windows scale by.
    #[serde(default)]
    pub connections: u64,
    /// Seconds into the recording at which it was seen to have run a new program (exec): its probes and
    /// mappings were replaced then.
    #[serde(default)]
    pub execs_at_s: Vec<f64>,
    /// The scheduler slices of its threads that ran TLS stages, in ms: with and without what the kernel left
    /// out of their task clock, as of the process's CPU clock (the hypervisor's steal time; record/duty/steal.rs).
    /// Stage and handshake CPU leave it out too.
    #[serde(default)]
    pub stage_slices_ms: f64,
    #[serde(default)]
    pub stage_slices_cpu_ms: f64,
    /// What tlsprof's programs other than the probes cost it. Zero in recordings made before it was measured.
    #[serde(default)]
    pub own_programs: OwnPrograms,
    /// It started during the recording and joined as it did (a target's new process, one named by --comm, one
    /// that ran TLS code under --all): seconds into the recording when tlsprof took it in, and the target
    /// that forked it.
    #[serde(default)]
    pub joined_at_s: Option<f64>,
    #[serde(default)]
    pub parent: Option<u32>,
    /// It had exited when the recording ended.
    #[serde(default)]
    pub exited: bool,
    /// The processes this target stands for: 1, or more where a report folds those of one program that
    /// started during the recording into one (Recording::fold_started).
    #[serde(default = "one")]
    pub processes: u32,
}

fn one() -> u32 {
    1
}

/// When the stage probes were attached (--max-overhead): handshakes, the call tree and stage CPU come from
/// these windows; CPU samples cover the whole recording.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Probing {
    /// The budget, in percent of the targets' CPU; 100: attached throughout.
    pub max_overhead_pct: f64,
    pub live_s: f64,
    pub windows: u32,
    /// The probes' cost over the costliest chunk (0.2 s) they were attached, as a fraction of the targets' CPU.
    pub peak_overhead: f64,
    /// What each window saw: what estimates for the whole recording, and their error, are made from. Empty
    /// in recordings made before windows were kept one by one.
    #[serde(default)]
    pub window_figures: Vec<ProbeWindow>,
}

/// One probe window: what the probes saw in each target during it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProbeWindow {
    /// When it opened, by the wall clock (ns since the Unix epoch); None in recordings made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_unix_ns: Option<u64>,
    pub live_s: f64,
    pub processes: Vec<WindowPart>,
    /// An earlier continuous-mode interval's window, standing for an interval whose connections all came
    /// while the probes were detached: its ratios (handshakes per connection, stage CPU per CPU ms) hold
    /// for it, but it sampled none of it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stands_in: bool,
}

/// What a probe window saw in one target (pid), or in several added together.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WindowPart {
    pub pid: u32,
    /// The process's CPU during the window, without the probes' estimated cost (the probes' hits are counted
    /// for all targets together: each process's share of their cost is its share of the window's CPU).
    pub own_cpu_ms: f64,
    /// Connections it accepted or opened during the window.
    pub connections: u64,
    pub handshakes: HandshakeCounts,
    /// The abandoned handshakes, each weighted by the inverse of its chance to be seen: one is seen when its
    /// work and its end both fall inside the probes' attachment, so one that ends D after its work began is
    /// seen in an attachment of length S with chance (S - D) / S. None in recordings made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abandoned_weighted: Option<f64>,
    /// Self CPU per stage in the window, the probes' cost taken out, in ns.
    pub stage_self_ns: BTreeMap<Stage, u64>,
    /// Its completed handshakes by role whose ClientHello was read, and how many of those refused a session:
    /// the windows are the clusters resumption is sampled in. Empty in recordings made before it was kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hellos: BTreeMap<Role, HelloCounts>,
}

/// Completed handshakes whose ClientHello was read whole, and those of them that refused the session it
/// offered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HelloCounts {
    pub read: u64,
    pub refused: u64,
}

impl WindowPart {
    /// The abandoned handshakes the window stands for: weighted for their chance to be seen where that was
    /// kept, else as counted.
    pub fn abandoned_seen(&self) -> f64 {
        self.abandoned_weighted.unwrap_or(self.handshakes.abandoned as f64)
    }

    pub(crate) fn add(&mut self, other: &WindowPart) {
        self.own_cpu_ms += other.own_cpu_ms;
        self.connections += other.connections;
        if self.abandoned_weighted.is_some() || other.abandoned_weighted.is_some() {
            self.abandoned_weighted = Some(self.abandoned_seen() + other.abandoned_seen());
        }
        self.handshakes.add_counts(&other.handshakes);
        for (stage, ns) in &other.stage_self_ns {
            *self.stage_self_ns.entry(*stage).or_default() += ns;
        }
        for (role, h) in &other.hellos {
            let mine = self.hellos.entry(*role).or_default();
            mine.read += h.read;
            mine.refused += h.refused;
        }
    }
}

impl ProbeWindow {
    /// What the window saw in all its processes together (pid 0).
    pub fn whole(&self) -> WindowPart {
        let mut whole = WindowPart::default();
        for p in &self.processes {
            whole.add(p);
        }
        whole
    }

    /// Whether any of its processes accepted or opened a connection during it.
    pub fn saw_connections(&self) -> bool {
        self.processes.iter().any(|p| p.connections > 0)
    }
}

/// Handshakes completed, by what was seen of them. `partial`: under way when the probes attached, so
/// neither role nor resumption is known; not in the other counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HandshakeCounts {
    pub total: u64,
    pub full: u64,
    pub resumed: u64,
    pub server: u64,
    pub client: u64,
    pub partial: u64,
    /// Did work but ended before completing: not in the other counts.
    pub abandoned: u64,
}

impl HandshakeCounts {
    pub fn add_counts(&mut self, o: &HandshakeCounts) {
        self.total += o.total;
        self.full += o.full;
        self.resumed += o.resumed;
        self.server += o.server;
        self.client += o.client;
        self.partial += o.partial;
        self.abandoned += o.abandoned;
    }

    pub fn add(&mut self, kind: &HandshakeKind, n: u64) {
        if kind.outcome == Outcome::Abandoned {
            self.abandoned += n;
            return;
        }
        if kind.role == Role::Partial {
            self.partial += n;
            return;
        }
        self.total += n;
        if kind.resumed {
            self.resumed += n;
        } else {
            self.full += n;
        }
        match kind.role {
            Role::Server => self.server += n,
            Role::Client => self.client += n,
            Role::Partial => {}
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Library {
    pub path: String,
    /// Its TLS library family (catalogue::families::Family::id).
    pub family: String,
    pub flavor: Flavor,
    pub version: Option<String>,
    pub symbols: Symbols,
    pub functions_found: usize,
    pub pids: Vec<u32>,
    /// The file at `path` was deleted or replaced on disk while this one was mapped (a package upgrade):
    /// the processes in `pids` ran this, the old file.
    #[serde(default)]
    pub replaced: bool,
    /// Where a handshake call fails, its connection's handshake state was read (the library's layout of
    /// it was read off its accessors): a failure after the handshake completed counts it as completed.
    #[serde(default)]
    pub handshake_state: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Function {
    pub name: String,
    /// Index into `libraries`.
    pub library: usize,
    pub stage: Option<Stage>,
}

/// One call-tree node: the path of function ids from the outermost stage function down.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TreeNode {
    pub pid: u32,
    pub path: Vec<u16>,
    pub calls: u64,
    pub cpu_ns: u64,
    pub self_ns: u64,
}

/// How user stacks were captured (--call-graph).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallGraph {
    /// Copy the user stack and unwind it with .eh_frame/.debug_frame (frame pointers for JIT code).
    Dwarf,
    /// Follow frame pointers in the kernel: cheaper, wrong through code built without them.
    Fp,
}

/// CPU samples with the same process, stage path and stack.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sample {
    pub pid: u32,
    pub path: Vec<u16>,
    /// User frames, outermost first, stage functions tagged: ("main", ..., "ngx_ssl_handshake",
    /// "SSL_do_handshake [handshake]", ..., "bn_sqrx8x_internal"); "[truncated]" first when unwinding stopped
    /// early (the stage frames the probes recorded then stand in for the lost part).
    pub frames: Vec<String>,
    /// Kernel frames below the user ones, outermost first (with --kernel).
    pub kernel: Vec<String>,
    /// The unwinder reached the root of the stack; false: outer frames are missing.
    pub complete: bool,
    pub count: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Server,
    Client,
    /// The connection began before tlsprof attached (its SSL_set_*_state call was not seen): only part of
    /// its handshake was observed, so it is reported apart and not counted.
    Partial,
}

/// What a handshake was; handshakes alike are counted together.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HandshakeKind {
    pub role: Role,
    pub resumed: bool,
    /// "RSA-2048", "ECDSA P-256": from the signature's length; None when no signature was seen (resumed).
    pub certificate_key: Option<String>,
    /// "x25519", "ffdhe2048" from the ServerHello flight; else "ECDHE (X25519 or P-256)", "DHE-2048", "RSA key
    /// transport" from the shared secret's length.
    pub key_exchange: Option<String>,
    /// From the ServerHello flight; None when it was not captured (outside capture windows).
    pub version: Option<String>,
    pub cipher: Option<String>,
    /// How a resumed handshake resumed: "TLS 1.3 PSK", "TLS 1.2 session ID or ticket"; None when unknown.
    pub resumption: Option<String>,
    /// Completed, or abandoned after the handshake did work. After the fields above, so the mix keeps its
    /// order.
    #[serde(default)]
    pub outcome: Outcome,
    /// What the ClientHello offered to resume with; None when the ServerHello was not captured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer: Option<Offer>,
    /// Why an offered session was not resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
}

impl HandshakeKind {
    /// A completed handshake, in a known role, whose ClientHello was read and parsed: the handshakes the
    /// resumption figures (offers, acceptances, refusals) are counted among.
    pub fn hello_read(&self) -> bool {
        self.outcome == Outcome::Completed
            && self.role != Role::Partial
            && matches!(self.offer, Some(o) if o != Offer::Unparsed)
    }
}

/// How a handshake ended (bpf/tlsprof.h, enum tlsprof_outcome).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    #[default]
    Completed,
    /// It did work (keygen, sign, ...) but its connection ended before it completed: the peer went away
    /// after the server's flight, or the handshake failed.
    Abandoned,
}

/// Handshakes of one kind (and outcome) in one process, with a histogram of their CPU.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HandshakeGroup {
    /// None in groups that add up several processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(flatten)]
    pub kind: HandshakeKind,
    pub cpu: CpuHistogram,
}

/// A file that sampled frames had no names in: a stripped file whose debug information was not found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnnamedFile {
    /// The target's path for it.
    pub path: String,
    pub build_id: Option<String>,
    /// The distribution package that installed it, whose debug symbols would name it.
    pub package: Option<String>,
    pub reason: UnnamedReason,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnnamedReason {
    /// Stripped; no debug file under the debug directories, no MiniDebugInfo, no debuginfod server set.
    NoDebugInfo,
    /// Stripped; the debuginfod servers had none or did not answer.
    NotOnServers,
    /// The lookup was still under way when the recording ended.
    LookupUnfinished,
    /// Its symbols (or its debug file's) do not cover the frames' code.
    NotCovered,
}

/// Largest recording read: far above what a recording holds (aggregated samples, a call tree, histograms),
/// so that a file that is not one is refused before it is parsed into memory.
pub const MAX_RECORDING_BYTES: u64 = 256 << 20;

/// Largest count or nanosecond figure a recording may hold, and largest sum of them: figures stay exact as
/// f64 and no sum of them overflows.
const MAX_FIGURE: u64 = 1 << 53;

/// The two fields that say what a file is, read before the rest.
#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    format: serde_json::Value,
    #[serde(default)]
    format_version: serde_json::Value,
}

impl Recording {
    /// Writes the recording whole or not at all (file::write_atomically).
    pub fn save(&self, path: &Path) -> Result<()> {
        file::write_atomically(path, |w| Ok(serde_json::to_writer(w, self)?))
            .with_context(|| format!("cannot write recording {}", path.display()))
    }

    /// Reads a recording, refusing anything that is not a whole, consistent one tlsprof wrote: the file may
    /// come from anywhere.
    pub fn load(path: &Path) -> Result<Recording> {
        Self::from_bytes(&file::read_bounded(path, MAX_RECORDING_BYTES, "recording")?)
            .map_err(|e| anyhow::anyhow!("{} {e}", path.display()))
    }

    /// A recording from a file's bytes; errors complete a sentence that starts with the file's name.
    pub fn from_bytes(bytes: &[u8]) -> Result<Recording> {
        let header: Header = serde_json::from_slice(bytes).map_err(|_| {
            anyhow::anyhow!(
                "is not a tlsprof recording or is damaged (not valid JSON): record it again with `tlsprof record`"
            )
        })?;
        if header.format.as_str() != Some(FORMAT) {
            bail!("is not a tlsprof recording: record one with `tlsprof record`");
        }
        let version = header.format_version.as_u64();
        if version != Some(u64::from(FORMAT_VERSION)) {
            bail!(
                "has recording format {}, this tlsprof reads format {FORMAT_VERSION}: use the tlsprof that wrote it",
                version.map_or("(none)".to_string(), |v| v.to_string())
            );
        }
        let rec: Recording = serde_json::from_slice(bytes)
            .map_err(|e| anyhow::anyhow!("is a damaged tlsprof recording ({e}): record it again"))?;
        rec.check()?;
        Ok(rec)
    }

    /// Cross-references must hold and figures be in range, or derived figures would silently be wrong.
    fn check(&self) -> Result<()> {
        let nfunc = self.functions.len();
        let bad_path = |p: &[u16]| p.iter().any(|&f| usize::from(f) >= nfunc);
        if self.functions.iter().any(|f| f.library >= self.libraries.len())
            || self.tree.iter().any(|n| n.path.is_empty() || bad_path(&n.path))
            || self.samples.iter().any(|s| bad_path(&s.path))
        {
            bail!("is a damaged tlsprof recording (inconsistent function references): record it again");
        }
        if let Err(what) = self.check_figures() {
            bail!("is a damaged tlsprof recording ({what} out of range): record it again");
        }
        Ok(())
    }

    /// Every figure finite, not negative and within what a recording can hold; sums of counts too.
    fn check_figures(&self) -> Result<(), &'static str> {
        fn sum<'a>(what: &'static str, values: impl IntoIterator<Item = &'a u64>) -> Result<u64, &'static str> {
            values
                .into_iter()
                .try_fold(0u64, |acc, &v| acc.checked_add(v).filter(|&s| s <= MAX_FIGURE))
                .ok_or(what)
        }
        fn real<'a>(what: &'static str, values: impl IntoIterator<Item = &'a f64>) -> Result<(), &'static str> {
            // A bit over a year in ms or ns, per figure: nothing a recording measures comes near.
            let ok = |v: f64| v.is_finite() && (0.0..=1e18).contains(&v);
            values.into_iter().all(|&v| ok(v)).then_some(()).ok_or(what)
        }
        real("duration", [&self.duration_s])?;
        if !(1..=1_000_000).contains(&self.sample_freq_hz) {
            return Err("sample frequency");
        }
        real(
            "target CPU",
            self.targets.iter().flat_map(|t| {
                [
                    &t.process_cpu_ms,
                    &t.probed_cpu_ms,
                    &t.stage_slices_ms,
                    &t.stage_slices_cpu_ms,
                ]
            }),
        )?;
        let c = &self.probe_cost;
        real(
            "probe cost",
            [&c.hit_ns, &c.inside_ns, &c.cold_hit_ns, &c.step_ns, &c.cold_step_ns],
        )?;
        let p = &self.probing;
        real("probing", [&p.max_overhead_pct, &p.live_s, &p.peak_overhead])?;
        real("openssl speed", self.openssl_speed.values())?;
        let parts = || p.window_figures.iter().flat_map(|w| &w.processes);
        for w in &p.window_figures {
            real("probe window", [&w.live_s])?;
        }
        for part in parts() {
            real("probe window", [&part.own_cpu_ms])?;
            sum("probe window", part.stage_self_ns.values())?;
        }
        sum("probe window connections", parts().map(|w| &w.connections))?;
        sum("probe window handshakes", parts().map(|w| &w.handshakes.total))?;
        sum("connections", self.targets.iter().map(|t| &t.connections))?;
        sum("call tree calls", self.tree.iter().map(|n| &n.calls))?;
        sum("call tree CPU", self.tree.iter().map(|n| &n.cpu_ns))?;
        sum("call tree self CPU", self.tree.iter().map(|n| &n.self_ns))?;
        sum("samples", self.samples.iter().map(|s| &s.count))?;
        sum("probe hits", [&self.probe_hits, &self.probe_stepped_hits])?;
        if let Some(t) = &self.probe_traps {
            sum("probe traps", [&t.samples, &t.freq_hz])?;
            if t.trapped > t.samples {
                return Err("probe traps");
            }
            if let Some(ran) = &t.ran {
                real("probe traps", [&ran.cpu_ms])?;
                sum("probe traps", [&ran.hits.all, &ran.hits.stepped])?;
            }
        }
        sum("lost counts", &self.lost.values())?;
        sum("handshakes", self.handshakes.iter().map(|g| &g.cpu.count))?;
        sum("handshake CPU", self.handshakes.iter().map(|g| &g.cpu.sum_ns))?;
        for g in &self.handshakes {
            let h = &g.cpu;
            if sum("handshake histogram", h.buckets.values())? != h.count
                || h.buckets.keys().any(|&b| b > CpuHistogram::MAX_BUCKET)
            {
                return Err("handshake histogram");
            }
        }
        Ok(())
    }

    /// Connections the targets accepted or opened over the recording.
    pub fn connections(&self) -> u64 {
        self.targets.iter().map(|t| t.connections).sum()
    }

    /// What tlsprof's programs other than the probes cost the targets over the recording.
    pub fn own_programs(&self) -> OwnPrograms {
        self.targets
            .iter()
            .fold(OwnPrograms::default(), |all, t| all.plus(&t.own_programs))
    }

    pub fn comm_of(&self, pid: u32) -> &str {
        self.targets
            .iter()
            .find(|t| t.pid == pid)
            .map_or("?", |t| t.comm.as_str())
    }

    /// The stage probes were detached for part of the recording (--max-overhead below 100): samples taken
    /// then have no stage path. A millisecond of slack for rounding: always-on probes cover it all.
    pub fn probed_part_time(&self) -> bool {
        self.probing.live_s < self.duration_s - 1e-3
    }

    pub fn stage_of(&self, func: u16) -> Option<Stage> {
        self.functions.get(usize::from(func)).and_then(|f| f.stage)
    }

    /// The stage each function of a stage path counts in, where it was called (catalogue::stage_within).
    pub fn path_stages(&self, path: &[u16]) -> Vec<Option<Stage>> {
        crate::catalogue::path_stages(path.iter().map(|&f| self.stage_of(f)))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs;

    /// nginx-like: SSL_do_handshake > EVP_DigestSign > EVP_DigestSignFinal, plus EVP_PKEY_derive.
    pub fn sample_recording() -> Recording {
        let lib = Library {
            path: "/usr/lib/x86_64-linux-gnu/libssl.so.3".into(),
            family: "openssl".into(),
            flavor: Flavor::Shared,
            version: Some("OpenSSL 3.0.19 27 Jan 2026".into()),
            symbols: Symbols::Exported,
            functions_found: 3,
            pids: vec![10],
            replaced: false,
            handshake_state: false,
        };
        let func = |name: &str, stage| Function {
            name: name.into(),
            library: 0,
            stage: Some(stage),
        };
        let node = |path: Vec<u16>, calls, cpu_ns, self_ns| TreeNode {
            pid: 10,
            path,
            calls,
            cpu_ns,
            self_ns,
        };
        let mut full = CpuHistogram::default();
        for ns in [1_200_000, 1_300_000, 1_250_000, 1_400_000] {
            full.add(ns);
        }
        Recording {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            tlsprof_version: "test".into(),
            start_unix_ns: Some(1_700_000_000_000_000_000),
            duration_s: 2.0,
            sample_freq_hz: 99,
            call_graph: CallGraph::Dwarf,
            stack_bytes: 16384,
            unnamed_jit_pids: Vec::new(),
            all_probes: false,
            targets: vec![Target {
                pid: 10,
                comm: "nginx".into(),
                process_cpu_ms: 10.0,
                probed_cpu_ms: 10.0,
                io_driven_from_s: None,
                container: None,
                connections: 0,
                execs_at_s: Vec::new(),
                stage_slices_ms: 0.0,
                stage_slices_cpu_ms: 0.0,
                own_programs: OwnPrograms::default(),
                joined_at_s: None,
                parent: None,
                exited: false,
                processes: 1,
            }],
            libraries: vec![lib],
            functions: vec![
                func("SSL_do_handshake", Stage::Handshake),
                func("EVP_DigestSign", Stage::Sign),
                func("EVP_DigestSignFinal", Stage::Sign),
                func("EVP_PKEY_derive", Stage::Derive),
            ],
            tree: vec![
                node(vec![0], 4, 5_150_000, 650_000),
                node(vec![0, 1], 4, 4_400_000, 100_000),
                node(vec![0, 1, 2], 4, 4_300_000, 4_300_000),
                node(vec![0, 3], 4, 100_000, 100_000),
                node(vec![2], 2, 20_000, 20_000),
            ],
            samples: vec![
                Sample {
                    pid: 10,
                    path: vec![0, 1],
                    frames: [
                        "main",
                        "ngx_ssl_handshake",
                        "SSL_do_handshake [handshake]",
                        "EVP_DigestSign [sign]",
                        "bn_mul_mont",
                    ]
                    .map(String::from)
                    .to_vec(),
                    kernel: Vec::new(),
                    complete: true,
                    count: 3,
                },
                Sample {
                    pid: 10,
                    path: vec![0, 1],
                    frames: [
                        "[truncated]",
                        "SSL_do_handshake [handshake]",
                        "EVP_DigestSign [sign]",
                        "bn_mul_mont",
                    ]
                    .map(String::from)
                    .to_vec(),
                    kernel: vec!["asm_sysvec_apic_timer_interrupt".into()],
                    complete: false,
                    count: 2,
                },
            ],
            unnamed_files: Vec::new(),
            debug_files: BTreeMap::new(),
            frame_files: BTreeMap::from([
                ("main".to_string(), "/usr/sbin/nginx".to_string()),
                ("ngx_ssl_handshake".to_string(), "/usr/sbin/nginx".to_string()),
                (
                    "bn_mul_mont".to_string(),
                    "/usr/lib/x86_64-linux-gnu/libcrypto.so.3".to_string(),
                ),
            ]),
            handshakes: vec![HandshakeGroup {
                pid: Some(10),
                kind: HandshakeKind {
                    role: Role::Server,
                    resumed: false,
                    certificate_key: Some("RSA-2048".into()),
                    key_exchange: Some("x25519".into()),
                    version: Some("TLSv1.3".into()),
                    cipher: Some("TLS_AES_256_GCM_SHA384".into()),
                    resumption: None,
                    outcome: Outcome::Completed,
                    offer: None,
                    refusal: None,
                },
                cpu: full,
            }],
            ticket_keys: Vec::new(),
            lost: Lost::default(),
            probe_cost: ProbeCost {
                hit_ns: 2000.0,
                inside_ns: 1500.0,
                cold_hit_ns: 3000.0,
                step_ns: 10_000.0,
                cold_step_ns: 12_000.0,
            },
            probe_hits: 100,
            probe_stepped_hits: 10,
            other_process_hits: 0,
            probe_traps: None,
            probing: Probing {
                max_overhead_pct: 0.5,
                live_s: 2.0,
                windows: 1,
                peak_overhead: 0.001,
                window_figures: Vec::new(),
            },
            openssl_speed: BTreeMap::from([("ecdsap256_sign".to_string(), 40.0)]),
        }
    }

    /// The sample recording's server (OpenSSL, pid 10) with ClientHellos read: 6 tickets accepted under key
    /// "aa", 3 refused under key "bb" that it never accepted, and 1 client that offered nothing; its 4 full
    /// handshakes cost 1.29 ms each, its resumed ones 0.4 ms.
    pub fn recording_with_refusals() -> Recording {
        let mut rec = sample_recording();
        let full = rec.handshakes[0].clone();
        let group = |resumed: bool, offer: Offer, refusal: Option<Refusal>, n: usize, ns: u64| {
            let mut g = full.clone();
            g.kind.resumed = resumed;
            g.kind.offer = Some(offer);
            g.kind.refusal = refusal;
            g.cpu = CpuHistogram::default();
            (0..n).for_each(|_| g.cpu.add(ns));
            g
        };
        rec.handshakes = vec![
            group(true, Offer::Psk, None, 6, 400_000),
            group(false, Offer::Psk, Some(Refusal::Ticket), 3, 1_300_000),
            group(false, Offer::Nothing, None, 1, 1_260_000),
        ];
        let mut accepted = TicketKey::new(10, Some("aa".into()), 0.1);
        (0..6).for_each(|i| accepted.add(true, 0.2 + f64::from(i)));
        let mut refused = TicketKey::new(10, Some("bb".into()), 0.5);
        (0..3).for_each(|i| refused.add(false, 0.6 + f64::from(i)));
        rec.ticket_keys = vec![accepted, refused];
        rec
    }

    /// The sample recording's nginx (pid 10) beside a node (pid 20), probed part of the time in two windows
    /// that saw both: nginx's handshakes are one per connection, node's too.
    pub fn two_process_recording() -> Recording {
        let mut rec = sample_recording();
        rec.probing.live_s = 0.5;
        rec.targets[0].probed_cpu_ms = 5.0;
        rec.targets[0].connections = 40;
        let mut node = rec.targets[0].clone();
        (
            node.pid,
            node.comm,
            node.process_cpu_ms,
            node.probed_cpu_ms,
            node.connections,
        ) = (20, "node".into(), 20.0, 10.0, 100);
        rec.targets.push(node);
        let mut own = rec.libraries[0].clone();
        (own.path, own.flavor, own.pids) = ("/usr/bin/node".into(), Flavor::Static, vec![20]);
        rec.libraries.push(own);
        let mut group = rec.handshakes[0].clone();
        group.pid = Some(20);
        group.cpu = CpuHistogram::default();
        for _ in 0..10 {
            group.cpu.add(1_000_000);
        }
        rec.handshakes.push(group);
        let more: Vec<TreeNode> = rec.tree.iter().map(|n| TreeNode { pid: 20, ..n.clone() }).collect();
        rec.tree.extend(more);
        let part = |pid, own_cpu_ms, n| WindowPart {
            pid,
            own_cpu_ms,
            connections: n,
            handshakes: HandshakeCounts {
                total: n,
                full: n,
                server: n,
                ..HandshakeCounts::default()
            },
            stage_self_ns: BTreeMap::from([(Stage::Sign, 1_000_000 * n)]),
            ..WindowPart::default()
        };
        let window = ProbeWindow {
            start_unix_ns: None,
            live_s: 0.25,
            processes: vec![part(10, 2.5, 2), part(20, 5.0, 5)],
            stands_in: false,
        };
        rec.probing.window_figures = vec![window.clone(), window];
        rec
    }

    #[test]
    fn a_process_part_holds_its_own_figures_and_its_share_of_the_probe_hits() {
        let rec = two_process_recording();
        let node = rec.of_processes(&[20]);
        assert_eq!(node.targets.len(), 1);
        assert!(node.tree.iter().all(|n| n.pid == 20) && node.tree.len() == 5);
        assert!(node.handshakes.iter().all(|g| g.pid == Some(20)) && node.handshakes.len() == 1);
        assert_eq!(node.connections(), 100);
        assert!(node
            .probing
            .window_figures
            .iter()
            .all(|w| w.processes.len() == 1 && w.processes[0].pid == 20));
        // 10 of the 15 ms while probed.
        assert_eq!(node.probe_hits, 67);
        let whole = rec.probing.window_figures[0].whole();
        assert_eq!(
            (whole.connections, whole.handshakes.total, whole.own_cpu_ms),
            (7, 7, 7.5)
        );
    }

    #[test]
    fn recording_round_trips_and_rejects_damage() {
        let dir = std::env::temp_dir().join(format!("tlsprof-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.tlsprof");
        sample_recording().save(&good).unwrap();
        let back = Recording::load(&good).unwrap();
        assert_eq!(back.tree.len(), 5);

        let junk = dir.join("junk.tlsprof");
        fs::write(&junk, b"\x7fELF not json").unwrap();
        let err = Recording::load(&junk).unwrap_err().to_string();
        assert!(err.contains("is not a tlsprof recording"), "{err}");

        let mut broken = sample_recording();
        broken.tree.push(TreeNode {
            pid: 10,
            path: vec![99],
            calls: 1,
            cpu_ns: 1,
            self_ns: 1,
        });
        let bad = dir.join("bad.tlsprof");
        broken.save(&bad).unwrap();
        let err = Recording::load(&bad).unwrap_err().to_string();
        assert!(err.contains("damaged"), "{err}");

        let missing = Recording::load(&dir.join("missing")).unwrap_err();
        assert!(format!("{missing:#}").contains("cannot read recording"));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A recording's JSON with one field replaced.
    fn with(field: &str, value: serde_json::Value) -> Vec<u8> {
        let mut v = serde_json::to_value(sample_recording()).unwrap();
        v[field] = value;
        serde_json::to_vec(&v).unwrap()
    }

    fn refused(bytes: &[u8]) -> String {
        Recording::from_bytes(bytes).unwrap_err().to_string()
    }

    #[test]
    fn hostile_recordings_are_refused_with_one_reason() {
        use serde_json::json;
        assert!(Recording::from_bytes(&with("format", json!(FORMAT))).is_ok());
        assert!(refused(&with("format", json!(["tlsprof-recording"]))).contains("is not a tlsprof recording"));
        assert!(refused(&with("duration_s", json!("1"))).contains("damaged tlsprof recording (invalid type"));
        assert!(refused(&with("duration_s", json!(1e300))).contains("(duration out of range)"));
        assert!(refused(&with("duration_s", json!(-1.0))).contains("(duration out of range)"));
        assert!(refused(&with("sample_freq_hz", json!(0))).contains("(sample frequency out of range)"));
        let mut v = serde_json::to_value(sample_recording()).unwrap();
        v["tree"][0]["cpu_ns"] = json!(u64::MAX);
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(call tree CPU out of range)"));
        // Each below the limit, their sum above it.
        v = serde_json::to_value(sample_recording()).unwrap();
        v["samples"][0]["count"] = json!(MAX_FIGURE);
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(samples out of range)"));
        for counter in Lost::COUNTERS {
            v = serde_json::to_value(sample_recording()).unwrap();
            v["lost"][counter.name] = json!(MAX_FIGURE + 1);
            let err = refused(&serde_json::to_vec(&v).unwrap());
            assert!(err.contains("(lost counts out of range)"), "{}: {err}", counter.name);
        }
        v = serde_json::to_value(sample_recording()).unwrap();
        v["lost"]["unframed_work"] = json!(u64::MAX);
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(lost counts out of range)"));
        v = serde_json::to_value(sample_recording()).unwrap();
        v["probe_traps"] = json!({"trapped": 5, "samples": 4, "freq_hz": 1000});
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(probe traps out of range)"));
        let ran = |cpu_ms: f64| json!({"trapped": 1, "samples": 4, "freq_hz": 1000, "ran": {"cpu_ms": cpu_ms, "hits": {"all": 3, "stepped": 0}}});
        v["probe_traps"] = ran(4.0);
        assert!(Recording::from_bytes(&serde_json::to_vec(&v).unwrap()).is_ok());
        v["probe_traps"] = ran(-4.0);
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(probe traps out of range)"));
        v = serde_json::to_value(sample_recording()).unwrap();
        v["handshakes"][0]["cpu"]["count"] = json!(5);
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(handshake histogram out of range)"));
        v = serde_json::to_value(sample_recording()).unwrap();
        v["handshakes"][0]["cpu"]["buckets"] = json!({"4000000000": 4});
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("(handshake histogram out of range)"));
        // Nesting far past serde_json's recursion limit: an error, not a stack overflow.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(refused(deep.as_bytes()).contains("not valid JSON"));
        let mut nested = serde_json::to_value(sample_recording()).unwrap();
        nested["extra"] = serde_json::from_str(&format!("{}1{}", "[".repeat(120), "]".repeat(120))).unwrap();
        let deep_inside = serde_json::to_vec(&nested).unwrap();
        assert!(Recording::from_bytes(&deep_inside).is_ok());
        // In a field this tlsprof does not read, skipped without recursion: no limit is needed there.
        let mut deeper = String::from_utf8(deep_inside).unwrap();
        deeper.insert_str(1, &format!("\"x\":{}{},", "[".repeat(1_000_000), "]".repeat(1_000_000)));
        assert!(Recording::from_bytes(deeper.as_bytes()).is_ok());
        let mut v = serde_json::to_value(sample_recording()).unwrap();
        v["samples"][0]["frames"] = serde_json::from_str(&format!("{}{}", "[".repeat(120), "]".repeat(120))).unwrap();
        assert!(refused(&serde_json::to_vec(&v).unwrap()).contains("damaged tlsprof recording (invalid type"));
        assert!(refused(b"").contains("not valid JSON"));
        assert!(refused(b"null").contains("not valid JSON"));
    }
}
