//! The requests a runner takes and what it answers: a session to create, an answer to
//! a pending call and where it went, and the small rules every operation shares (when
//! a new run may start, a commit that changes only the head, a new run's record).

use super::super::RunError;
use crate::chunk::RunStatus;
use crate::message::Message;
use crate::model::Usage;
use crate::store::{
    Commit, ForkOrigin, ParentRef, RunRecord, SessionHead, SessionStatus, StateChange,
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
    /// For a fork, with no input, of a checkpoint where its run ended: the copy starts
    /// idle (`completed`, as the run was there) and runs on its first message.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idle: bool,
    /// The first run's model options (`providerOptions`, as given), checked
    /// against the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<serde_json::Value>,
    /// Who owns it: the user who created it, or for a child its root's owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<crate::store::Owner>,
    /// The caller's span the first run continues (a `traceparent`'s; for a child, its
    /// parent run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::TraceContext>,
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
            idle: false,
            options: None,
            owner: None,
            trace: None,
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
    /// Its status: `active`, or `completed` for an idle fork.
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
    /// `elicitation-response` or `authorization-response`: the user's answer to what a
    /// call asked mid-call ([`crate::tool::Wait`]).
    Input {
        /// The call.
        tool_call_id: String,
        /// What it answers: an elicitation or an authorization.
        kind: crate::store::PendingKind,
        /// `{"action", "content"?}` or `{"action", "code"?, "state"?}`.
        answer: Value,
    },
}

impl Submission {
    /// The call it answers.
    pub fn call_id(&self) -> &str {
        match self {
            Self::Approval { tool_call_id, .. }
            | Self::ClientResult { tool_call_id, .. }
            | Self::Input { tool_call_id, .. } => tool_call_id,
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
        usage_by_model: Default::default(),
        nudges: 0,
        deferred_output: None,
        input_at,
        options: None,
        trace: None,
    }
}

/// Checks a request's `providerOptions` (as given) for a run of `agent`.
pub(crate) fn check_options(
    given: &serde_json::Value,
    agent: &crate::agent::Agent,
) -> Result<(), RunError> {
    let has_tool = |name: &str| agent.tool(name).is_some();
    crate::provider_options::check(given, agent.name(), &has_tool).map_err(RunError::Invalid)
}
