//! Remote sub-agents on the Workers runtime (feature `remote-subagents`): the core's
//! [`Remotes`] over `fetch` to another helix-edge deployment's public API, with the URL
//! and token from this deployment's vars and secrets. A look at a remote session also
//! brings its stream's new chunks into the parent's stream
//! (`GET …/stream?after=<relayed>&follow=false`: the buffered events, then the end of
//! the response), each appended once.

use crate::runner::waits::{RemoteAnswer, RemoteError, RemoteOrder, RemoteView, Remotes};
use crate::runner::{Runner, WaitKind};
use crate::storage::ObjectStore;
use crate::storage::SqlStreamLog;
use crate::tool::RemoteAgent;
use futures::future::{Either, LocalBoxFuture, select};
use futures::pin_mut;
use serde_json::{Value, json};
use std::rc::Rc;
use std::time::Duration;
use worker::wasm_bindgen::JsValue;
use worker::{AbortController, Delay, Env, Fetch, Headers};

/// How long one request to a remote may take, body included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read from a remote (its stream's backlog included).
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// Remote deployments reached with `fetch`; relayed chunks go to `stream`.
pub struct HttpRemotes {
    env: Env,
    stream: Rc<SqlStreamLog>,
}

/// A remote's reply: its status and body text.
struct HttpReply {
    status: u16,
    body: String,
}

/// Lets `runner` run remote sub-agent calls, relaying into `stream`.
pub(crate) fn register(
    runner: Runner<ObjectStore>,
    wiring: &crate::object::Wiring<'_>,
) -> Runner<ObjectStore> {
    let remotes = HttpRemotes {
        env: wiring.env.clone(),
        stream: wiring.stream.clone(),
    };
    runner.with_waits([WaitKind::remote(Rc::new(remotes))])
}

impl HttpRemotes {
    fn var(&self, name: &str) -> Option<String> {
        let value = self
            .env
            .secret(name)
            .map(|s| s.to_string())
            .or_else(|_| self.env.var(name).map(|v| v.to_string()))
            .ok()?;
        Some(value.trim().to_string()).filter(|v| !v.is_empty())
    }

