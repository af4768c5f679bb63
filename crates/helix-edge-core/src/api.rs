//! The runtime-independent parts of the HTTP API (SPEC §2): request bodies and their
//! validation, response bodies, the JSON error body, and the mapping of every error to
//! a status. The platform layer only moves bytes. It must not touch `worker::`.

use crate::auth::AuthError;
use crate::error::{Coded, ErrorInfo};
use crate::runner::{RunError, Submission};
use crate::store::{
    CheckpointRecord, Loaded, PendingCall, PendingKind, RunRecord, SessionStatus, StoreError,
};
use crate::wire::{absent, present, required};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An error as every route answers it: `{"error": {"code", "message", "retryable"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    /// HTTP status to answer with; not part of the body.
    #[serde(skip)]
    pub status: u16,
    /// Stable snake_case code that clients match on.
    pub code: &'static str,
    /// A human sentence, safe to show: never secrets or internal detail.
    pub message: String,
    /// Whether the same request may succeed if sent again later.
    pub retryable: bool,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a ApiError,
}

impl ApiError {
    /// An error that a client must fix before retrying.
    pub fn client(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            retryable: false,
        }
    }

    /// No route matches the path.
    pub fn route_not_found(path: &str) -> Self {
        Self::client(404, "not_found", format!("No route for {path}."))
    }

    /// The route exists but not for this method.
    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        Self::client(
            405,
            "method_not_allowed",
            format!("{method} is not allowed on {path}."),
        )
    }

    /// The JSON body of this error.
    pub fn body(&self) -> String {
        // Serialising a struct of strings and a bool cannot fail; the fallback keeps the
        // request path free of panics all the same.
        serde_json::to_string(&ErrorBody { error: self }).unwrap_or_else(|_| {
            r#"{"error":{"code":"framework_error","message":"error","retryable":true}}"#.into()
        })
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::NotConfigured => Self {
                status: 503,
                code: "auth_not_configured",
                message: "Authentication is not configured: set API_TOKEN (or ALLOW_UNAUTHENTICATED for local demos)."
                    .into(),
                retryable: false,
            },
            AuthError::Unauthorized => {
                Self::client(401, "unauthorized", "Missing, invalid or expired credentials.")
            }
            AuthError::Forbidden => Self::client(403, "forbidden", "These credentials do not grant access here."),
        }
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        let status = match &e {
            RunError::Store(StoreError::Exists(_)) => 409,
            RunError::Store(StoreError::NotFound(_)) => 404,
            RunError::Store(StoreError::Stale { .. }) => 409,
            RunError::Store(StoreError::Backend(_)) => 503,
            RunError::Store(StoreError::Corrupt(_)) => 500,
            RunError::Store(StoreError::TooLarge { .. }) => 413,
            RunError::AgentNotFound(_)
            | RunError::ToolCallNotFound(_)
            | RunError::CheckpointNotFound(_) => 404,
            RunError::Busy(_)
            | RunError::Aborted
            | RunError::NotResumable(_)
            | RunError::AlreadyResolved(_)
            | RunError::CheckpointNotRestorable(_) => 409,
            RunError::KindMismatch { .. } | RunError::Invalid(_) => 400,
            RunError::Provider(_) => 502,
        };
        // Internal detail stays in the logs; clients get the safe sentence.
        let message = match &e {
            RunError::Store(StoreError::Backend(_)) => {
                "Storage is unavailable; try again.".to_string()
            }
            RunError::Store(StoreError::Corrupt(_)) => "Stored data could not be read.".to_string(),
            other => other.to_string(),
        };
        Self {
            status,
            code: e.code(),
            message,
            retryable: e.retryable(),
        }
    }
}

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

fn validation(message: impl Into<String>) -> ApiError {
    ApiError::client(400, "validation_error", message)
}

/// `input` of `POST /v1/sessions`: a message, or a message with initial state.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Just the message.
    Text(String),
    /// The message and top-level state overrides.
    Full(FullInput),
}

/// A string is [`Input::Text`], an object [`Input::Full`]: the JSON type decides, so
/// nothing is buffered to try one form after the other. Anything else, an array
/// included, is refused, as the OpenAPI document says.
impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = Input;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a message string or an object with `message` (and optional `state`)")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Input, E> {
                Ok(Input::Text(text.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Input, E> {
                Ok(Input::Text(text))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Input, A::Error> {
                let map = serde::de::value::MapAccessDeserializer::new(map);
                FullInput::deserialize(map).map(Input::Full)
            }
        }
        d.deserialize_any(Either)
    }
}

/// The object form of [`Input`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FullInput {
    /// The user's message.
    pub message: String,
    /// Keys that override the agent's initial state.
    #[serde(default)]
    pub state: Option<Map<String, Value>>,
}

/// Body of `POST /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreateSessionBody {
    /// The agent to run.
    pub agent: String,
    /// The id to use (generated when absent).
    #[serde(default)]
    pub session_id: Option<String>,
    /// The first message.
    pub input: Input,
}

