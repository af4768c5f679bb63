//! New runs in a session: a follow-up message, a restored checkpoint, and a queued
//! follow-up turn (a persistent child's next message from its parent: at once when the
//! child is idle, or queued in a durable interrupt request that the step machine takes
//! when the running turn reaches a step boundary or ends).

use super::branch::Restore;
use super::{ensure_idle, new_run};
use crate::chunk::{ChunkBody, ResyncReason};
use crate::message::Message;
use crate::runner::{Live, RunError, Runner};
use crate::state::diff;
use crate::store::{
    CheckpointRecord, CheckpointStatus, Commit, FollowUp, InterruptRequest, SessionStatus,
    StateChange, Store,
};
use crate::trace::{RunTrace, TraceContext};
use serde_json::Value;

impl<S: Store> Runner<S> {
    /// Starts a new run in the session with a follow-up message.
    pub async fn send_message(
        &self,
        session_id: &str,
        message: String,
    ) -> Result<String, RunError> {
        self.send_messages(session_id, vec![Message::user(message)], None, None)
            .await
    }

    /// Starts a new run in the session answering `messages` (user messages, checked by
    /// the API layer), with the run's model options (`providerOptions`, as given) if
    /// given, checked against the session's agent.
    pub async fn send_messages(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        options: Option<Value>,
        trace: Option<TraceContext>,
    ) -> Result<String, RunError> {
        let mut live = self.load(session_id).await?;
        if let Some(given) = &options {
            let agent = self.agent(&live.head.agent)?;
            super::check_options(given, &agent)?;
        }
        ensure_idle(&live.head)?;
        let start = (options, trace.as_ref());
        self.start_run(&mut live, messages, None, start, None).await
    }

    /// [`Self::send_messages`] for a run whose id was fixed beforehand (a queued
    /// message's: its start is then recognised after a crash, and never repeated).
    pub async fn send_messages_as(
        &self,
        session_id: &str,
        messages: Vec<Message>,
        options: Option<Value>,
        run_id: String,
        trace: Option<TraceContext>,
    ) -> Result<String, RunError> {
        let mut live = self.load(session_id).await?;
        if let Some(given) = &options {
            let agent = self.agent(&live.head.agent)?;
            super::check_options(given, &agent)?;
        }
        ensure_idle(&live.head)?;
        let start = (options, trace.as_ref());
        self.start_run(&mut live, messages, None, start, Some(run_id))
            .await
    }

