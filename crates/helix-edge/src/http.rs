//! HTTP plumbing shared by the worker entry and the session objects: reading a body
//! under the size limit, JSON responses and error bodies, requests to a session's
//! Durable Object.

use crate::api::ApiError;
use crate::host::Level;
use crate::worker_host::log;
use serde_json::json;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::web_sys;
use worker::{Env, Headers, Method, Response, Result, js_sys};

/// Request bodies above this size answer 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Header carrying the session id to its object.
pub const SESSION_HEADER: &str = "x-helix-session-id";
/// The user who asks, set by the worker only (feature `users`, [`crate::auth::Caller`]).
pub const USER_HEADER: &str = "x-helix-user";
/// Set by the worker only, on a request it took with a session token (not the API
/// token): such a holder does not decide approvals that need a role.
pub const SESSION_TOKEN_HEADER: &str = "x-helix-session-token";
/// W3C Trace Context: the caller's span, which a run the request starts continues.
pub const TRACEPARENT: &str = "traceparent";

/// The platform's request as it comes, without `worker::Request`'s conversion: that
/// reads the request's `cf` object, which the runtime builds on first access, and
/// helix-edge has no use for it (~0.1 ms of CPU per request in `wrangler dev`).
pub type RawRequest = web_sys::Request;

/// The body, refused with 413 past [`MAX_BODY_BYTES`]: by its declared length first, and
/// else while it streams in (a chunked body is read no further than the limit).
pub async fn read_body(req: &RawRequest) -> std::result::Result<Vec<u8>, ApiError> {
    let too_large = || {
        ApiError::client(
            413,
            "payload_too_large",
            "Request bodies are limited to 1 MiB.",
        )
    };
    let declared = header(req, "content-length").and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(too_large());
    }
    let Some(stream) = req.body() else {
        return Ok(Vec::new());
    };
    let unreadable = |_| ApiError::client(400, "invalid_body", "The body could not be read.");
    let reader = stream.get_reader();
    let call = |name: &str| -> std::result::Result<js_sys::Promise, ApiError> {
        let method = js_sys::Reflect::get(&reader, &name.into()).map_err(unreadable)?;
        let method: js_sys::Function = method.dyn_into().map_err(|_| unreadable(JsValue::NULL))?;
        method
            .call0(&reader)
            .map_err(unreadable)?
            .dyn_into()
            .map_err(|_| unreadable(JsValue::NULL))
    };
    let mut body = Vec::with_capacity(declared.unwrap_or(0));
    loop {
        let chunk = JsFuture::from(call("read")?).await.map_err(unreadable)?;
        let done = js_sys::Reflect::get(&chunk, &"done".into()).map_err(unreadable)?;
        if done.is_truthy() {
            return Ok(body);
        }
        let value = js_sys::Reflect::get(&chunk, &"value".into()).map_err(unreadable)?;
        let bytes = js_sys::Uint8Array::new(&value);
        if body.len() + bytes.length() as usize > MAX_BODY_BYTES {
            // Read no further: the rest is left unread and the stream let go.
            let _ = call("cancel").map(JsFuture::from);
            return Err(too_large());
        }
        body.extend_from_slice(&bytes.to_vec());
    }
}

/// A header's value, if present.
pub fn header(req: &RawRequest, name: &str) -> Option<String> {
    req.headers().get(name).ok().flatten()
}

/// An internal failure: logged in detail, answered with a safe 500.
pub fn internal(what: &str, e: impl std::fmt::Display) -> ApiError {
    internal_error(what, &e)
}

/// [`internal`] for any error: one copy in the bundle, not one per error type.
fn internal_error(what: &str, e: &dyn std::fmt::Display) -> ApiError {
    log(
        Level::Error,
        "internal_error",
        json!({ "what": what, "error": e.to_string() }),
    );
    ApiError::new(500, "framework_error", "Internal error.", true)
}

