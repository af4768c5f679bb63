//! One shard's writer as a queue: D1 is one SQLite with one writer, so the batches the
//! sessions' objects send wait for each other, first come first served. Given when each
//! batch is ready to go and how long the database takes for it, [`drain`] says when
//! each is done; [`poisson`] makes the arrivals of a steady rate, reproducibly.

/// When each batch is done (ms), for batches ready at `ready` (ms, ascending) that take
/// `service` (ms) each once the writer gets to them.
pub fn drain(ready: &[f64], service: impl Fn(usize) -> f64) -> Vec<f64> {
    let mut free_at = 0.0_f64;
    ready
        .iter()
        .enumerate()
        .map(|(i, &at)| {
            free_at = free_at.max(at) + service(i);
            free_at
        })
        .collect()
}

/// Arrival times (ms, ascending) of a Poisson process of `per_second` over `seconds`,
/// from a fixed `seed` (the same run gives the same numbers).
pub fn poisson(per_second: f64, seconds: f64, seed: u64) -> Vec<f64> {
    let mut random = SplitMix64(seed);
    let mean_gap_ms = 1_000.0 / per_second;
    let end = seconds * 1_000.0;
    let mut at = 0.0;
    let mut arrivals = Vec::with_capacity((per_second * seconds * 1.1) as usize);
    loop {
        // An exponential gap: -ln(U) × mean, with U in (0, 1].
        at += -random.unit().ln() * mean_gap_ms;
        if at >= end {
            return arrivals;
        }
        arrivals.push(at);
    }
}

/// The value below which `share` (0–1) of `values` fall (nearest rank).
pub fn percentile(values: &mut [f64], share: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((share * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

/// SplitMix64 (Steele, Lea and Flood): a small generator with a full 2^64 period, enough
/// for arrival times.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_wait_for_the_one_writer_in_turn() {
        // Worked by hand: three batches 1 ms apart that take 5 ms each finish at 5, 10
        // and 15 ms; one ready after the writer is free starts at once.
        let done = drain(&[0.0, 1.0, 2.0, 30.0], |_| 5.0);
        assert_eq!(done, [5.0, 10.0, 15.0, 35.0]);
        let sized = drain(&[0.0, 0.0], |i| [2.0, 3.0][i]);
        assert_eq!(sized, [2.0, 5.0]);
    }

    #[test]
    fn arrivals_have_the_rate_asked_for_and_repeat_with_the_seed() {
        let arrivals = poisson(200.0, 600.0, 7);
        let rate = arrivals.len() as f64 / 600.0;
        assert!((rate - 200.0).abs() < 3.0, "{rate}/s");
        assert!(arrivals.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(arrivals, poisson(200.0, 600.0, 7));
        assert_ne!(arrivals, poisson(200.0, 600.0, 8));
        // The gaps of a Poisson process: their standard deviation equals their mean.
        let gaps: Vec<f64> = arrivals.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!(
            (var.sqrt() / mean - 1.0).abs() < 0.02,
            "cv {}",
            var.sqrt() / mean
        );
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut values: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&mut values, 0.5), 50.0);
        assert_eq!(percentile(&mut values, 0.99), 99.0);
        assert_eq!(percentile(&mut values, 1.0), 100.0);
        assert_eq!(percentile(&mut [], 0.5), 0.0);
    }
}
