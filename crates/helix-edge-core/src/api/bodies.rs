//! Request bodies and their validation: strict parsing (unknown fields, wrong types and
//! missing fields are a 400 that names the field), then the checks serde cannot express.

use super::ApiError;
use super::input::{Input, InputObject, RichInput, UserInput, check_history};
use crate::attachment::Attachment;
use crate::auth::valid_session_id;
use crate::memory::check::{MAX_CALLS, PlannedCall};
use crate::message::Message;
use crate::runner::{CreateSession, Submission};
use crate::store::PendingKind;
use crate::wire::wire_enum;
use crate::wire::{absent, present, required};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Parses a JSON request body, rejecting invalid UTF-8, invalid JSON, wrong types,
/// missing and unknown fields with a 400 that says what is wrong.
pub fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let text = std::str::from_utf8(body).map_err(|_| {
        ApiError::client(400, "invalid_body", "The request body is not valid UTF-8.")
    })?;
    if !text.trim_start().starts_with('{') {
        // Syntax is checked first, so that `[1` is invalid JSON but `[1]` is the wrong type.
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
            return Err(ApiError::client(
                400,
                "invalid_json",
                format!("The request body is not valid JSON: {e}."),
            ));
        }
        return Err(ApiError::client(
            400,
            "validation_error",
            "The request body must be a JSON object.",
        ));
    }
    serde_json::from_str(text).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => {
            ApiError::client(400, "validation_error", format!("{e}."))
        }
        _ => ApiError::client(
            400,
            "invalid_json",
            format!("The request body is not valid JSON: {e}."),
        ),
    })
}

/// Body of `POST /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateSessionBody {
    /// The agent to run.
    pub agent: String,
    /// The id to use (generated when absent).
    #[serde(default, deserialize_with = "present")]
    pub session_id: Option<String>,
    /// What the first run answers.
    pub input: Input,
    /// The conversation the session starts from (before `input`).
    #[serde(default)]
    pub messages: Vec<Message>,
}

impl CreateSessionBody {
    /// The runner's request, validated: the session id given (it must be of the form
    /// `^[A-Za-z0-9._-]{1,128}$`) or `generated()` when there is none.
    pub fn into_request(
        self,
        generated: impl FnOnce() -> String,
    ) -> Result<CreateSession, ApiError> {
        let session_id = match self.session_id {
            Some(id) if valid_session_id(&id) => id,
            Some(_) => return Err(invalid_session_id()),
            None => generated(),
        };
        check_history(&self.messages)?;
        let (input, state) = self.input.into_parts()?;
        Ok(CreateSession {
            session_id,
            agent: self.agent,
            history: self.messages,
            input,
            state,
            parent: None,
            fork: None,
            idle: false,
            options: None,
            owner: None,
            // The caller's `traceparent`, which the worker reads from the request.
            trace: None,
        })
    }
}

/// Body of `POST /v1/sessions/{id}/tool-results`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "ToolResultWire")]
pub enum ToolResultBody {
    /// Approves or denies an approval-gated call.
    ApprovalResponse {
        /// The call.
        tool_call_id: String,
        /// The decision.
        approved: bool,
        /// Why.
        reason: Option<String>,
        /// Who decided, as a deployment that passes on its user's decision says (the
        /// API token only).
        decided_by: Option<crate::store::Owner>,
    },
    /// Delivers a client tool's result or error.
    ClientToolResult {
        /// The call.
        tool_call_id: String,
        /// The result (any JSON).
        result: Option<Value>,
        /// An error message instead of a result.
        error: Option<String>,
    },
    /// Answers what a call asked mid-call: an `elicitation-response` (`action`,
    /// `content`) or an `authorization-response` (`action`, `code`, `state`).
    InputResponse {
        /// The call.
        tool_call_id: String,
        /// What it answers.
        kind: PendingKind,
        /// The answer's fields (checked against the call when it is stored).
        answer: Value,
    },
}

