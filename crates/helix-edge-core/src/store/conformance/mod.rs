//! The store conformance suite: the [`Store`] contract as executable checks, written
//! once and run against every backend (natively against [`MemoryStore`](crate::store::MemoryStore),
//! in workerd against D1). Checks return errors instead of panicking, so that the suite
//! can run inside a worker and report.

use super::Store;
use checks::*;

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// The check's name.
    pub name: &'static str,
    /// `Err(why)` when the backend broke the contract.
    pub outcome: Result<(), String>,
}

/// `Err(message)` unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

mod checks;
mod fixtures;

/// Runs every check against `store`, using session ids that start with `prefix` (so
/// that the suite can share a database with other data).
pub async fn run<S: Store>(store: &S, prefix: &str) -> Vec<CheckResult> {
    let id = |n: &str| format!("{prefix}-{n}");
    vec![
        CheckResult {
            name: "create_then_load_round_trips",
            outcome: create_then_load_round_trips(store, &id("create")).await,
        },
        CheckResult {
            name: "concurrent_creators_exactly_one_wins",
            outcome: concurrent_creators_exactly_one_wins(store, &id("race")).await,
        },
        CheckResult {
            name: "commit_applies_everything_and_bumps_the_version",
            outcome: commit_applies_everything_and_bumps_the_version(store, &id("commit")).await,
        },
        CheckResult {
            name: "a_stale_commit_is_rejected_and_changes_nothing",
            outcome: a_stale_commit_is_rejected_and_changes_nothing(store, &id("stale")).await,
        },
        CheckResult {
            name: "a_commit_whose_patch_fails_changes_nothing",
            outcome: a_commit_whose_patch_fails_changes_nothing(store, &id("badpatch")).await,
        },
        CheckResult {
            name: "messages_paginate",
            outcome: messages_paginate(store, &id("pages")).await,
        },
        CheckResult {
            name: "pending_calls_round_trip",
            outcome: pending_calls_round_trip(store, &id("pending")).await,
        },
        CheckResult {
            name: "an_interrupt_is_durable_until_a_commit_clears_it",
            outcome: an_interrupt_is_durable_until_a_commit_clears_it(store, &id("interrupt"))
                .await,
        },
        CheckResult {
            name: "a_checkpoint_restores_state_and_transcript",
            outcome: a_checkpoint_restores_state_and_transcript(store, &id("restore")).await,
        },
        CheckResult {
            name: "unknown_sessions_are_not_found",
            outcome: unknown_sessions_are_not_found(store, &id("unknown")).await,
        },
        CheckResult {
            name: "subsessions_are_recorded_and_updated",
            outcome: subsessions_are_recorded_and_updated(store, &id("children")).await,
        },
        CheckResult {
            name: "a_deleted_session_is_gone_and_others_stay",
            outcome: a_deleted_session_is_gone_and_others_stay(store, &id("delete")).await,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::run;
    use crate::store::MemoryStore;

    #[test]
    fn the_memory_store_passes_the_conformance_suite() {
        let store = MemoryStore::new();
        let results = futures::executor::block_on(run(&store, "t"));
        let failures: Vec<_> = results.iter().filter(|r| r.outcome.is_err()).collect();
        assert!(failures.is_empty(), "{failures:#?}");
        assert_eq!(results.len(), 12);
    }

    #[test]
    fn the_planned_d1_rows_pass_the_conformance_suite() {
        let store = crate::store::rows::PlannedStore::new();
        let results = futures::executor::block_on(run(&store, "t"));
        let failures: Vec<_> = results.iter().filter(|r| r.outcome.is_err()).collect();
        assert!(failures.is_empty(), "{failures:#?}");
        assert_eq!(results.len(), 12);
    }
}
