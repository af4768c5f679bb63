//! A session's past and going back to it (feature `time-travel`), as the session's object
//! serves them: `GET …/runs` lists the runs with what each step's checkpoint recorded,
//! `GET …/checkpoints` where the session can go back to (and `…/checkpoints/{id}` the
//! session as it was at one), `POST …/retry` runs again from
//! one of them in the same session, `POST …/fork` starts a new session from one (created
//! by its own object, from the request this one builds).

use super::capability::{Call, Capability, NOTHING};
use super::ops::or_empty;
use super::{Inner, Reply};
use crate::api::{
    CheckpointAt, CheckpointView, ForkBody, Operation, RetryBody, RunView, page, parse_body,
    query_pairs,
};
use crate::host::Level;
use crate::http::{ObjectRequest, call_object, internal, json_response};
use crate::runner::RunError;
use crate::store::Store;
use crate::worker_host::log;
use serde_json::json;
use std::rc::Rc;

/// Runs, checkpoints, retries and forks.
pub(super) const TIME_TRAVEL: Capability = Capability {
    operations: &[
        (Operation::ListRuns, |inner, call| {
            Box::pin(inner.runs(call.id))
        }),
        (Operation::ListCheckpoints, |inner, call| {
            Box::pin(inner.checkpoints(call.id))
        }),
        (Operation::GetCheckpoint, |inner, call| {
            Box::pin(inner.checkpoint(call))
        }),
        (Operation::Retry, |inner, call| {
            Box::pin(inner.retry(call.id, call.body))
        }),
        (Operation::Fork, |inner, call| {
            Box::pin(inner.fork(call.id, call.body))
        }),
    ],
    ..NOTHING
};

impl Inner {
    /// `GET …/runs`.
    async fn runs(&self, id: &str) -> Reply {
        let parts = self.attach(id)?;
        let runner = &parts.runner;
        self.head(runner, id).await?;
        let store = runner.store();
        let runs = store.runs(id).await.map_err(RunError::from)?;
        let checkpoints = store.checkpoints(id).await.map_err(RunError::from)?;
        let runs: Vec<RunView> = runs
            .into_iter()
            .map(|run| RunView::new(run, &checkpoints))
            .collect();
        json_response(200, &json!({ "runs": runs }))
    }

    /// `GET …/checkpoints`.
    async fn checkpoints(&self, id: &str) -> Reply {
        let parts = self.attach(id)?;
        let runner = &parts.runner;
        self.head(runner, id).await?;
        let all = runner
            .store()
            .checkpoints(id)
            .await
            .map_err(RunError::from)?;
        let checkpoints: Vec<CheckpointView> = all.into_iter().map(CheckpointView::from).collect();
        json_response(200, &json!({ "checkpoints": checkpoints }))
    }

    /// `GET …/checkpoints/{checkpointId}`: the session as it was there.
    async fn checkpoint(&self, call: &Call<'_>) -> Reply {
        let id = call.id;
        let parts = self.attach(id)?;
        let runner = &parts.runner;
        self.head(runner, id).await?;
        let query = page(&query_pairs(&call.req.inner().url()))?;
        let store = runner.store();
        let wanted = call.item.unwrap_or_default();
        let (checkpoint, state) = store
            .checkpoint_state(id, wanted)
            .await
            .map_err(RunError::from)?
            .ok_or_else(|| RunError::CheckpointNotFound(wanted.into()))?;
        let (offset, limit) = CheckpointAt::window(&checkpoint, &query);
        let messages = match limit {
            0 => Vec::new(),
            _ => store
                .messages(id, offset, limit)
                .await
                .map_err(RunError::from)?,
        };
        json_response(200, &CheckpointAt::new(checkpoint, state, messages, &query))
    }

    /// `POST …/retry`.
    async fn retry(self: &Rc<Self>, id: &str, body: &[u8]) -> Reply {
        let parts = self.attach(id)?;
        let (checkpoint, input) = parse_body::<RetryBody>(or_empty(body))?.into_parts()?;
        let run_id = parts
            .runner
            .retry_with(id, checkpoint.as_deref(), input)
            .await?;
        self.schedule(id);
        json_response(202, &json!({ "runId": run_id }))
    }

    /// `POST …/fork`: the new session is created by its own object, from the request
    /// this one builds out of its checkpoint; its 201 is the answer.
    async fn fork(&self, id: &str, body: &[u8]) -> Reply {
        let parts = self.attach(id)?;
        let generated = || format!("s_{}", crate::worker_host::random_hex(16));
        let (checkpoint, new_id, input) =
            parse_body::<ForkBody>(or_empty(body))?.into_parts(generated)?;
        let request = parts
            .runner
            .fork_request_with(id, checkpoint.as_deref(), new_id.clone(), input)
            .await?;
        let body = serde_json::to_vec(&request).map_err(|e| internal("fork", e))?;
        let create = ObjectRequest::post(crate::runner::waits::CREATE_PATH, body);
        let resp = call_object(&self.env, self.app.sessions(), &new_id, create).await?;
        log(
            Level::Info,
            "session_forked",
            json!({ "session": id, "fork": new_id }),
        );
        Ok(resp)
    }
}
