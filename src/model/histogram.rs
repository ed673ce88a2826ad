// SPDX-License-Identifier: Apache-2.0
//! A log-scale histogram of nanoseconds (CPU per handshake, an abandoned handshake's time from its work to
//! its end): bounded memory whatever the number of values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Log-scale histogram (1% wide buckets): bounded memory whatever the number of values.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CpuHistogram {
    pub count: u64,
    pub sum_ns: u64,
    pub buckets: BTreeMap<u32, u64>,
}

const BUCKET_GROWTH: f64 = 1.01;

impl CpuHistogram {
    /// The bucket of u64::MAX ns: no value lands above it.
    pub const MAX_BUCKET: u32 = 4458;

    pub fn add(&mut self, ns: u64) {
        self.count += 1;
        self.sum_ns += ns;
        let bucket = ((ns.max(1) as f64).ln() / BUCKET_GROWTH.ln()).floor() as u32;
        *self.buckets.entry(bucket).or_default() += 1;
    }

    pub fn merge(&mut self, other: &CpuHistogram) {
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        for (b, n) in &other.buckets {
            *self.buckets.entry(*b).or_default() += n;
        }
    }

    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }

    /// The sample variance of the values (ns²), from the bucket midpoints: to within the 1% bucket width.
    pub fn variance_ns2(&self) -> f64 {
        if self.count < 2 {
            return 0.0;
        }
        let mean = self.mean_ns();
        let squares: f64 = self
            .buckets
            .iter()
            .map(|(b, n)| *n as f64 * (BUCKET_GROWTH.powf(*b as f64 + 0.5) - mean).powi(2))
            .sum();
        squares / (self.count - 1) as f64
    }

    /// The sum of `f` over the values, each taken at its bucket's midpoint.
    pub fn sum_over(&self, f: impl Fn(f64) -> f64) -> f64 {
        self.buckets
            .iter()
            .map(|(b, n)| *n as f64 * f(BUCKET_GROWTH.powf(*b as f64 + 0.5)))
            .sum()
    }

    /// The value below which fraction `q` of the values lie, to within the 1% bucket width.
    pub fn quantile_ns(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return BUCKET_GROWTH.powf(*b as f64 + 0.5);
            }
        }
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_value_lands_in_the_last_bucket() {
        let mut h = CpuHistogram::default();
        h.add(u64::MAX);
        assert_eq!(
            h.buckets.keys().copied().collect::<Vec<_>>(),
            [CpuHistogram::MAX_BUCKET]
        );
    }

    #[test]
    fn histogram_quantiles_are_within_a_bucket() {
        let mut h = CpuHistogram::default();
        for i in 1..=1000u64 {
            h.add(i * 1000);
        }
        assert_eq!(h.count, 1000);
        assert!((h.mean_ns() - 500_500.0).abs() < 1.0);
        let p50 = h.quantile_ns(0.5);
        let p99 = h.quantile_ns(0.99);
        assert!((p50 / 500_000.0 - 1.0).abs() < 0.015, "p50 {p50}");
        assert!((p99 / 990_000.0 - 1.0).abs() < 0.015, "p99 {p99}");
    }
}
