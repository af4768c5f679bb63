//! The runner's request-driven operations: create a session, answer a pending call,
//! send a follow-up message, interrupt, resume, abort, retry from a checkpoint. Each
//! validates against durable state and makes at most one commit; the work itself
//! happens in `drive`.

use super::children::ChildOrder;
use super::{Live, RunError, Runner};
use crate::chunk::{ChunkBody, RunStatus, StreamEvent};
use crate::error::ErrorInfo;
use crate::message::Message;
use crate::model::Usage;
use crate::state::diff;
use crate::store::{
    Answer, AnswerOutcome, CheckpointRecord, Commit, InterruptRequest, NewSession, ParentRef,
    PendingKind, RunRecord, SessionHead, SessionStatus, StateChange, Store, StoreError,
};
use serde_json::{Map, Value};

/// A request to start a session.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateSession {
    /// The session id (validated by the API layer).
    pub session_id: String,
    /// The agent to run.
    pub agent: String,
    /// The user's first message, exactly as submitted.
    pub message: String,
    /// Top-level keys that override the agent's initial state.
    pub state: Option<Map<String, Value>>,
    /// For a child session (a sub-agent call): where it reports.
    pub parent: Option<ParentRef>,
}

/// A created session.
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    /// Its id.
    pub session_id: String,
    /// The first run.
    pub run_id: String,
    /// Its status (`active`).
    pub status: SessionStatus,
}

/// An answer to a pending call, as submitted.
#[derive(Debug, Clone, PartialEq)]
pub enum Submission {
    /// `approval-response`.
    Approval {
        /// The call.
        tool_call_id: String,
        /// Approved or denied.
        approved: bool,
        /// Why.
        reason: Option<String>,
    },
    /// `client-tool-result`.
    ClientResult {
        /// The call.
        tool_call_id: String,
        /// `Ok(result)` or `Err(error message)`.
        outcome: Result<Value, String>,
    },
}

impl Submission {
    fn call_id(&self) -> &str {
        match self {
            Self::Approval { tool_call_id, .. } | Self::ClientResult { tool_call_id, .. } => {
                tool_call_id
            }
        }
    }
}

/// Where an answer went.
#[derive(Debug, Clone, PartialEq)]
pub enum Routed {
    /// Stored in this session.
    Here,
    /// The call is pending in this descendant (a sub-agent's child session): submit
    /// the answer there.
    Owner(String),
}

/// A new run may start only when no run is active and the session is not aborted.
fn ensure_idle(head: &SessionHead) -> Result<(), RunError> {
    match head.status {
        SessionStatus::Active => Err(RunError::Busy("a run is active or calls are pending")),
        SessionStatus::Aborted => Err(RunError::Aborted),
        SessionStatus::Completed | SessionStatus::Failed | SessionStatus::Interrupted => Ok(()),
    }
}

/// A commit that changes only the head.
pub(crate) fn head_only(head: SessionHead, clear_interrupt: bool) -> Commit {
    Commit {
        head,
        truncate_messages_to: None,
        messages: vec![],
        state: StateChange::None,
        checkpoint: None,
        clear_interrupt,
        subsessions: Vec::new(),
    }
}

fn new_run(run_id: String, turn: u32, now: u64) -> RunRecord {
    RunRecord {
        run_id,
        turn,
        status: RunStatus::Running,
        step_count: 0,
        started_at: now,
        completed_at: None,
        error: None,
        usage: Usage::default(),
        nudges: 0,
    }
}