/// Either form of [`ToolResultBody`] as one flat record (see [`crate::wire`]); a field
/// of the other form is refused like any unknown field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ToolResultWire {
    kind: ToolResultKind,
    tool_call_id: String,
    // Presence is tracked so that a field of the other kind is refused even as `null`.
    #[serde(default, deserialize_with = "present")]
    approved: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    reason: Option<String>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    error: Option<String>,
    // An answer to what a call asked, checked against the call when it is stored
    // (`crate::tool::check_answer`).
    action: Option<String>,
    #[serde(default, deserialize_with = "present")]
    content: Option<Value>,
    code: Option<String>,
    state: Option<String>,
    #[serde(default, deserialize_with = "present")]
    decided_by: Option<crate::store::Owner>,
}

wire_enum! {
    #[derive(Clone, Copy)]
    enum ToolResultKind {
        ApprovalResponse = "approval-response",
        ClientToolResult = "client-tool-result",
        ElicitationResponse = "elicitation-response",
        AuthorizationResponse = "authorization-response",
    }
}

impl TryFrom<ToolResultWire> for ToolResultBody {
    type Error = String;

    fn try_from(w: ToolResultWire) -> Result<Self, String> {
        let tool_call_id = w.tool_call_id;
        let text = |t: Option<String>| t.map(Value::String);
        let asked = [
            ("action", text(w.action)),
            ("content", w.content),
            ("code", text(w.code)),
            ("state", text(w.state)),
        ];
        let kind = match w.kind {
            ToolResultKind::ElicitationResponse => PendingKind::Elicitation,
            ToolResultKind::AuthorizationResponse => PendingKind::Authorization,
            _ => {
                for (name, value) in &asked {
                    absent(value, name, w.kind.as_str())?;
                }
                PendingKind::Approval
            }
        };
        Ok(match w.kind {
            ToolResultKind::ElicitationResponse | ToolResultKind::AuthorizationResponse => {
                let tag = w.kind.as_str();
                absent(&w.approved, "approved", tag)?;
                absent(&w.decided_by, "decidedBy", tag)?;
                absent(&w.result, "result", tag)?;
                absent(&w.reason, "reason", tag)?;
                absent(&w.error, "error", tag)?;
                let mut answer = serde_json::Map::new();
                for (name, value) in asked {
                    if let Some(value) = value {
                        answer.insert(name.into(), value);
                    }
                }
                Self::InputResponse {
                    tool_call_id,
                    kind,
                    answer: answer.into(),
                }
            }
            ToolResultKind::ApprovalResponse => {
                let kind = "approval-response";
                absent(&w.result, "result", kind)?;
                absent(&w.error, "error", kind)?;
                Self::ApprovalResponse {
                    tool_call_id,
                    approved: required(w.approved, "approved")?,
                    reason: w.reason,
                    decided_by: w.decided_by,
                }
            }
            ToolResultKind::ClientToolResult => {
                let kind = "client-tool-result";
                absent(&w.approved, "approved", kind)?;
                absent(&w.decided_by, "decidedBy", kind)?;
                absent(&w.reason, "reason", kind)?;
                Self::ClientToolResult {
                    tool_call_id,
                    // `"result": null` is a null result; `error` is a string.
                    result: w.result,
                    error: w.error,
                }
            }
        })
    }
}

impl ToolResultBody {
    /// Who decided, when the answer names them (`decidedBy`, an approval passed on by
    /// another deployment).
    pub fn decided_by(&self) -> Option<crate::store::Owner> {
        match self {
            Self::ApprovalResponse { decided_by, .. } => decided_by.clone(),
            _ => None,
        }
    }

    /// The runner's form of the answer.
    pub fn into_submission(self) -> Result<Submission, ApiError> {
        match self {
            Self::ApprovalResponse {
                tool_call_id,
                approved,
                reason,
                ..
            } => Ok(Submission::Approval {
                tool_call_id,
                approved,
                reason,
            }),
            Self::ClientToolResult {
                tool_call_id,
                result,
                error,
            } => {
                let outcome = match (result, error) {
                    (Some(_), Some(_)) => {
                        return Err(ApiError::validation(
                            "Send either result or error, not both.",
                        ));
                    }
                    (result, None) => Ok(result.unwrap_or(Value::Null)),
                    (None, Some(error)) => Err(error),
                };
                Ok(Submission::ClientResult {
                    tool_call_id,
                    outcome,
                })
            }
            Self::InputResponse {
                tool_call_id,
                kind,
                answer,
            } => Ok(Submission::Input {
                tool_call_id,
                kind,
                answer,
            }),
        }
    }
}

