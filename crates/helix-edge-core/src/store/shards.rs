//! The queryable record spread over several D1 databases (shards): which one a root
//! session's rows live on. The choice is a stable function of the session id and the
//! number of shards the deployment names when the session is created; the session's
//! object records it, so naming more shards later never moves an existing session (new
//! sessions spread over the larger set). Children live on their root's shard. This
//! module only decides: the platform keeps the choice and reaches the databases.

use sha2::{Digest, Sha256};

/// The shard (0-based, below `shards`) of a root session with id `session_id`, when
/// the deployment has `shards` databases (one when it names none).
///
/// The id's SHA-256, its first eight bytes as a big-endian number, modulo the count: the
/// same on every platform and version, and even over any set of ids (the modulo's bias
/// is below 2^-56 for any count a deployment names).
pub fn shard_of(session_id: &str, shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    let digest = Sha256::digest(session_id.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) % shards as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pearson's chi-square statistic of `counts` against an even spread.
    fn chi_square(counts: &[u64]) -> f64 {
        let total: u64 = counts.iter().sum();
        let expected = total as f64 / counts.len() as f64;
        counts
            .iter()
            .map(|&c| (c as f64 - expected).powi(2) / expected)
            .sum()
    }

    fn spread(ids: impl Iterator<Item = String>, shards: usize) -> Vec<u64> {
        let mut counts = vec![0u64; shards];
        for id in ids {
            counts[shard_of(&id, shards)] += 1;
        }
        counts
    }

    #[test]
    fn a_session_keeps_its_shard_and_one_database_takes_everything() {
        // Pinned (from Python's hashlib: int.from_bytes(sha256(id)[:8], "big") % n): a
        // change of the function would move every existing session.
        let of = |n| ["s_0", "alpha", "user-42"].map(|id| shard_of(id, n));
        assert_eq!(of(64), [7, 30, 9]);
        assert_eq!(of(4), [3, 2, 1]);
        for id in ["a", "s_1f", "x.y-z"] {
            assert_eq!(shard_of(id, 1), 0);
            assert_eq!(shard_of(id, 0), 0, "no databases named: the one default");
        }
    }

    #[test]
    fn ids_spread_evenly_over_4_16_and_64_shards() {
        // 100,000 ids of two shapes: random-looking generated ids and sequential names
        // a client might choose. The statistic stays below the chi-square critical value
        // at p = 0.001 for its degrees of freedom (shards - 1).
        let generated = |n: u64| format!("s_{:016x}", n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let named = |n: u64| format!("user-{n}");
        for (shards, critical) in [(4, 16.27), (16, 37.70), (64, 103.44)] {
            for (shape, counts) in [
                ("generated", spread((0..100_000).map(generated), shards)),
                ("named", spread((0..100_000).map(named), shards)),
            ] {
                let statistic = chi_square(&counts);
                assert!(
                    statistic < critical,
                    "{shape} ids over {shards} shards: chi-square {statistic:.1} ≥ {critical}: {counts:?}"
                );
                assert_eq!(counts.iter().sum::<u64>(), 100_000);
            }
        }
    }

    #[test]
    fn the_chi_square_check_fails_an_uneven_spread() {
        // The check can fail: ids that all land on one shard of four.
        let skewed = [100_000, 0, 0, 0];
        assert!(chi_square(&skewed) > 16.27);
        let mild = [25_500, 24_500, 25_000, 25_000];
        assert!(chi_square(&mild) > 16.27, "a 2% skew over 100k is detected");
    }
}
