// SPDX-License-Identifier: Apache-2.0
//! The --max-overhead duty cycle. Every probe hit is a trap in the target (microseconds in a VM), so a busy
//! server pays for each handshake's dozen hits. The governor measures that cost against the targets' own
//! CPU second by second and, when it is over budget, detaches the stage probes for as long as it takes to
//! bring the average back to the budget. Within each live window every figure stays exact; the report
//! scales counts by the share of time the probes were live.

use std::time::{Duration, Instant};

/// How much probed time each decision is based on.
const CHUNK: Duration = Duration::from_secs(1);
/// Below this much target CPU in a chunk, /proc's 10 ms ticks make the ratio meaningless: count it as this.
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
        hits: u64,
        cpu_ms: f64,
    },
    Paused {
        until: Instant,
    },
}

pub struct Governor {
    /// Fraction of the targets' CPU the probes may cost; None: probes stay attached.
    budget: Option<f64>,
    cold_hit_ns: f64,
    state: State,
    /// Time the probes were live, in windows already closed.
    probed: Duration,
    pub windows: u32,
    /// The highest overhead measured in a chunk: what the probes cost while live.
    pub peak_overhead: f64,
}

impl Governor {
    /// Probes are live from `now`; `hits` and `cpu_ms` are the probe hits and the targets' CPU so far.
    pub fn new(max_overhead_pct: f64, cold_hit_ns: f64, now: Instant, hits: u64, cpu_ms: f64) -> Governor {
        Governor {
            budget: (max_overhead_pct < 100.0).then_some(max_overhead_pct / 100.0),
            cold_hit_ns,
            state: State::Live {
                window_start: now,
                chunk_start: now,
                hits,
                cpu_ms,
            },
            probed: Duration::ZERO,
            windows: 1,
            peak_overhead: 0.0,
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
    pub fn resumed(&mut self, now: Instant, hits: u64, cpu_ms: f64) {
        self.state = State::Live {
            window_start: now,
            chunk_start: now,
            hits,
            cpu_ms,
        };
        self.windows += 1;
    }

    /// Called on every poll with the probe hits and the targets' CPU so far; says what to do with the probes.
    pub fn tick(&mut self, now: Instant, hits: u64, cpu_ms: f64) -> Action {
        match self.state {
            State::Paused { until } if now >= until => Action::Resume,
            State::Paused { .. } => Action::Stay,
            State::Live {
                window_start,
                chunk_start,
                hits: hits0,
                cpu_ms: cpu0,
            } => {
                let chunk = now.saturating_duration_since(chunk_start);
                if chunk < CHUNK {
                    return Action::Stay;
                }
                let probe_ms = hits.saturating_sub(hits0) as f64 * self.cold_hit_ns / 1e6;
                // Overhead relative to what the targets would have used without the probes.
                let overhead = probe_ms / (cpu_ms - cpu0 - probe_ms).max(MIN_CPU_MS);
                self.peak_overhead = self.peak_overhead.max(overhead);
                match self.budget {
                    Some(budget) if overhead > budget => {
                        // Paused for long enough that this chunk's cost, spread over chunk and pause, is the budget.
                        let pause = chunk.mul_f64(overhead / budget - 1.0);
                        self.probed += now.saturating_duration_since(window_start);
                        self.state = State::Paused { until: now + pause };
                        Action::Pause
                    }
                    _ => {
                        self.state = State::Live {
                            window_start,
                            chunk_start: now,
                            hits,
                            cpu_ms,
                        };
                        Action::Stay
                    }
                }
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

    #[test]
    fn under_budget_the_probes_stay() {
        let t0 = Instant::now();
        // 100 hits of 2 µs per second against 500 ms of target CPU: 0.04%.
        let mut g = Governor::new(0.5, 2000.0, t0, 0, 0.0);
        for i in 1..=20 {
            let t = t0 + secs(0.5 * i as f64);
            assert_eq!(g.tick(t, 50 * i, 250.0 * i as f64), Action::Stay);
        }
        assert!(g.live());
        assert_eq!(g.windows, 1);
        assert_eq!(g.probed(t0 + secs(10.0)), secs(10.0));
    }

    #[test]
    fn over_budget_pauses_until_the_average_is_the_budget() {
        let t0 = Instant::now();
        // 10,000 hits of 2 µs in 1 s against 1,000 ms of target CPU: 20 ms = 2.04% over 980 ms, budget 0.5%.
        let mut g = Governor::new(0.5, 2000.0, t0, 0, 0.0);
        assert_eq!(g.tick(t0 + secs(0.5), 5_000, 500.0), Action::Stay);
        assert_eq!(g.tick(t0 + secs(1.0), 10_000, 1000.0), Action::Pause);
        assert!(!g.live());
        let overhead = 20.0 / 980.0;
        let pause = overhead / 0.005 - 1.0;
        assert!((g.peak_overhead - overhead).abs() < 1e-9);
        assert_eq!(g.tick(t0 + secs(1.0 + pause - 0.01), 10_000, 1500.0), Action::Stay);
        assert_eq!(g.tick(t0 + secs(1.0 + pause + 0.01), 10_000, 1500.0), Action::Resume);
        assert!(!g.live(), "live only once attached");
        g.resumed(t0 + secs(1.0 + pause + 0.02), 10_000, 1500.0);
        assert!(g.live());
        assert_eq!(g.windows, 2);
        // Probed time counts the live windows only.
        let probed = g.probed(t0 + secs(1.5 + pause + 0.02)).as_secs_f64();
        assert!((probed - 1.5).abs() < 1e-6, "{probed}");
    }

    #[test]
    fn idle_targets_are_not_paused_for_tick_rounding() {
        let t0 = Instant::now();
        // One handshake's 16 hits while /proc shows no CPU at all yet.
        let mut g = Governor::new(0.5, 2000.0, t0, 0, 0.0);
        assert_eq!(g.tick(t0 + secs(1.0), 16, 0.0), Action::Stay);
    }

    #[test]
    fn a_budget_of_100_percent_never_pauses() {
        let t0 = Instant::now();
        let mut g = Governor::new(100.0, 2000.0, t0, 0, 0.0);
        assert_eq!(g.tick(t0 + secs(1.0), 1_000_000, 10.0), Action::Stay);
        assert!(g.peak_overhead > 1.0);
    }
}