/// Body of `POST /v1/sessions/{id}/messages`: one `message` (with its `metadata` and
/// `attachments`) or a list of `messages`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct MessageBody(InputObject);

impl MessageBody {
    /// The user messages, checked.
    pub fn into_messages(self) -> Result<Vec<Message>, ApiError> {
        if self.0.state.is_some() {
            return Err(ApiError::validation(
                "state is set when a session is created, not with a message.",
            ));
        }
        self.0.into_messages("body")
    }
}

/// Body of `interrupt` and `abort` (optional).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    /// Why.
    #[serde(default, deserialize_with = "present")]
    pub reason: Option<String>,
}

/// Body of `POST …/plans/validate`: the calls of a plan, as the model would make them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidatePlanBody {
    calls: Vec<PlannedCall>,
}

impl ValidatePlanBody {
    /// The calls: 1 to [`MAX_CALLS`] (an id given twice is one of the plan's problems).
    pub fn into_calls(self) -> Result<Vec<PlannedCall>, ApiError> {
        let n = self.calls.len();
        if n == 0 || n > MAX_CALLS {
            let message = format!("calls: a plan has 1 to {MAX_CALLS} calls, got {n}.");
            return Err(ApiError::validation(message));
        }
        Ok(self.calls)
    }
}

/// Body of `retry` and of `fork` (both optional): the checkpoint to go back to, and what
/// the user says there — one `message` (with its `metadata` and `attachments`) or a list
/// of `messages`, in place of the checkpoint's run input (or after the checkpoint).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BranchBody {
    #[serde(default, deserialize_with = "present")]
    checkpoint_id: Option<String>,
    /// A fork's new session id.
    #[serde(default, deserialize_with = "present")]
    session_id: Option<String>,
    #[serde(default, deserialize_with = "present")]
    message: Option<String>,
    #[serde(default, deserialize_with = "present")]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    attachments: Vec<Attachment>,
    #[serde(default, deserialize_with = "present")]
    messages: Option<Vec<UserInput>>,
}

impl BranchBody {
    /// The user messages it gives (none when it gives none), checked.
    fn input(&mut self) -> Result<Vec<Message>, ApiError> {
        let rich = RichInput {
            message: self.message.take(),
            metadata: self.metadata.take(),
            attachments: std::mem::take(&mut self.attachments),
            messages: self.messages.take(),
        };
        match rich.is_empty() {
            true => Ok(Vec::new()),
            false => rich.into_messages("body"),
        }
    }
}

/// Body of `retry` (optional): [`BranchBody`] without a session id.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct RetryBody(BranchBody);

impl RetryBody {
    /// The checkpoint and the user messages (none, or checked).
    pub fn into_parts(mut self) -> Result<(Option<String>, Vec<Message>), ApiError> {
        if self.0.session_id.is_some() {
            return Err(ApiError::validation(
                "sessionId names a fork's new session; a retry stays in its own.",
            ));
        }
        let input = self.0.input()?;
        Ok((self.0.checkpoint_id, input))
    }
}

/// Body of `fork` (optional): [`BranchBody`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct ForkBody(BranchBody);

impl ForkBody {
    /// The checkpoint, the new session's id (given and valid, or `generated()`) and the
    /// user messages (none, or checked).
    pub fn into_parts(
        mut self,
        generated: impl FnOnce() -> String,
    ) -> Result<(Option<String>, String, Vec<Message>), ApiError> {
        let id = match self.0.session_id.take() {
            Some(id) if valid_session_id(&id) => id,
            Some(_) => return Err(invalid_session_id()),
            None => generated(),
        };
        let input = self.0.input()?;
        Ok((self.0.checkpoint_id, id, input))
    }
}

