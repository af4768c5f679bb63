//! Schedules and the queue of waiting messages (feature `schedules`), as the session's
//! object serves them: `POST …/schedules`, `GET …/schedules`, `DELETE
//! …/schedules/{scheduleId}`, and follow-ups (`POST …/messages`) with their `whenBusy`.
//! After each slice of work (the alarm's included) the due fires are claimed and the
//! queue's next run started, driven by a slice of its own ([`crate::schedule`] holds the
//! protocol), and the alarm is brought forward to the soonest fire. The object registers
//! its storage for the agent's own scheduling tools once it knows its session. An
//! aborted session's schedules and queue go.

use super::capability::{Call, Capability, Followed, NOTHING};
use super::{Inner, Reply};
use crate::api::{ApiError, MessageBody, Operation, parse_body};
use crate::chunk::ChunkBody;
use crate::d1::D1;
use crate::host::{Host, Level};
use crate::http::{internal, json_response};
use crate::message::Message;
use crate::runner::RunError;
use crate::schedule::{
    Decision, Fired, Next, Placed, ScheduleBody, ScheduleView, Schedules, TableError, WhenBusy,
    cancel, check_options, chunk_for, default_policy, is_busy, record, table::from_message,
    take_when_busy, tell, under,
};
use crate::store::{SessionHead, SessionStatus, StoreError};
use crate::trace::TraceContext;
use crate::worker_host::{WorkerHost, log};
use futures::future::LocalBoxFuture;
use serde_json::{Value, json};
use std::rc::Rc;
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
        (Operation::SendMessage, |inner, call| {
            Box::pin(inner.send_when_busy(call))
        }),
    ],
    // `/v1/chat`'s new messages, with the `whenBusy` of the chat body.
    follow_up: Some(|inner, id, body, messages, (options, trace)| {
        Box::pin(async move {
            let (policy, _) = take_when_busy(body)?;
            inner
                .follow_up(id, policy, messages, (options, trace))
                .await
        })
    }),
    after_slice: Some(after_slice),
    next_due: Some(|inner| inner.due.take()),
    // Cron patterns are read in time zones by the runtime's own rules.
    equip: Some(|runner, _| {
        if !crate::schedule::zone::installed() {
            crate::schedule::zone::install(Rc::new(crate::zones::Intl));
        }
        runner
    }),
    // The agent's own scheduling tools reach the session's schedules by its id.
    identified: Some(|parts, id| {
        let db: Rc<dyn crate::sqlite::Db> = parts.sql.clone();
        crate::schedule::tools::register(id, &db);
    }),
    // The messages waiting their turn (an empty queue adds nothing).
    view: Some(|parts, fields| {
        let queue = Schedules::new(&*parts.sql).queue().unwrap_or_default();
        if !queue.is_empty() {
            fields.insert("queue".into(), json!(queue));
        }
    }),
    ..NOTHING
};

fn table_error(e: TableError) -> ApiError {
    match e {
        TableError::TooMany => ApiError::client(429, "too_many_schedules", e.to_string()),
        TableError::Storage(e) => internal("schedules", e),
        TableError::Claim { reason, .. } => internal("schedules", reason),
    }
}

impl Inner {
    /// `POST …/messages` with its `whenBusy` ([`Inner::follow_up`]): 202 `{"runId"}`,
    /// with `queued`, `queueId` and `position` when it waits.
    async fn send_when_busy(self: &Rc<Self>, call: &Call<'_>) -> Reply {
        let (options, body) =
            crate::provider_options::take(call.body).map_err(ApiError::validation)?;
        let (policy, body) = take_when_busy(&body)?;
        let messages = parse_body::<MessageBody>(&body)?.into_messages()?;
        let trace = super::trace_of(call.req);
        let followed = self
            .follow_up(call.id, policy, messages, (options, trace))
            .await?;
        let body = match followed.queued {
            None => json!({ "runId": followed.run_id }),
            Some((queue_id, position)) => json!({
                "runId": followed.run_id, "queued": true, "queueId": queue_id,
                "position": position,
            }),
        };
        json_response(202, &body)
    }

