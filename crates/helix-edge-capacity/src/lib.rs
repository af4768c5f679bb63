//! helix-edge-capacity: a capacity model of the queryable record (D1). Every session's
//! object replicates its commits to a D1 database: coalesced for
//! [`COALESCE_MS`](helix_edge_core::sqlite::COALESCE_MS), then sent as one batch, which
//! the database's single writer applies in turn. The model takes what one session costs
//! there, measured locally (`bench/capacity.mjs` runs sessions through the reference
//! worker in `wrangler dev`), and projects a target load over 1, 4, 16 and 64 shards:
//! bytes per shard per day, days until a database's 10 GB, writes per second per shard,
//! and the replication lag of the peak hour, simulated.
//!
//! # Map of the crate
//! - [`Measured`] → [`Inputs`]: the benchmark's figures, and the per-batch time fitted
//!   to them ([`fit`]).
//! - [`project`]: the figures for a number of shards ([`Projection`]).
//! - [`queue`]: one shard's writer as a first-come-first-served queue, and arrivals.
//! - [`measure`]: what a session's rows take in a SQLite database, from a D1 dump.
//! - `main.rs`: the command line (`cargo run -p helix-edge-capacity --release`), which
//!   prints the README's table.

pub mod measure;
pub mod queue;

use helix_edge_core::sqlite::COALESCE_MS;

/// A D1 database's size limit (10 GB, as Cloudflare counts it).
pub const D1_LIMIT_BYTES: f64 = 10e9;
/// The shard counts the table shows.
pub const SHARD_COUNTS: [usize; 4] = [1, 4, 16, 64];

/// What the benchmark measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Sessions it ran.
    pub sessions: u64,
    /// Every batch D1 took for them: commits, encoded bytes, milliseconds.
    pub sends: Vec<(u64, u64, u64)>,
    /// What their rows take in a database (bytes; [`measure::database_bytes`]).
    pub database_bytes: u64,
}

/// The load the model is asked about.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// Sessions started per day.
    pub sessions_per_day: f64,
    /// The peak hour's rate over the day's mean rate.
    pub peak_factor: f64,
}

/// What the model runs on, per session and per batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Inputs {
    /// Database bytes a session leaves.
    pub bytes_per_session: f64,
    /// Batches a session's object sends.
    pub batches_per_session: f64,
    /// Commits a session makes.
    pub commits_per_session: f64,
    /// Encoded bytes of a batch, on average.
    pub batch_bytes: f64,
    /// The time of a batch: a fixed part (ms) ...
    pub send_ms: f64,
    /// ... and a part per KiB of statements (ms).
    pub send_ms_per_kib: f64,
    /// How long an object waits after a commit before it sends (ms).
    pub coalesce_ms: f64,
}

impl Inputs {
    /// The inputs `measured` gives.
    pub fn from(measured: &Measured) -> Self {
        let sessions = measured.sessions.max(1) as f64;
        let batches = measured.sends.len() as f64;
        let sum = |f: fn(&(u64, u64, u64)) -> u64| measured.sends.iter().map(f).sum::<u64>();
        let points: Vec<(f64, f64)> = measured
            .sends
            .iter()
            .map(|&(_, bytes, ms)| (bytes as f64 / 1024.0, ms as f64))
            .collect();
        let (send_ms, send_ms_per_kib) = fit(&points);
        Self {
            bytes_per_session: measured.database_bytes as f64 / sessions,
            batches_per_session: batches / sessions,
            commits_per_session: sum(|s| s.0) as f64 / sessions,
            batch_bytes: sum(|s| s.1) as f64 / batches.max(1.0),
            send_ms,
            send_ms_per_kib,
            coalesce_ms: COALESCE_MS as f64,
        }
    }

    /// The time of a batch of the average size (ms).
    pub fn batch_ms(&self) -> f64 {
        self.send_ms + self.send_ms_per_kib * self.batch_bytes / 1024.0
    }
}