impl<S: Store> Runner<S> {
    /// Creates a session and its first run. Exactly one of concurrent creators of an id
    /// wins; the others get `session_exists`.
    pub async fn create(&self, request: CreateSession) -> Result<Created, RunError> {
        let agent = self.agent(&request.agent)?;
        let mut state = agent.initial_state().clone();
        if let (Some(overrides), Some(obj)) = (request.state, state.as_object_mut()) {
            obj.extend(overrides);
        }
        let now = self.host.now_ms();
        let run_id = self.host.new_id("run");
        let mut head = SessionHead {
            id: request.session_id.clone(),
            agent: request.agent,
            status: SessionStatus::Active,
            version: 1,
            commit_id: self.host.new_id("commit"),
            step_count: 0,
            message_count: 1,
            run: new_run(run_id.clone(), 1, now),
            pending: vec![],
            suspended_reason: None,
            output: None,
            error: None,
            checkpoint_id: None,
            created_at: now,
            updated_at: now,
            parent: request.parent,
        };
        let checkpoint = CheckpointRecord {
            id: self.host.new_id("ckpt"),
            step_count: 0,
            message_count: 1,
            timestamp: now,
            status: "active".into(),
            run_id: run_id.clone(),
        };
        head.checkpoint_id = Some(checkpoint.id.clone());
        let started = self
            .emitter(&head, None)
            .event(ChunkBody::RunStarted { turn: 1 });
        let commit_id = head.commit_id.clone();
        self.journal.stage(&commit_id, 1, vec![started]);
        let messages = vec![Message::user(request.message)];
        let session = NewSession {
            head,
            state,
            messages,
            checkpoint,
        };
        // A losing creator must leave nothing staged in the winner's journal.
        self.store
            .create(session)
            .await
            .inspect_err(|_| self.journal.discard(&commit_id))?;
        self.journal.release(&commit_id);
        let fields = [
            ("session", crate::host::LogValue::Str(&request.session_id)),
            ("run", crate::host::LogValue::Str(&run_id)),
        ];
        self.host
            .log(crate::host::Level::Info, "run_started", &fields);
        Ok(Created {
            session_id: request.session_id,
            run_id,
            status: SessionStatus::Active,
        })
    }

    /// Stores an answer to a pending call (the first answer wins). The run resumes on
    /// the next `drive` once every pending call of the step is answered or expired.
    /// Answers are submitted to the root session: a call pending in a descendant (a
    /// sub-agent's child session) is [`Routed::Owner`], to be submitted there.
    pub async fn submit(
        &self,
        session_id: &str,
        submission: Submission,
    ) -> Result<Routed, RunError> {
        let live = self.load(session_id).await?;
        let call_id = submission.call_id().to_string();
        let call_id = call_id.as_str();
        // A child call is never the client's to answer: an id shared with a call pending
        // in a descendant (models reuse ids like `call_0`) means the descendant's call.
        let own = |kind_ok: fn(PendingKind) -> bool| {
            live.head
                .pending
                .iter()
                .find(|p| p.tool_call_id == call_id && kind_ok(p.kind))
        };
        let Some(pending) = own(|k| k != PendingKind::Child) else {
            let routed = self.route(&live, call_id).await;
            return match routed {
                Err(RunError::ToolCallNotFound(_)) if own(|_| true).is_some() => {
                    Err(RunError::KindMismatch {
                        call: call_id.into(),
                        expected: "no answer: it resolves when its sub-agent ends",
                    })
                }
                other => other,
            };
        };
        let answer = match (pending.kind, submission) {
            (
                PendingKind::Approval,
                Submission::Approval {
                    approved, reason, ..
                },
            ) => Answer::Approval { approved, reason },
            (PendingKind::Client, Submission::ClientResult { outcome, .. }) => match outcome {
                Ok(result) => {
                    // Refused here (413) rather than stored as an error: the call stays
                    // open for an answer that fits.
                    if let Some(bytes) = crate::message::oversized_result(&result) {
                        return Err(StoreError::TooLarge {
                            what: "tool result",
                            bytes,
                            limit: crate::message::MAX_TOOL_RESULT_BYTES,
                        }
                        .into());
                    }
                    Answer::ClientResult { result }
                }
                Err(error) => Answer::ClientError { error },
            },
            // Filtered out above; kept total without a panic.
            (PendingKind::Child, _) => {
                return Err(RunError::KindMismatch {
                    call: call_id.into(),
                    expected: "no answer: it resolves when its sub-agent ends",
                });
            }
            (PendingKind::Approval, _) => {
                return Err(RunError::KindMismatch {
                    call: call_id.into(),
                    expected: "an approval-response",
                });
            }
            (PendingKind::Client, _) => {
                return Err(RunError::KindMismatch {
                    call: call_id.into(),
                    expected: "a client-tool-result",
                });
            }
        };
        match self.journal.answer(session_id, call_id, &answer)? {
            AnswerOutcome::Stored => Ok(Routed::Here),
            AnswerOutcome::AlreadyAnswered(_) => Err(RunError::AlreadyResolved(call_id.into())),
        }
    }

