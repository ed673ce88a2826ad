// SPDX-License-Identifier: Apache-2.0
//! Whole-recording figures from probe windows. The governor opens windows as the targets' CPU pays for
//! them, so the windows sample the targets' CPU time evenly; a count over the recording is estimated as
//! the count per ms of the targets' own CPU in the windows times that CPU over the recording (a ratio
//! estimator), with a 95% interval from how much the windows differ from one another.

use serde::Serialize;

/// A figure over the whole recording: exact (the probes saw all of it) or estimated, with its 95% interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Estimate {
    pub value: f64,
    pub ci95: [f64; 2],
    pub exact: bool,
}

impl Estimate {
    pub fn exact(value: f64) -> Estimate {
        Estimate {
            value,
            ci95: [value, value],
            exact: true,
        }
    }

    /// The interval widened to at least ±`rel` of the value: a CPU figure is no surer than the count of
    /// handshakes that make it.
    pub fn at_least(self, rel: f64) -> Estimate {
        if self.exact {
            return self;
        }
        Estimate {
            value: self.value,
            ci95: [
                self.ci95[0].min(self.value * (1.0 - rel)),
                self.ci95[1].max(self.value * (1.0 + rel)),
            ],
            exact: false,
        }
    }

    /// Half the interval's width over the value.
    pub fn relative_error(&self) -> f64 {
        if self.value > 0.0 {
            (self.ci95[1] - self.ci95[0]) / 2.0 / self.value
        } else {
            0.0
        }
    }

    /// The same estimate multiplied by `k` (a figure in other units, or one that goes with this one).
    pub fn scaled(self, k: f64) -> Estimate {
        Estimate {
            value: self.value * k,
            ci95: [self.ci95[0] * k, self.ci95[1] * k],
            exact: self.exact,
        }
    }
}

/// Student's t for a two-sided 95% interval with `df` degrees of freedom.
fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    T.get(df.wrapping_sub(1)).copied().unwrap_or(1.96)
}

/// What a window's count varies by at least, whatever the windows show: a few windows can agree by chance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Spread {
    /// Events arriving at random in the base (CPU time): the variance of a count is the count.
    Arrivals,
    /// Each unit of the base (a connection) carries at most one event: binomial.
    PerUnit,
}

/// `seen[i]` counted in window i over `base[i]` of a base quantity (the targets' own CPU, or their
/// connections), of which the whole recording had `total`. `edges`: events the windows may have put on the
/// wrong side of their edges (a handshake under way as a window opens or closes, against connections
/// counted from and to the moment it did): a bias that the windows' agreement cannot show, so the interval
/// holds it on top.
pub fn ratio(seen: &[f64], base: &[f64], total: f64, spread: Spread, edges: f64) -> Estimate {
    ratio_with_stand_ins(seen, base, &vec![false; seen.len()], total, spread, edges)
}

/// As `ratio`, where the windows marked in `stand_ins` were not taken from the recording but stand for the
/// part of it no window saw (a continuous-mode interval whose connections came while the probes were
/// detached takes an earlier interval's window): they give the ratio, but sample none of `total`, and
/// what they saw is not a floor.
pub fn ratio_with_stand_ins(
    seen: &[f64],
    base: &[f64],
    stand_ins: &[bool],
    total: f64,
    spread: Spread,
    edges: f64,
) -> Estimate {
    let (y, x): (f64, f64) = (seen.iter().sum(), base.iter().sum());
    let taken = |v: &[f64]| -> f64 { v.iter().zip(stand_ins).filter(|(_, s)| !**s).map(|(v, _)| v).sum() };
    let (y_taken, x_taken) = (taken(seen), taken(base));
    let n = seen.len();
    if x <= 0.0 || total <= 0.0 {
        return Estimate::exact(y_taken);
    }
    // What the windows sampled of the recording, for the finite-population correction (all of it: what they
    // saw is exact, whatever stood in); the scale from their base to the recording's, for the estimate.
    let sampled = (x_taken / total).min(1.0);
    if sampled >= 1.0 {
        return Estimate::exact(y_taken);
    }
    let scale = x / total;
    let r = y / x;
    let value = r * total;
    let half = if n >= 2 {
        let residual: f64 = seen.iter().zip(base).map(|(yi, xi)| (yi - r * xi).powi(2)).sum::<f64>() / (n - 1) as f64;
        let mean_x = x / n as f64;
        let floor = match spread {
            Spread::Arrivals => y / n as f64,
            Spread::PerUnit => x / n as f64 * r.min(1.0) * (1.0 - r.min(1.0)),
        };
        let residual = residual.max(floor);
        let var = total.powi(2) * (1.0 - sampled) * residual / (n as f64 * mean_x.powi(2));
        t95(n - 1) * var.sqrt()
    } else {
        // One window says nothing of how windows differ: count its events as random arrivals.
        1.96 * (y.max(3.0) * (1.0 - sampled)).sqrt() / scale
    };
    let half = half + edges * r.min(1.0) * total / x;
    Estimate {
        value,
        ci95: [(value - half).max(y_taken), value + half],
        exact: false,
    }
}