/// The least-squares line `y = a + b·x` through `points`: `(a, b)`, neither below zero.
/// A batch never takes less for being larger: a falling line is noise, and the mean is
/// the fixed part. Nor does a batch take less than nothing: a line that would start
/// below zero is fitted through the origin instead. No points: `(0, 0)`.
pub fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    if points.is_empty() {
        return (0.0, 0.0);
    }
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
    let start = mean_y - slope * mean_x;
    if start >= 0.0 {
        return (start, slope);
    }
    let xx: f64 = points.iter().map(|p| p.0 * p.0).sum();
    let xy: f64 = points.iter().map(|p| p.0 * p.1).sum();
    (0.0, xy / xx)
}

/// The figures of `target` over `shards` databases.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Projection {
    /// Databases.
    pub shards: usize,
    /// Bytes each database grows by per day.
    pub bytes_per_shard_per_day: f64,
    /// Days until a database reaches [`D1_LIMIT_BYTES`].
    pub days_to_limit: f64,
    /// Batches (write transactions) per second per database, in the peak hour ...
    pub peak_writes_per_second: f64,
    /// ... and over the day.
    pub mean_writes_per_second: f64,
    /// The share of the peak hour a database's writer is busy (1 or more: it falls
    /// behind, and the lag grows for as long as the peak lasts).
    pub peak_utilization: f64,
    /// The replication lag of a batch's first commit in the peak hour (ms): median ...
    pub lag_p50_ms: f64,
    /// ... and 99th percentile.
    pub lag_p99_ms: f64,
}

