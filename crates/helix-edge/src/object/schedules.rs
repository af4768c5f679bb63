//! Schedules and the queue of waiting messages (feature `schedules`), as the session's
//! object serves them: `POST …/schedules`, `GET …/schedules`, `DELETE
//! …/schedules/{scheduleId}`; after each slice of work (the alarm's included) the due fires
//! are claimed and the queue's next run started, driven by a slice of its own
//! ([`crate::schedule`] holds the protocol), and the alarm is brought forward to the
//! soonest fire. An aborted session's schedules and queue go.

use super::capability::{Call, Capability, NOTHING};
use super::{Inner, Reply};
use crate::api::{ApiError, Operation, parse_body};
use crate::host::{Host, Level};
use crate::http::{internal, json_response};
use crate::runner::RunError;
use crate::schedule::{Fired, Next, ScheduleBody, ScheduleView, Schedules, TableError, is_busy};
use crate::store::{SessionStatus, StoreError};
use crate::worker_host::{WorkerHost, log};
use futures::future::LocalBoxFuture;
use serde_json::json;
use std::time::Duration;
use worker::{Date, Response};

/// Schedules, and the queue they share with busy messages.
pub(super) const SCHEDULES: Capability = Capability {
    operations: &[
        (Operation::CreateSchedule, |inner, call| {
            Box::pin(inner.create_schedule(call))
        }),
        (Operation::ListSchedules, |inner, call| {
            Box::pin(inner.list_schedules(call.id))
        }),
        (Operation::DeleteSchedule, |inner, call| {
            Box::pin(inner.delete_schedule(call))
        }),
    ],
    after_slice: Some(after_slice),
    next_due: Some(|inner| inner.due.take()),
    ..NOTHING
};

fn table_error(e: TableError) -> ApiError {
    match e {
        TableError::TooMany => ApiError::client(429, "too_many_schedules", e.to_string()),
        TableError::Storage(e) => internal("schedules", e),
    }
}

impl Inner {
    /// `POST …/schedules`: 201 `{"scheduleId", "nextFireAt"}`, the alarm brought forward.
    async fn create_schedule(&self, call: &Call<'_>) -> Reply {
        let parts = self.attach(call.id)?;
        let body = parse_body::<ScheduleBody>(call.body)?;
        let now = Date::now().as_millis();
        let schedule = body.into_schedule(WorkerHost.new_id("schedule"), now)?;
        let head = self.head(&parts.runner, call.id).await?;
        if head.status == SessionStatus::Aborted {
            return Err(RunError::Aborted.into());
        }
        Schedules::new(&*parts.sql)
            .create(&schedule)
            .map_err(table_error)?;
        self.alarm_by(schedule.next_fire_ms).await;
        let fields = json!({ "session": call.id, "schedule": schedule.schedule_id });
        log(Level::Info, "schedule_created", fields);
        let view = ScheduleView::from(schedule);
        json_response(201, &view)
    }

    /// `GET …/schedules`, soonest first, with the messages waiting in the queue.
    async fn list_schedules(&self, id: &str) -> Reply {
        let parts = self.attach(id)?;
        let head = self.head(&parts.runner, id).await?;
        let table = Schedules::new(&*parts.sql);
        if head.status == SessionStatus::Aborted {
            table.clear().map_err(table_error)?;
        }
        let schedules = table.list().map_err(table_error)?;
        let schedules: Vec<ScheduleView> = schedules.into_iter().map(ScheduleView::from).collect();
        let queue = table.queue().map_err(table_error)?;
        json_response(200, &json!({ "schedules": schedules, "queue": queue }))
    }

    /// `DELETE …/schedules/{scheduleId}`: 204, or 404 `schedule_not_found`.
    async fn delete_schedule(&self, call: &Call<'_>) -> Reply {
        let parts = self.attach(call.id)?;
        self.head(&parts.runner, call.id).await?;
        let schedule = call.item.unwrap_or_default();
        if !Schedules::new(&*parts.sql)
            .delete(schedule)
            .map_err(table_error)?
        {
            let message = format!("No schedule '{schedule}' in this session.");
            return Err(ApiError::client(404, "schedule_not_found", message));
        }
        let fields = json!({ "session": call.id, "schedule": schedule });
        log(Level::Info, "schedule_deleted", fields);
        Response::empty()
            .map(|r| r.with_status(204))
            .map_err(|e| internal("delete schedule", e))
    }

