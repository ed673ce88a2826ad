// SPDX-License-Identifier: Apache-2.0
//! The --max-overhead duty cycle. Every probe hit is a trap in the target (microseconds in a VM), so a busy
//! server pays for each handshake's dozen hits. The governor keeps an account of the probes' cost against
//! the targets' own CPU: the budget's share of that CPU is credited as the targets use it, the probes' cost
//! is debited as they are hit. A probe window opens only once the account can pay for a whole window at the
//! cost measured in the last one, so the recording stays within the budget at any moment, not only on
//! average, whenever it ends. Within each live window every figure stays exact; the summary estimates the
//! whole recording from the windows (analyze/estimate.rs).

use std::time::{Duration, Instant};

/// The least probed time a decision is based on: the session decides at each of its polls, so a chunk is
/// one poll. Short, so that the budget buys many windows spread over the recording rather than a few long
/// ones (the estimates for the whole recording come from them, and the machine's speed drifts within
/// seconds); the first window, before anything says what the probes cost, is no longer.
const CHUNK: Duration = Duration::from_millis(50);
/// Unspent budget is kept for at most this long of the targets' CPU: a quiet hour does not pay for minutes
/// of costly probing later.
const SAVED: Duration = Duration::from_secs(10);
/// Below this much target CPU in a chunk (a nearly idle target), the ratio says nothing: count it as this.
const MIN_CPU_MS: f64 = 10.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Stay,
    Pause,
    Resume,
}

#[derive(Clone, Copy, Debug)]
enum State {
    Live {
        window_start: Instant,
        chunk_start: Instant,
    },
    /// Since `since`, when the targets' CPU clocks summed to `cpu_ms`.
    Paused { since: Instant, cpu_ms: f64 },
}

pub struct Governor {
    /// Fraction of the targets' CPU the probes may cost; None: probes stay attached.
    budget: Option<f64>,
    state: State,
    /// Time the probes were live, in windows already closed.
    probed: Duration,
    pub windows: u32,
    /// The highest overhead measured in a chunk: what the probes cost while live.
    pub peak_overhead: f64,
    /// The budget's share of the targets' CPU so far minus the probes' cost, in ms of CPU.
    credit_ms: f64,
    /// The probes' cost and the targets' CPU at the last reading accounted: the chunk's start while live.
    probe_ms: f64,
    cpu_ms: f64,
    /// From the last chunk: the probes' cost per ms of the targets' own CPU, that CPU per second, and how
    /// long the chunk was (what the next window will likely last).
    overhead: f64,
    cpu_ms_per_s: f64,
    chunk_s: f64,
}

impl Governor {
    /// Probes are live from `now`; `probe_ms` and `cpu_ms` are what the probes cost the targets so far (see
    /// ProbeCost::overhead_ms) and the targets' CPU, both in ms. That cost is the hits of the probes while
    /// they were being attached: the account starts owing it, as it owes the hits of later attaches.
    pub fn new(max_overhead_pct: f64, now: Instant, probe_ms: f64, cpu_ms: f64) -> Governor {
        Governor {
            budget: (max_overhead_pct < 100.0).then_some(max_overhead_pct / 100.0),
            state: State::Live {
                window_start: now,
                chunk_start: now,
            },
            probed: Duration::ZERO,
            windows: 1,
            peak_overhead: 0.0,
            credit_ms: -probe_ms,
            probe_ms,
            cpu_ms,
            overhead: 0.0,
            cpu_ms_per_s: 0.0,
            chunk_s: CHUNK.as_secs_f64(),
        }
    }

    pub fn live(&self) -> bool {
        matches!(self.state, State::Live { .. })
    }

    /// Time the probes have been live up to `now`.
    pub fn probed(&self, now: Instant) -> Duration {
        match self.state {
            State::Live { window_start, .. } => self.probed + now.saturating_duration_since(window_start),
            State::Paused { .. } => self.probed,
        }
    }

