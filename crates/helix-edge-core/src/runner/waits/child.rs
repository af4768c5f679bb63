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
use serde_json::{Value, json};
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
        /// Its root's owner, whom it belongs to as well.
        owner: Option<crate::store::Owner>,
        /// The parent run's span, which the child's run continues.
        trace: Option<crate::trace::TraceContext>,
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

/// Internal path of a session's object: create its session (a root's, from the
/// worker's router, or a child's, from its parent); the body is a `CreateSession`.
pub const CREATE_PATH: &str = "/__internal/create";
/// Internal path: a child reports that it ended ([`ChildEnded`]).
pub const ENDED_PATH: &str = "/__internal/ended";
/// Internal path: chunks of a child's stream for the parent's ([`Relay`]).
pub const RELAY_PATH: &str = "/__internal/relay";
/// Internal path: a persistent child's parent starts its next turn
/// (`{message, toolCallId}`).
pub const MESSAGE_PATH: &str = "/__internal/message";
/// Internal path: the parent is being deleted; delete this child session.
pub const DELETE_PATH: &str = "/__internal/delete";

/// An order as the request to the child's object that carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderRequest {
    /// The path (an internal one, or the API's route of the operation).
    pub path: String,
    /// The JSON body.
    pub body: Value,
    /// Statuses besides 2xx that mean the order needs no doing.
    pub accept: &'static [u16],
}

impl ChildOrder {
    /// The request to child `child_id`'s object that carries this order.
    pub fn request(&self, child_id: &str) -> Result<OrderRequest, String> {
        let op = |name: &str| format!("/v1/sessions/{child_id}/{name}");
        let (path, body, accept): (String, Value, &'static [u16]) = match self {
            Self::Start {
                agent,
                message,
                parent,
                owner,
                trace,
            } => {
                let request = crate::runner::CreateSession {
                    parent: Some(parent.clone()),
                    owner: owner.clone(),
                    trace: trace.clone(),
                    ..crate::runner::CreateSession::new(child_id, agent.clone(), message.clone())
                };
                let body = serde_json::to_value(&request).map_err(|e| e.to_string())?;
                // 409: created before (a retried start finds the same child).
                (CREATE_PATH.into(), body, &[409])
            }
            // 404: never started; 409: ended already.
            Self::Abort { reason } => (op("abort"), json!({ "reason": reason }), &[404, 409]),
            // 409: the child is not running (already ended or interrupted).
            Self::Interrupt { reason } => (op("interrupt"), json!({ "reason": reason }), &[409]),
            Self::Resume => (op("resume"), json!({}), &[409]),
            Self::Message {
                message,
                tool_call_id,
            } => {
                let body = json!({ "message": message, "toolCallId": tool_call_id });
                (MESSAGE_PATH.into(), body, &[])
            }
            // 404: never started, or deleted before.
            Self::Delete => (DELETE_PATH.into(), json!({}), &[404]),
        };
        Ok(OrderRequest { path, body, accept })
    }
}

/// A persistent child's next message from its parent, as its object takes it.
pub fn parse_message(body: &[u8]) -> Option<(String, String)> {
    let body: Value = serde_json::from_slice(body).ok()?;
    let message = body["message"].as_str()?.to_string();
    let call = body["toolCallId"].as_str()?.to_string();
    Some((message, call))
}

/// Chunks of a child's stream sent to its parent's: `(sequence, data)` from `from`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relay {
    /// The child session.
    pub from: String,
    /// Its confirmed chunks, by sequence.
    pub chunks: Vec<(u64, String)>,
}

impl Relay {
    /// Reads a relay body; `None` when it is not one.
    pub fn parse(body: &[u8]) -> Option<Self> {
        let relay: Self = serde_json::from_slice(body).ok()?;
        (!relay.from.is_empty()).then_some(relay)
    }
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
    fn orders_travel_as_requests_with_the_statuses_that_mean_done_already() {
        let parent = ParentRef {
            session_id: "p".into(),
            tool_call_id: "c1".into(),
            root_id: "p".into(),
        };
        let start = ChildOrder::Start {
            agent: "researcher".into(),
            message: "{}".into(),
            parent,
            owner: Some(crate::store::Owner {
                subject: "u1".into(),
                tenant: None,
            }),
            trace: None,
        };
        let r = start.request("p.sub-1").unwrap();
        assert_eq!((r.path.as_str(), r.accept), (CREATE_PATH, &[409][..]));
        assert_eq!(r.body["sessionId"], "p.sub-1");
        assert_eq!(r.body["parent"]["toolCallId"], "c1");
        assert_eq!(r.body["owner"], serde_json::json!({"subject": "u1"}));
        let abort = ChildOrder::Abort { reason: "x".into() };
        let r = abort.request("k").unwrap();
        assert_eq!(r.path, "/v1/sessions/k/abort");
        assert_eq!(
            (r.body.clone(), r.accept),
            (json!({"reason": "x"}), &[404, 409][..])
        );
        let r = ChildOrder::Interrupt { reason: None }.request("k").unwrap();
        assert_eq!(
            (r.path.as_str(), r.accept),
            ("/v1/sessions/k/interrupt", &[409][..])
        );
        let r = ChildOrder::Resume.request("k").unwrap();
        assert_eq!(
            (r.path.as_str(), r.accept),
            ("/v1/sessions/k/resume", &[409][..])
        );
        let message = ChildOrder::Message {
            message: "hi".into(),
            tool_call_id: "c2".into(),
        };
        let r = message.request("k").unwrap();
        assert_eq!(r.path, MESSAGE_PATH);
        let body = serde_json::to_vec(&r.body).unwrap();
        assert_eq!(parse_message(&body), Some(("hi".into(), "c2".into())));
        let r = ChildOrder::Delete.request("k").unwrap();
        assert_eq!((r.path.as_str(), r.accept), (DELETE_PATH, &[404][..]));
    }

    #[test]
    fn relays_and_messages_that_are_malformed_are_refused() {
        let relay = Relay {
            from: "k".into(),
            chunks: vec![(3, "{}".into())],
        };
        let body = serde_json::to_vec(&relay).unwrap();
        assert_eq!(Relay::parse(&body), Some(relay));
        assert_eq!(Relay::parse(br#"{"from":"","chunks":[]}"#), None);
        assert_eq!(Relay::parse(b"[]"), None);
        assert_eq!(parse_message(br#"{"message":"hi"}"#), None);
    }

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
