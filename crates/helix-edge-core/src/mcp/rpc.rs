//! One JSON-RPC exchange with an MCP server over the Streamable HTTP transport: a POST
//! with the message, answered with a JSON body or an event stream that carries the
//! server's notifications (progress, a changed tool list) before the answer. Reads are
//! bounded in bytes and in time, and a raised abort signal ends them; a request cut
//! short is cancelled at the server (`notifications/cancelled`).

use super::McpServer;
use crate::abort::AbortSignal;
use crate::error::{Category, Coded};
use crate::provider::sse::SseFramer;
use crate::provider::{HttpRequest, HttpResponse, Method, TransportError};
use futures::future::{Either, select};
use serde_json::{Value, json};
use std::time::Duration;

/// The protocol revisions this client speaks, newest first (it asks for the first).
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// The most bytes one answer may hold (a tool's result is bounded again as any is).
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// How often a read in progress looks at its abort signal and deadline.
const POLL: Duration = Duration::from_millis(250);

/// Why an MCP server could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The server could not be reached, failed (5xx, 429) or did not answer in time.
    #[error("MCP server '{server}' is unavailable: {reason}")]
    Unavailable {
        /// The server's name.
        server: String,
        /// What happened.
        reason: String,
    },
    /// The server refused the credentials (401, 403).
    #[error("MCP server '{server}' refused the request as unauthorized (HTTP {status})")]
    Unauthorized {
        /// The server's name.
        server: String,
        /// The status it answered.
        status: u16,
        /// Its `WWW-Authenticate` challenge, if any (where its authorization is described).
        challenge: Option<String>,
    },
    /// The server answered something the protocol does not allow.
    #[error("MCP server '{server}' broke the protocol: {reason}")]
    Protocol {
        /// The server's name.
        server: String,
        /// What was wrong.
        reason: String,
    },
    /// The server answered the request with a JSON-RPC error.
    #[error("MCP server '{server}' answered an error: {message} ({code})")]
    Rpc {
        /// The server's name.
        server: String,
        /// The JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// The server's authorization could not be got or used (its metadata, the client's
    /// registration, the token exchange), or the user did not connect.
    #[error("MCP server '{server}' could not be authorized: {reason}")]
    Authorization {
        /// The server's name.
        server: String,
        /// What happened.
        reason: String,
    },
    /// The server no longer knows the session (HTTP 404 for its id): initialise again.
    #[error("MCP server '{server}' no longer knows the session")]
    SessionGone {
        /// The server's name.
        server: String,
    },
    /// The call was aborted, or ran past its timeout, and was cancelled at the server.
    #[error("MCP call to server '{server}' was cancelled: {reason}")]
    Cancelled {
        /// The server's name.
        server: String,
        /// Why.
        reason: String,
    },
}

impl Coded for McpError {
    fn code(&self) -> &'static str {
        match self {
            Self::Unavailable { .. } | Self::SessionGone { .. } => "mcp_unavailable",
            Self::Unauthorized { .. } | Self::Authorization { .. } => "mcp_unauthorized",
            Self::Protocol { .. } | Self::Rpc { .. } => "mcp_protocol",
            Self::Cancelled { .. } => "mcp_cancelled",
        }
    }
    fn category(&self) -> Category {
        Category::Tool
    }
    fn retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::SessionGone { .. })
    }
}

/// The session a request belongs to: its id and negotiated revision, once initialised,
/// and the access token it is sent with (a server's OAuth, in place of its own headers').
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Session {
    pub id: Option<String>,
    pub protocol: Option<String>,
    #[serde(skip)]
    pub bearer: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

/// An answer: its `result`, the session id the server gave with it, and whether the
/// server said its tool list changed on the way; or, instead of the result, what the
/// server asked the user on the way (an elicitation: `result` is then null).
#[derive(Debug, Default)]
pub(super) struct Answer {
    pub result: Value,
    pub session_id: Option<String>,
    pub tools_changed: bool,
    pub asked: Option<Asked>,
}

/// A request the server made of the user during a call (`elicitation/create`), on an
/// event stream the call goes on with after the answer: its id and params, the call's
/// request id, and the stream's last event id (where the stream is resumed).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Asked {
    pub id: Value,
    pub params: Value,
    pub call: u64,
    pub event_id: String,
}