    /// A follow-up of session `id` by `policy` (the agent's when `None`): its run starts
    /// at once when nothing is busy; otherwise the message is refused (`reject`: 409),
    /// queued (`enqueue`; `interrupt`: first in line, the running run asked to stop at its
    /// next step boundary) or merged into the last queued message (`merge`), and the
    /// stream told; 429 `queue_full` past the queue's bound.
    pub(super) async fn follow_up(
        self: &Rc<Self>,
        id: &str,
        policy: Option<WhenBusy>,
        messages: Vec<Message>,
        (options, trace): (Option<Value>, Option<TraceContext>),
    ) -> Result<Followed, ApiError> {
        let parts = self.attach(id)?;
        let runner = &parts.runner;
        let head = self.head(runner, id).await?;
        if head.status == SessionStatus::Aborted {
            return Err(RunError::Aborted.into());
        }
        if let Some(given) = &options {
            check_options(runner, &head, given)?;
        }
        let policy = match policy {
            Some(policy) => policy,
            None => default_policy(runner, &head)?,
        };
        let table = Schedules::new(&*parts.sql);
        let (queue_id, run_id) = (WorkerHost.new_id("queued"), WorkerHost.new_id("run"));
        let now = Date::now().as_millis();
        let queued = from_message(queue_id.clone(), run_id.clone(), messages, options, now);
        let (messages, options) = (queued.messages.clone(), queued.options.clone());
        let decision = table
            .enqueue(queued, policy, is_busy(&head))
            .map_err(table_error)?;
        let placed = match &decision {
            // Started here, as without the feature: refused, it leaves nothing behind.
            Decision::Start => {
                let run_id = runner
                    .send_messages_as(id, messages, options, run_id, trace)
                    .await?;
                self.schedule(id);
                return Ok(Followed {
                    run_id,
                    queued: None,
                });
            }
            Decision::Refuse => {
                return Err(RunError::Busy("a run is active or messages are queued").into());
            }
            Decision::Full(limit) => {
                return Err(ApiError::client(429, "queue_full", limit.message()));
            }
            Decision::Queue => Placed::Queued(&queue_id, policy),
            Decision::Interrupt => {
                self.make_way(runner, &head, "a new message took its turn")
                    .await;
                Placed::Queued(&queue_id, policy)
            }
            Decision::MergeInto(into) => Placed::Merged(into),
        };
        let queue = table.queue().map_err(table_error)?;
        let (Placed::Queued(entry, _) | Placed::Merged(entry)) = placed;
        let at = queue.iter().position(|q| q.queue_id == entry);
        if let Some(body) = chunk_for(placed, &queue, None) {
            tell(&*parts.stream, head.version, under(&head, now, body));
        }
        let fields = json!({ "session": id, "queued": entry, "policy": policy.as_str() });
        log(Level::Info, "message_queued", fields);
        let run_id = at.map_or(run_id, |at| queue[at].run_id.clone());
        let position = at.map_or(queue.len(), |at| at + 1);
        Ok(Followed {
            run_id,
            queued: Some((entry.to_string(), position)),
        })
    }

    /// Makes way for a message that interrupts: a working run stops at its next step
    /// boundary; a run waiting on a human alone has its calls cancelled (the model sees
    /// why) and stops there; then the session is driven on. A run waiting on sub-agents
    /// is left to finish its wait. The message is queued already: if this fails (logged),
    /// it runs once the current run ends.
    async fn make_way(
        &self,
        runner: &crate::runner::Runner<crate::storage::ObjectStore>,
        head: &SessionHead,
        reason: &str,
    ) {
        let made = match head.status {
            SessionStatus::Active if head.pending.is_empty() => {
                runner.interrupt(&head.id, Some(reason.into())).await
            }
            SessionStatus::Active if cancel::cancellable(head) => {
                let reason = format!("Cancelled: {reason}.");
                cancel::cancel_pending(runner, head, &reason).await
            }
            _ => return,
        };
        if let Err(e) = made {
            let fields = json!({ "session": head.id, "error": e.to_string() });
            log(Level::Warn, "interrupt_failed", fields);
        }
        if let Some(me) = self.me.upgrade() {
            me.schedule(&head.id);
        }
    }

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
        self.send_to_record_soon(call.id);
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
            self.send_to_record_soon(id);
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
        self.send_to_record_soon(call.id);
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
        let default = default_policy(runner, &head)?;
        let fired = table
            .claim_due(now, is_busy(&head), default, ids)
            .map_err(storage)?;
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
            let policy = schedule.when_busy.unwrap_or(default);
            let placed = match outcome {
                Fired::Queued { queue_id } | Fired::Interrupting { queue_id } => {
                    Some(Placed::Queued(queue_id, policy))
                }
                Fired::Merged { queue_id } => Some(Placed::Merged(queue_id)),
                Fired::Skipped => None,
            };
            if let Some(placed) = placed {
                let queue = table.queue().map_err(storage)?;
                // A fire an idle session starts at once is told by its `run_started`.
                let starts = !is_busy(&head)
                    && matches!(placed, Placed::Queued(id, _) if queue.first().is_some_and(|q| q.queue_id == id));
                let schedule_id = Some(schedule.schedule_id.as_str());
                if let Some(body) = chunk_for(placed, &queue, schedule_id).filter(|_| !starts) {
                    tell(&*parts.stream, head.version, under(&head, now, body));
                }
            }
            if matches!(outcome, Fired::Interrupting { .. }) {
                let reason = format!("schedule {} took its turn", schedule.schedule_id);
                self.make_way(runner, &head, &reason).await;
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
                let (queue_id, run_id) = (&queued.queue_id, &queued.run_id);
                let body = ChunkBody::Error {
                    code: "queued_message_dropped".into(),
                    message: format!(
                        "Queued message {queue_id} (run {run_id}) did not start: {why}"
                    ),
                    recoverable: false,
                };
                let head = self.head(runner, id).await?;
                tell(&*parts.stream, head.version, under(&head, now, body));
            }
            Next::Empty | Next::Waiting => {}
        }
        Ok(next)
    }
}

