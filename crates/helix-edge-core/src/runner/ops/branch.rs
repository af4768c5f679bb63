//! Going back to a checkpoint: `retry` restores one in the session and runs again from
//! it; `fork` copies one (transcript and state) into a new session that continues on its
//! own. Either may bring a user message: it takes the place of the checkpoint's run
//! input when the checkpoint holds nothing after that input, and otherwise follows the
//! checkpoint's transcript. Without a checkpoint id, a retry or fork with a message goes
//! back to just before the latest run's input (the user edits their last message);
//! without one, to the latest restorable checkpoint.
//!
//! A checkpoint where its run ended (completed) holds nothing to continue: without a
//! message, a fork of it is an idle copy that runs on its first message, and a retry
//! of it is refused (`checkpoint_run_ended`). No model is ever asked to answer its own
//! final answer. The run a retry or fork starts redoes the checkpoint's run, with that
//! run's model options (`providerOptions`).

use super::{CreateSession, ensure_idle};
use crate::message::Message;
use crate::runner::{RunError, Runner};
use crate::store::{
    CheckpointRecord, CheckpointStatus, ForkOrigin, SessionHead, Store, StoreError,
};
use serde_json::Value;

/// Where a run restarts: a checkpoint, its state, and how much of its transcript stays.
pub(crate) struct Restore {
    pub checkpoint: CheckpointRecord,
    pub state: Value,
    /// Messages kept (the checkpoint's, less its run's input when a message replaces it).
    pub keep: u64,
    /// Where the checkpoint's run input starts.
    pub input_at: u64,
    /// The run ended at the checkpoint: there is nothing to continue.
    pub ended: bool,
}

impl<S: Store> Runner<S> {
    /// Restores a checkpoint (see the module) and starts a new run from it, answering
    /// `message` when there is one.
    pub async fn retry(
        &self,
        session_id: &str,
        checkpoint_id: Option<&str>,
        message: Option<String>,
    ) -> Result<String, RunError> {
        let input = message.map(Message::user).into_iter().collect();
        self.retry_with(session_id, checkpoint_id, input).await
    }

    /// [`Self::retry`] answering `input` (user messages, checked by the API layer; none:
    /// the run goes on from the checkpoint).
    pub async fn retry_with(
        &self,
        session_id: &str,
        checkpoint_id: Option<&str>,
        input: Vec<Message>,
    ) -> Result<String, RunError> {
        let mut live = self.load(session_id).await?;
        ensure_idle(&live.head)?;
        let says = !input.is_empty();
        let restore = self.restore_point(&live.head, checkpoint_id, says).await?;
        if restore.ended && !says {
            return Err(RunError::RunEnded(restore.checkpoint.id));
        }
        let options = self
            .options_of(&live.head, &restore.checkpoint.run_id)
            .await?;
        self.start_run(&mut live, input, Some(restore), (options, None), None)
            .await
    }

    /// The request that creates `new_id` as a fork of this session at a checkpoint (see
    /// the module); the new session's object runs it.
    pub async fn fork_request(
        &self,
        session_id: &str,
        checkpoint_id: Option<&str>,
        new_id: String,
        message: Option<String>,
    ) -> Result<CreateSession, RunError> {
        let input = message.map(Message::user).into_iter().collect();
        self.fork_request_with(session_id, checkpoint_id, new_id, input)
            .await
    }

    /// [`Self::fork_request`] answering `input` (user messages, checked by the API layer;
    /// none: the fork goes on from the checkpoint).
    pub async fn fork_request_with(
        &self,
        session_id: &str,
        checkpoint_id: Option<&str>,
        new_id: String,
        input: Vec<Message>,
    ) -> Result<CreateSession, RunError> {
        let live = self.load(session_id).await?;
        let says = !input.is_empty();
        let restore = self.restore_point(&live.head, checkpoint_id, says).await?;
        let history = self.store.messages(session_id, 0, restore.keep).await?;
        let Value::Object(state) = restore.state else {
            return Err(StoreError::Corrupt("a checkpoint's state is not an object".into()).into());
        };
        let idle = restore.ended && !says;
        let options = match idle {
            true => None,
            false => {
                self.options_of(&live.head, &restore.checkpoint.run_id)
                    .await?
            }
        };
        Ok(CreateSession {
            session_id: new_id,
            agent: live.head.agent.clone(),
            history,
            input,
            state: Some(state),
            parent: None,
            fork: Some(ForkOrigin {
                session_id: session_id.into(),
                checkpoint_id: restore.checkpoint.id,
                step_count: restore.checkpoint.step_count,
            }),
            idle,
            options,
            // A fork stays with the source's owner (who, or whose tenant, asked for it).
            owner: live.head.owner.clone(),
            trace: None,
        })
    }

    /// The model options run `run_id` of the session had.
    async fn options_of(
        &self,
        head: &SessionHead,
        run_id: &str,
    ) -> Result<Option<Value>, RunError> {
        if head.run.run_id == run_id {
            return Ok(head.run.options.clone());
        }
        let runs = self.store.runs(&head.id).await?;
        Ok(runs
            .into_iter()
            .find(|r| r.run_id == run_id)
            .and_then(|r| r.options))
    }

    /// The checkpoint to go back to and what of it to keep.
    async fn restore_point(
        &self,
        head: &SessionHead,
        checkpoint_id: Option<&str>,
        with_message: bool,
    ) -> Result<Restore, RunError> {
        let id = &head.id;
        let checkpoints = self.store.checkpoints(id).await?;
        let chosen = match checkpoint_id {
            Some(wanted) => {
                let c = checkpoints.iter().find(|c| c.id == wanted);
                let c = c.ok_or_else(|| RunError::CheckpointNotFound(wanted.into()))?;
                if !c.restorable() {
                    return Err(RunError::CheckpointNotRestorable(wanted.into()));
                }
                c
            }
            None => {
                // With a message: no later than the latest run's input.
                let before = head.run.input_at + 1;
                let fits = |c: &&CheckpointRecord| !with_message || c.message_count <= before;
                let found = checkpoints
                    .iter()
                    .rev()
                    .filter(|c| c.restorable())
                    .find(fits);
                found.ok_or_else(|| RunError::CheckpointNotFound("latest".into()))?
            }
        };
        let (checkpoint, state) = self
            .store
            .checkpoint_state(id, &chosen.id)
            .await?
            .ok_or_else(|| RunError::CheckpointNotFound(chosen.id.clone()))?;
        let runs = self.store.runs(id).await?;
        let run = runs.iter().find(|r| r.run_id == checkpoint.run_id);
        let input_at = run.map_or(0, |r| r.input_at).min(checkpoint.message_count);
        let mut keep = checkpoint.message_count;
        if with_message && keep > input_at {
            // Nothing answered the run's input yet: the message takes its place.
            let after = self.store.messages(id, input_at, keep - input_at).await?;
            if after.iter().all(|m| matches!(m, Message::User { .. })) {
                keep = input_at;
            }
        }
        let ended = checkpoint.status == CheckpointStatus::Completed;
        Ok(Restore {
            checkpoint,
            state,
            keep,
            input_at,
            ended,
        })
    }
}
