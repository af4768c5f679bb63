//! [`ApiRemotes`]: the [`Remotes`] of a helix-edge deployment's public API, over an HTTP
//! exchange the platform makes ([`RemoteHttp`]: `fetch` with a timeout and a size
//! bound). The URL and token come from the vars the tool names. A look at a remote
//! session also brings its stream's new chunks into the parent's stream
//! (`GET …/stream?after=<relayed>&follow=false`: the buffered events, then the end of
//! the answer), each appended once.

use super::api::{RemoteAnswer, RemoteError, RemoteOrder, RemoteView, Remotes};
use crate::provider::sse::SseFramer;
use crate::sqlite::SqliteStreamLog;
use crate::store::SessionStatus;
use crate::tool::RemoteAgent;
use futures::future::LocalBoxFuture;
use serde_json::{Value, json};
use std::rc::Rc;

/// One HTTP exchange with a remote deployment, as the platform makes it.
pub trait RemoteHttp {
    /// The var or secret `name`, trimmed; `None` when unset or empty.
    fn var(&self, name: &str) -> Option<String>;
    /// Sends `method url` with `headers` and `body`; the reply's status and body. A
    /// remote that cannot be reached, is too slow or answers too much is an error.
    fn send<'a>(
        &'a self,
        method: &'a str,
        url: String,
        headers: Vec<(&'static str, String)>,
        body: Option<String>,
    ) -> LocalBoxFuture<'a, Result<(u16, String), RemoteError>>;
}

/// Remote deployments reached through their public API; relayed chunks go to `stream`.
pub struct ApiRemotes<H: RemoteHttp> {
    http: H,
    stream: Rc<SqliteStreamLog>,
}

/// A reply's status and body.
type Reply = (u16, String);

/// A 2xx reply's JSON body.
fn parse((status, body): &Reply) -> Result<Value, RemoteError> {
    RemoteError::from_status(*status, body)?;
    serde_json::from_str(body)
        .map_err(|_| RemoteError::Invalid("it answered a body that is not JSON".into()))
}

/// The chunks of a remote stream's body (`follow=false`) that are remote session `id`'s
/// or its descendants' (its `end`/`fail` stay its own: a remote cannot write the
/// parent's own chunks), by sequence.
pub fn relayed_chunks(id: &str, body: &str) -> Result<Vec<(u64, String)>, RemoteError> {
    let mut events = Vec::new();
    let framed = SseFramer::new().feed(body.as_bytes(), &mut events);
    framed.map_err(|_| RemoteError::Invalid("its stream is not an event stream".into()))?;
    let ours = |data: &str| {
        let chunk: Value = serde_json::from_str(data).unwrap_or_default();
        let session = chunk["sessionId"].as_str().unwrap_or_default();
        chunk["type"].is_string() && session.starts_with(id)
    };
    Ok(events
        .into_iter()
        .filter(|e| e.event.as_deref() == Some("chunk") && ours(&e.data))
        .filter_map(|e| Some((e.id?.parse().ok()?, e.data)))
        .collect())
}

impl<H: RemoteHttp> ApiRemotes<H> {
    /// Remotes reached with `http`, relaying into `stream`.
    pub fn new(http: H, stream: Rc<SqliteStreamLog>) -> Self {
        Self { http, stream }
    }

    /// Sends `method` `path` (under the remote's base URL) with an optional JSON body.
    async fn send(
        &self,
        remote: &RemoteAgent,
        method: &'static str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Reply, RemoteError> {
        let base = self.http.var(remote.url_name()).ok_or_else(|| {
            RemoteError::Unavailable(format!("the var {} is not set", remote.url_name()))
        })?;
        if !(base.starts_with("https://") || base.starts_with("http://")) {
            let var = remote.url_name();
            return Err(RemoteError::Unavailable(format!(
                "{var} is not a usable URL"
            )));
        }
        let url = format!("{}{path}", base.trim_end_matches('/'));
        let mut headers = Vec::new();
        if let Some(token) = self.http.var(remote.token_name()) {
            // A token that decides anything there never travels in the clear.
            if !crate::provider::secure_url(&base) {
                let (var, token_var) = (remote.url_name(), remote.token_name());
                return Err(RemoteError::Rejected(format!(
                    "{var} is plain http to a host that is not this machine: {token_var} would travel in the clear (use https)"
                )));
            }
            headers.push(("authorization", format!("Bearer {token}")));
        }
        if body.is_some() {
            headers.push(("content-type", "application/json".to_string()));
        }
        let body = body.map(Value::to_string);
        self.http.send(method, url, headers, body).await
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
        let (status, body) = self.send(remote, "GET", &path, None).await?;
        RemoteError::from_status(status, &body)?;
        let chunks = relayed_chunks(id, &body)?;
        self.stream.append_relayed(id, &chunks);
        Ok(())
    }
}

impl<H: RemoteHttp> Remotes for ApiRemotes<H> {
    fn start<'a>(
        &'a self,
        remote: &'a RemoteAgent,
        child_id: &'a str,
        message: &'a str,
    ) -> LocalBoxFuture<'a, Result<(), RemoteError>> {
        Box::pin(async move {
            let body = json!({ "agent": remote.agent(), "sessionId": child_id, "input": message });
            let (status, body) = self
                .send(remote, "POST", "/v1/sessions", Some(&body))
                .await?;
            match status {
                // Created before: a retried start finds the same session.
                409 => Ok(()),
                status => RemoteError::from_status(status, &body),
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
            let (status, body) = self.send(remote, "GET", &path, None).await?;
            RemoteError::from_status(status, &body)?;
            let mut view = RemoteView::parse(&body)?;
            // After the view: every chunk up to the state it shows is relayed.
            self.relay(remote, child_id).await?;
            if view.status == SessionStatus::Completed && view.output.is_none() {
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
            let (status, body) = self.send(remote, "POST", &path, Some(&json!({}))).await?;
            if order.done_already(status) {
                return Ok(());
            }
            RemoteError::from_status(status, &body)
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
            let (status, reply) = self.send(remote, "POST", &path, Some(body)).await?;
            let call = body["toolCallId"].as_str().unwrap_or_default();
            RemoteAnswer::from_status(status, &reply, call)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_remote_sessions_own_chunks_are_relayed() {
        let chunk = |session: &str| json!({"type": "text_delta", "sessionId": session}).to_string();
        let body = format!(
            "id: 3\nevent: chunk\ndata: {}\n\nid: 4\nevent: chunk\ndata: {}\n\nid: 5\nevent: end\ndata: {{}}\n\nid: 6\nevent: chunk\ndata: {}\n\n",
            chunk("r1"),
            chunk("parent"),
            chunk("r1.sub-x")
        );
        let chunks = relayed_chunks("r1", &body).unwrap();
        let seqs: Vec<u64> = chunks.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, [3, 6], "not another session's chunk, not its end");
        assert!(relayed_chunks("r1", "data: {\n\n").unwrap().is_empty());
    }
}