impl CreateSessionBody {
    /// The message and state overrides, validated.
    pub fn into_parts(self) -> Result<(String, Option<Map<String, Value>>), ApiError> {
        let (message, state) = match self.input {
            Input::Text(message) => (message, None),
            Input::Full(FullInput { message, state }) => (message, state),
        };
        if message.trim().is_empty() {
            return Err(validation("input.message must not be empty."));
        }
        Ok((message, state))
    }
}

/// The OpenAPI 3.1 document of the v1 API (`api/openapi.json`), served at
/// `GET /v1/openapi.json`. `tests/openapi.rs` keeps it in line with [`ROUTES`] and the
/// body types here; the end-to-end fuzzer checks the running worker against it.
pub const OPENAPI: &str = include_str!("../api/openapi.json");

/// Every route of the API as `(method, path template)`.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/v1/agents"),
    ("POST", "/v1/sessions"),
    ("GET", "/v1/sessions/{id}"),
    ("GET", "/v1/sessions/{id}/messages"),
    ("POST", "/v1/sessions/{id}/messages"),
    ("GET", "/v1/sessions/{id}/stream"),
    ("POST", "/v1/sessions/{id}/tool-results"),
    ("POST", "/v1/sessions/{id}/interrupt"),
    ("POST", "/v1/sessions/{id}/resume"),
    ("POST", "/v1/sessions/{id}/abort"),
    ("GET", "/v1/sessions/{id}/runs"),
    ("GET", "/v1/sessions/{id}/checkpoints"),
    ("POST", "/v1/sessions/{id}/retry"),
];

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
    reason: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    error: Option<Option<String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum ToolResultKind {
    ApprovalResponse,
    ClientToolResult,
}

impl TryFrom<ToolResultWire> for ToolResultBody {
    type Error = String;

    fn try_from(w: ToolResultWire) -> Result<Self, String> {
        let tool_call_id = w.tool_call_id;
        Ok(match w.kind {
            ToolResultKind::ApprovalResponse => {
                let kind = "approval-response";
                absent(&w.result, "result", kind)?;
                absent(&w.error, "error", kind)?;
                Self::ApprovalResponse {
                    tool_call_id,
                    approved: required(w.approved, "approved")?,
                    reason: w.reason.flatten(),
                }
            }
            ToolResultKind::ClientToolResult => {
                let kind = "client-tool-result";
                absent(&w.approved, "approved", kind)?;
                absent(&w.reason, "reason", kind)?;
                Self::ClientToolResult {
                    tool_call_id,
                    // `"result": null` is no result, as `"error": null` is no error.
                    result: w.result.filter(|v| !v.is_null()),
                    error: w.error.flatten(),
                }
            }
        })
    }
}

impl ToolResultBody {
    /// The runner's form of the answer.
    pub fn into_submission(self) -> Result<Submission, ApiError> {
        match self {
            Self::ApprovalResponse {
                tool_call_id,
                approved,
                reason,
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
                        return Err(validation("Send either result or error, not both."));
                    }
                    (result, None) => Ok(result.unwrap_or(Value::Null)),
                    (None, Some(error)) => Err(error),
                };
                Ok(Submission::ClientResult {
                    tool_call_id,
                    outcome,
                })
            }
        }
    }
}

