//! What a suspended run waits on and what answers it: pending calls, the answers stored
//! for them (read through a flat record, see `wire`), and how long each call waited.

use super::Owner;
use crate::wire::{present, required, wire_enum};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How long an approval or a client call waited for its answer, and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallWait {
    /// The call.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// Who answered it.
    pub kind: PendingKind,
    /// From the suspension to the answer (or the deadline), in ms.
    pub waited_ms: u64,
    /// How it ended.
    pub outcome: WaitOutcome,
}

wire_enum! {
    /// How a call that waited ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum WaitOutcome {
        /// Approved (and then run).
        Approved = "approved",
        /// Denied.
        Denied = "denied",
        /// The client sent a result.
        Result = "result",
        /// The client reported an error.
        Error = "error",
        /// Its deadline passed first.
        Expired = "expired",
    }
}

wire_enum! {
    /// How a pending call is answered.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum PendingKind {
        /// The user approves or denies; the server then runs it.
        Approval = "approval",
        /// The client runs it and submits the result.
        Client = "client",
        /// A child session runs it (a sub-agent); it resolves when the child ends.
        Child = "child",
        /// The call asks the user to connect an account (an MCP server's OAuth): they
        /// follow `authorizeUrl`; the callback answers it, and the call goes on.
        Authorization = "authorization",
        /// The call asks the user for input (an MCP server's elicitation): `message`,
        /// and the `requestedSchema` an accepted answer's `content` matches.
        Elicitation = "elicitation",
    }
}

impl PendingKind {
    /// Whether a running call asked for it (it goes on with the answer).
    pub fn asked_mid_call(self) -> bool {
        matches!(self, Self::Authorization | Self::Elicitation)
    }
}

/// A tool call the run waits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingCall {
    /// The call.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// Its arguments.
    pub arguments: Value,
    /// Who answers it.
    pub kind: PendingKind,
    /// For client and sub-agent calls: when the answer is due (ms since epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<u64>,
    /// When the run suspended on it (ms).
    #[serde(default)]
    pub since: u64,
    /// Where its result is stored in the state (`_outputPath`), if anywhere; the
    /// arguments are then the ones the call runs with (references resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_path: Option<String>,
    /// For an approval only a holder of a role may give: who may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers: Option<Approvers>,
    /// For a call that asked mid-call: what the user is shown (an object:
    /// `authorizeUrl`, or `message` and `requestedSchema`, with the `server`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
}

impl PendingCall {
    /// Where its answer is kept: the call's id, but for a call that asked mid-call the
    /// wait's own (a call may ask more than once, each time since a later instant).
    pub fn answer_id(&self) -> std::borrow::Cow<'_, str> {
        match self.kind.asked_mid_call() {
            true => format!("{}@{}", self.tool_call_id, self.since).into(),
            false => self.tool_call_id.as_str().into(),
        }
    }
}

/// Who may decide an approval, when not the session's owner by default (separation of
/// duties): users holding `role`, in the owner's tenant, and never the owner when
/// `not_owner` says so. The API token may always decide.
// Read through a JSON value (whose reading every reader of a pending call has for its
// arguments): a derived reader per JSON reader costs ~1.5 KiB of wasm each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "Value")]
pub struct Approvers {
    /// The role an approver holds (from the claim the deployment names).
    pub role: String,
    /// Whether the session's owner is refused even when they hold the role.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_owner: bool,
}

impl TryFrom<Value> for Approvers {
    type Error = &'static str;

    fn try_from(v: Value) -> Result<Self, Self::Error> {
        let role = v["role"].as_str().ok_or("approvers without a role")?;
        Ok(Self {
            role: role.into(),
            not_owner: v["notOwner"].as_bool().unwrap_or(false),
        })
    }
}

/// A pending call as it is listed: in `GET /v1/sessions/{id}` (its `pendingToolCalls`),
/// and so as a parent reads a child's or a remote session's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingView {
    tool_call_id: String,
    tool_name: String,
    arguments: Value,
    kind: PendingKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    deadline: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approvers: Option<Approvers>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    request: Option<Value>,
}

impl From<&PendingCall> for PendingView {
    fn from(p: &PendingCall) -> Self {
        Self {
            tool_call_id: p.tool_call_id.clone(),
            tool_name: p.tool_name.clone(),
            arguments: p.arguments.clone(),
            kind: p.kind,
            deadline: p.deadline,
            approvers: p.approvers.clone(),
            request: crate::tool::wait::shown(p.request.as_ref()),
        }
    }
}

