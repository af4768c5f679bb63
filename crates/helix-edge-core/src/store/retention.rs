//! Retention of the queryable record (feature `retention`): what a deployment keeps in
//! D1 of sessions that ended long ago. Sessions ended more than `RETAIN_DAYS` ago are
//! **compacted** to their index — their row (status, head, pending calls) and their
//! runs (usage) stay; their transcript, checkpoints and state log leave D1 (the session
//! keeps them in its object) — and sessions ended more than `ERASE_AFTER_DAYS` ago are
//! **erased**, as `DELETE` erases them: their object's storage, their children, their
//! rows. A worker's cron trigger works through them in bounded batches; each batch
//! picks what is still to do, so an interrupted run is simply continued by the next.
//! This module decides; the platform runs the statements and the deletions.

use crate::store::rows::{Arg, Statement};

/// The internal path of a session's object that erases it for retention: only while it
/// is still ended before the cutoff (`{"endedBefore": ms}`) and a root; else 409.
pub const RETIRE_PATH: &str = "/__internal/retire";

/// A day, in ms.
const DAY_MS: u64 = 86_400_000;

/// The sessions handled per shard and per action in one run, unless configured.
pub const DEFAULT_BATCH: u32 = 100;

/// What a deployment keeps, from its vars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Days after its end that a session is compacted to its index (`RETAIN_DAYS`).
    pub compact_after_days: Option<u64>,
    /// Days after its end that a session is erased (`ERASE_AFTER_DAYS`).
    pub erase_after_days: Option<u64>,
    /// Sessions per shard and per action in one run (`RETENTION_BATCH`, 1–1000).
    pub batch: u32,
}

impl Retention {
    /// The policy `RETAIN_DAYS`, `ERASE_AFTER_DAYS` and `RETENTION_BATCH` give (each may
    /// be unset); a value that is not a whole number in range says why.
    pub fn from_vars(
        retain_days: Option<&str>,
        erase_after_days: Option<&str>,
        batch: Option<&str>,
    ) -> Result<Self, String> {
        let days = |name: &str, value: Option<&str>| match value.map(str::trim) {
            None | Some("") => Ok(None),
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|d| *d <= 36_500)
                .map(Some)
                .ok_or_else(|| format!("{name} is a whole number of days (0–36500), not '{v}'")),
        };
        let batch = match batch.map(str::trim) {
            None | Some("") => DEFAULT_BATCH,
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .ok_or_else(|| format!("RETENTION_BATCH is 1–1000, not '{v}'"))?,
        };
        Ok(Self {
            compact_after_days: days("RETAIN_DAYS", retain_days)?,
            erase_after_days: days("ERASE_AFTER_DAYS", erase_after_days)?,
            batch,
        })
    }

    /// Whether it keeps everything (nothing to do).
    pub fn keeps_all(&self) -> bool {
        self.compact_after_days.is_none() && self.erase_after_days.is_none()
    }

    /// When a session must have ended by, at `now` (ms), to be erased.
    pub fn erase_cutoff(&self, now: u64) -> Option<u64> {
        Some(now.saturating_sub(self.erase_after_days? * DAY_MS))
    }

    /// When a session must have ended by, at `now` (ms), to be compacted.
    pub fn compact_cutoff(&self, now: u64) -> Option<u64> {
        Some(now.saturating_sub(self.compact_after_days? * DAY_MS))
    }

    /// The root sessions to erase at `now` (ms), oldest first, one batch: their ids
    /// (not those with schedules: a scheduled session is idle between fires, not done).
    pub fn to_erase(&self, now: u64) -> Option<(&'static str, Vec<Arg>)> {
        let batch = Arg::Int(u64::from(self.batch));
        Some((SELECT_ERASE, vec![Arg::Int(self.erase_cutoff(now)?), batch]))
    }

    /// The sessions to compact at `now` (ms), oldest first, one batch: those that ended
    /// before the cutoff and still have a transcript in the record.
    pub fn to_compact(&self, now: u64) -> Option<(&'static str, Vec<Arg>)> {
        let batch = Arg::Int(u64::from(self.batch));
        Some((
            SELECT_COMPACT,
            vec![Arg::Int(self.compact_cutoff(now)?), batch],
        ))
    }
}

