//! Work that fails again and again (a schedule's due fire whose claim the storage
//! refuses): said once per streak of failures, then tried again after a wait that
//! doubles from a second up to an hour — never at once again, which would re-arm the
//! object's alarm in a loop.

/// The wait after the first failed claim.
pub const FIRST_RETRY_MS: u64 = 1_000;
/// The longest wait between two tries.
pub const MAX_RETRY_MS: u64 = 3_600_000;

/// The failures of one piece of work, in a row.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// After a failure at `now_ms`: whether to say so (the first failure of a streak),
    /// and when to try again.
    pub fn failed(&mut self, now_ms: u64) -> (bool, u64) {
        let report = self.failures == 0;
        let wait = FIRST_RETRY_MS
            .saturating_mul(1u64 << self.failures.min(32))
            .min(MAX_RETRY_MS);
        self.failures = self.failures.saturating_add(1);
        (report, now_ms.saturating_add(wait))
    }

    /// After a success: the next failure is said again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// How many tries failed in a row.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_said_once_and_tried_again_ever_later_up_to_an_hour() {
        let mut backoff = Backoff::default();
        let tries: Vec<(bool, u64)> = (0..15).map(|_| backoff.failed(0)).collect();
        assert_eq!(tries[0], (true, 1_000));
        assert_eq!(tries[1], (false, 2_000));
        assert_eq!(tries[2], (false, 4_000));
        assert!(tries[1..].iter().all(|(said, _)| !said), "said once");
        assert_eq!(tries[14].1, MAX_RETRY_MS);
        assert!(tries.windows(2).all(|w| w[0].1 <= w[1].1), "never sooner");
        backoff.succeeded();
        assert_eq!(
            backoff.failed(5),
            (true, 1_005),
            "a new streak is said again"
        );
        for _ in 0..100 {
            backoff.failed(u64::MAX - 1);
        }
        assert_eq!(backoff.failures(), 101);
    }
}