/// Body of `POST /v1/sessions/{id}/messages`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageBody {
    /// The follow-up message.
    pub message: String,
}

/// Body of `interrupt` and `abort` (optional).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    /// Why.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Body of `retry` (optional).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetryBody {
    /// The checkpoint to restore (the latest restorable one by default).
    #[serde(default)]
    pub checkpoint_id: Option<String>,
}

/// A pending call as `GET /v1/sessions/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingView {
    tool_call_id: String,
    tool_name: String,
    arguments: Value,
    kind: PendingKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    deadline: Option<u64>,
}

impl From<&PendingCall> for PendingView {
    fn from(p: &PendingCall) -> Self {
        Self {
            tool_call_id: p.tool_call_id.clone(),
            tool_name: p.tool_name.clone(),
            arguments: p.arguments.clone(),
            kind: p.kind,
            deadline: p.deadline,
        }
    }
}

/// Body of `GET /v1/sessions/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    session_id: String,
    agent: String,
    status: SessionStatus,
    step_count: u32,
    version: u64,
    state: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorInfo>,
    pending_tool_calls: Vec<PendingView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suspended_reason: Option<String>,
}

impl From<Loaded> for SessionView {
    fn from(l: Loaded) -> Self {
        let h = l.head;
        let suspended_reason = h.suspended_reason.map(|r| match r {
            crate::chunk::SuspendReason::ClientTool => "suspended_client_tool".to_string(),
            crate::chunk::SuspendReason::AwaitingChildren => {
                "suspended_awaiting_children".to_string()
            }
        });
        Self {
            pending_tool_calls: h
                .pending
                .iter()
                .filter(|p| p.kind != PendingKind::Child)
                .map(PendingView::from)
                .collect(),
            session_id: h.id,
            agent: h.agent,
            status: h.status,
            step_count: h.step_count,
            version: h.version,
            state: l.state,
            output: h.output,
            error: h.error,
            suspended_reason,
        }
    }
}

impl SessionView {
    /// Adds the calls pending in descendant sessions (sub-agents): the client answers
    /// them at this, the root, session.
    pub fn with_descendant_calls(mut self, calls: Vec<(String, PendingCall)>) -> Self {
        self.pending_tool_calls
            .extend(calls.iter().map(|(_, p)| PendingView::from(p)));
        self
    }
}

/// One run as `GET /v1/sessions/{id}/runs` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    run_id: String,
    turn: u32,
    status: crate::chunk::RunStatus,
    step_count: u32,
    started_at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorInfo>,
}

impl From<RunRecord> for RunView {
    fn from(r: RunRecord) -> Self {
        Self {
            run_id: r.run_id,
            turn: r.turn,
            status: r.status,
            step_count: r.step_count,
            started_at: r.started_at,
            completed_at: r.completed_at,
            error: r.error,
        }
    }
}

/// One checkpoint as `GET /v1/sessions/{id}/checkpoints` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointView {
    id: String,
    step_count: u32,
    timestamp: u64,
    status: String,
}

impl From<CheckpointRecord> for CheckpointView {
    fn from(c: CheckpointRecord) -> Self {
        Self {
            id: c.id,
            step_count: c.step_count,
            timestamp: c.timestamp,
            status: c.status,
        }
    }
}

/// The path and query of an absolute URL (`/a/b?c=d`), without the fragment.
pub fn path_and_query(url: &str) -> &str {
    let rest = url.find("://").map_or(url, |i| &url[i + 3..]);
    let rest = rest.find('/').map_or("/", |i| &rest[i..]);
    rest.split('#').next().unwrap_or("/")
}