    /// Sends `method` `path` (under the remote's base URL) with an optional JSON body.
    async fn send(
        &self,
        remote: &RemoteAgent,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<HttpReply, RemoteError> {
        let base = self.var(remote.url_name()).ok_or_else(|| {
            RemoteError::Unavailable(format!("the var {} is not set", remote.url_name()))
        })?;
        let url = format!("{}{path}", base.trim_end_matches('/'));
        let network = |e: worker::Error| RemoteError::Unavailable(e.to_string());
        let headers = Headers::new();
        if let Some(token) = self.var(remote.token_name()) {
            headers
                .set("authorization", &format!("Bearer {token}"))
                .map_err(network)?;
        }
        if body.is_some() {
            headers
                .set("content-type", "application/json")
                .map_err(network)?;
        }
        let body = body.map(|b| JsValue::from_str(&b.to_string()));
        let request = crate::http::request(&url, method, &headers, body).map_err(|e| {
            RemoteError::Unavailable(format!("{} is not a usable URL: {e}", remote.url_name()))
        })?;
        let controller = AbortController::default();
        let signal = controller.signal();
        let exchange = async {
            let mut response = Fetch::Request(request)
                .send_with_signal(&signal)
                .await
                .map_err(network)?;
            let status = response.status_code();
            let declared = response.headers().get("content-length").ok().flatten();
            if declared.and_then(|n| n.parse::<usize>().ok()).unwrap_or(0) > MAX_ANSWER_BYTES {
                return Err(too_large());
            }
            let body = response.text().await.map_err(network)?;
            if body.len() > MAX_ANSWER_BYTES {
                return Err(too_large());
            }
            Ok(HttpReply { status, body })
        };
        let timer = Delay::from(REQUEST_TIMEOUT);
        pin_mut!(exchange);
        match select(exchange, timer).await {
            Either::Left((answer, _)) => answer,
            Either::Right(_) => {
                controller.abort();
                Err(RemoteError::Unavailable(format!(
                    "no answer within {} s",
                    REQUEST_TIMEOUT.as_secs()
                )))
            }
        }
    }

    /// The text of the remote session's last message (its final answer).
    async fn last_text(
        &self,
        remote: &RemoteAgent,
        id: &str,
    ) -> Result<Option<String>, RemoteError> {
        let page = |offset: u64| format!("/v1/sessions/{id}/messages?offset={offset}&limit=1");
        let first = self.send(remote, "GET", &page(0), None).await?;
        let total = parse(&first)?["total"].as_u64().unwrap_or(0);
        let last = self
            .send(remote, "GET", &page(total.saturating_sub(1)), None)
            .await?;
        let last = parse(&last)?;
        Ok(last["messages"][0]["content"].as_str().map(str::to_string))
    }

    /// Appends the remote stream's chunks past those relayed before.
    async fn relay(&self, remote: &RemoteAgent, id: &str) -> Result<(), RemoteError> {
        let after = self.stream.relayed_from(id);
        let path = format!("/v1/sessions/{id}/stream?after={after}&follow=false");
        let answer = self.send(remote, "GET", &path, None).await?;
        RemoteError::from_status(answer.status, &answer.body)?;
        let mut events = Vec::new();
        let mut framer = crate::provider::sse::SseFramer::new();
        let framed = framer.feed(answer.body.as_bytes(), &mut events);
        framed.map_err(|_| RemoteError::Invalid("its stream is not an event stream".into()))?;
        // Chunks only (its `end`/`fail` stay its own), each one of its session's (or of a
        // session below it): a remote cannot write the parent's own chunks.
        let ours = |data: &str| {
            let chunk: Value = serde_json::from_str(data).unwrap_or_default();
            let session = chunk["sessionId"].as_str().unwrap_or_default();
            chunk["type"].is_string() && session.starts_with(id)
        };
        let chunks: Vec<(u64, String)> = events
            .into_iter()
            .filter(|e| e.event.as_deref() == Some("chunk") && ours(&e.data))
            .filter_map(|e| Some((e.id?.parse().ok()?, e.data)))
            .collect();
        self.stream.append_relayed(id, &chunks);
        Ok(())
    }
}

fn too_large() -> RemoteError {
    RemoteError::Invalid(format!("it answered more than {MAX_ANSWER_BYTES} bytes"))
}

/// A 2xx answer's JSON body.
fn parse(answer: &HttpReply) -> Result<Value, RemoteError> {
    RemoteError::from_status(answer.status, &answer.body)?;
    serde_json::from_str(&answer.body)
        .map_err(|_| RemoteError::Invalid("it answered a body that is not JSON".into()))
}

impl Remotes for HttpRemotes {
    fn start<'a>(
        &'a self,
        remote: &'a RemoteAgent,
        child_id: &'a str,
        message: &'a str,
    ) -> LocalBoxFuture<'a, Result<(), RemoteError>> {
        Box::pin(async move {
            let body = json!({ "agent": remote.agent(), "sessionId": child_id, "input": message });
            let answer = self
                .send(remote, "POST", "/v1/sessions", Some(&body))
                .await?;
            match answer.status {
                // Created before: a retried start finds the same session.
                409 => Ok(()),
                status => RemoteError::from_status(status, &answer.body),
            }
        })
    }

    fn view<'a>(
        &'a self,
        remote: &'a RemoteAgent,
        child_id: &'a str,
    ) -> LocalBoxFuture<'a, Result<RemoteView, RemoteError>> {
        Box::pin(async move {
            let path = format!("/v1/sessions/{child_id}");
            let answer = self.send(remote, "GET", &path, None).await?;
            RemoteError::from_status(answer.status, &answer.body)?;
            let mut view = RemoteView::parse(&answer.body)?;
            // After the view: every chunk up to the state it shows is relayed.
            self.relay(remote, child_id).await?;
            if view.status == crate::store::SessionStatus::Completed && view.output.is_none() {
                let text = self.last_text(remote, child_id).await?;
                view.output = Some(json!({ "text": text }));
            }
            Ok(view)
        })
    }

    fn order<'a>(
        &'a self,
        remote: &'a RemoteAgent,
        child_id: &'a str,
        order: RemoteOrder,
    ) -> LocalBoxFuture<'a, Result<(), RemoteError>> {
        Box::pin(async move {
            let path = format!("/v1/sessions/{child_id}/{}", order.path());
            let answer = self.send(remote, "POST", &path, Some(&json!({}))).await?;
            if order.done_already(answer.status) {
                return Ok(());
            }
            RemoteError::from_status(answer.status, &answer.body)
        })
    }

    fn answer<'a>(
        &'a self,
        remote: &'a RemoteAgent,
        child_id: &'a str,
        body: &'a Value,
    ) -> LocalBoxFuture<'a, Result<RemoteAnswer, RemoteError>> {
        Box::pin(async move {
            let path = format!("/v1/sessions/{child_id}/tool-results");
            let answer = self.send(remote, "POST", &path, Some(body)).await?;
            let call = body["toolCallId"].as_str().unwrap_or_default();
            RemoteAnswer::from_status(answer.status, &answer.body, call)
        })
    }
}
