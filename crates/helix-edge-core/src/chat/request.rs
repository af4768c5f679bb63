//! The body the AI SDK's `DefaultChatTransport` posts to `POST /v1/chat`:
//! `{id, messages, trigger, messageId?, ...body}` (its `body` option adds `agent`).
//!
//! The server owns the transcript: of the client's messages only the newest user
//! message and the answers in the last assistant message are read — approvals
//! (`approval-responded` tool parts) and client tool outputs (`output-available` /
//! `output-error`). Whether an answer is for a call that is pending is the session's to
//! say; this only reads what the client claims.

use crate::api::{ApiError, is_blank};
use crate::attachment::Attachment;
use crate::auth::valid_session_id;
use crate::message::Message;
use crate::store::{PendingCall, PendingKind};
use serde_json::{Map, Value};

/// What a chat request asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The chat id: the session id.
    pub id: String,
    /// The agent of a new session (`body: {agent}`); the first registered one if absent.
    pub agent: Option<String>,
    /// The text of the newest message, if it is the user's.
    pub user_text: Option<String>,
    /// That message's files, as attachments.
    pub user_attachments: Vec<Attachment>,
    /// Answers found in the last assistant message.
    pub answers: Vec<ChatAnswer>,
    /// The id of the assistant message the answers continue (the client appends the
    /// response to it); `None` for a new user turn.
    pub continues: Option<String>,
    /// The model options of the run a new user message starts (`body:
    /// {providerOptions}`, as `useChat` sends extra body fields).
    pub provider_options: Option<Value>,
}

/// An answer the client claims to give.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatAnswer {
    /// `addToolApprovalResponse`.
    Approval {
        /// The call (the approval id is the call id).
        call_id: String,
        /// Approved or denied.
        approved: bool,
        /// The user's reason, if given.
        reason: Option<String>,
    },
    /// `addToolOutput` with an output.
    Output {
        /// The call.
        call_id: String,
        /// The result.
        output: Value,
    },
    /// `addToolOutput` with `state: 'output-error'`.
    Error {
        /// The call.
        call_id: String,
        /// The client's error text.
        error: String,
    },
}

impl ChatAnswer {
    /// The call it answers.
    pub fn call_id(&self) -> &str {
        match self {
            Self::Approval { call_id, .. }
            | Self::Output { call_id, .. }
            | Self::Error { call_id, .. } => call_id,
        }
    }

    /// Whether it answers an approval (rather than a client tool).
    pub fn is_approval(&self) -> bool {
        matches!(self, Self::Approval { .. })
    }

    /// The body of `POST /v1/sessions/{id}/tool-results` that gives this answer.
    pub fn tool_result_body(&self) -> Value {
        let mut body = Map::new();
        let call_id = Value::String(self.call_id().to_string());
        match self {
            Self::Approval {
                approved, reason, ..
            } => {
                body.insert("kind".into(), "approval-response".into());
                body.insert("approved".into(), (*approved).into());
                if let Some(reason) = reason {
                    body.insert("reason".into(), reason.as_str().into());
                }
            }
            Self::Output { output, .. } => {
                body.insert("kind".into(), "client-tool-result".into());
                body.insert("result".into(), output.clone());
            }
            Self::Error { error, .. } => {
                body.insert("kind".into(), "client-tool-result".into());
                body.insert("error".into(), error.as_str().into());
            }
        }
        body.insert("toolCallId".into(), call_id);
        Value::Object(body)
    }
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::validation(message)
}

