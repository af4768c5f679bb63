//! The remote deployment's side as the runner sees it: [`Remotes`] (what the platform
//! does over HTTP), what a remote's answers mean ([`RemoteError`], [`RemoteView`],
//! [`RemoteAnswer`]) and the body an answer is forwarded with.

use super::super::child::ended_answer;
use crate::runner::{RunError, Submission};
use crate::store::{Answer, PendingCall, SessionStatus};
use crate::tool::RemoteAgent;
use futures::future::LocalBoxFuture;
use serde_json::{Value, json};

/// How a runner reaches the deployments of its remote sub-agents (on the platform:
/// `fetch` to their public API with the configured URL and token).
pub trait Remotes {
    /// Creates session `child_id` of the remote's agent with `message` as its first
    /// message; a session of that id that exists already is the one (created before).
    fn start<'a>(
        &'a self,
        remote: &'a RemoteAgent,
        child_id: &'a str,
        message: &'a str,
    ) -> LocalBoxFuture<'a, Result<(), RemoteError>>;
    /// The remote session as it is now; the platform also relays the remote stream's
    /// new chunks into the parent's.
    fn view<'a>(
        &'a self,
        remote: &'a RemoteAgent,
        child_id: &'a str,
    ) -> LocalBoxFuture<'a, Result<RemoteView, RemoteError>>;
    /// Interrupts, resumes or aborts the remote session.
    fn order<'a>(
        &'a self,
        remote: &'a RemoteAgent,
        child_id: &'a str,
        order: RemoteOrder,
    ) -> LocalBoxFuture<'a, Result<(), RemoteError>>;
    /// Submits an answer to a call pending in the remote session.
    fn answer<'a>(
        &'a self,
        remote: &'a RemoteAgent,
        child_id: &'a str,
        body: &'a Value,
    ) -> LocalBoxFuture<'a, Result<RemoteAnswer, RemoteError>>;
}

/// For runners without remote sub-agents: the remote is never reachable.
pub struct NoRemotes;

impl Remotes for NoRemotes {
    fn start<'a>(
        &'a self,
        _: &'a RemoteAgent,
        _: &'a str,
        _: &'a str,
    ) -> LocalBoxFuture<'a, Result<(), RemoteError>> {
        Box::pin(async { Err(unavailable_here()) })
    }
    fn view<'a>(
        &'a self,
        _: &'a RemoteAgent,
        _: &'a str,
    ) -> LocalBoxFuture<'a, Result<RemoteView, RemoteError>> {
        Box::pin(async { Err(unavailable_here()) })
    }
    fn order<'a>(
        &'a self,
        _: &'a RemoteAgent,
        _: &'a str,
        _: RemoteOrder,
    ) -> LocalBoxFuture<'a, Result<(), RemoteError>> {
        Box::pin(async { Err(unavailable_here()) })
    }
    fn answer<'a>(
        &'a self,
        _: &'a RemoteAgent,
        _: &'a str,
        _: &'a Value,
    ) -> LocalBoxFuture<'a, Result<RemoteAnswer, RemoteError>> {
        Box::pin(async { Err(unavailable_here()) })
    }
}

fn unavailable_here() -> RemoteError {
    RemoteError::Unavailable("remote sub-agents are not available in this runner".into())
}

/// What the parent passes on to a remote session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteOrder {
    /// `POST …/interrupt`.
    Interrupt,
    /// `POST …/resume`.
    Resume,
    /// `POST …/abort`.
    Abort,
}

impl RemoteOrder {
    /// The route's last path segment.
    pub fn path(self) -> &'static str {
        match self {
            Self::Interrupt => "interrupt",
            Self::Resume => "resume",
            Self::Abort => "abort",
        }
    }

    /// The statuses that mean the order needs no doing: the session is not running
    /// (409) or, for an abort, does not exist (404).
    pub fn done_already(self, status: u16) -> bool {
        status == 409 || (self == Self::Abort && status == 404)
    }
}

/// Why a remote could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteError {
    /// Not configured, not reachable, too slow, or answering 429/5xx.
    Unavailable(String),
    /// It refused: bad credentials, no such agent or session.
    Rejected(String),
    /// It answered something that is not its API.
    Invalid(String),
}