    /// A call not pending here: pending in a descendant, answered before (here, or in a
    /// descendant: its committed tool result), or unknown.
    async fn route(&self, live: &Live, call_id: &str) -> Result<Routed, RunError> {
        let calls = self.descendant_calls(&live.head).await?;
        if let Some((owner, _)) = calls.into_iter().find(|(_, p)| p.tool_call_id == call_id) {
            return Ok(Routed::Owner(owner));
        }
        if self.journal.find_answer(&live.head.id, call_id)?.is_some() {
            return Err(RunError::AlreadyResolved(call_id.into()));
        }
        // A descendant's answers live in its own object; once its call resolved, the
        // result is in its transcript (an error path: read only here).
        for id in &self.descendants(&live.head.id).await? {
            if self.has_tool_result(id, call_id).await? {
                return Err(RunError::AlreadyResolved(call_id.into()));
            }
        }
        Err(RunError::ToolCallNotFound(call_id.into()))
    }

    /// Whether session `id`'s transcript holds a result for call `call_id`.
    async fn has_tool_result(&self, id: &str, call_id: &str) -> Result<bool, RunError> {
        let Some(loaded) = self.store.load(id).await? else {
            return Ok(false);
        };
        let count = loaded.head.message_count;
        let messages = self.store.messages(id, 0, count).await?;
        Ok(messages
            .iter()
            .any(|m| matches!(m, Message::Tool { tool_call_id, .. } if tool_call_id == call_id)))
    }

    /// Starts a new run in the session with a follow-up message.
    pub async fn send_message(
        &self,
        session_id: &str,
        message: String,
    ) -> Result<String, RunError> {
        let mut live = self.load(session_id).await?;
        ensure_idle(&live.head)?;
        let run_id = self
            .start_run(&mut live, Some(Message::user(message)), None)
            .await?;
        Ok(run_id)
    }

    /// Starts a new run: a follow-up message, or a restore of a checkpoint.
    async fn start_run(
        &self,
        live: &mut Live,
        message: Option<Message>,
        restore: Option<(CheckpointRecord, Value)>,
    ) -> Result<String, RunError> {
        let now = self.host.now_ms();
        let mut head = live.head.clone();
        let run_id = self.host.new_id("run");
        head.run = new_run(run_id.clone(), live.head.run.turn + 1, now);
        head.status = SessionStatus::Active;
        head.pending.clear();
        head.suspended_reason = None;
        head.output = None;
        head.error = None;
        head.updated_at = now;
        let emitter = self.emitter(&head, None);
        let mut post = Vec::new();
        let (truncate, state) = match restore {
            Some((ckpt, state)) => {
                let mut patches = Vec::new();
                diff("", &live.state, &state, &mut patches);
                if !patches.is_empty() {
                    post.push(emitter.event(ChunkBody::StatePatch { patches }));
                }
                head.step_count = ckpt.step_count;
                head.message_count = ckpt.message_count;
                head.checkpoint_id = Some(ckpt.id);
                live.state = state.clone();
                (Some(ckpt.message_count), StateChange::Replace(state))
            }
            None => (None, StateChange::None),
        };
        post.insert(
            0,
            emitter.event(ChunkBody::RunStarted {
                turn: head.run.turn,
            }),
        );
        let messages: Vec<Message> = message.into_iter().collect();
        head.message_count += messages.len() as u64;
        let commit = Commit {
            head,
            truncate_messages_to: truncate,
            messages,
            state,
            checkpoint: None,
            clear_interrupt: true,
            subsessions: Vec::new(),
        };
        self.commit(live, commit, post).await?;
        // A new run starts clean: an interrupt meant for the previous one is dropped.
        self.interrupt_requested.borrow_mut().take();
        Ok(run_id)
    }

    /// Requests an interrupt, honoured at the next step boundary.
    pub async fn interrupt(
        &self,
        session_id: &str,
        reason: Option<String>,
    ) -> Result<(), RunError> {
        let live = self.load(session_id).await?;
        match live.head.status {
            SessionStatus::Active => {
                self.store
                    .request_interrupt(session_id, reason.clone())
                    .await?;
                *self.interrupt_requested.borrow_mut() = Some(InterruptRequest {
                    reason: reason.clone(),
                });
                self.order_children(&live.head, ChildOrder::Interrupt { reason })
                    .await;
                Ok(())
            }
            SessionStatus::Aborted => Err(RunError::Aborted),
            _ => Err(RunError::Busy("no run is active")),
        }
    }