/// What a request is, beyond its message: its id (none for a notification), how to
/// stop it, and where its progress notifications go.
pub(super) struct Sending<'a> {
    pub id: Option<u64>,
    pub abort: Option<&'a AbortSignal>,
    pub progress: &'a dyn Fn(Value),
}

impl McpServer {
    fn error(&self, kind: fn(String, String) -> McpError, reason: impl Into<String>) -> McpError {
        kind(self.name.clone(), reason.into())
    }

    fn unavailable(&self, reason: impl Into<String>) -> McpError {
        self.error(
            |server, reason| McpError::Unavailable { server, reason },
            reason,
        )
    }

    pub(super) fn protocol(&self, reason: impl Into<String>) -> McpError {
        self.error(
            |server, reason| McpError::Protocol { server, reason },
            reason,
        )
    }

    /// The POST carrying `message` in `session`.
    fn post(&self, session: &Session, message: &Value) -> HttpRequest {
        let mut headers = vec![
            ("content-type".to_string(), "application/json".to_string()),
            (
                "accept".to_string(),
                "application/json, text/event-stream".to_string(),
            ),
        ];
        self.session_headers(session, &mut headers);
        HttpRequest {
            method: Method::Post,
            url: self.url.clone(),
            headers,
            body: message.to_string(),
        }
    }

    /// The GET that resumes `session`'s event stream after event `event_id`.
    fn resumption(&self, session: &Session, event_id: &str) -> HttpRequest {
        let mut headers = vec![
            ("accept".to_string(), "text/event-stream".to_string()),
            ("last-event-id".to_string(), event_id.to_string()),
        ];
        self.session_headers(session, &mut headers);
        HttpRequest {
            method: Method::Get,
            url: self.url.clone(),
            headers,
            body: String::new(),
        }
    }

    /// The session's headers and the server's own (its credentials).
    fn session_headers(&self, session: &Session, headers: &mut Vec<(String, String)>) {
        if let Some(id) = &session.id {
            headers.push(("mcp-session-id".into(), id.clone()));
        }
        if let Some(protocol) = &session.protocol {
            headers.push(("mcp-protocol-version".into(), protocol.clone()));
        }
        headers.extend(self.headers.iter().cloned());
        if let Some(token) = &session.bearer {
            headers.retain(|(name, _)| name != "authorization");
            headers.push(("authorization".into(), format!("Bearer {token}")));
        }
    }

    /// Sends `message` in `session` and reads its answer (for a request) or its
    /// acceptance (for a notification), within the server's timeout.
    pub(super) async fn send(
        &self,
        session: &Session,
        message: &Value,
        sending: Sending<'_>,
    ) -> Result<Answer, McpError> {
        self.exchange(session, self.post(session, message), sending)
            .await
    }

    /// Resumes `session`'s event stream after event `event_id`, reading on to the
    /// answer to request `sending.id` (a call that waited on the user's answer).
    pub(super) async fn resume(
        &self,
        session: &Session,
        event_id: &str,
        sending: Sending<'_>,
    ) -> Result<Answer, McpError> {
        self.exchange(session, self.resumption(session, event_id), sending)
            .await
    }