/// The 400 for a session id that breaks the id rule.
fn invalid_session_id() -> ApiError {
    ApiError::client(
        400,
        "invalid_session_id",
        "sessionId must match ^[A-Za-z0-9._-]{1,128}$.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_parsed_strictly_with_clear_errors() {
        let ok: CreateSessionBody = parse_body(br#"{"agent":"a","input":"hi"}"#).unwrap();
        let request = ok.into_request(|| "gen".into()).unwrap();
        assert_eq!(request.input, vec![Message::user("hi")]);
        assert_eq!((request.session_id.as_str(), request.state), ("gen", None));
        let full: CreateSessionBody =
            parse_body(br#"{"agent":"a","sessionId":"s","input":{"message":"m","state":{"k":1}}}"#)
                .unwrap();
        assert_eq!(full.session_id.as_deref(), Some("s"));
        let cases: [(&[u8], &str); 7] = [
            (b"\xff\xfe", "invalid_body"),
            (b"{not json", "invalid_json"),
            (b"[1]", "validation_error"),
            (br#"{"agent":"a"}"#, "validation_error"),
            (br#"{"agent":1,"input":"x"}"#, "validation_error"),
            (
                br#"{"agent":"a","input":"x","extra":1}"#,
                "validation_error",
            ),
            (
                br#"{"agent":"a","input":{"message":"x","state":[1]}}"#,
                "validation_error",
            ),
        ];
        for (body, code) in cases {
            let err = parse_body::<CreateSessionBody>(body).unwrap_err();
            assert_eq!(
                (err.status, err.code),
                (400, code),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let empty: CreateSessionBody = parse_body(br#"{"agent":"a","input":"  "}"#).unwrap();
        let err = empty.into_request(|| "gen".into()).unwrap_err();
        assert_eq!(err.code, "validation_error");
        let unanswered: CreateSessionBody = parse_body(
            br#"{"agent":"a","input":"x","messages":[{"role":"assistant","content":"","toolCalls":[{"id":"c","name":"t","arguments":{}}]}]}"#,
        )
        .unwrap();
        let err = unanswered.into_request(|| "gen".into()).unwrap_err();
        assert!(err.message.contains("never answered"), "{}", err.message);
    }

    #[test]
    fn tool_results_take_one_of_two_kinds() {
        let a: ToolResultBody =
            parse_body(br#"{"kind":"approval-response","toolCallId":"c","approved":true}"#)
                .unwrap();
        assert!(matches!(
            a.into_submission(),
            Ok(Submission::Approval { approved: true, .. })
        ));
        let r: ToolResultBody =
            parse_body(br#"{"kind":"client-tool-result","toolCallId":"c","error":"no"}"#).unwrap();
        assert!(matches!(
            r.into_submission(),
            Ok(Submission::ClientResult {
                outcome: Err(_),
                ..
            })
        ));
        let both: ToolResultBody = parse_body(
            br#"{"kind":"client-tool-result","toolCallId":"c","result":1,"error":"no"}"#,
        )
        .unwrap();
        assert_eq!(both.into_submission().unwrap_err().status, 400);
        for bad in [
            &br#"{"kind":"approval","toolCallId":"c","approved":true}"#[..],
            br#"{"kind":"approval-response","toolCallId":"c"}"#,
        ] {
            assert_eq!(parse_body::<ToolResultBody>(bad).unwrap_err().status, 400);
        }
    }

    #[test]
    #[cfg(feature = "remote-subagents")]
    fn submissions_round_trip_to_the_api_body() {
        use crate::runner::waits::submission_body;
        use serde_json::json;
        let approval = Submission::Approval {
            tool_call_id: "c".into(),
            approved: false,
            reason: Some("no".into()),
        };
        let body = submission_body(&approval);
        assert_eq!(
            body,
            json!({"kind": "approval-response", "toolCallId": "c", "approved": false, "reason": "no"})
        );
        let parsed: ToolResultBody = serde_json::from_value(body).unwrap();
        assert_eq!(parsed.into_submission().unwrap(), approval);
        let plain = Submission::Approval {
            tool_call_id: "c".into(),
            approved: true,
            reason: None,
        };
        let parsed: ToolResultBody = serde_json::from_value(submission_body(&plain)).unwrap();
        assert_eq!(parsed.into_submission().unwrap(), plain);
        let failed = Submission::ClientResult {
            tool_call_id: "c".into(),
            outcome: Err("no camera".into()),
        };
        let parsed: ToolResultBody = serde_json::from_value(submission_body(&failed)).unwrap();
        assert_eq!(parsed.into_submission().unwrap(), failed);
    }
}
