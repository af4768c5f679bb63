//! The session tree's protocol, shared by every kind of child: what a parent asks of a
//! child ([`ChildOrder`], carried by the platform's [`Children`]), what a child reports
//! when it ended ([`ChildEnded`]), a child's id and how its end answers its parent's
//! call. The parent never waits in memory and never reads a child's rows: every message
//! is idempotent, so the platform sends each again until it goes through.

use super::super::emit::Emitter;
use super::super::results::{end_with_error, end_with_result};
use crate::agent::Agent;
use crate::chunk::ChunkBody;
use crate::message::{Message, ToolCall};
use crate::state::PatchOp;
use crate::store::{
    Answer, ChildStatus, ParentRef, PendingCall, SessionHead, SessionStatus, SubSession,
};
use futures::future::LocalBoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What a parent asks of one of its child sessions.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildOrder {
    /// Create the child and start its run (a child that exists already is left alone).
    Start {
        /// The child's agent.
        agent: String,
        /// Its first message: the call's arguments as JSON text.
        message: String,
        /// Where it reports.
        parent: ParentRef,
    },
    /// End it for good.
    Abort {
        /// Why.
        reason: String,
    },
    /// Stop it at its next step boundary.
    Interrupt {
        /// Why.
        reason: Option<String>,
    },
    /// Continue it after an interrupt.
    Resume,
    /// Start a persistent child's next turn with `message`, for the parent's call
    /// `tool_call_id` (a child that has that call already is left alone).
    Message {
        /// The message.
        message: String,
        /// The parent's call the turn answers.
        tool_call_id: String,
    },
    /// Delete it and everything of it, for good (its parent is being deleted).
    Delete,
}

/// How a runner reaches its child sessions (on the platform: their Durable Objects).
pub trait Children {
    /// Sends `order` to child `child_id`; `Err` carries a message for logs and the model.
    fn send<'a>(
        &'a self,
        child_id: &'a str,
        order: ChildOrder,
    ) -> LocalBoxFuture<'a, Result<(), String>>;
    /// The calls a client answers that are pending in child `child_id` or below it.
    fn pending<'a>(
        &'a self,
        child_id: &'a str,
    ) -> LocalBoxFuture<'a, Result<Vec<PendingCall>, String>>;
}

/// For runners without sub-agents: every order fails, and nothing is pending below.
pub struct NoChildren;

impl Children for NoChildren {
    fn send<'a>(&'a self, _: &'a str, _: ChildOrder) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async { Err("sub-agents are not available in this runner".to_string()) })
    }

    fn pending<'a>(&'a self, _: &'a str) -> LocalBoxFuture<'a, Result<Vec<PendingCall>, String>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// A child's report to its parent that it ended: the outcome its parent's call gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildEnded {
    /// The child session.
    pub child_id: String,
    /// The parent's call it answers.
    pub tool_call_id: String,
    /// The child's version when it ended: a report is delivered once per ending.
    pub version: u64,
    /// The outcome ([`Answer::ChildOutput`] or [`Answer::ChildFailed`]).
    pub answer: Answer,
}

/// The report a child session owes its parent: `Some` once it ended, unless the report
/// of this ending (`delivered`: the version last reported) went out already.
pub fn ended_report(child: &SessionHead, delivered: Option<u64>) -> Option<(String, ChildEnded)> {
    let parent = child.parent.as_ref()?;
    let answer = child_outcome(child)?;
    (delivered != Some(child.version)).then(|| {
        let report = ChildEnded {
            child_id: child.id.clone(),
            tool_call_id: parent.tool_call_id.clone(),
            version: child.version,
            answer,
        };
        (parent.session_id.clone(), report)
    })
}

/// The id of the child session that answers `tool_call_id` of `parent_id`: the same
/// every time, so a retried start finds the child it started before. It is a valid
/// session id (`[A-Za-z0-9._-]`, at most 110 characters).
pub fn child_session_id(parent_id: &str, tool_call_id: &str) -> String {
    let digest = Sha256::new()
        .chain_update(parent_id.as_bytes())
        .chain_update([0u8])
        .chain_update(tool_call_id.as_bytes())
        .finalize();
    let hex: String = digest[..10].iter().map(|b| format!("{b:02x}")).collect();
    let prefix: String = parent_id.chars().take(80).collect();
    format!("{prefix}.sub-{hex}")
}