    /// Sends `request` and reads its answer (for a request) or its acceptance (for a
    /// notification), within the server's timeout.
    async fn exchange(
        &self,
        session: &Session,
        request: HttpRequest,
        sending: Sending<'_>,
    ) -> Result<Answer, McpError> {
        let deadline = self.transport.now_ms() + millis(self.timeout);
        let response = self.transport.send(&request, self.timeout).await;
        let response = response.map_err(|e| self.unavailable(transport_reason(&e)))?;
        let session_id = response.header("mcp-session-id").map(str::to_string);
        self.accepted(session, &response)?;
        let Some(id) = sending.id else {
            return Ok(Answer {
                session_id,
                ..Answer::default()
            });
        };
        let streamed = response
            .header("content-type")
            .is_some_and(|t| t.trim_start().starts_with("text/event-stream"));
        let mut reader = Reader {
            server: self,
            response,
            deadline,
            abort: sending.abort,
            read: 0,
            framer: SseFramer::new(),
            queued: Default::default(),
            tools_changed: false,
        };
        let read = loop {
            let read = match streamed {
                true => reader.events(id, sending.progress).await,
                false => reader.json().await.map(Read::Answer),
            };
            match read {
                // A stream that cannot be resumed cannot wait on the user: the server
                // hears the request was cancelled, and the call reads on.
                Ok(Read::Unresumable(asked)) => {
                    let cancel = json!({ "action": "cancel" });
                    self.respond(session, &asked, cancel).await?;
                }
                read => break read,
            }
        };
        let tools_changed = reader.tools_changed;
        let message = match read {
            Ok(Read::Answer(message)) => message,
            Ok(Read::Asked(asked)) => {
                return Ok(Answer {
                    result: Value::Null,
                    session_id,
                    tools_changed,
                    asked: Some(Asked { call: id, ..asked }),
                });
            }
            Ok(Read::Unresumable(_)) => return Err(self.protocol("an unanswered request")),
            Err(Stop::Failed(e)) => return Err(e),
            Err(Stop::Cancelled(reason)) => {
                self.cancel(session, id, &reason).await;
                return Err(self.error(
                    |server, reason| McpError::Cancelled { server, reason },
                    reason,
                ));
            }
        };
        Ok(Answer {
            result: self.result_of(message, id)?,
            session_id,
            tools_changed,
            asked: None,
        })
    }

    /// Answers the server's request `asked` with `result` in `session`.
    pub(super) async fn respond(
        &self,
        session: &Session,
        asked: &Value,
        result: Value,
    ) -> Result<(), McpError> {
        let message = json!({ "jsonrpc": "2.0", "id": asked, "result": result });
        let request = self.post(session, &message);
        let response = self.transport.send(&request, self.timeout).await;
        let response = response.map_err(|e| self.unavailable(transport_reason(&e)))?;
        self.accepted(session, &response)
    }

    /// Whether `response` in `session` is a success; else what its status says.
    fn accepted(&self, session: &Session, response: &HttpResponse) -> Result<(), McpError> {
        let server = || self.name.clone();
        Err(match response.status {
            200..=299 => return Ok(()),
            404 if session.id.is_some() => McpError::SessionGone { server: server() },
            status @ (401 | 403) => McpError::Unauthorized {
                server: server(),
                status,
                challenge: response.header("www-authenticate").map(str::to_string),
            },
            status @ (408 | 429 | 500..) => self.unavailable(format!("HTTP {status}")),
            status => self.protocol(format!("HTTP {status}")),
        })
    }

    /// Tells the server request `id` is cancelled (best effort: it may have ended).
    async fn cancel(&self, session: &Session, id: u64, reason: &str) {
        let message = json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": { "requestId": id, "reason": reason },
        });
        let request = self.post(session, &message);
        let _ = self.transport.send(&request, POLL * 20).await;
    }

    /// The `result` of answer `message` to request `id`, or its error.
    fn result_of(&self, mut message: Value, id: u64) -> Result<Value, McpError> {
        if message.get("id").and_then(Value::as_u64) != Some(id) {
            return Err(self.protocol("the answer is not for the request sent"));
        }
        if let Some(error) = message.get("error") {
            return Err(McpError::Rpc {
                server: self.name.clone(),
                code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message")
                    .to_string(),
            });
        }
        match message.get_mut("result").map(Value::take) {
            Some(result @ Value::Object(_)) => Ok(result),
            _ => Err(self.protocol("the answer has no result object")),
        }
    }
}

/// What a read of an answer found.
enum Read {
    /// The answer.
    Answer(Value),
    /// A request of the user's, on a stream that resumes after it.
    Asked(Asked),
    /// A request of the user's (its id) that cannot wait: on a stream that cannot be
    /// resumed, or not a form this client shows.
    Unresumable(Value),
}

/// Why a read stopped short.
enum Stop {
    Failed(McpError),
    /// Aborted or past the deadline: the request is cancelled at the server.
    Cancelled(String),
}

/// Reads one response's body, bounded in bytes and time.
struct Reader<'a> {
    server: &'a McpServer,
    response: HttpResponse,
    deadline: u64,
    abort: Option<&'a AbortSignal>,
    read: usize,
    framer: SseFramer,
    /// Events framed and not read yet.
    queued: std::collections::VecDeque<crate::provider::sse::SseEvent>,
    /// Whether the server said its tool list changed.
    tools_changed: bool,
}

