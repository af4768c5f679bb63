//! Schedules an agent makes for itself (`AgentBuilder::scheduling`): the
//! `schedule_run`, `list_schedules` and `cancel_schedule` tools, so that "remind me
//! tomorrow at nine" works. They reach the session's schedules through the registry
//! below: the session's object registers its storage when it learns its session id, and
//! a tool finds it by the id its context carries (one session per object; an isolate
//! may host several).

use super::body::{ScheduleBody, ScheduleView};
use super::table::Schedules;
use crate::agent::AgentBuilder;
use crate::error::ToolError;
use crate::sqlite::Db;
use crate::tool::{Tool, ToolContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::cell::RefCell;
use std::rc::{Rc, Weak};

/// `schedule_run`: a run this session starts later, with `message`.
pub const SCHEDULE_RUN: &str = "schedule_run";
/// `list_schedules`: this session's schedules.
pub const LIST_SCHEDULES: &str = "list_schedules";
/// `cancel_schedule`: removes one.
pub const CANCEL_SCHEDULE: &str = "cancel_schedule";

thread_local! {
    /// The storage of each session this isolate's objects serve, by session id.
    static TABLES: RefCell<Vec<(String, Weak<dyn Db>)>> = const { RefCell::new(Vec::new()) };
}

/// Registers `db` as session `session_id`'s storage (the object does, once it knows
/// its session); entries of objects that went away are dropped.
pub fn register(session_id: &str, db: &Rc<dyn Db>) {
    TABLES.with(|tables| {
        let mut tables = tables.borrow_mut();
        tables.retain(|(id, db)| id != session_id && db.strong_count() > 0);
        tables.push((session_id.to_string(), Rc::downgrade(db)));
    });
}

/// `f` on session `session_id`'s schedules, if its storage is registered.
fn with_table<T>(session_id: &str, f: impl FnOnce(&Schedules<'_>) -> T) -> Result<T, ToolError> {
    let db = TABLES.with(|tables| {
        let tables = tables.borrow();
        let found = tables.iter().find(|(id, _)| id == session_id);
        found.and_then(|(_, db)| db.upgrade())
    });
    let db = db.ok_or_else(|| failed("this session keeps no schedules here".into()))?;
    Ok(f(&Schedules::new(&*db)))
}

fn failed(message: String) -> ToolError {
    ToolError::Failed {
        message,
        source: None,
    }
}

/// Input of `schedule_run`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScheduleRun {
    /// What the run starts with, as if the user said it then.
    message: String,
    /// Once, at this time: RFC 3339 with an offset (`2026-11-27T09:00:00+01:00`).
    #[serde(skip_serializing_if = "Option::is_none")]
    at: Option<String>,
    /// Every so many seconds (1 to a year).
    #[serde(skip_serializing_if = "Option::is_none")]
    every: Option<u64>,
    /// A cron pattern (`0 9 * * MON-FRI`), read in `timezone`.
    #[serde(skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    /// The IANA zone of `cron` (`Europe/Berlin`; default UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    timezone: Option<String>,
    /// No fire after this time (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<String>,
    /// Fires in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
}

/// Input of `list_schedules`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListSchedules {}

/// Input of `cancel_schedule`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CancelSchedule {
    /// The schedule's id, as `schedule_run` or `list_schedules` gave it.
    schedule_id: String,
}

/// `schedule_run`: the schedule's id is the call's (`schedule_<call id>`), so a call run
/// again after a crash makes the same schedule, not a second one.
fn schedule_run(input: ScheduleRun, ctx: &ToolContext) -> Result<Value, ToolError> {
    let body = serde_json::to_value(&input).map_err(|e| failed(e.to_string()))?;
    let body: ScheduleBody = serde_json::from_value(body).map_err(|e| failed(e.to_string()))?;
    let id = format!("schedule_{}", ctx.tool_call_id());
    let schedule = body
        .into_schedule(id, ctx.now_ms())
        .map_err(|e| failed(e.message))?;
    with_table(ctx.session_id(), |table| table.create(&schedule))?
        .map_err(|e| failed(e.to_string()))?;
    Ok(json!(ScheduleView::from(schedule)))
}

fn list_schedules(ctx: &ToolContext) -> Result<Value, ToolError> {
    let listed = with_table(ctx.session_id(), |table| table.list())?;
    let views: Vec<ScheduleView> = listed
        .map_err(|e| failed(e.to_string()))?
        .into_iter()
        .map(ScheduleView::from)
        .collect();
    Ok(json!({ "schedules": views }))
}

fn cancel_schedule(input: CancelSchedule, ctx: &ToolContext) -> Result<Value, ToolError> {
    let id = input.schedule_id;
    let deleted = with_table(ctx.session_id(), |table| table.delete(&id))?;
    match deleted.map_err(|e| failed(e.to_string()))? {
        true => Ok(json!({ "cancelled": id })),
        false => Err(failed(format!("no schedule '{id}' in this session"))),
    }
}

/// The three tools.
pub fn scheduling_tools() -> [Tool; 3] {
    [
        Tool::new(
            SCHEDULE_RUN,
            "Schedule a run of this conversation for later: once `at` a time, `every` so many \
             seconds, or on a `cron` pattern in a `timezone`; it starts with `message`.",
            |input: ScheduleRun, ctx| {
                let result = schedule_run(input, &ctx);
                async move { result }
            },
        )
        .into(),
        Tool::new(
            LIST_SCHEDULES,
            "List this conversation's schedules and when each fires next.",
            |_: ListSchedules, ctx| {
                let result = list_schedules(&ctx);
                async move { result }
            },
        )
        .into(),
        Tool::new(
            CANCEL_SCHEDULE,
            "Cancel one of this conversation's schedules by its id.",
            |input: CancelSchedule, ctx| {
                let result = cancel_schedule(input, &ctx);
                async move { result }
            },
        )
        .into(),
    ]
}

impl AgentBuilder {
    /// The agent may schedule runs of its own session: the `schedule_run`,
    /// `list_schedules` and `cancel_schedule` tools (at most
    /// [`MAX_SCHEDULES`](super::MAX_SCHEDULES) schedules a session). The worker needs
    /// helix-edge's `schedules` feature, which fires them.
    pub fn scheduling(self) -> Self {
        scheduling_tools()
            .into_iter()
            .fold(self, |builder, tool| builder.tool(tool))
    }
}