impl RemoteError {
    /// The tool error code the model sees.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "subagent_remote_unavailable",
            Self::Rejected(_) => "subagent_remote_rejected",
            Self::Invalid(_) => "subagent_remote_invalid",
        }
    }

    /// What went wrong, in a sentence.
    pub fn message(&self) -> &str {
        match self {
            Self::Unavailable(m) | Self::Rejected(m) | Self::Invalid(m) => m,
        }
    }

    /// What a remote's HTTP `status` means, with its error body `body`: `Ok` on 2xx.
    pub fn from_status(status: u16, body: &str) -> Result<(), RemoteError> {
        if (200..300).contains(&status) {
            return Ok(());
        }
        let said = serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string));
        let said = said.map_or(String::new(), |m| format!(": {m}"));
        let message = format!("the remote deployment answered HTTP {status}{said}");
        Err(match status {
            408 | 429 | 500..=599 => Self::Unavailable(message),
            400..=499 => Self::Rejected(message),
            _ => Self::Invalid(message),
        })
    }

    pub(super) fn answer(&self, what: &str) -> Answer {
        Answer::ChildFailed {
            code: self.code().into(),
            error: format!("The remote sub-agent {what}: {}", self.message()),
        }
    }
}

/// A remote session as its `GET /v1/sessions/{id}` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteView {
    /// Its status.
    pub status: SessionStatus,
    /// Its version: a poll that sees the same one saw no change.
    pub version: u64,
    /// Its output, once completed (the platform fills in `{"text": …}` with its last
    /// answer when its agent has no structured output).
    pub output: Option<Value>,
    /// Why it failed.
    pub error: Option<String>,
    /// The calls pending there that a client answers.
    pub pending: Vec<PendingCall>,
}

impl RemoteView {
    /// Reads the body of `GET /v1/sessions/{id}`.
    pub fn parse(body: &str) -> Result<Self, RemoteError> {
        let invalid = |what: &str| RemoteError::Invalid(format!("its session view {what}"));
        let v: Value = serde_json::from_str(body).map_err(|_| invalid("is not JSON"))?;
        let status = serde_json::from_value(v["status"].clone())
            .map_err(|_| invalid("has no valid status"))?;
        let version = v["version"]
            .as_u64()
            .ok_or_else(|| invalid("has no version"))?;
        let pending = crate::store::pending_calls(&v["pendingToolCalls"])
            .map_err(|e| invalid(&format!("has {e}")))?;
        Ok(Self {
            status,
            version,
            output: v.get("output").filter(|o| !o.is_null()).cloned(),
            error: v["error"]["message"].as_str().map(str::to_string),
            pending,
        })
    }

    /// How the call ends, once the remote session ended.
    pub(super) fn outcome(&self) -> Option<Answer> {
        let output = self.output.clone();
        ended_answer(
            self.status,
            output,
            self.error.as_deref(),
            "remote sub-agent",
        )
    }
}

/// Where an answer forwarded to a remote session went.
#[derive(Debug, Clone, PartialEq)]
pub enum RemoteAnswer {
    /// The remote stored it (202).
    Taken,
    /// The call is not pending there (404).
    NotThere,
    /// The remote refused it (a second answer, the wrong kind): the client's error.
    Refused(RunError),
}

impl RemoteAnswer {
    /// What a remote's answer to a forwarded submission means.
    pub fn from_status(status: u16, body: &str, call_id: &str) -> Result<Self, RemoteError> {
        let code = serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| v["error"]["code"].as_str().map(str::to_string));
        Ok(match (status, code.as_deref()) {
            (202, _) => Self::Taken,
            (404, Some("tool_call_not_found")) => Self::NotThere,
            (409, Some("tool_call_already_resolved")) => {
                Self::Refused(RunError::AlreadyResolved(call_id.into()))
            }
            (400, Some("kind_mismatch")) => Self::Refused(RunError::KindMismatch {
                call: call_id.into(),
                expected: "the other kind of answer",
            }),
            (400 | 413, _) => {
                let said = RemoteError::from_status(status, body).err();
                let said = said.map_or(String::new(), |e| e.message().to_string());
                Self::Refused(RunError::ResultInvalid(said))
            }
            _ => {
                RemoteError::from_status(status, body)?;
                return Err(RemoteError::Invalid(format!(
                    "it answered HTTP {status} to a tool result"
                )));
            }
        })
    }
}

