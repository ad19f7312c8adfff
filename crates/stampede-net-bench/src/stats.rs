//! Order statistics over samples, and what a bandwidth run measured.

use std::time::Duration;

/// The `q`-quantile (`0.0..=1.0`) of `samples` by the nearest-rank method; `NaN` if empty.
pub fn percentile(samples: &[f64], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.saturating_sub(1)]
}

/// The median of `samples`, averaging the two middle values of an even count; `NaN` if empty.
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 0 {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// What a consumer measured in one bandwidth run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throughput {
    /// Messages received, each checked for its size (and, with Zenoh, counted against the
    /// producer's count).
    pub messages: u64,
    /// Bytes received after the first message arrived.
    pub bytes: u64,
    /// From the arrival of the first message to the arrival of the last.
    pub elapsed: Duration,
}

impl Throughput {
    /// Builds the measurement from `messages` of `size` bytes, the first arriving `elapsed`
    /// before the last. The first message's bytes are excluded: they arrived before the clock
    /// started.
    pub fn from_arrivals(messages: u64, size: usize, elapsed: Duration) -> Self {
        Self {
            messages,
            bytes: messages.saturating_sub(1) * size as u64,
            elapsed,
        }
    }

    /// Megabytes (10^6 bytes) per second.
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64() / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn percentile_by_nearest_rank() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&xs, 0.5), 50.0);
        assert_eq!(percentile(&xs, 0.99), 99.0);
        assert_eq!(percentile(&xs, 1.0), 100.0);
        assert_eq!(percentile(&xs, 0.0), 1.0);
    }

    #[test]
    fn throughput_excludes_the_first_message() {
        let t = Throughput::from_arrivals(11, 1_000_000, Duration::from_secs(1));
        assert_eq!(t.bytes, 10_000_000);
        assert_eq!(t.mb_per_s(), 10.0);
    }
}
