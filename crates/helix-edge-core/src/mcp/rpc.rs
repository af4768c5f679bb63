//! One JSON-RPC exchange with an MCP server over the Streamable HTTP transport: a POST
//! with the message, answered with a JSON body or an event stream that carries the
//! server's notifications (progress, a changed tool list) before the answer. Reads are
//! bounded in bytes and in time, and a raised abort signal ends them; a request cut
//! short is cancelled at the server (`notifications/cancelled`).

use super::McpServer;
use crate::abort::AbortSignal;
use crate::error::{Category, Coded};
use crate::provider::sse::SseFramer;
use crate::provider::{HttpRequest, HttpResponse, TransportError};
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
            Self::Unauthorized { .. } => "mcp_unauthorized",
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

/// The session a request belongs to: its id and negotiated revision, once initialised.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Session {
    pub id: Option<String>,
    pub protocol: Option<String>,
}

/// An answer: its `result`, the session id the server gave with it, and whether the
/// server said its tool list changed on the way.
#[derive(Debug, Default)]
pub(super) struct Answer {
    pub result: Value,
    pub session_id: Option<String>,
    pub tools_changed: bool,
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
        if let Some(id) = &session.id {
            headers.push(("mcp-session-id".into(), id.clone()));
        }
        if let Some(protocol) = &session.protocol {
            headers.push(("mcp-protocol-version".into(), protocol.clone()));
        }
        headers.extend(self.headers.iter().cloned());
        HttpRequest {
            url: self.url.clone(),
            headers,
            body: message.to_string(),
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
        let deadline = self.transport.now_ms() + millis(self.timeout);
        let request = self.post(session, message);
        let response = self.transport.send(&request, self.timeout).await;
        let response = response.map_err(|e| self.unavailable(transport_reason(&e)))?;
        let session_id = response.header("mcp-session-id").map(str::to_string);
        match response.status {
            200..=299 => {}
            404 if session.id.is_some() => {
                return Err(McpError::SessionGone {
                    server: self.name.clone(),
                });
            }
            status @ (401 | 403) => {
                return Err(McpError::Unauthorized {
                    server: self.name.clone(),
                    status,
                });
            }
            status @ (408 | 429 | 500..) => {
                return Err(self.unavailable(format!("HTTP {status}")));
            }
            status => return Err(self.protocol(format!("HTTP {status}"))),
        }
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
        };
        let read = if streamed {
            reader.events(id, sending.progress).await
        } else {
            reader.json().await.map(|body| (body, false))
        };
        let (message, tools_changed) = match read {
            Ok(read) => read,
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

    /// An event stream, up to the answer to request `id`: progress goes to `progress`,
    /// and a changed tool list is noted.
    async fn events(&mut self, id: u64, progress: &dyn Fn(Value)) -> Result<(Value, bool), Stop> {
        let mut framer = SseFramer::new();
        let mut events = Vec::new();
        let mut tools_changed = false;
        while let Some(chunk) = self.chunk().await? {
            let framed = framer.feed(&chunk, &mut events);
            framed.map_err(|e| Stop::Failed(self.server.protocol(e.to_string())))?;
            for event in events.drain(..) {
                if event.data.is_empty() {
                    continue; // a priming event, or a comment's
                }
                let message: Value = serde_json::from_str(&event.data).map_err(|e| {
                    Stop::Failed(self.server.protocol(format!("an event is not JSON: {e}")))
                })?;
                match message.get("method").and_then(Value::as_str) {
                    None if message.get("id").and_then(Value::as_u64) == Some(id) => {
                        return Ok((message, tools_changed));
                    }
                    Some("notifications/progress") => {
                        progress(message.get("params").cloned().unwrap_or(Value::Null));
                    }
                    Some("notifications/tools/list_changed") => tools_changed = true,
                    // Other notifications, and requests for capabilities this client
                    // did not declare, are not for it.
                    _ => {}
                }
            }
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
