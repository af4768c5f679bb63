//! The runner's request-driven operations: create a session, answer a pending call,
//! send a follow-up message, interrupt, resume, abort, retry from a checkpoint. Each
//! validates against durable state and makes at most one commit; the work itself
//! happens in `drive`.

use super::branch::Restore;
use super::children::ChildOrder;
use super::{Live, RunError, Runner};
use crate::chunk::{ChunkBody, ResyncReason, RunStatus, StreamEvent};
use crate::error::ErrorInfo;
use crate::message::Message;
use crate::model::Usage;
use crate::state::diff;
use crate::store::{
    Answer, AnswerOutcome, CheckpointRecord, CheckpointStatus, Commit, ForkOrigin,
    InterruptRequest, NewSession, ParentRef, PendingKind, RunRecord, SessionHead, SessionStatus,
    StateChange, Store, StoreError,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A request to start a session. Its JSON form is what the worker's router sends the
/// session's object (and a parent its child's): the body, validated once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateSession {
    /// The session id (validated by the API layer).
    pub session_id: String,
    /// The agent to run.
    pub agent: String,
    /// Earlier conversation the transcript starts with (validated by the API layer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    /// The user messages the first run answers, exactly as submitted. Empty only for a
    /// fork, whose run goes on from its checkpoint.
    pub input: Vec<Message>,
    /// Top-level keys that override the agent's initial state (for a fork: the whole
    /// state at its checkpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Map<String, Value>>,
    /// For a child session (a sub-agent call): where it reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentRef>,
    /// For a fork: the checkpoint it branches from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<ForkOrigin>,
}

impl CreateSession {
    /// A session of `agent` whose first run answers `message`.
    pub fn new(
        session_id: impl Into<String>,
        agent: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            agent: agent.into(),
            history: Vec::new(),
            input: vec![Message::user(message)],
            state: None,
            parent: None,
            fork: None,
        }
    }
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
    /// The call it answers.
    pub fn call_id(&self) -> &str {
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
    /// The call is not pending here: it may be pending in one of these child sessions
    /// (sub-agents this session waits on) or below them. Submit it to each in turn
    /// until one takes it, then [`record_route`](Runner::record_route) that one; when
    /// none has it, the answer is `otherwise`.
    Descendants {
        /// The children to ask, in order.
        children: Vec<String>,
        /// The refusal when none of them has the call.
        otherwise: RunError,
    },
}

