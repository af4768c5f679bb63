//! The benchmark's crossings floor (test build): the platform crossings of a
//! human-in-the-loop cycle with none of helix-edge's work in them. Like the real cycle,
//! every request is one hop to the session's object, and the stream is one SSE response
//! that stays open between requests; the create and the approval each write the object's
//! SQLite, fetch the model (its streamed answer read chunk by chunk to the end) and make
//! one D1 write, then send their event down the stream. What the real cycle costs above
//! this is helix-edge's own work: decoding the answer, the transcript, the events, the
//! commits and their checks, the replication's bookkeeping.

use super::super::{Inner, Reply};
use crate::http::{internal, json_response};
use crate::worker_host::config_value;
use futures::StreamExt;
use futures::channel::mpsc;
use serde_json::json;
use std::cell::RefCell;
use std::collections::HashMap;
use worker::wasm_bindgen::JsValue;
use worker::{Fetch, Headers, Response};

/// A session's stream as the floor keeps it: the frames sent before a client came, and
/// the open client, if any. Objects of one isolate share the map (keyed by session).
#[derive(Default)]
struct Stream {
    backlog: Vec<Vec<u8>>,
    client: Option<mpsc::UnboundedSender<Vec<u8>>>,
}

thread_local! {
    static STREAMS: RefCell<HashMap<String, Stream>> = RefCell::default();
}

/// Sends `frame` to session `id`'s client (or keeps it for the client to come); the
/// last frame ends the stream.
fn send(id: &str, frame: &str, last: bool) {
    STREAMS.with_borrow_mut(|streams| {
        let stream = streams.entry(id.to_string()).or_default();
        let frame = frame.as_bytes().to_vec();
        match &stream.client {
            Some(client) => {
                let _ = client.unbounded_send(frame);
            }
            None => stream.backlog.push(frame),
        }
        if last {
            streams.remove(id);
        }
    });
}

impl Inner {
    /// `POST …/crossings/{id}`: what a create crosses.
    pub(super) async fn crossings_create(&self, id: &str) -> Reply {
        self.crossing(id, "user", "created").await?;
        send(id, "event: tool_approval_request\ndata: {}\n\n", false);
        json_response(201, &json!({ "sessionId": id }))
    }

    /// `POST …/crossings/{id}/approve`: what an approval crosses.
    pub(super) async fn crossings_approve(&self, id: &str) -> Reply {
        self.crossing(id, "tool", "approved").await?;
        send(id, "event: end\ndata: {}\n\n", true);
        json_response(202, &json!({ "accepted": true }))
    }

    /// `GET …/crossings/{id}/stream`: the frames so far, then live ones until the end.
    pub(super) fn crossings_stream(&self, id: &str) -> Reply {
        let (tx, rx) = mpsc::unbounded::<Vec<u8>>();
        let backlog = STREAMS.with_borrow_mut(|streams| match streams.get_mut(id) {
            Some(stream) => {
                stream.client = Some(tx);
                std::mem::take(&mut stream.backlog)
            }
            // Ended already (or never created): the stream closes after nothing.
            None => Vec::new(),
        });
        let frames = futures::stream::iter(backlog)
            .chain(rx)
            .map(Ok::<Vec<u8>, worker::Error>);
        let mut resp = Response::from_stream(frames).map_err(|e| internal("stream", e))?;
        let headers = resp.headers_mut();
        headers
            .set("content-type", "text/event-stream")
            .map_err(|e| internal("headers", e))?;
        Ok(resp)
    }

    /// One SQLite write, one model call read to its end, one D1 write.
    async fn crossing(&self, id: &str, role: &str, mark: &str) -> Result<(), crate::api::ApiError> {
        let sql = self.state.storage().sql();
        let write = |q: &str, args| {
            sql.exec(q, args)
                .map(drop)
                .map_err(|e| internal("sqlite", e))
        };
        write(
            "CREATE TABLE IF NOT EXISTS crossings (id TEXT PRIMARY KEY, v TEXT)",
            None,
        )?;
        write(
            "INSERT OR REPLACE INTO crossings (id, v) VALUES (?, ?)",
            Some(vec![id.into(), mark.into()]),
        )?;
        self.model_call(role).await?;
        self.floor_write().await
    }

    /// A streamed chat completion from the deployment's model server, whose answer
    /// depends on the last message's role (the benchmark's mock asks for the tool first).
    async fn model_call(&self, role: &str) -> Result<(), crate::api::ApiError> {
        let failed = |e: worker::Error| internal("model", e);
        let base = config_value(&self.env, "LLM_BASE_URL")
            .ok_or_else(|| internal("model", "LLM_BASE_URL is not set"))?;
        let body = json!({
            "model": "floor",
            "stream": true,
            "messages": [{ "role": role, "content": "delete /tmp/bench", "tool_call_id": "c" }],
        });
        let headers = Headers::new();
        headers
            .set("content-type", "application/json")
            .map_err(failed)?;
        let url = format!("{base}/chat/completions");
        let body = JsValue::from_str(&body.to_string());
        let request =
            crate::outgoing::request(&url, "POST", &headers, Some(body)).map_err(failed)?;
        let mut resp = Fetch::Request(request).send().await.map_err(failed)?;
        let mut answer = resp.stream().map_err(failed)?;
        while let Some(chunk) = answer.next().await {
            chunk.map_err(failed)?;
        }
        Ok(())
    }
}
