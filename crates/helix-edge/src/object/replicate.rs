//! Sending the session's commit log to D1 in the background ([`crate::sqlite::Replica`]): soon
//! after a commit (a short delay lets the commits right behind it join the batch), at
//! the end of every slice of work, and from the alarm while D1 fails.

use super::CAPABILITIES;
use super::Inner;
use crate::host::Level;
use crate::sqlite::{COALESCE_MS, Replicated};
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
        if let Replicated::Caught { lags, sends, .. } = &outcome {
            for record in CAPABILITIES.iter().filter_map(|c| c.on_replicated) {
                record(self, id, lags, sends);
            }
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
