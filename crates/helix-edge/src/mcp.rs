//! Tools of remote MCP servers on the platform (feature `mcp`): the core's
//! [`McpServer`], reached through the Workers `fetch` with [`server`]. On every target,
//! so that a worker crate's agents build natively for its tests; natively there is no
//! `fetch`, and a server made with [`server`] answers every request with an error
//! (give [`McpServer::new`] a transport of your own to test against a server).
//!
//! A server's authorization starts at the session's `GET …/authorize` (the pending
//! call's `authorizeUrl`), which binds the flow to the browser that opened it, and the
//! worker's `GET /v1/mcp/callback` ([`callback`]) is where the user comes back: the
//! state names the session, whose object answers the calls that waited on it
//! ([`Callback`]) when the browser is the one that started it; the browser gets a page
//! saying so.
//!
//! ```ignore
//! let github = helix_edge::mcp::server("github", "https://api.githubcopilot.com/mcp/")
//!     .bearer(env.secret("GITHUB_TOKEN")?.to_string())
//!     .allow(["search_issues", "create_issue"]);
//! let agent = Agent::builder("triage").mcp_server(github).build()?;
//! ```

pub use helix_edge_core::mcp::*;

#[cfg(target_arch = "wasm32")]
pub(crate) use page::callback;

/// MCP server `name` at `url`, reached through `fetch`: headers, tool filters and
/// approvals are set on what it returns.
pub fn server(name: impl Into<String>, url: impl Into<String>) -> McpServer {
    McpServer::new(name, url, std::rc::Rc::new(Fetch))
}

#[cfg(target_arch = "wasm32")]
use crate::llm::FetchTransport as Fetch;
#[cfg(not(target_arch = "wasm32"))]
use native::NoFetch as Fetch;

/// The callback page (the worker's, so wasm only).
#[cfg(target_arch = "wasm32")]
mod page {
    use super::{Binding, CALLBACK_PATH, Callback};
    use crate::api::ApiError;
    use crate::app::App;
    use crate::http::{ObjectRequest, RawRequest, call_object, internal};
    use worker::{Env, Headers, Response};

    type Reply = std::result::Result<Response, ApiError>;

    /// `GET /v1/mcp/callback`, if `path` is it.
    pub(crate) async fn callback(
        req: &RawRequest,
        path: &str,
        env: &Env,
        app: &App,
    ) -> Option<Reply> {
        if path != "/v1/mcp/callback" || req.method() != "GET" {
            return None;
        }
        let answered = answer(req, env, app).await;
        let back = "You can close this window and go back.";
        let (status, title, text) = match &answered {
            Ok(true) => (200, "Connected", back.to_string()),
            Ok(false) => (
                200,
                "Not connected",
                format!("The request was withdrawn. {back}"),
            ),
            Err(e) => (e.status, "Not connected", e.message.clone()),
        };
        Some(page(status, title, &text))
    }

    /// Passes the callback to the session its state names; whether the user connected.
    async fn answer(req: &RawRequest, env: &Env, app: &App) -> Result<bool, ApiError> {
        let mut callback = Callback::parse(&crate::api::query_pairs(&req.url()))?;
        // The flow's cookie, if this browser started it.
        let cookies = crate::http::header(req, "cookie").unwrap_or_default();
        callback.binding = Binding::from_cookies(&cookies, &callback.state);
        let session = callback.session_id().unwrap_or_default().to_string();
        let body = serde_json::to_vec(&callback).map_err(|e| internal("callback", e))?;
        let request = ObjectRequest::post(CALLBACK_PATH, body);
        let mut resp = call_object(env, app.sessions(), &session, request).await?;
        if resp.status_code() == 200 {
            return Ok(callback.code.is_some());
        }
        let body = resp.text().await.unwrap_or_default();
        let error: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let message = error["error"]["message"]
            .as_str()
            .unwrap_or("The authorization failed.");
        // A state naming no session (404 too) is one no call waits on.
        let code = "authorization_not_pending";
        Err(ApiError::new(
            resp.status_code(),
            code,
            message.to_string(),
            false,
        ))
    }

    /// A small page for the browser (no script, nothing loaded).
    fn page(status: u16, title: &str, text: &str) -> Reply {
        let escape = |t: &str| {
            t.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        };
        let html = format!(
            "<!doctype html><meta charset=utf-8><meta name=viewport content=\"width=device-width\">\
             <title>{title}</title><body style=\"font:16px system-ui;margin:3rem auto;max-width:32rem\">\
             <h1>{title}</h1><p>{}</p>",
            escape(text)
        );
        let headers = Headers::new();
        let set = |k: &str, v: &str| headers.set(k, v).map_err(|e| internal("headers", e));
        set("content-type", "text/html; charset=utf-8")?;
        set(
            "content-security-policy",
            "default-src 'none'; style-src 'unsafe-inline'",
        )?;
        set("cache-control", "no-store")?;
        set("referrer-policy", "no-referrer")?;
        Ok(Response::ok(html)
            .map_err(|e| internal("callback page", e))?
            .with_status(status)
            .with_headers(headers))
    }
}

/// Natively: no `fetch`.
#[cfg(not(target_arch = "wasm32"))]
mod native {
    use crate::provider::{HttpRequest, HttpResponse, Transport, TransportError};
    use futures::future::LocalBoxFuture;
    use std::time::Duration;

    /// A transport that has no network: every request fails, saying why.
    pub struct NoFetch;

    impl Transport for NoFetch {
        fn send<'a>(
            &'a self,
            _request: &'a HttpRequest,
            _timeout: Duration,
        ) -> LocalBoxFuture<'a, Result<HttpResponse, TransportError>> {
            let why = "MCP servers are reached through the Workers runtime's fetch; natively, \
                       give McpServer::new a transport of your own";
            Box::pin(async move { Err(TransportError::Network(why.into())) })
        }

        fn sleep(&self, _wait: Duration) -> LocalBoxFuture<'_, ()> {
            Box::pin(async {})
        }

        fn now_ms(&self) -> u64 {
            0
        }

        fn random(&self) -> f64 {
            0.5
        }

        fn warn(&self, _message: &str) {}
    }
}
