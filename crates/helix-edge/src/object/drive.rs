//! Running the session's work: after an answer (`wait_until`) or from the alarm, one
//! slice at a time, with the alarm as the durable trigger around each. When to drive
//! and when the alarm fires next is decided by [`crate::lifecycle`]; this executes it.

use super::CAPABILITIES;
use super::Inner;
use crate::host::Level;
use crate::lifecycle::{Alarm, GUARD, STEPS_PER_SLICE, due_alarm, replicate_at_once, slice_alarm};
use crate::worker_host::log;
use futures::future::LocalBoxFuture;
use serde_json::json;
use std::rc::Rc;
use worker::Date;

impl Inner {
    /// Drives the session after the response is sent.
    pub(super) fn schedule(self: &Rc<Self>, id: &str) {
        self.state.wait_until(self.clone().drive(id.to_string()));
    }

    /// One slice of work, with the alarm as the durable trigger around it. Boxed: the
    /// alarm and `wait_until` share one copy of the drive's state machine.
    pub(super) fn drive(self: Rc<Self>, id: String) -> LocalBoxFuture<'static, ()> {
        Box::pin(async move { self.drive_slice(&id).await })
    }

    async fn drive_slice(&self, id: &str) {
        let Ok(parts) = self.parts() else { return };
        let storage = self.state.storage();
        if let Err(e) = storage.set_alarm(GUARD).await {
            let fields = json!({ "session": id, "error": e.to_string() });
            log(Level::Warn, "alarm_error", fields);
        }
        let started = Date::now().as_millis();
        let progress = parts.runner.drive(id, STEPS_PER_SLICE).await;
        let now = Date::now().as_millis();
        if let Err(e) = &progress {
            let ms = now.saturating_sub(started);
            let fields = json!({ "session": id, "error": e.to_string(), "ms": ms });
            log(Level::Warn, "drive_failed", fields);
        }
        // What the session owes others (a child's relay and report to its parent).
        let mut reported = true;
        for after in CAPABILITIES.iter().filter_map(|c| c.after_slice) {
            reported &= after(self, id).await;
        }
        // What the slice committed goes to D1: at once when the run ended; when it waits
        // for a human, a little later, so that the answer's commits can join the batch.
        if replicate_at_once(&progress) {
            self.replicate_now(id).await;
        } else {
            self.replicate_soon();
        }
        let waiting = parts.replica.backlog().0 > 0;
        let (alarm, fallback) = slice_alarm(&progress, now, reported, waiting);
        let due = CAPABILITIES.iter().filter_map(|c| c.next_due);
        let (alarm, fallback) = match due.filter_map(|due| due(self)).min() {
            Some(at) => due_alarm(alarm, at, now),
            None => (alarm, fallback),
        };
        self.replication_fallback.set(fallback);
        let rearmed = match alarm {
            Alarm::In(wait) => storage.set_alarm(wait).await,
            Alarm::Clear => storage.delete_alarm().await,
            // The slice in progress re-arms when it ends.
            Alarm::Leave => return,
        };
        if let Err(e) = rearmed {
            let fields = json!({ "session": id, "error": e.to_string() });
            log(Level::Warn, "alarm_error", fields);
        }
    }
}