/// The decoded `key=value` pairs of a URL's query (`+` is a space, `%XX` a byte).
pub fn query_pairs(url: &str) -> Vec<(String, String)> {
    let query = path_and_query(url).split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `offset`/`limit` of `GET …/messages`: limit defaults to 50, at most 500.
pub fn page(query: &[(String, String)]) -> Result<(u64, u64), ApiError> {
    let get = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let number = |name: &str, default: u64| match get(name) {
        None | Some("") => Ok(default),
        Some(v) => v
            .parse::<u64>()
            .map_err(|_| validation(format!("{name} must be a non-negative integer."))),
    };
    let (offset, limit) = (number("offset", 0)?, number("limit", 50)?);
    if !(1..=500).contains(&limit) {
        return Err(validation("limit must be between 1 and 500."));
    }
    Ok((offset, limit))
}

/// Body of `GET /healthz`.
pub const HEALTHZ_BODY: &str = r#"{"ok":true}"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_body_has_the_spec_shape_and_no_status() {
        let body = ApiError::route_not_found("/nope").body();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"error": {
                "code": "not_found",
                "message": "No route for /nope.",
                "retryable": false
            }})
        );
    }

    #[test]
    fn bodies_are_parsed_strictly_with_clear_errors() {
        let ok: CreateSessionBody = parse_body(br#"{"agent":"a","input":"hi"}"#).unwrap();
        assert_eq!(ok.into_parts().unwrap(), ("hi".to_string(), None));
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
        assert_eq!(empty.into_parts().unwrap_err().code, "validation_error");
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
    fn run_errors_map_to_the_documented_statuses_and_never_500_for_client_input() {
        let cases = [
            (
                RunError::Store(StoreError::Exists("s".into())),
                409,
                "session_exists",
            ),
            (
                RunError::Store(StoreError::NotFound("s".into())),
                404,
                "session_not_found",
            ),
            (RunError::AgentNotFound("x".into()), 404, "agent_not_found"),
            (
                RunError::ToolCallNotFound("c".into()),
                404,
                "tool_call_not_found",
            ),
            (
                RunError::AlreadyResolved("c".into()),
                409,
                "tool_call_already_resolved",
            ),
            (
                RunError::KindMismatch {
                    call: "c".into(),
                    expected: "x",
                },
                400,
                "kind_mismatch",
            ),
            (RunError::Busy("x"), 409, "session_busy"),
        ];
        for (err, status, code) in cases {
            let api = ApiError::from(err);
            assert_eq!((api.status, api.code), (status, code));
        }
        let backend = ApiError::from(RunError::Store(StoreError::Backend(
            "D1_ERROR: secret detail".into(),
        )));
        assert_eq!((backend.status, backend.retryable), (503, true));
        assert!(
            !backend.message.contains("secret"),
            "internal detail stays in the logs"
        );
    }

    #[test]
    fn queries_are_split_and_decoded() {
        let url = "https://h:8/v1/sessions/s/stream?token=a%3Ab%2Bc&after=5&x=a+b&flag&%zz=1#frag";
        assert_eq!(
            path_and_query(url),
            "/v1/sessions/s/stream?token=a%3Ab%2Bc&after=5&x=a+b&flag&%zz=1"
        );
        let pairs = query_pairs(url);
        assert_eq!(pairs[0], ("token".to_string(), "a:b+c".to_string()));
        assert_eq!(pairs[1], ("after".to_string(), "5".to_string()));
        assert_eq!(pairs[2], ("x".to_string(), "a b".to_string()));
        assert_eq!(pairs[3], ("flag".to_string(), String::new()));
        assert_eq!(pairs[4], ("%zz".to_string(), "1".to_string()));
        assert_eq!(path_and_query("https://host"), "/");
        assert!(query_pairs("https://h/p").is_empty());
        assert_eq!(query_pairs("https://h/p?a=%E2%9C%93&b=%")[0].1, "✓");
    }

    #[test]
    fn message_pages_default_to_50_and_cap_at_500() {
        let q = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(page(&q(&[])).unwrap(), (0, 50));
        assert_eq!(
            page(&q(&[("offset", "10"), ("limit", "500")])).unwrap(),
            (10, 500)
        );
        for bad in [
            ("limit", "501"),
            ("limit", "0"),
            ("offset", "-1"),
            ("limit", "x"),
        ] {
            assert_eq!(page(&q(&[bad])).unwrap_err().status, 400, "{bad:?}");
        }
    }

    #[test]
    fn healthz_body_is_ok_true() {
        let v: serde_json::Value = serde_json::from_str(HEALTHZ_BODY).unwrap();
        assert_eq!(v, serde_json::json!({"ok": true}));
    }
}