    /// Starts a new run (`run_id`, or a new id): a follow-up message, or a restore of a
    /// checkpoint (with a message to run on, for a retry that replaces the user's
    /// message).
    pub(crate) async fn start_run(
        &self,
        live: &mut Live,
        messages: Vec<Message>,
        restore: Option<Restore>,
        (options, trace): (Option<Value>, Option<&TraceContext>),
        run_id: Option<String>,
    ) -> Result<String, RunError> {
        let now = self.host.now_ms();
        let mut head = live.head.clone();
        let run_id = run_id.unwrap_or_else(|| self.host.new_id("run"));
        let input_at = match &restore {
            Some(r) if !messages.is_empty() => r.keep,
            Some(r) => r.input_at,
            None => head.message_count,
        };
        head.run = new_run(run_id.clone(), live.head.run.turn + 1, now, input_at);
        head.run.options = options;
        head.run.trace = Some(RunTrace::new(&*self.host, trace));
        self.observer.run_started(&live.head, &head, now);
        head.status = SessionStatus::Active;
        head.pending.clear();
        head.suspended_reason = None;
        head.output = None;
        head.error = None;
        head.updated_at = now;
        let emitter = self.emitter(&head, None);
        let mut post = vec![emitter.event(ChunkBody::RunStarted {
            turn: head.run.turn,
        })];
        let mut rollback = None;
        let mut branch = None;
        let (truncate, state) = match restore {
            Some(r) => {
                let mut patches = Vec::new();
                diff("", &live.state, &r.state, &mut patches);
                if !patches.is_empty() {
                    post.push(emitter.event(ChunkBody::StatePatch {
                        patches,
                        tool_call_id: None,
                    }));
                }
                head.step_count = r.checkpoint.step_count;
                head.message_count = r.keep;
                head.checkpoint_id = Some(r.checkpoint.id.clone());
                if !messages.is_empty() && r.keep < r.checkpoint.message_count {
                    // The messages replace the checkpoint's input: the checkpoint goes
                    // with the branch this abandons, and the new branch starts at them.
                    let start = CheckpointRecord {
                        id: self.host.new_id("ckpt"),
                        step_count: r.checkpoint.step_count,
                        message_count: r.keep + messages.len() as u64,
                        timestamp: now,
                        status: CheckpointStatus::Active,
                        run_id: run_id.clone(),
                        usage: None,
                        stop_reason: None,
                        waits: Vec::new(),
                    };
                    head.checkpoint_id = Some(start.id.clone());
                    branch = Some(start);
                }
                live.state = r.state.clone();
                rollback = Some((r.checkpoint, r.keep));
                (Some(r.keep), StateChange::Replace(r.state))
            }
            None => (None, StateChange::None),
        };
        head.message_count += messages.len() as u64;
        let commit = Commit {
            head,
            truncate_messages_to: truncate,
            messages,
            state,
            checkpoint: branch,
            clear_interrupt: true,
            subsessions: Vec::new(),
        };
        self.pipeline().commit(live, commit, post).await?;
        if let Some((checkpoint, kept)) = rollback {
            // Told right after the commit, with nothing in between: its sequence is the
            // one it names (nothing before it is discarded).
            emitter.chunk(ChunkBody::StreamResync {
                checkpoint_id: checkpoint.id,
                step_count: checkpoint.step_count,
                message_count: kept,
                from_sequence: self.journal.stream.next_sequence(),
                reason: ResyncReason::Rollback,
            });
        }
        // A new run starts clean: an interrupt meant for the previous one is dropped.
        self.interrupt_requested.borrow_mut().take();
        Ok(run_id)
    }

    /// A persistent child's parent starts its next turn with `message`, for the parent's
    /// call `tool_call_id` ([`ChildOrder::Message`](crate::runner::ChildOrder::Message)). Idempotent: a child whose turn
    /// answers that call already is left alone.
    pub async fn parent_message(
        &self,
        session_id: &str,
        message: String,
        tool_call_id: &str,
    ) -> Result<(), RunError> {
        let mut live = self.load(session_id).await?;
        let Some(parent) = live.head.parent.as_mut() else {
            return Err(RunError::Busy("the session has no parent"));
        };
        if parent.tool_call_id == tool_call_id {
            return Ok(());
        }
        let then = FollowUp {
            message,
            tool_call_id: tool_call_id.to_string(),
        };
        if let Some(queued) = live.interrupt.as_ref().and_then(|r| r.then.as_ref()) {
            return match queued.tool_call_id == tool_call_id {
                true => Ok(()),
                false => Err(RunError::Busy("another message waits for the turn to stop")),
            };
        }
        if live.head.status == SessionStatus::Active {
            // Running (or waiting on answers): the turn stops at its next step boundary,
            // or ends, then this one starts.
            let request = InterruptRequest {
                reason: Some("Its parent sent a new message.".into()),
                then: Some(then),
                after_calls: false,
            };
            self.store
                .request_interrupt(session_id, request.clone())
                .await?;
            *self.interrupt_requested.borrow_mut() = Some(request);
            return Ok(());
        }
        ensure_idle(&live.head)?;
        self.follow_up(&mut live, then).await
    }

    /// Starts a persistent child's next turn, for its parent's call.
    pub(crate) async fn follow_up(&self, live: &mut Live, then: FollowUp) -> Result<(), RunError> {
        if let Some(parent) = live.head.parent.as_mut() {
            parent.tool_call_id = then.tool_call_id;
        }
        self.start_run(
            live,
            vec![Message::user(then.message)],
            None,
            (None, None),
            None,
        )
        .await
        .map(drop)
    }
}