/// The text parts of a UI message, joined.
fn text_of(message: &Value) -> String {
    let parts = message["parts"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let texts: Vec<&str> = parts
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect();
    texts.join("\n")
}

/// Each message is an object with a known `role` and a list of part objects (what the
/// document promises to refuse otherwise); everything else in it is read leniently.
fn check_messages(messages: &[Value]) -> Result<(), ApiError> {
    for (i, message) in messages.iter().enumerate() {
        let at = |what: &str| invalid(format!("messages[{i}]{what}"));
        let Some(fields) = message.as_object() else {
            return Err(at(" must be an object."));
        };
        if !matches!(
            fields.get("role").and_then(Value::as_str),
            Some("system" | "user" | "assistant")
        ) {
            return Err(at(".role must be system, user or assistant."));
        }
        let parts = fields.get("parts").and_then(Value::as_array);
        if !parts.is_some_and(|p| p.iter().all(Value::is_object)) {
            return Err(at(".parts must be a list of objects."));
        }
        if fields.get("id").is_some_and(|id| !id.is_string()) {
            return Err(at(".id must be a string."));
        }
    }
    Ok(())
}

/// The answers in one assistant message's tool parts.
fn answers_in(message: &Value) -> Vec<ChatAnswer> {
    let parts = message["parts"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut answers = Vec::new();
    for part in parts {
        let (Some(kind), Some(call_id)) = (part["type"].as_str(), part["toolCallId"].as_str())
        else {
            continue;
        };
        if !(kind.starts_with("tool-") || kind == "dynamic-tool") {
            continue;
        }
        let call_id = call_id.to_string();
        match part["state"].as_str() {
            Some("approval-responded") => {
                // Read leniently: a part the client did not fill in answers nothing.
                let approval = &part["approval"];
                let Some(approved) = approval["approved"].as_bool() else {
                    continue;
                };
                let reason = approval["reason"].as_str().map(str::to_string);
                answers.push(ChatAnswer::Approval {
                    call_id,
                    approved,
                    reason,
                });
            }
            // An approved call's output carries its approval: it is history, not an answer.
            Some("output-available") if part.get("approval").is_none() => {
                let output = part.get("output").cloned().unwrap_or(Value::Null);
                answers.push(ChatAnswer::Output { call_id, output });
            }
            Some("output-error") if part.get("approval").is_none() => {
                let error = part["errorText"]
                    .as_str()
                    .unwrap_or("Tool error")
                    .to_string();
                answers.push(ChatAnswer::Error { call_id, error });
            }
            _ => {}
        }
    }
    answers
}

impl ChatRequest {
    /// Reads a chat request body; 400 with the field at fault otherwise.
    pub fn parse(body: &[u8]) -> Result<Self, ApiError> {
        let text = std::str::from_utf8(body).map_err(|_| invalid("The body is not UTF-8."))?;
        let body: Value = serde_json::from_str(text)
            .map_err(|e| invalid(format!("The body is not JSON: {e}.")))?;
        let id = match body.get("id") {
            Some(Value::String(id)) if valid_session_id(id) => id.clone(),
            Some(_) => {
                return Err(invalid("id must match ^[A-Za-z0-9._-]{1,128}$."));
            }
            None => return Err(invalid("id is required (the chat id).")),
        };
        let agent = match body.get("agent") {
            None | Some(Value::Null) => None,
            Some(Value::String(agent)) => Some(agent.clone()),
            Some(_) => return Err(invalid("agent must be a string.")),
        };
        match body.get("trigger").map(Value::as_str) {
            None | Some(Some("submit-message")) => {}
            Some(None) => return Err(invalid("trigger must be a string.")),
            Some(Some(other)) => {
                return Err(ApiError::client(
                    400,
                    "unsupported_trigger",
                    format!(
                        "trigger `{other}` is not supported: the server owns the transcript (retry a run with POST /v1/sessions/{{id}}/retry)."
                    ),
                ));
            }
        }
        if body.get("messageId").is_some_and(|m| !m.is_string()) {
            return Err(invalid("messageId must be a string."));
        }
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| invalid("messages must be a non-empty array."))?;
        check_messages(messages)?;
        let last = messages.last().unwrap_or(&Value::Null);
        let user_text = (last["role"] == "user").then(|| text_of(last));
        let assistant = messages.iter().rev().find(|m| m["role"] == "assistant");
        let answers = match (&user_text, assistant) {
            (None, Some(message)) => answers_in(message),
            _ => Vec::new(),
        };
        let user_attachments = match user_text {
            Some(_) => super::files::attachments_of(last)?,
            None => Vec::new(),
        };
        if user_text.as_deref().is_some_and(is_blank) && user_attachments.is_empty() {
            return Err(invalid("The user message has no text."));
        }
        let continues = match user_text {
            None => last["id"].as_str().map(str::to_string),
            Some(_) => None,
        };
        // Read and checked by the runner, with the session's agent.
        let provider_options = body.get("providerOptions").cloned();
        Ok(Self {
            id,
            agent,
            user_text,
            user_attachments,
            answers,
            continues,
            provider_options,
        })
    }
}

/// What a chat request does to a session that exists.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatTurn<'a> {
    /// Answers calls the session waits on (submitted as `POST …/tool-results`).
    Answers(Vec<&'a ChatAnswer>),
    /// Starts a new run with the user's message.
    Message(&'a str),
}

impl ChatRequest {
    /// What this request does to a session whose calls `pending` wait (its own and its
    /// descendants'): an approval must be for a call awaiting one (else 409
    /// `approval_not_pending`: it was answered already, or never asked); outputs of
    /// calls that are not pending client calls are history, not answers; with nothing
    /// to answer, the newest user message starts a run (else 409 `nothing_to_answer`).
    pub fn turn(&self, pending: &[PendingCall]) -> Result<ChatTurn<'_>, ApiError> {
        let kind_of = |call: &str| {
            pending
                .iter()
                .find(|p| p.tool_call_id == call)
                .map(|p| p.kind)
        };
        let forged = self
            .answers
            .iter()
            .find(|a| a.is_approval() && kind_of(a.call_id()) != Some(PendingKind::Approval));
        if let Some(forged) = forged {
            return Err(ApiError::client(
                409,
                "approval_not_pending",
                format!(
                    "No approval is pending for tool call {}: it was answered already, or never requested.",
                    forged.call_id()
                ),
            ));
        }
        let answers: Vec<&ChatAnswer> = self
            .answers
            .iter()
            .filter(|a| a.is_approval() || kind_of(a.call_id()) == Some(PendingKind::Client))
            .collect();
        match (answers.is_empty(), self.user_text.as_deref()) {
            (false, _) => Ok(ChatTurn::Answers(answers)),
            (true, Some(text)) => Ok(ChatTurn::Message(text)),
            (true, None) => Err(ApiError::client(
                409,
                "nothing_to_answer",
                "The messages answer nothing the session waits on, and end with no new user message.",
            )),
        }
    }

    /// The new user message: `text` (the request's [`user_text`](Self::user_text)) with
    /// its files.
    pub fn user_message(&self, text: &str) -> Message {
        Message::User {
            content: text.to_string(),
            attachments: self.user_attachments.clone(),
            metadata: None,
        }
    }

    /// The id of the assistant message the answer streams into: the one the answers
    /// continue (the client appends to it), else the run's.
    pub fn message_id(&self, answered: bool, run_id: &str) -> String {
        match (&self.continues, answered) {
            (Some(continued), true) => continued.clone(),
            _ => run_id.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ChatAnswer, ChatRequest};
    use serde_json::json;

    fn parse(body: serde_json::Value) -> Result<ChatRequest, String> {
        ChatRequest::parse(body.to_string().as_bytes()).map_err(|e| e.message)
    }

    #[test]
    fn a_chat_names_its_session_in_its_body() {
        let body = br#"{"id":"chat-1","messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"}]}]}"#;
        assert_eq!(ChatRequest::parse(body).unwrap().id, "chat-1");
        let refused = ChatRequest::parse(b"{}").unwrap_err();
        assert_eq!(refused.status, 400);
    }

    #[test]
    fn a_first_message_names_the_chat_the_agent_and_the_text() {
        let request = parse(json!({
            "id": "chat-1", "agent": "assistant", "trigger": "submit-message",
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]
        }))
        .expect("valid");
        assert_eq!(request.id, "chat-1");
        assert_eq!(request.agent.as_deref(), Some("assistant"));
        assert_eq!(request.user_text.as_deref(), Some("hi"));
        assert!(request.answers.is_empty());
        assert_eq!(request.provider_options, None);
        let with_options = parse(json!({
            "id": "chat-1", "providerOptions": {"reasoningEffort": "high"},
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]
        }))
        .expect("valid");
        let options = with_options.provider_options.expect("read");
        assert_eq!(options, json!({"reasoningEffort": "high"}));
    }

    #[test]
    fn answers_come_from_the_last_assistant_message_and_history_is_not_an_answer() {
        let request = parse(json!({
            "id": "chat-1", "messageId": "a1",
            "messages": [
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]},
                {"id": "a1", "role": "assistant", "parts": [
                    {"type": "step-start"},
                    {"type": "tool-delete_file", "toolCallId": "c1", "state": "approval-responded",
                     "input": {"path": "/x"}, "approval": {"id": "c1", "approved": false, "reason": "no"}},
                    {"type": "tool-ask_user", "toolCallId": "c2", "state": "output-available",
                     "input": {}, "output": "blue"},
                    {"type": "tool-ask_user", "toolCallId": "c3", "state": "output-error",
                     "input": {}, "errorText": "cancelled"},
                    {"type": "tool-delete_file", "toolCallId": "c0", "state": "output-available",
                     "input": {}, "output": {"deleted": "/y"}, "approval": {"id": "c0", "approved": true}}
                ]}
            ]
        }))
        .expect("valid");
        assert_eq!(request.user_text, None);
        assert_eq!(request.continues.as_deref(), Some("a1"));
        assert_eq!(
            request.answers,
            vec![
                ChatAnswer::Approval {
                    call_id: "c1".into(),
                    approved: false,
                    reason: Some("no".into())
                },
                ChatAnswer::Output {
                    call_id: "c2".into(),
                    output: json!("blue")
                },
                ChatAnswer::Error {
                    call_id: "c3".into(),
                    error: "cancelled".into()
                },
            ]
        );
        assert_eq!(
            request.answers[0].tool_result_body(),
            json!({"kind": "approval-response", "toolCallId": "c1", "approved": false, "reason": "no"})
        );
    }

    #[test]
    fn malformed_requests_are_refused_naming_the_field() {
        let user = json!([{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]);
        for (body, says) in [
            (json!({"messages": user}), "id is required"),
            (json!({"id": "a/b", "messages": user}), "id must match"),
            (json!({"id": "c", "messages": []}), "messages must be"),
            (
                json!({"id": "c", "agent": 3, "messages": user}),
                "agent must be",
            ),
            (
                json!({"id": "c", "trigger": "regenerate-message", "messages": user}),
                "not supported",
            ),
            (
                json!({"id": "c", "messages": [{"role": "user", "parts": []}]}),
                "no text",
            ),
            (
                json!({"id": "c", "messages": [3]}),
                "messages[0] must be an object",
            ),
            (
                json!({"id": "c", "messages": [{"role": "tool", "parts": []}]}),
                "messages[0].role",
            ),
            (
                json!({"id": "c", "messages": [{"role": "user", "parts": "hi"}]}),
                "messages[0].parts",
            ),
            (
                json!({"id": "c", "messages": [{"role": "user", "parts": [], "id": 1}]}),
                "messages[0].id",
            ),
            (
                json!({"id": "c", "messageId": 2, "messages": user}),
                "messageId must be",
            ),
        ] {
            let error = parse(body.clone()).expect_err("refused");
            assert!(error.contains(says), "{body}: {error}");
        }
    }

    #[test]
    fn a_turn_answers_pending_calls_refuses_forged_approvals_and_otherwise_runs_the_message() {
        use super::ChatTurn;
        use crate::store::{PendingCall, PendingKind};
        let pending = |id: &str, kind| PendingCall {
            tool_call_id: id.into(),
            tool_name: "t".into(),
            arguments: json!({}),
            kind,
            deadline: None,
            since: 0,
            output_path: None,
            approvers: None,
            request: None,
        };
        let request = |answers: Vec<ChatAnswer>, user_text: Option<&str>| ChatRequest {
            id: "c".into(),
            agent: None,
            user_text: user_text.map(str::to_string),
            user_attachments: Vec::new(),
            answers,
            continues: Some("m1".into()),
            provider_options: None,
        };
        let approve = |id: &str| ChatAnswer::Approval {
            call_id: id.into(),
            approved: true,
            reason: None,
        };
        let output = |id: &str| ChatAnswer::Output {
            call_id: id.into(),
            output: json!(1),
        };
        let waiting = [
            pending("a", PendingKind::Approval),
            pending("c", PendingKind::Client),
        ];
        let both = request(vec![approve("a"), output("c"), output("old")], None);
        match both.turn(&waiting).unwrap() {
            ChatTurn::Answers(answers) => {
                let ids: Vec<&str> = answers.iter().map(|a| a.call_id()).collect();
                assert_eq!(ids, ["a", "c"], "an old output is history");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(both.message_id(true, "run-1"), "m1");
        let forged = request(vec![approve("c")], None)
            .turn(&waiting)
            .unwrap_err();
        assert_eq!((forged.status, forged.code), (409, "approval_not_pending"));
        let message = request(vec![output("old")], Some("hi"));
        assert_eq!(message.turn(&waiting).unwrap(), ChatTurn::Message("hi"));
        assert_eq!(message.message_id(false, "run-2"), "run-2");
        let nothing = request(vec![], None).turn(&waiting).unwrap_err();
        assert_eq!((nothing.status, nothing.code), (409, "nothing_to_answer"));
    }
}