/// Ended root sessions (a follow-up message may start one again: then it is no longer
/// ended) without schedules, oldest first; their children go with them.
const SELECT_ERASE: &str = "SELECT id FROM sessions \
     WHERE status IN ('completed', 'failed', 'aborted') AND updated_at < ?1 \
     AND head ->> '$.parent' IS NULL \
     AND NOT EXISTS (SELECT 1 FROM schedules AS k WHERE k.session_id = sessions.id) \
     ORDER BY updated_at, id LIMIT ?2";

/// Ended sessions that still have a transcript in the record, oldest first.
const SELECT_COMPACT: &str = "SELECT s.id FROM sessions AS s \
     WHERE s.status IN ('completed', 'failed', 'aborted') AND s.updated_at < ?1 \
     AND EXISTS (SELECT 1 FROM messages AS m WHERE m.session_id = s.id) \
     ORDER BY s.updated_at, s.id LIMIT ?2";

/// The statements that compact session `id` in the record: its transcript, checkpoints
/// and state log go; its row and runs stay. (One batch: all or nothing.) Each holds only
/// while the session's row still says it ended before `cutoff`: one that a follow-up
/// started again since it was picked keeps everything.
pub fn compaction(id: &str, cutoff: u64) -> [Statement; 3] {
    let args = || vec![Arg::Text(id.to_string()), Arg::Int(cutoff)];
    [
        Statement {
            sql: "DELETE FROM messages WHERE session_id = ?1 AND EXISTS (SELECT 1 FROM sessions \
                  WHERE id = ?1 AND status IN ('completed', 'failed', 'aborted') AND updated_at < ?2)",
            args: args(),
        },
        Statement {
            sql: "DELETE FROM checkpoints WHERE session_id = ?1 AND EXISTS (SELECT 1 FROM sessions \
                  WHERE id = ?1 AND status IN ('completed', 'failed', 'aborted') AND updated_at < ?2)",
            args: args(),
        },
        Statement {
            sql: "DELETE FROM state_log WHERE session_id = ?1 AND EXISTS (SELECT 1 FROM sessions \
                  WHERE id = ?1 AND status IN ('completed', 'failed', 'aborted') AND updated_at < ?2)",
            args: args(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_comes_from_the_vars_and_bad_values_say_why() {
        let all = Retention::from_vars(None, None, None).unwrap();
        assert!(all.keeps_all());
        assert_eq!(all.batch, DEFAULT_BATCH);
        assert_eq!((all.to_erase(1), all.to_compact(1)), (None, None));
        let some = Retention::from_vars(Some("30"), Some(" 365 "), Some("50")).unwrap();
        assert_eq!(
            (some.compact_after_days, some.erase_after_days, some.batch),
            (Some(30), Some(365), 50)
        );
        for (retain, erase, batch, why) in [
            (Some("-1"), None, None, "RETAIN_DAYS"),
            (None, Some("1.5"), None, "ERASE_AFTER_DAYS"),
            (None, Some("99999"), None, "ERASE_AFTER_DAYS"),
            (None, None, Some("0"), "RETENTION_BATCH"),
            (None, None, Some("1001"), "RETENTION_BATCH"),
        ] {
            let e = Retention::from_vars(retain, erase, batch).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn a_cutoff_is_the_days_before_now_and_zero_days_is_now() {
        let now = 100 * DAY_MS;
        let p = Retention::from_vars(Some("0"), Some("30"), Some("7")).unwrap();
        let (_, compact) = p.to_compact(now).unwrap();
        assert_eq!(compact, [Arg::Int(now), Arg::Int(7)]);
        let (_, erase) = p.to_erase(now).unwrap();
        assert_eq!(erase, [Arg::Int(70 * DAY_MS), Arg::Int(7)]);
        // Never below the epoch.
        let (_, early) = p.to_erase(DAY_MS).unwrap();
        assert_eq!(early[0], Arg::Int(0));
    }
}