    /// Continues an interrupted run (or returns the active run's id, to re-drive it).
    pub async fn resume(&self, session_id: &str) -> Result<String, RunError> {
        let mut live = self.load(session_id).await?;
        match live.head.status {
            SessionStatus::Active => Ok(live.head.run.run_id.clone()),
            SessionStatus::Interrupted => {
                let mut head = live.head.clone();
                head.status = SessionStatus::Active;
                head.run.status = RunStatus::Running;
                head.updated_at = self.host.now_ms();
                let post = vec![self.emitter(&head, None).event(ChunkBody::RunResumed {
                    turn: head.run.turn,
                })];
                self.commit(&mut live, head_only(head, true), post).await?;
                self.order_children(&live.head, ChildOrder::Resume).await;
                Ok(live.head.run.run_id)
            }
            SessionStatus::Aborted => Err(RunError::Aborted),
            SessionStatus::Completed => Err(RunError::NotResumable("completed")),
            SessionStatus::Failed => Err(RunError::NotResumable("failed")),
        }
    }

    /// Ends the session for good; tools running in this runner see the abort signal.
    pub async fn abort(&self, session_id: &str, reason: Option<String>) -> Result<(), RunError> {
        self.abort.borrow().abort();
        for _ in 0..5 {
            let mut live = self.load(session_id).await?;
            if live.head.status == SessionStatus::Aborted {
                return Ok(());
            }
            let now = self.host.now_ms();
            let mut head = live.head.clone();
            head.status = SessionStatus::Aborted;
            head.pending.clear();
            head.suspended_reason = None;
            head.updated_at = now;
            let mut post = Vec::new();
            if !head.run.status.is_terminal() {
                let error = ErrorInfo {
                    code: "run_aborted".into(),
                    message: reason
                        .clone()
                        .unwrap_or_else(|| "The run was aborted".into()),
                    retryable: false,
                };
                head.run.status = RunStatus::Aborted;
                head.run.completed_at = Some(now);
                head.run.error = Some(error.clone());
                let emitter = self.emitter(&head, None);
                post.push(emitter.event(ChunkBody::RunFinished {
                    status: RunStatus::Aborted,
                }));
                post.push(StreamEvent::Fail { error });
            }
            let waited_on = live.head.clone();
            match self.commit(&mut live, head_only(head, true), post).await {
                Err(RunError::Store(StoreError::Stale { .. })) => continue,
                Ok(()) => {
                    let reason = reason.unwrap_or_else(|| "The parent session was aborted".into());
                    self.order_children(&waited_on, ChildOrder::Abort { reason })
                        .await;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Err(RunError::Busy("the session kept changing; try again"))
    }

    /// Restores a checkpoint (the latest restorable one by default) and starts a new run
    /// from it.
    pub async fn retry(
        &self,
        session_id: &str,
        checkpoint_id: Option<&str>,
    ) -> Result<String, RunError> {
        let mut live = self.load(session_id).await?;
        ensure_idle(&live.head)?;
        let checkpoints = self.store.checkpoints(session_id).await?;
        let chosen = match checkpoint_id {
            Some(id) => {
                let c = checkpoints
                    .iter()
                    .find(|c| c.id == id)
                    .ok_or_else(|| RunError::CheckpointNotFound(id.into()))?;
                if !c.restorable() {
                    return Err(RunError::CheckpointNotRestorable(id.into()));
                }
                c.id.clone()
            }
            None => checkpoints
                .iter()
                .rev()
                .find(|c| c.restorable())
                .map(|c| c.id.clone())
                .ok_or_else(|| RunError::CheckpointNotFound("latest".into()))?,
        };
        let restore = self
            .store
            .checkpoint_state(session_id, &chosen)
            .await?
            .ok_or_else(|| RunError::CheckpointNotFound(chosen.clone()))?;
        self.start_run(&mut live, None, Some(restore)).await
    }
}