/// A part of `total` known by the share of `n` random samples that fell in it (`k` of them), with the share's
/// 95% interval (Wilson's, which stays inside 0–1 and is not empty when nothing or everything fell in the part).
pub fn sampled_share(k: f64, n: f64, total: f64) -> Estimate {
    if n <= 0.0 {
        return Estimate {
            value: 0.0,
            ci95: [0.0, total],
            exact: false,
        };
    }
    let (p, z2) = (k / n, 1.96f64.powi(2));
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = 1.96 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    Estimate {
        value: p * total,
        ci95: [(centre - half).max(0.0) * total, (centre + half).min(1.0) * total],
        exact: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampled_share_has_an_interval_even_when_no_sample_fell_in_it() {
        let e = sampled_share(25.0, 100.0, 2000.0);
        assert_eq!(e.value, 500.0);
        // Wilson's interval for 25 of 100: 0.175–0.343.
        assert!(
            (e.ci95[0] - 0.1754 * 2000.0).abs() < 1.0 && (e.ci95[1] - 0.3430 * 2000.0).abs() < 1.0,
            "{e:?}"
        );
        let none = sampled_share(0.0, 100.0, 2000.0);
        assert_eq!(none.value, 0.0);
        assert!(none.ci95[0] == 0.0 && none.ci95[1] > 50.0, "{none:?}");
        assert_eq!(sampled_share(0.0, 0.0, 2000.0).ci95, [0.0, 2000.0]);
    }

    #[test]
    fn windows_seeing_everything_are_exact() {
        let e = ratio(&[100.0], &[50.0], 50.0, Spread::Arrivals, 0.0);
        assert_eq!(e, Estimate::exact(100.0));
    }

    #[test]
    fn steady_windows_give_a_narrow_interval_around_the_ratio() {
        // 10 windows of ~20 ms CPU at 2 handshakes per ms, out of 2,000 ms: 4,000 handshakes.
        let cpu: Vec<f64> = (0..10).map(|i| 20.0 + (i % 3) as f64).collect();
        let seen: Vec<f64> = cpu
            .iter()
            .enumerate()
            .map(|(i, c)| 2.0 * c + if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let e = ratio(&seen, &cpu, 2000.0, Spread::Arrivals, 0.0);
        assert!((e.value - 4000.0).abs() < 10.0, "{e:?}");
        // The windows agree better than random arrivals would, so those set the spread: 420 seen, a tenth of
        // the CPU: 1.96 × √(420 × 0.9) / 0.105, with Student's t for 9 degrees of freedom: ±10.5%.
        assert!((e.ci95[1] - e.value - 419.0).abs() < 2.0, "{e:?}");
        assert!((e.value - e.ci95[0] - 419.0).abs() < 2.0, "{e:?}");
        assert!(!e.exact);
    }

    #[test]
    fn windows_that_disagree_widen_the_interval_and_never_go_below_what_was_seen() {
        let e = ratio(&[10.0, 90.0], &[20.0, 20.0], 400.0, Spread::Arrivals, 0.0);
        assert!((e.value - 1000.0).abs() < 1e-9);
        assert!(e.ci95[0] >= 100.0 && e.ci95[1] > 2000.0, "{e:?}");
    }

    #[test]
    fn one_window_falls_back_to_random_arrivals() {
        let e = ratio(&[100.0], &[10.0], 100.0, Spread::Arrivals, 0.0);
        assert!((e.value - 1000.0).abs() < 1e-9);
        // 1.96 × √(100 × 0.9) / 0.1 ≈ 186.
        assert!((e.ci95[1] - e.value - 186.0).abs() < 1.0, "{e:?}");
    }

    #[test]
    fn one_handshake_per_connection_is_a_narrow_interval() {
        // Each window: as many handshakes as connections, give or take one at its edges.
        let connections = [150.0, 160.0, 155.0];
        let seen = [151.0, 159.0, 155.0];
        let e = ratio(&seen, &connections, 7000.0, Spread::PerUnit, 0.0);
        assert!((e.value - 7000.0).abs() < 20.0, "{e:?}");
        assert!(e.ci95[1] - e.ci95[0] < 0.05 * e.value, "{e:?}");
        // A handshake at each edge of each window may be on the wrong side: 6 of 465 seen, scaled to 7,000.
        let edged = ratio(&seen, &connections, 7000.0, Spread::PerUnit, 6.0);
        let widening = (edged.ci95[1] - e.ci95[1]) / (6.0 * 7000.0 / 465.0);
        assert!((widening - 1.0).abs() < 0.01, "{e:?} {edged:?}");
    }

    #[test]
    fn a_window_standing_in_gives_the_ratio_but_samples_nothing() {
        // 50 connections came while the probes were detached; an earlier window saw 88 handshakes in 89.
        let e = ratio_with_stand_ins(&[88.0], &[89.0], &[true], 50.0, Spread::PerUnit, 0.0);
        assert!(!e.exact, "{e:?}");
        assert!((e.value - 50.0 * 88.0 / 89.0).abs() < 1e-9, "{e:?}");
        assert!(e.ci95[0] < e.value && e.ci95[0] < 88.0, "{e:?}");
        // Nothing of the 50 was sampled: no finite-population correction, 1.96 × √88 / (89 / 50).
        assert!(
            (e.ci95[1] - e.value - 1.96 * 88f64.sqrt() * 50.0 / 89.0).abs() < 1e-6,
            "{e:?}"
        );
        // Beside a window of the recording that saw no connection, it still samples nothing.
        let two = ratio_with_stand_ins(&[0.0, 88.0], &[0.0, 89.0], &[false, true], 50.0, Spread::PerUnit, 0.0);
        assert!(!two.exact && (two.value - e.value).abs() < 1e-9, "{two:?}");
        // A window of the recording that saw it all needs no stand-in.
        let whole = ratio_with_stand_ins(&[50.0, 88.0], &[50.0, 89.0], &[false, true], 50.0, Spread::PerUnit, 0.0);
        assert_eq!(whole, Estimate::exact(50.0));
    }
}