/// How an ended child answers its parent's call; `None` while it has not ended.
pub fn child_outcome(child: &SessionHead) -> Option<Answer> {
    let error = child.error.as_ref().map(|e| e.message.as_str());
    ended_answer(child.status, child.output.clone(), error, "sub-agent")
}

/// How a child session (`who`: "sub-agent", "remote sub-agent") that ended in `status`
/// answers its parent's call: with its `output`, or failed with its `error`; `None`
/// while it runs.
pub(crate) fn ended_answer(
    status: SessionStatus,
    output: Option<Value>,
    error: Option<&str>,
    who: &str,
) -> Option<Answer> {
    let failed = |code: &str, what: &str| {
        let detail = error.map_or(String::new(), |e| format!(": {e}"));
        Some(Answer::ChildFailed {
            code: code.into(),
            error: format!("The {who} {what}{detail}"),
        })
    };
    match status {
        // Bounded like every result when it becomes the call's.
        SessionStatus::Completed => Some(Answer::ChildOutput {
            output: output.unwrap_or_default(),
        }),
        SessionStatus::Failed => failed("subagent_failed", "failed"),
        SessionStatus::Aborted => failed("subagent_aborted", "was aborted"),
        SessionStatus::Active | SessionStatus::Interrupted => None,
    }
}

/// The parent's record of a child, as it ends for the parent (`answer`) or starts.
pub(crate) fn subsession(
    parent_id: &str,
    call: &PendingCall,
    agent: &str,
    answer: Option<&Answer>,
    now: u64,
) -> SubSession {
    let status = match answer {
        None => ChildStatus::Running,
        Some(Answer::ChildOutput { .. }) => ChildStatus::Completed,
        Some(Answer::ChildFailed { code, .. }) if code == "subagent_timeout" => {
            ChildStatus::TimedOut
        }
        Some(_) => ChildStatus::Failed,
    };
    SubSession {
        child_id: child_session_id(parent_id, &call.tool_call_id),
        agent: agent.into(),
        tool_call_id: call.tool_call_id.clone(),
        status,
        created_at: now,
        updated_at: now,
        name: None,
        mode: None,
    }
}

/// Turns a child call's answer (a sub-agent's, here or remote) into its tool result,
/// with `subagent_end`; the result is stored at `output_path` when the call has one.
pub(crate) fn end_child_call(
    agent: &Agent,
    call: &ToolCall,
    answer: &Answer,
    output_path: Option<&str>,
    (session_id, state): (&str, &Value),
    emitter: &Emitter,
) -> (Message, Option<PatchOp>) {
    let child_agent = agent
        .tool(&call.name)
        .and_then(|t| t.child_agent())
        .unwrap_or_default()
        .to_string();
    let output = match answer {
        Answer::ChildOutput { output } => Some(output.clone()),
        _ => None,
    };
    emitter.chunk_as(
        &child_agent,
        ChunkBody::SubagentEnd {
            sub_session_id: child_session_id(session_id, &call.id),
            tool_call_id: call.id.clone(),
            result: output.clone(),
        },
    );
    match (output, answer) {
        (Some(output), _) => end_with_result(call, output, output_path, state, emitter),
        (None, Answer::ChildFailed { code, error }) => {
            (end_with_error(call, code, error, emitter), None)
        }
        (None, _) => (
            end_with_error(
                call,
                "subagent_failed",
                "The sub-agent ended without output.",
                emitter,
            ),
            None,
        ),
    }
}

/// A failed child call's answer.
pub(crate) fn failed(code: &str, error: &str) -> Answer {
    Answer::ChildFailed {
        code: code.into(),
        error: error.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_ids_are_deterministic_valid_and_distinct() {
        let a = child_session_id("root", "call-1");
        assert_eq!(a, child_session_id("root", "call-1"));
        assert_ne!(a, child_session_id("root", "call-2"));
        assert_ne!(a, child_session_id("root2", "call-1"));
        let long = "p".repeat(128);
        let nested = child_session_id(&child_session_id(&long, "x"), "weird id/with:chars");
        assert!(crate::auth::valid_session_id(&nested), "{nested}");
        assert!(nested.len() <= 110);
    }
}