/// The body of `POST …/tool-results` that carries `submission`.
pub fn submission_body(submission: &Submission) -> Value {
    match submission {
        Submission::Approval {
            tool_call_id,
            approved,
            reason,
        } => {
            let mut body = json!({
                "kind": "approval-response",
                "toolCallId": tool_call_id,
                "approved": approved,
            });
            if let Some(reason) = reason {
                body["reason"] = json!(reason);
            }
            body
        }
        Submission::ClientResult {
            tool_call_id,
            outcome: Ok(result),
        } => json!({ "kind": "client-tool-result", "toolCallId": tool_call_id, "result": result }),
        Submission::ClientResult {
            tool_call_id,
            outcome: Err(error),
        } => json!({ "kind": "client-tool-result", "toolCallId": tool_call_id, "error": error }),
        Submission::Input {
            tool_call_id,
            kind,
            answer,
        } => {
            let mut body = match answer {
                Value::Object(fields) => fields.clone(),
                _ => serde_json::Map::new(),
            };
            body.insert("kind".into(), json!(format!("{}-response", kind.as_str())));
            body.insert("toolCallId".into(), json!(tool_call_id));
            Value::Object(body)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::PendingKind;

    #[test]
    fn statuses_are_classified() {
        assert_eq!(RemoteError::from_status(201, ""), Ok(()));
        let body = r#"{"error":{"code":"unauthorized","message":"Bad token.","retryable":false}}"#;
        let err = RemoteError::from_status(401, body).unwrap_err();
        assert_eq!(err.code(), "subagent_remote_rejected");
        assert!(err.message().ends_with("HTTP 401: Bad token."), "{err:?}");
        let down = RemoteError::from_status(503, "<html>").unwrap_err();
        assert_eq!(down.code(), "subagent_remote_unavailable");
        let odd = RemoteError::from_status(302, "").unwrap_err();
        assert_eq!(odd.code(), "subagent_remote_invalid");
    }

    #[test]
    fn views_parse_and_garbage_is_invalid() {
        let body = json!({
            "sessionId": "s", "agent": "assistant", "status": "active", "version": 4,
            "stepCount": 1, "state": {},
            "pendingToolCalls": [{"toolCallId": "c1", "toolName": "delete_file",
                "arguments": {"path": "/x"}, "kind": "approval"}]
        });
        let view = RemoteView::parse(&body.to_string()).unwrap();
        assert_eq!((view.status, view.version), (SessionStatus::Active, 4));
        assert_eq!(view.pending[0].kind, PendingKind::Approval);
        assert_eq!(view.outcome(), None);
        for garbage in [
            "",
            "[]",
            r#"{"status":"sleeping","version":1}"#,
            r#"{"status":"active"}"#,
        ] {
            let err = RemoteView::parse(garbage).unwrap_err();
            assert_eq!(err.code(), "subagent_remote_invalid", "{garbage}");
        }
        let bad_call =
            json!({"status": "active", "version": 1, "pendingToolCalls": [{"kind": "approval"}]});
        assert!(RemoteView::parse(&bad_call.to_string()).is_err());
        let done = json!({"status": "completed", "version": 9, "output": {"text": "hi"}});
        let view = RemoteView::parse(&done.to_string()).unwrap();
        assert_eq!(
            view.outcome(),
            Some(Answer::ChildOutput {
                output: json!({"text": "hi"})
            })
        );
        let failed =
            json!({"status": "failed", "version": 9, "error": {"code": "x", "message": "boom"}});
        let Some(Answer::ChildFailed { code, error }) =
            RemoteView::parse(&failed.to_string()).unwrap().outcome()
        else {
            panic!("a failed remote fails the call");
        };
        assert_eq!(code, "subagent_failed");
        assert!(error.ends_with(": boom"), "{error}");
    }

    #[test]
    fn forwarded_answers_are_classified() {
        let err = |code: &str| {
            json!({"error": {"code": code, "message": "m", "retryable": false}}).to_string()
        };
        assert_eq!(
            RemoteAnswer::from_status(202, "{}", "c"),
            Ok(RemoteAnswer::Taken)
        );
        assert_eq!(
            RemoteAnswer::from_status(404, &err("tool_call_not_found"), "c"),
            Ok(RemoteAnswer::NotThere)
        );
        assert_eq!(
            RemoteAnswer::from_status(409, &err("tool_call_already_resolved"), "c"),
            Ok(RemoteAnswer::Refused(RunError::AlreadyResolved("c".into())))
        );
        let mismatch = RemoteAnswer::from_status(400, &err("kind_mismatch"), "c");
        assert!(matches!(
            mismatch,
            Ok(RemoteAnswer::Refused(RunError::KindMismatch { .. }))
        ));
        // A 404 that is not about the call (no such session there) is the remote's refusal.
        let gone = RemoteAnswer::from_status(404, &err("session_not_found"), "c");
        assert_eq!(gone.unwrap_err().code(), "subagent_remote_rejected");
        assert_eq!(
            RemoteAnswer::from_status(502, "", "c").unwrap_err().code(),
            "subagent_remote_unavailable"
        );
    }
}