    /// Makes the alarm fire no later than `at_ms` (the platform's alarm is read as a time,
    /// set as an offset).
    async fn alarm_by(&self, at_ms: u64) {
        let storage = self.state.storage();
        let current = storage.get_alarm().await.ok().flatten();
        if current.is_some_and(|set| set >= 0 && (set as u64) <= at_ms) {
            return;
        }
        let wait = at_ms.saturating_sub(Date::now().as_millis()).max(1);
        if let Err(e) = storage.set_alarm(Duration::from_millis(wait)).await {
            log(
                Level::Warn,
                "alarm_error",
                json!({ "error": e.to_string() }),
            );
        }
    }

    /// Claims the due fires of session `id` and starts the queue's next run if the
    /// session is idle.
    async fn fire_and_start(&self, id: &str) -> Result<Next, RunError> {
        let storage = |e: String| RunError::Store(StoreError::Backend(e));
        let parts = self.parts().map_err(|e| storage(e.message))?;
        let runner = &parts.runner;
        let table = Schedules::new(&*parts.sql);
        let storage = |e: TableError| storage(e.to_string());
        let head = self.head(runner, id).await?;
        if head.status == SessionStatus::Aborted {
            return table.clear().map(|()| Next::Empty).map_err(storage);
        }
        let now = Date::now().as_millis();
        let ids = || (WorkerHost.new_id("queued"), WorkerHost.new_id("run"));
        let fired = table.claim_due(now, is_busy(&head), ids).map_err(storage)?;
        for (schedule, outcome) in &fired {
            let lag = now.saturating_sub(schedule.next_fire_ms.min(now));
            let (what, queued) = match outcome {
                Fired::Queued { queue_id } => ("queued", Some(queue_id)),
                Fired::Interrupting { queue_id } => ("interrupting", Some(queue_id)),
                Fired::Merged { queue_id } => ("merged", Some(queue_id)),
                Fired::Skipped => ("skipped", None),
            };
            let fields = json!({
                "session": id, "schedule": schedule.schedule_id, "outcome": what,
                "queued": queued, "fired": schedule.fired, "lagMs": lag,
            });
            log(Level::Info, "schedule_fired", fields);
            if matches!(outcome, Fired::Interrupting { .. }) && head.status == SessionStatus::Active
            {
                let reason = Some(format!("schedule {}", schedule.schedule_id));
                runner.interrupt(id, reason).await?;
            }
        }
        let next = crate::schedule::start_next(runner, &table, id).await?;
        match &next {
            Next::Started(queued) => {
                let fields =
                    json!({ "session": id, "queued": queued.queue_id, "run": queued.run_id });
                log(Level::Info, "queued_run_started", fields);
            }
            Next::Dropped(queued, why) => {
                let fields = json!({ "session": id, "queued": queued.queue_id, "error": why });
                log(Level::Warn, "queued_message_dropped", fields);
            }
            Next::Empty | Next::Waiting => {}
        }
        Ok(next)
    }
}

/// After a slice: the due fires, and the queue's next run (driven by a slice of its
/// own). Owes nobody anything: `true`.
fn after_slice<'a>(inner: &'a Inner, id: &'a str) -> LocalBoxFuture<'a, bool> {
    Box::pin(async move {
        match inner.fire_and_start(id).await {
            // Its own slice drives it (and says when the alarm is due next).
            Ok(Next::Started(_)) => {
                if let Some(me) = inner.me.upgrade() {
                    me.schedule(id);
                }
            }
            // Idle, with more maybe queued behind the one dropped.
            Ok(Next::Dropped(..)) => inner.due.set(next_due(inner, true)),
            Ok(Next::Empty | Next::Waiting) => inner.due.set(next_due(inner, false)),
            Err(e) => {
                let fields = json!({ "session": id, "error": e.to_string() });
                log(Level::Warn, "schedule_error", fields);
                inner.due.set(next_due(inner, false));
            }
        }
        true
    })
}

/// When the alarm must fire for the schedules and the queue: at the soonest fire, and
/// at once when the session is idle with messages queued.
fn next_due(inner: &Inner, idle: bool) -> Option<u64> {
    let parts = inner.parts().ok()?;
    let table = Schedules::new(&*parts.sql);
    if idle && table.first().ok().flatten().is_some() {
        return Some(Date::now().as_millis());
    }
    table.next_fire().ok().flatten()
}