/// A new run may start only when no run is active, no call waits for an answer, and
/// the session is not aborted.
pub(crate) fn ensure_idle(head: &SessionHead) -> Result<(), RunError> {
    match head.status {
        SessionStatus::Active => Err(RunError::Busy("a run is active or calls are pending")),
        // A new run would leave the calls unanswered in the transcript.
        SessionStatus::Interrupted if !head.pending.is_empty() => Err(RunError::Busy(
            "calls are pending: resume the session and answer them first",
        )),
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

pub(crate) fn new_run(run_id: String, turn: u32, now: u64, input_at: u64) -> RunRecord {
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
        deferred_output: None,
        input_at,
    }
}

impl<S: Store> Runner<S> {
    /// Creates a session and its first run. Exactly one of concurrent creators of an id
    /// wins; the others get `session_exists`.
    pub async fn create(&self, request: CreateSession) -> Result<Created, RunError> {
        let agent = self.agent(&request.agent)?;
        if request.input.is_empty() && request.fork.is_none() {
            return Err(RunError::Invalid(
                "input must hold at least one message".into(),
            ));
        }
        let state = match (request.fork.is_some(), request.state) {
            (true, Some(whole)) => Value::Object(whole),
            (_, overrides) => {
                let mut state = agent.initial_state().clone();
                if let (Some(overrides), Some(obj)) = (overrides, state.as_object_mut()) {
                    obj.extend(overrides);
                }
                state
            }
        };
        if let Some(schema) = agent.state_schema() {
            crate::schema::validate(schema, &state).map_err(|reason| {
                RunError::Invalid(format!(
                    "input.state does not match the agent's state: {reason}"
                ))
            })?;
        }
        let now = self.host.now_ms();
        let run_id = self.host.new_id("run");
        let input_at = request.history.len() as u64;
        let mut messages = request.history;
        messages.extend(request.input);
        let step_count = request.fork.as_ref().map_or(0, |f| f.step_count);
        let mut head = SessionHead {
            id: request.session_id.clone(),
            agent: request.agent,
            status: SessionStatus::Active,
            version: 1,
            commit_id: self.host.new_id("commit"),
            step_count,
            message_count: messages.len() as u64,
            run: new_run(run_id.clone(), 1, now, input_at),
            pending: vec![],
            suspended_reason: None,
            output: None,
            error: None,
            checkpoint_id: None,
            created_at: now,
            updated_at: now,
            parent: request.parent,
            forked_from: request.fork.clone(),
        };
        let checkpoint = CheckpointRecord {
            id: self.host.new_id("ckpt"),
            step_count,
            message_count: head.message_count,
            timestamp: now,
            status: CheckpointStatus::Active,
            run_id: run_id.clone(),
            usage: None,
            stop_reason: None,
            waits: Vec::new(),
        };
        head.checkpoint_id = Some(checkpoint.id.clone());
        let emitter = self.emitter(&head, None);
        let mut events = vec![emitter.event(ChunkBody::RunStarted { turn: 1 })];
        if let Some(fork) = request.fork {
            // The session's first events: nothing else can come between them.
            events.push(emitter.event(ChunkBody::StreamResync {
                checkpoint_id: fork.checkpoint_id,
                step_count: fork.step_count,
                message_count: input_at,
                from_sequence: self.journal.stream.next_sequence() + 1,
                reason: ResyncReason::Branch,
            }));
        }
        let commit_id = head.commit_id.clone();
        self.journal.stream.stage(&commit_id, 1, events);
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
            .inspect_err(|_| self.journal.stream.discard(&commit_id))?;
        self.journal.stream.release(&commit_id);
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
    /// sub-agent's child session) is [`Routed::Descendants`], to be passed on.
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
            // An id of this session's own sub-agent call: that call takes no answer.
            let not_found = match own(|_| true) {
                Some(_) => RunError::KindMismatch {
                    call: call_id.into(),
                    expected: "no answer: it resolves when its sub-agent ends",
                },
                None => RunError::ToolCallNotFound(call_id.into()),
            };
            return self.route(&live, &submission, not_found).await;
        };
        let answered_at = self.host.now_ms();
        let answer = match (pending.kind, submission) {
            (
                PendingKind::Approval,
                Submission::Approval {
                    approved, reason, ..
                },
            ) => Answer::Approval {
                approved,
                reason,
                answered_at,
            },
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
                    // A result that breaks the tool's declared output schema is refused
                    // (400), and the call stays open for one that matches.
                    let agent = self.agents.get(&live.head.agent);
                    let tool = agent.as_ref().and_then(|a| a.tool(&pending.tool_name));
                    if let Some(Err(e)) = tool.map(|t| t.check_output(&result)) {
                        return Err(RunError::ResultInvalid(e.to_string()));
                    }
                    Answer::ClientResult {
                        result,
                        answered_at,
                    }
                }
                Err(error) => Answer::ClientError { error, answered_at },
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
        match self
            .journal
            .suspension
            .answer(session_id, call_id, &answer)?
        {
            AnswerOutcome::Stored => {
                self.log_answered(&live, pending, &answer);
                Ok(Routed::Here)
            }
            AnswerOutcome::AlreadyAnswered(_) => Err(RunError::AlreadyResolved(call_id.into())),
        }
    }

    /// A call not pending here: answered before (here, or passed on to a descendant),
    /// possibly pending below, or unknown.
    async fn route(
        &self,
        live: &Live,
        submission: &Submission,
        otherwise: RunError,
    ) -> Result<Routed, RunError> {
        let call_id = submission.call_id();
        let suspension = &self.journal.suspension;
        let answered =
            |call: &str| matches!(suspension.find_answer(&live.head.id, call), Ok(Some(_)));
        if suspension.routed(call_id)?.is_some() || answered(call_id) {
            return Err(RunError::AlreadyResolved(call_id.into()));
        }
        // Passed on to a remote session that has it: the parent polls it now.
        #[cfg(feature = "remote-subagents")]
        if self.route_remote(&live.head, submission).await? {
            return Ok(Routed::Here);
        }
        let children = self.asked_children(&live.head).await?;
        if children.is_empty() {
            return Err(otherwise);
        }
        Ok(Routed::Descendants {
            children,
            otherwise,
        })
    }

    /// Records that the answer to `call_id`, which is not this session's, was taken by
    /// descendant `owner`: a second answer to it is refused here.
    pub fn record_route(&self, call_id: &str, owner: &str) -> Result<(), RunError> {
        self.journal.suspension.route(call_id, owner)?;
        Ok(())
    }

    /// Starts a new run in the session with a follow-up message.
    pub async fn send_message(
        &self,
        session_id: &str,
        message: String,
    ) -> Result<String, RunError> {
        self.send_messages(session_id, vec![Message::user(message)])
            .await
    }

    /// Starts a new run in the session answering `messages` (user messages, checked by
    /// the API layer).
    pub async fn send_messages(
        &self,
        session_id: &str,
        messages: Vec<Message>,
    ) -> Result<String, RunError> {
        let mut live = self.load(session_id).await?;
        ensure_idle(&live.head)?;
        self.start_run(&mut live, messages, None).await
    }

    /// Starts a new run: a follow-up message, or a restore of a checkpoint (with a
    /// message to run on, for a retry that replaces the user's message).
    pub(crate) async fn start_run(
        &self,
        live: &mut Live,
        messages: Vec<Message>,
        restore: Option<Restore>,
    ) -> Result<String, RunError> {
        let now = self.host.now_ms();
        let mut head = live.head.clone();
        let run_id = self.host.new_id("run");
        let input_at = match &restore {
            Some(r) if !messages.is_empty() => r.keep,
            Some(r) => r.input_at,
            None => head.message_count,
        };
        head.run = new_run(run_id.clone(), live.head.run.turn + 1, now, input_at);
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
        let (truncate, state) = match restore {
            Some(r) => {
                let mut patches = Vec::new();
                diff("", &live.state, &r.state, &mut patches);
                if !patches.is_empty() {
                    post.push(emitter.event(ChunkBody::StatePatch { patches }));
                }
                head.step_count = r.checkpoint.step_count;
                head.message_count = r.keep;
                head.checkpoint_id = Some(r.checkpoint.id.clone());
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
            checkpoint: None,
            clear_interrupt: true,
            subsessions: Vec::new(),
        };
        self.commit(live, commit, post).await?;
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

    /// Requests an interrupt, honoured at the next step boundary.
    pub async fn interrupt(
        &self,
        session_id: &str,
        reason: Option<String>,
    ) -> Result<(), RunError> {
        let live = self.load(session_id).await?;
        match live.head.status {
            SessionStatus::Active => {
                #[cfg_attr(not(feature = "persistent-children"), allow(unused_mut))]
                let mut request = InterruptRequest::because(reason.clone());
                // A persistent child's queued next turn stays queued.
                #[cfg(feature = "persistent-children")]
                {
                    request.then = live.interrupt.as_ref().and_then(|r| r.then.clone());
                }
                self.store
                    .request_interrupt(session_id, request.clone())
                    .await?;
                *self.interrupt_requested.borrow_mut() = Some(request);
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
                    let order = ChildOrder::Abort { reason };
                    // Its persistent children end with it.
                    #[cfg(feature = "persistent-children")]
                    {
                        let helpers = self.persistent_children(&waited_on, false).await?;
                        self.order_all(session_id, &helpers, order.clone()).await;
                    }
                    self.order_children(&waited_on, order).await;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Err(RunError::Busy("the session kept changing; try again"))
    }
}