impl Reader<'_> {
    /// The next chunk of the body (`None` at its end).
    async fn chunk(&mut self) -> Result<Option<Vec<u8>>, Stop> {
        let transport = &self.server.transport;
        let mut next = self.response.body.next();
        let chunk = loop {
            if self.abort.is_some_and(AbortSignal::is_aborted) {
                return Err(Stop::Cancelled("the call was aborted".into()));
            }
            if transport.now_ms() >= self.deadline {
                let ms = millis(self.server.timeout);
                return Err(Stop::Cancelled(format!("no answer within {ms} ms")));
            }
            match select(next, transport.sleep(POLL)).await {
                Either::Left((chunk, _)) => break chunk,
                Either::Right(((), waiting)) => next = waiting,
            }
        };
        let chunk = match chunk {
            None => return Ok(None),
            Some(Ok(chunk)) => chunk,
            Some(Err(TransportError::Timeout)) => {
                let ms = millis(self.server.timeout);
                return Err(Stop::Cancelled(format!("no answer within {ms} ms")));
            }
            Some(Err(e)) => {
                return Err(Stop::Failed(self.server.unavailable(transport_reason(&e))));
            }
        };
        self.read += chunk.len();
        if self.read > MAX_ANSWER_BYTES {
            let reason = format!("the answer is larger than {MAX_ANSWER_BYTES} bytes");
            return Err(Stop::Failed(self.server.protocol(reason)));
        }
        Ok(Some(chunk))
    }

    /// A JSON body, whole.
    async fn json(&mut self) -> Result<Value, Stop> {
        let mut body = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body)
            .map_err(|e| Stop::Failed(self.server.protocol(format!("the answer is not JSON: {e}"))))
    }

    /// An event stream, up to the answer to request `id` or a request of the user's
    /// (an elicitation): progress goes to `progress`, and a changed tool list is noted.
    /// A read of the same stream goes on where the last one stopped.
    async fn events(&mut self, id: u64, progress: &dyn Fn(Value)) -> Result<Read, Stop> {
        loop {
            while let Some(event) = self.queued.pop_front() {
                if event.data.is_empty() {
                    continue; // a priming event, or a comment's
                }
                let mut message: Value = serde_json::from_str(&event.data).map_err(|e| {
                    Stop::Failed(self.server.protocol(format!("an event is not JSON: {e}")))
                })?;
                match message.get("method").and_then(Value::as_str) {
                    None if message.get("id").and_then(Value::as_u64) == Some(id) => {
                        return Ok(Read::Answer(message));
                    }
                    Some("notifications/progress") => {
                        progress(message.get("params").cloned().unwrap_or(Value::Null));
                    }
                    Some("notifications/tools/list_changed") => self.tools_changed = true,
                    Some("elicitation/create") if message.get("id").is_some() => {
                        let asked = message["id"].take();
                        let params = message["params"].take();
                        // A form this client can show: a message and an object schema.
                        let form = params["message"].is_string()
                            && params["requestedSchema"].is_object()
                            && params["mode"].as_str().is_none_or(|m| m == "form");
                        // Events after it come again when the stream is resumed.
                        return Ok(match event.id {
                            Some(event_id) if form => Read::Asked(Asked {
                                id: asked,
                                params,
                                call: id,
                                event_id,
                            }),
                            _ => Read::Unresumable(asked),
                        });
                    }
                    // Other notifications, and requests for capabilities this client
                    // did not declare, are not for it.
                    _ => {}
                }
            }
            let Some(chunk) = self.chunk().await? else {
                break;
            };
            let mut events = Vec::new();
            let framed = self.framer.feed(&chunk, &mut events);
            framed.map_err(|e| Stop::Failed(self.server.protocol(e.to_string())))?;
            self.queued.extend(events);
        }
        let reason = "the event stream ended without an answer";
        Err(Stop::Failed(self.server.unavailable(reason)))
    }
}

fn transport_reason(e: &TransportError) -> String {
    match e {
        TransportError::Timeout => "no answer in time".into(),
        TransportError::Network(reason) => reason.clone(),
        TransportError::Aborted => "the call was aborted".into(),
    }
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
