//! Schedules (feature `schedules`): runs a session starts on its own — once at a time,
//! every so many seconds, or on a cron pattern in a time zone — and the durable queue of
//! messages that wait while a run is busy (`whenBusy`). Both live in the session
//! object's storage; its one alarm serves the schedules together with its other work.
//!
//! - [`when`]: when a schedule fires, and the arithmetic of its next fire across
//!   daylight-saving changes.
//! - [`cron`]: cron patterns, parsed and matched against civil times.
//! - [`civil`]: civil dates and times, and RFC 3339 timestamps.
//! - [`zone`]: the offsets of IANA time zones, from the platform (natively, the IANA
//!   database).
//! - [`body`]: the API's schedule body, checked into the record a session keeps, and
//!   its view.
//! - [`busy`]: what a message does while the session is busy: the policies and the
//!   decision.
//! - [`table`]: schedules and the queue in the object's SQLite, and the claim protocol
//!   that runs each due fire exactly once.
//! - [`drain`]: starting the queue's next run once the session is idle.
//! - [`cancel`]: `interrupt` for a run waiting on a human: its calls cancelled.
//! - [`record`]: the schedules in the queryable record (D1), for `GET /v1/schedules`.
//! - [`listing`]: `GET /v1/schedules`' query and page.
//! - [`notice`]: what the stream says of a message that waits (`message_queued`,
//!   `message_merged`).
//! - [`tools`]: `AgentBuilder::scheduling`, the tools an agent schedules itself with,
//!   and the registry through which they reach the session's schedules.

pub mod body;
pub mod busy;
pub mod cancel;
pub mod civil;
pub mod cron;
pub mod drain;
pub mod listing;
pub mod notice;
pub mod record;
pub mod table;
pub mod tools;
pub mod when;
pub mod zone;

pub use body::{MAX_SCHEDULES, Schedule, ScheduleBody, ScheduleView};
pub use busy::{
    Decision, Limit, MAX_ENTRY_BYTES, MAX_MERGED, MAX_QUEUE_BYTES, MAX_QUEUED, Queued, Source,
    WhenBusy, decide, policy_of, take_when_busy,
};
pub use drain::{Next, start_next};
pub use notice::{Placed, chunk_for, tell, under};
pub use table::{Fired, Schedules, TableError};
pub use when::When;

use crate::store::SessionHead;

/// Checks a follow-up's model options against the session's agent before the message is
/// queued (they are checked again when its run starts).
pub fn check_options<S: crate::store::Store>(
    runner: &crate::runner::Runner<S>,
    head: &SessionHead,
    options: &serde_json::Value,
) -> Result<(), crate::runner::RunError> {
    let agent = runner.agent(&head.agent)?;
    crate::runner::check_options(options, &agent)
}

/// What a message to session `head` does when it is busy and says nothing: its
/// agent's policy ([`AgentBuilder::when_busy`](crate::agent::AgentBuilder::when_busy)).
pub fn default_policy<S: crate::store::Store>(
    runner: &crate::runner::Runner<S>,
    head: &SessionHead,
) -> Result<WhenBusy, crate::runner::RunError> {
    Ok(policy_of(&*runner.agent(&head.agent)?))
}

/// Whether a message arriving now would find the session busy: a run is active or waits
/// on a human (a new run would leave its calls unanswered).
pub fn is_busy(head: &SessionHead) -> bool {
    crate::runner::ensure_idle(head).is_err()
}