/// The pending calls a session view lists ([`PendingView`]s), read back, as a parent
/// reads a child's or a remote session's; absent is none.
pub fn pending_calls(listed: &Value) -> Result<Vec<PendingCall>, &'static str> {
    let call = |c: &Value| -> Option<PendingCall> {
        let kind: PendingKind = serde_json::from_value(c["kind"].clone()).ok()?;
        let request = kind.asked_mid_call().then(|| {
            let mut shown = serde_json::Map::new();
            for key in ["server", "authorizeUrl", "message", "requestedSchema"] {
                if let Some(value) = c.get(key) {
                    shown.insert(key.into(), value.clone());
                }
            }
            Value::Object(shown)
        });
        Some(PendingCall {
            tool_call_id: c["toolCallId"].as_str()?.into(),
            tool_name: c["toolName"].as_str()?.into(),
            arguments: c["arguments"].clone(),
            kind,
            deadline: c["deadline"].as_u64(),
            since: 0,
            output_path: None,
            approvers: Approvers::try_from(c["approvers"].clone()).ok(),
            request,
        })
    };
    match listed {
        Value::Null => Ok(Vec::new()),
        Value::Array(calls) => calls
            .iter()
            .map(call)
            .collect::<Option<Vec<_>>>()
            .ok_or("a malformed pending call"),
        _ => Err("malformed pending calls"),
    }
}

impl Answer {
    /// When a person or a client submitted it, for the answers they give.
    pub fn answered_at(&self) -> Option<u64> {
        match self {
            Self::Approval { answered_at, .. }
            | Self::ClientResult { answered_at, .. }
            | Self::ClientError { answered_at, .. } => Some(*answered_at),
            _ => None,
        }
    }
}

/// An answer to a pending call.
// Written by the derive, read through `AnswerWire` (see `crate::wire`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", try_from = "AnswerWire")]
pub enum Answer {
    /// The user's decision on an approval.
    Approval {
        /// Approved or denied.
        approved: bool,
        /// Why, if given.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// When it was submitted (ms).
        #[serde(rename = "answeredAt")]
        answered_at: u64,
        /// The user who decided, when a user's token did (not the API token's or a
        /// session token's holder).
        #[serde(rename = "decidedBy", skip_serializing_if = "Option::is_none")]
        decided_by: Option<Owner>,
    },
    /// A client tool's result.
    ClientResult {
        /// The result.
        result: Value,
        /// When it was submitted (ms).
        #[serde(rename = "answeredAt")]
        answered_at: u64,
    },
    /// A client tool's error.
    ClientError {
        /// The message.
        error: String,
        /// When it was submitted (ms).
        #[serde(rename = "answeredAt")]
        answered_at: u64,
    },
    /// The deadline passed with no answer.
    Expired,
    /// A sub-agent's child session completed with this output (the child reports it
    /// when it ends).
    ChildOutput {
        /// The child's output.
        output: Value,
    },
    /// A sub-agent call ended without output: the child failed, was aborted, timed out
    /// or could not be started.
    ChildFailed {
        /// Machine-readable reason (`subagent_failed`, `subagent_timeout`, …).
        code: String,
        /// What happened, for the model.
        error: String,
    },
    /// A companion call's result that needs no child turn (a non-blocking start, a
    /// child's status, the list of children, an ended child).
    CompanionResult {
        /// The result the model gets.
        result: Value,
    },
}

/// Any stored [`Answer`] as one flat record (see [`crate::wire`]).
#[derive(Deserialize)]
struct AnswerWire {
    kind: AnswerKind,
    approved: Option<bool>,
    reason: Option<String>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    output: Option<Value>,
    error: Option<String>,
    code: Option<String>,
    /// Absent in answers stored before it was recorded: 0.
    #[serde(default, rename = "answeredAt")]
    answered_at: u64,
    /// Read as a value (see [`Approvers`]).
    #[serde(default, rename = "decidedBy", deserialize_with = "present")]
    decided_by: Option<Value>,
}

wire_enum! {
    /// The kinds an answer is stored as.
    #[derive(Clone, Copy)]
    enum AnswerKind {
        Approval = "approval",
        ClientResult = "client_result",
        ClientError = "client_error",
        Expired = "expired",
        ChildOutput = "child_output",
        ChildFailed = "child_failed",
        CompanionResult = "companion_result",
    }
}

impl TryFrom<AnswerWire> for Answer {
    type Error = String;

    fn try_from(w: AnswerWire) -> Result<Self, String> {
        Ok(match w.kind {
            AnswerKind::Approval => Self::Approval {
                approved: required(w.approved, "approved")?,
                reason: w.reason,
                answered_at: w.answered_at,
                decided_by: w.decided_by.as_ref().and_then(Owner::from_json),
            },
            AnswerKind::ClientResult => Self::ClientResult {
                result: required(w.result, "result")?,
                answered_at: w.answered_at,
            },
            AnswerKind::ClientError => Self::ClientError {
                error: required(w.error, "error")?,
                answered_at: w.answered_at,
            },
            AnswerKind::Expired => Self::Expired,
            AnswerKind::ChildOutput => Self::ChildOutput {
                output: required(w.output, "output")?,
            },
            AnswerKind::ChildFailed => Self::ChildFailed {
                code: required(w.code, "code")?,
                error: required(w.error, "error")?,
            },
            AnswerKind::CompanionResult => Self::CompanionResult {
                result: required(w.result, "result")?,
            },
        })
    }
}