/// Projects `target` with `inputs` over `shards` databases: the arithmetic for sizes and
/// rates, and for the lag the peak hour simulated on one database (they are alike):
/// batches arrive as a Poisson process, each is sent after the coalescing delay, and
/// waits for the writer. The whole measured time of a batch is taken as the writer's
/// (locally it includes the round trip to the database: a conservative reading).
pub fn project(target: &Target, inputs: &Inputs, shards: usize, seed: u64) -> Projection {
    let shards_f = shards.max(1) as f64;
    let sessions_per_second = target.sessions_per_day / 86_400.0;
    let mean_writes = sessions_per_second * inputs.batches_per_session / shards_f;
    let peak_writes = mean_writes * target.peak_factor;
    let bytes_per_day = target.sessions_per_day * inputs.bytes_per_session / shards_f;
    let service = inputs.batch_ms();
    let arrivals = queue::poisson(peak_writes, 3_600.0, seed);
    let ready: Vec<f64> = arrivals.iter().map(|a| a + inputs.coalesce_ms).collect();
    let done = queue::drain(&ready, |_| service);
    let mut lags: Vec<f64> = done.iter().zip(&arrivals).map(|(d, a)| d - a).collect();
    Projection {
        shards,
        bytes_per_shard_per_day: bytes_per_day,
        days_to_limit: D1_LIMIT_BYTES / bytes_per_day,
        peak_writes_per_second: peak_writes,
        mean_writes_per_second: mean_writes,
        peak_utilization: peak_writes * service / 1_000.0,
        lag_p50_ms: queue::percentile(&mut lags, 0.5),
        lag_p99_ms: queue::percentile(&mut lags, 0.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> Inputs {
        Inputs {
            bytes_per_session: 10_000.0,
            batches_per_session: 2.0,
            commits_per_session: 4.0,
            batch_bytes: 2_048.0,
            send_ms: 1.0,
            send_ms_per_kib: 0.5,
            coalesce_ms: 250.0,
        }
    }

    const MILLION: Target = Target {
        sessions_per_day: 1_000_000.0,
        peak_factor: 10.0,
    };

    #[test]
    fn the_arithmetic_of_a_case_worked_by_hand() {
        // 1M sessions a day of 10,000 bytes over 4 databases: 2.5 GB each per day, so
        // 4 days to 10 GB. 1M/86,400 = 11.574 sessions/s, 2 batches each, over 4: 5.787
        // writes/s per database, ×10 in the peak hour: 57.87. A batch of 2 KiB takes
        // 1 + 0.5×2 = 2 ms, so the writer is busy 57.87 × 2 / 1000 = 11.6% of the peak.
        let p = project(&MILLION, &inputs(), 4, 1);
        assert!((p.bytes_per_shard_per_day - 2.5e9).abs() < 1.0);
        assert!((p.days_to_limit - 4.0).abs() < 1e-9);
        assert!((p.mean_writes_per_second - 5.787).abs() < 1e-3);
        assert!((p.peak_writes_per_second - 57.87).abs() < 1e-2);
        assert!((p.peak_utilization - 0.1157).abs() < 1e-4);
        // M/D/1 at ρ = 0.116: the mean wait is ρ·S / 2(1-ρ) = 0.13 ms, so a batch's
        // first commit waits the 250 ms delay, its 2 ms, and rarely much more.
        assert!((252.0..252.5).contains(&p.lag_p50_ms), "{}", p.lag_p50_ms);
        assert!((252.0..262.0).contains(&p.lag_p99_ms), "{}", p.lag_p99_ms);
    }

    #[test]
    fn one_database_past_its_writer_falls_behind_and_more_shards_take_it() {
        // Batches of 20 ms at 1M/day with a 10× peak: one database would need its
        // writer 231.5 × 20 / 1000 = 4.6 times over; 16 share it at 29%.
        let slow = Inputs {
            send_ms: 20.0,
            send_ms_per_kib: 0.0,
            ..inputs()
        };
        let one = project(&MILLION, &slow, 1, 1);
        assert!(one.peak_utilization > 4.5);
        assert!(one.lag_p50_ms > 60_000.0, "the backlog grows over the hour");
        let sixteen = project(&MILLION, &slow, 16, 1);
        assert!((sixteen.peak_utilization - 0.2894).abs() < 1e-3);
        assert!(sixteen.lag_p99_ms < 400.0, "{}", sixteen.lag_p99_ms);
    }

    #[test]
    fn measured_batches_give_the_inputs() {
        let measured = Measured {
            sessions: 2,
            // Batch time 2 + 1 ms per KiB, exactly.
            sends: vec![(2, 1024, 3), (1, 2048, 4), (1, 4096, 6)],
            database_bytes: 30_000,
        };
        let inputs = Inputs::from(&measured);
        assert_eq!(inputs.bytes_per_session, 15_000.0);
        assert_eq!(inputs.batches_per_session, 1.5);
        assert_eq!(inputs.commits_per_session, 2.0);
        assert!((inputs.batch_bytes - 7168.0 / 3.0).abs() < 1e-9);
        assert!((inputs.send_ms - 2.0).abs() < 1e-9);
        assert!((inputs.send_ms_per_kib - 1.0).abs() < 1e-9);
        assert_eq!(inputs.coalesce_ms, COALESCE_MS as f64);
    }

    #[test]
    fn a_fit_never_makes_larger_batches_faster() {
        assert_eq!(fit(&[]), (0.0, 0.0));
        assert_eq!(
            fit(&[(1.0, 5.0), (1.0, 7.0)]),
            (6.0, 0.0),
            "one size: the mean"
        );
        let (a, b) = fit(&[(1.0, 9.0), (3.0, 5.0)]);
        assert_eq!((a, b), (7.0, 0.0), "a falling line is noise: the mean");
        // y = -3 + 2x would start below zero: through the origin, b = Σxy/Σxx = 11/13.
        let (a, b) = fit(&[(2.0, 1.0), (3.0, 3.0)]);
        assert_eq!(a, 0.0);
        assert!((b - 11.0 / 13.0).abs() < 1e-12, "{b}");
    }
}
