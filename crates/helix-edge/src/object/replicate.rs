//! Sending the session's commit log to D1 in the background ([`crate::replica`]): soon
//! after a commit (a short delay lets the commits right behind it join the batch), at
//! the end of every slice of work, and from the alarm while D1 fails.

use super::Inner;
use crate::host::Level;
use crate::replica::{COALESCE_MS, Replicated};
use crate::worker_host::log;
use serde_json::json;
use std::time::Duration;
use worker::{Date, Delay};

impl Inner {
    /// Replicates in the background, shortly; commits landing until then go along.
    pub(super) fn replicate_soon(&self) {
        let Some(me) = self.me.upgrade() else { return };
        if self.replication_scheduled.replace(true) {
            return;
        }
        self.state.wait_until(async move {
            Delay::from(Duration::from_millis(COALESCE_MS)).await;
            me.replication_scheduled.set(false);
            if let Some(id) = me.session_id() {
                me.replicate_now(&id).await;
            }
        });
    }

    /// Sends what waits for D1; when D1 fails, arms the alarm to try again with backoff.
    pub(super) async fn replicate_now(&self, id: &str) -> Replicated {
        let Ok(parts) = self.parts() else {
            return Replicated::Busy;
        };
        let outcome = parts.replica.replicate().await;
        if matches!(outcome, Replicated::Caught { .. }) {
            self.clear_fallback().await;
        }
        if let Replicated::Failed { retry_ms, error } = &outcome {
            let code = crate::error::Coded::code(error);
            let fields = json!({ "session": id, "code": code, "retryMs": retry_ms, "error": error.to_string() });
            log(Level::Warn, "replication_failed", fields);
            let storage = self.state.storage();
            let at = Date::now().as_millis() as i64 + *retry_ms as i64;
            let armed = storage.get_alarm().await.ok().flatten();
            if armed.is_none_or(|t| t > at) {
                let set = storage.set_alarm(Duration::from_millis(*retry_ms)).await;
                if let Err(e) = set {
                    log(
                        Level::Warn,
                        "alarm_error",
                        json!({ "session": id, "error": e.to_string() }),
                    );
                }
            }
        }
        outcome
    }
}

impl Inner {
    /// Deletes the alarm a slice set only so that replication would be retried, now
    /// that D1 has everything (unless something else moved the alarm since).
    async fn clear_fallback(&self) {
        let Some(at) = self.replication_fallback.take() else {
            return;
        };
        let storage = self.state.storage();
        let armed = storage.get_alarm().await.ok().flatten();
        // The alarm's time is the one the slice computed, to within the clock's drift.
        if armed.is_some_and(|t| (t - at as i64).abs() < 1_000) {
            let _ = storage.delete_alarm().await;
        }
    }
}

#[cfg(feature = "test-routes")]
impl Inner {
    /// Test builds: replicates until D1 has everything, then compares every row of the
    /// session in the object's storage with D1's.
    pub(super) async fn replica_report(&self, parts: &super::Parts, id: &str) -> super::Reply {
        // A replication under way (D1 may be slow) finishes first: at most 30 s.
        let mut outcome = Replicated::Busy;
        for _ in 0..600 {
            outcome = self.replicate_now(id).await;
            if outcome != Replicated::Busy {
                break;
            }
            Delay::from(Duration::from_millis(50)).await;
        }
        let caught = matches!(outcome, Replicated::Caught { .. });
        let (waiting, bytes) = parts.replica.backlog();
        let mut report = json!({
            "caughtUp": caught,
            "waiting": waiting,
            "waitingBytes": bytes,
            "lags": parts.replica.lags(),
        });
        if caught {
            let dumped = parts.replica.dump(id).await;
            let (local, remote) = dumped.map_err(crate::runner::RunError::from)?;
            let rows = |dump: &serde_json::Value| -> usize {
                let tables = dump.as_object().into_iter().flat_map(|t| t.values());
                tables
                    .filter_map(|rows| rows.as_array())
                    .map(Vec::len)
                    .sum()
            };
            report["rows"] = json!({ "local": rows(&local), "remote": rows(&remote) });
            report["equal"] = json!(local == remote);
            if local != remote {
                report["local"] = local;
                report["remote"] = remote;
            }
        }
        crate::http::json_response(200, &report)
    }

    /// Test builds: deletes everything the object stored, as a lost namespace would;
    /// the next request finds the session only in D1.
    pub(super) async fn forget(&self) -> super::Reply {
        self.erase().await?;
        crate::http::json_response(202, &json!({ "accepted": true }))
    }
}