/// How soon a failed send of the schedules to the queryable record is made again (ms).
const RECORD_RETRY_MS: u64 = 30_000;

impl Inner {
    /// Sends session `id`'s schedules to the queryable record if they changed since last
    /// sent (again if they changed meanwhile: see [`record`]); `false` when it failed.
    async fn send_to_record(&self, id: &str) -> bool {
        let Ok(parts) = self.parts() else {
            return false;
        };
        let sent = async {
            let agent = self.head(&parts.runner, id).await?.agent;
            let d1 = D1::new(&self.env, &parts.database, None)
                .map_err(|e| RunError::Store(StoreError::Backend(e.to_string())))?;
            for _ in 0..3 {
                if !record::sync(&d1, &*parts.sql, id, &agent).await? {
                    break;
                }
            }
            Ok::<(), RunError>(())
        };
        match sent.await {
            Ok(()) => true,
            // Gone with its session: nothing to send.
            Err(RunError::Store(StoreError::NotFound(_))) => true,
            Err(e) => {
                let fields = json!({ "session": id, "error": e.to_string() });
                log(Level::Warn, "schedule_record_failed", fields);
                false
            }
        }
    }

    /// [`send_to_record`](Self::send_to_record) in the background, after a request
    /// changed the schedules (the alarm comes back if it failed).
    fn send_to_record_soon(&self, id: &str) {
        let (Some(me), id) = (self.me.upgrade(), id.to_string()) else {
            return;
        };
        self.state.wait_until(async move {
            if !me.send_to_record(&id).await {
                me.alarm_by(Date::now().as_millis() + RECORD_RETRY_MS).await;
            }
        });
    }
}

/// After a slice: the due fires, and the queue's next run (driven by a slice of its
/// own). Owes nobody anything: `true`. A session without schedules, queue or record rows
/// costs one statement.
fn after_slice<'a>(inner: &'a Inner, id: &'a str) -> LocalBoxFuture<'a, bool> {
    Box::pin(async move {
        let quiet = inner
            .parts()
            .map(|parts| Schedules::new(&*parts.sql).quiet());
        if matches!(quiet, Ok(Ok(true))) {
            inner.due.set(None);
            return true;
        }
        let fired = inner.fire_and_start(id).await;
        let mut claims = inner.claims.get();
        if fired.is_ok() {
            claims.succeeded();
        }
        match fired {
            // Its own slice drives it (and says when the alarm is due next).
            Ok(Next::Started(_)) => {
                if let Some(me) = inner.me.upgrade() {
                    me.schedule(id);
                }
            }
            // Idle, with more maybe queued behind the one dropped.
            Ok(Next::Dropped(..)) => inner.due.set(next_due(inner, true)),
            Ok(Next::Empty | Next::Waiting) => inner.due.set(next_due(inner, false)),
            // Said once, then tried again ever later: never at once in a loop.
            Err(e) => {
                let (report, retry) = claims.failed(Date::now().as_millis());
                if report {
                    let fields = json!({ "session": id, "error": e.to_string() });
                    log(Level::Warn, "schedule_error", fields);
                }
                inner.due.set(Some(retry));
            }
        }
        inner.claims.set(claims);
        // The queryable record follows (a failed send is tried again soon).
        if !inner.send_to_record(id).await {
            let retry = Date::now().as_millis() + RECORD_RETRY_MS;
            inner
                .due
                .set(Some(inner.due.get().map_or(retry, |due| due.min(retry))));
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