/// A JSON response with the given status.
pub fn json(status: u16, body: &str) -> Result<Response> {
    let mut resp = Response::ok(body)?.with_status(status);
    resp.headers_mut().set("content-type", "application/json")?;
    Ok(resp)
}

/// `body` as a JSON response, or a 500 if it cannot be sent.
pub fn json_response(
    status: u16,
    body: &impl serde::Serialize,
) -> std::result::Result<Response, ApiError> {
    let text = serde_json::to_string(body).map_err(|e| internal("serialize", e))?;
    json(status, &text).map_err(|e| internal("response", e))
}

/// The JSON error response of an [`ApiError`] (with `Allow` on a 405).
pub fn error(err: &ApiError) -> Result<Response> {
    let mut resp = json(err.status, &err.body())?;
    if let Some(allow) = &err.allow {
        resp.headers_mut().set("allow", allow)?;
    }
    Ok(resp)
}

/// A request to session `id`'s Durable Object.
pub struct ObjectRequest<'a> {
    /// Method.
    pub method: Method,
    /// Path and query (the public API's, or an internal `/__internal/…` one).
    pub path: &'a str,
    /// The client's `Last-Event-ID`, for streams.
    pub last_event_id: Option<String>,
    /// JSON body.
    pub body: Option<Vec<u8>>,
    /// The user who asks (a [`crate::auth::Caller`] as JSON), for a user's request.
    pub user: Option<String>,
    /// Whether a session token's holder asks.
    pub session_token: bool,
    /// The caller's `traceparent`, which a run it starts continues.
    pub traceparent: Option<String>,
    /// The caller asked for the run's stream as the answer (`Accept: text/event-stream`).
    pub stream: bool,
}

impl<'a> ObjectRequest<'a> {
    /// A POST of `body` to `path`.
    pub fn post(path: &'a str, body: Vec<u8>) -> Self {
        Self {
            method: Method::Post,
            path,
            last_event_id: None,
            body: Some(body),
            user: None,
            session_token: false,
            traceparent: None,
            stream: false,
        }
    }
}

/// Sends `request` to the object of session `id` in namespace `binding`; an object
/// that cannot be reached is a retryable 503.
pub async fn call_object(
    env: &Env,
    binding: &str,
    id: &str,
    request: ObjectRequest<'_>,
) -> std::result::Result<Response, ApiError> {
    let namespace = env
        .durable_object(binding)
        .map_err(|e| internal("durable object", e))?;
    let stub = namespace
        .id_from_name(id)
        .and_then(|oid| oid.get_stub())
        .map_err(|e| internal("durable object", e))?;
    let headers = Headers::new();
    let set = |k: &str, v: &str| headers.set(k, v).map_err(|e| internal("headers", e));
    set(SESSION_HEADER, id)?;
    set("content-type", "application/json")?;
    if let Some(v) = &request.last_event_id {
        set("last-event-id", v)?;
    }
    if let Some(v) = &request.user {
        set(USER_HEADER, v)?;
    }
    if request.session_token {
        set(SESSION_TOKEN_HEADER, "1")?;
    }
    if let Some(v) = &request.traceparent {
        set(TRACEPARENT, v)?;
    }
    if request.stream {
        set("accept", "text/event-stream")?;
    }
    let body = request
        .body
        .map(|b| js_sys::Uint8Array::from(b.as_slice()).into());
    let url = format!("https://session{}", request.path);
    // Manual: an object's redirect (an authorization's start) goes to the client, not
    // back into the object.
    let sent = crate::outgoing::unredirected(&url, request.method.as_ref(), &headers, body)
        .map_err(|e| internal("request", e))?;
    stub.fetch_with_request(sent).await.map_err(|e| {
        log(
            Level::Warn,
            "object_unreachable",
            json!({ "session": id, "error": e.to_string() }),
        );
        ApiError::new(
            503,
            "session_unavailable",
            "The session is unavailable; try again.",
            true,
        )
    })
}
