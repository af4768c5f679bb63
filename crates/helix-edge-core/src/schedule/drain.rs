//! Starting the queue's next run: the queue's first message runs once the session is
//! idle, with the run id it was given when queued; its entry goes once the run started.
//! An entry whose run already started (the process died in between) is dropped, not run
//! again; one that can never start (its agent's options no longer fit, say) is dropped
//! with the reason, so that it does not hold up the messages behind it.

use super::busy::Queued;
use super::is_busy;
use super::table::Schedules;
use crate::error::Coded;
use crate::runner::{RunError, Runner};
use crate::store::{Store, StoreError};

/// What [`start_next`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Nothing is queued.
    Empty,
    /// The session is busy: the queue waits.
    Waiting,
    /// The first message's run started.
    Started(Queued),
    /// The first message could not start and was dropped (the error says why); the rest
    /// waits for the next call.
    Dropped(Queued, String),
}

fn storage(e: super::TableError) -> RunError {
    RunError::Store(StoreError::Backend(e.to_string()))
}

/// Starts the run of the first queued message of `session_id` if the session is idle.
pub async fn start_next<S: Store>(
    runner: &Runner<S>,
    table: &Schedules<'_>,
    session_id: &str,
) -> Result<Next, RunError> {
    loop {
        let Some(first) = table.first().map_err(storage)? else {
            return Ok(Next::Empty);
        };
        if table.started(session_id, &first).map_err(storage)? {
            table.remove(&first.queue_id).map_err(storage)?;
            continue;
        }
        let loaded = runner.store().load(session_id).await?;
        let head = loaded
            .ok_or_else(|| RunError::Store(StoreError::NotFound(session_id.into())))?
            .head;
        if is_busy(&head) {
            return Ok(Next::Waiting);
        }
        let (messages, options) = (first.messages.clone(), first.options.clone());
        let started = runner
            .send_messages_as(session_id, messages, options, first.run_id.clone(), None)
            .await;
        return match started {
            Ok(_) => {
                table.remove(&first.queue_id).map_err(storage)?;
                Ok(Next::Started(first))
            }
            Err(RunError::Busy(_)) => Ok(Next::Waiting),
            Err(e) if e.retryable() => Err(e),
            Err(e) => {
                table.remove(&first.queue_id).map_err(storage)?;
                Ok(Next::Dropped(first, e.to_string()))
            }
        };
    }
}