    /// The probes are live again from `now` (after an Action::Resume, once they are attached).
    pub fn resumed(&mut self, now: Instant, probe_ms: f64, cpu_ms: f64) {
        self.account(probe_ms, cpu_ms);
        self.state = State::Live {
            window_start: now,
            chunk_start: now,
        };
        self.windows += 1;
    }

    /// Between windows: the hits of probes still being detached or already being attached (unregistering
    /// uprobes waits for a grace period, during which they still trap) are debited too.
    fn account(&mut self, probe_ms: f64, cpu_ms: f64) {
        let spent_ms = (probe_ms - self.probe_ms).max(0.0);
        if let Some(budget) = self.budget {
            self.credit_ms += budget * (cpu_ms - self.cpu_ms - spent_ms).max(0.0) - spent_ms;
        }
        self.probe_ms = probe_ms;
        self.cpu_ms = cpu_ms;
    }

    /// Called on every poll with the probes' cost and the targets' CPU so far; says what to do with the probes.
    pub fn tick(&mut self, now: Instant, probe_ms: f64, cpu_ms: f64) -> Action {
        match self.state {
            State::Paused {
                since,
                cpu_ms: at_pause,
            } => {
                self.account(probe_ms, cpu_ms);
                let Some(budget) = self.budget else {
                    return Action::Resume;
                };
                // What a window as long as the last chunk, at the last measured cost per ms of the targets' CPU would take from
                // the account, at the CPU rate since the pause when that is lower: a target gone quiet costs
                // its probes little, and its windows are not held back by the rate it had when busy.
                let paused_s = now.saturating_duration_since(since).as_secs_f64();
                let rate = if paused_s >= CHUNK.as_secs_f64() {
                    self.cpu_ms_per_s.min((cpu_ms - at_pause).max(0.0) / paused_s)
                } else {
                    self.cpu_ms_per_s
                };
                // A debt is kept for at most SAVED of the targets' CPU, as unspent budget is: a target gone
                // idle would otherwise never pay off the last window's (hits of probes being detached).
                self.credit_ms = self.credit_ms.max(-budget * rate * SAVED.as_secs_f64());
                let window_cost = (self.overhead - budget) * rate * self.chunk_s;
                if self.credit_ms >= window_cost {
                    Action::Resume
                } else {
                    Action::Stay
                }
            }
            State::Live {
                window_start,
                chunk_start,
            } => {
                let elapsed = now.saturating_duration_since(chunk_start);
                if elapsed < CHUNK {
                    return Action::Stay;
                }
                let spent_ms = (probe_ms - self.probe_ms).max(0.0);
                // What the targets would have used without the probes.
                let own_ms = (cpu_ms - self.cpu_ms - spent_ms).max(MIN_CPU_MS);
                self.overhead = spent_ms / own_ms;
                self.chunk_s = elapsed.as_secs_f64();
                self.cpu_ms_per_s = own_ms / self.chunk_s;
                self.peak_overhead = self.peak_overhead.max(self.overhead);
                self.probe_ms = probe_ms;
                self.cpu_ms = cpu_ms;
                self.state = State::Live {
                    window_start,
                    chunk_start: now,
                };
                let Some(budget) = self.budget else {
                    return Action::Stay;
                };
                let saved_max = budget * self.cpu_ms_per_s * SAVED.as_secs_f64();
                self.credit_ms = (self.credit_ms + budget * own_ms - spent_ms).min(saved_max);
                // Stay only if the account still covers the next chunk at this chunk's cost.
                let next_chunk = (budget - self.overhead) * self.cpu_ms_per_s * self.chunk_s;
                if self.credit_ms + next_chunk >= 0.0 {
                    return Action::Stay;
                }
                self.probed += now.saturating_duration_since(window_start);
                self.state = State::Paused { since: now, cpu_ms };
                Action::Pause
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// The cost of this many hits of 2 µs, in ms.
    fn ms(hits: u64) -> f64 {
        hits as f64 * 0.002
    }

    #[test]
    fn under_budget_the_probes_stay() {
        let t0 = Instant::now();
        // 100 hits of 2 µs per second against 500 ms of target CPU: 0.04%.
        let mut g = Governor::new(0.5, t0, 0.0, 0.0);
        for i in 1..=100 {
            let t = t0 + secs(0.1 * i as f64);
            assert_eq!(g.tick(t, ms(10 * i), 50.0 * i as f64), Action::Stay);
        }
        assert!(g.live());
        assert_eq!(g.windows, 1);
        assert_eq!(g.probed(t0 + secs(10.0)), secs(10.0));
    }

    #[test]
    fn over_budget_the_first_window_is_one_poll_and_the_next_waits_until_paid_for() {
        let t0 = Instant::now();
        // 10,000 hits of 2 µs per second against 1,000 ms of target CPU: 20 ms = 2.04% of 980 ms, budget 0.5%.
        let mut g = Governor::new(0.5, t0, 0.0, 0.0);
        assert_eq!(g.tick(t0 + secs(0.04), ms(400), 40.0), Action::Stay);
        assert_eq!(g.tick(t0 + secs(0.1), ms(1_000), 100.0), Action::Pause);
        assert!(!g.live());
        let overhead = 2.0 / 98.0;
        assert!((g.peak_overhead - overhead).abs() < 1e-9);
        // Owed: the first window's cost over its share (2 - 0.49 ms), then a window as long as that one at
        // 2.04% ((0.0204 - 0.005) × 980 ms per second of it, for 0.1 s); the account earns 0.5% of 1,000 ms
        // per second of pause.
        let owed = (2.0 - 0.005 * 98.0) + (overhead - 0.005) * 980.0 * 0.1;
        let resume_at = 0.1 + owed / 5.0;
        assert_eq!(
            g.tick(t0 + secs(resume_at - 0.05), ms(1_000), 1000.0 * (resume_at - 0.05)),
            Action::Stay
        );
        assert_eq!(
            g.tick(t0 + secs(resume_at + 0.05), ms(1_000), 1000.0 * (resume_at + 0.05)),
            Action::Resume
        );
        assert!(!g.live(), "live only once attached");
        g.resumed(t0 + secs(resume_at + 0.06), ms(1_000), 1000.0 * (resume_at + 0.06));
        assert!(g.live());
        assert_eq!(g.windows, 2);
        // Probed time counts the live windows only.
        let probed = g.probed(t0 + secs(resume_at + 0.16)).as_secs_f64();
        assert!((probed - 0.2).abs() < 1e-6, "{probed}");
    }

    /// The over-budget load above, with `attach_ms` of hits while the probes were being attached: when the
    /// second window opens, polling every 50 ms.
    fn second_window_at(attach_ms: f64) -> f64 {
        let t0 = Instant::now();
        let mut g = Governor::new(0.5, t0, attach_ms, 0.0);
        assert_eq!(g.tick(t0 + secs(0.1), attach_ms + ms(1_000), 100.0), Action::Pause);
        (3..200)
            .map(|i| 0.05 * f64::from(i))
            .find(|&t| g.tick(t0 + secs(t), attach_ms + ms(1_000), 1000.0 * t) == Action::Resume)
            .expect("resumed within 10 s")
    }

    #[test]
    fn the_hits_while_attaching_are_owed() {
        // The account earns 0.5% of 1,000 ms per second: 1 ms owed takes 0.2 s longer to pay.
        let later = second_window_at(1.0) - second_window_at(0.0);
        assert!((later - 0.2).abs() < 0.05 + 1e-9, "{later} s later");
    }

    /// Simulated minute of a busy target whose probes would cost 2.4%: whenever it stops, the probes have
    /// cost at most the budget plus the unpaid first window, and they were live about budget/cost of it.
    #[test]
    fn the_budget_holds_at_every_moment_not_only_on_average() {
        let t0 = Instant::now();
        let (hit_ns, hits_per_s, cpu_per_s) = (2000.0, 12_000.0, 1000.0);
        let mut g = Governor::new(0.5, t0, 0.0, 0.0);
        let (mut hits, mut cpu, mut spent_ms) = (0u64, 0.0f64, 0.0f64);
        let first_window_ms = 0.1 * hits_per_s * hit_ns / 1e6;
        for i in 1..=600 {
            let t = t0 + secs(0.1 * i as f64);
            let new_hits = if g.live() { (hits_per_s * 0.1) as u64 } else { 0 };
            hits += new_hits;
            let probe_ms = new_hits as f64 * hit_ns / 1e6;
            spent_ms += probe_ms;
            cpu += cpu_per_s * 0.1 + probe_ms;
            let own = cpu - spent_ms;
            assert!(
                spent_ms <= 0.005 * own + first_window_ms + 1e-9,
                "at {i}: {spent_ms} ms of {own}"
            );
            match g.tick(t, ms(hits), cpu) {
                Action::Resume => g.resumed(t, ms(hits), cpu),
                Action::Pause | Action::Stay => {}
            }
        }
        let fraction = g.probed(t0 + secs(60.0)).as_secs_f64() / 60.0;
        let expected = 0.005 / (hits_per_s * hit_ns / 1e6 / cpu_per_s);
        assert!(
            (fraction - expected).abs() < 0.3 * expected,
            "live {fraction:.3} of the time, {expected:.3} expected"
        );
        assert!(g.windows >= 10, "{}", g.windows);
    }

    /// Busy: 10,000 hits of 2 µs per second against 1,000 ms of CPU (2%, budget 0.5%), until a pause after
    /// 5 s, with hits of the probes being detached after it; then `quiet` of that. At the busy rate the
    /// next window would wait a minute, and an idle target would never pay off the detaching hits.
    fn resumed_after_going_quiet(quiet: f64) -> Option<f64> {
        let t0 = Instant::now();
        let mut g = Governor::new(0.5, t0, 0.0, 0.0);
        let (mut hits, mut cpu, mut quiet_from) = (0.0f64, 0.0f64, None);
        for i in 1..=300 {
            let t = 0.1 * f64::from(i);
            let scale = if quiet_from.is_some() { quiet } else { 1.0 };
            if g.live() {
                hits += 1_000.0 * scale;
            } else if quiet_from.is_some_and(|q| t - q < 0.15) {
                hits += 200.0;
            }
            cpu += 100.0 * scale;
            match g.tick(t0 + secs(t), ms(hits as u64), cpu) {
                Action::Pause if t >= 5.0 && quiet_from.is_none() => quiet_from = Some(t),
                Action::Resume => {
                    g.resumed(t0 + secs(t), ms(hits as u64), cpu);
                    if let Some(q) = quiet_from {
                        return Some(t - q);
                    }
                }
                _ => {}
            }
        }
        None
    }

    #[test]
    fn a_target_gone_quiet_or_idle_is_probed_again_soon() {
        for quiet in [0.01, 0.0] {
            let after = resumed_after_going_quiet(quiet);
            assert!(
                after.is_some_and(|s| s < 3.0),
                "at {quiet} of the load: resumed {after:?} s after the pause"
            );
        }
    }

    #[test]
    fn nearly_idle_targets_are_not_paused() {
        let t0 = Instant::now();
        // One handshake's 16 hits while the target's clock shows no CPU at all yet.
        let mut g = Governor::new(0.5, t0, 0.0, 0.0);
        assert_eq!(g.tick(t0 + secs(1.0), ms(16), 0.0), Action::Stay);
        assert_eq!(g.tick(t0 + secs(2.0), ms(32), 0.0), Action::Stay);
    }

    #[test]
    fn a_budget_of_100_percent_never_pauses() {
        let t0 = Instant::now();
        let mut g = Governor::new(100.0, t0, 0.0, 0.0);
        assert_eq!(g.tick(t0 + secs(1.0), ms(1_000_000), 10.0), Action::Stay);
        assert!(g.peak_overhead > 1.0);
    }
}
