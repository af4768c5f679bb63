//! The session tree between objects: a parent starting and steering its children
//! ([`DoChildren`]), a child relaying its stream to its parent's and reporting when it
//! ended, and the parent's side of both. Every message is an internal request to the
//! other session's object (`/__internal/*` paths, never routed by the worker), and
//! every one is idempotent, so each is simply sent again until it goes through.

use super::{
    CREATE_PATH, DELETE_PATH, ENDED_PATH, Inner, Parts, RELAY_PATH, Reply, Wiring, accepted,
};
use crate::api::ApiError;
use crate::host::Level;
use crate::http::{ObjectRequest, call_object, internal};
use crate::runner::{
    ChildEnded, ChildOrder, Children, CreateSession, Runner, WaitKind, ended_report,
};
use crate::storage::ObjectStore;
use crate::store::{PendingCall, PendingKind, Store};
use crate::worker_host::log;
use futures::future::LocalBoxFuture;
use serde_json::{Value, json};
use std::rc::Rc;
use worker::{Env, Method};

type R = Runner<ObjectStore>;

/// Internal path: a persistent child's parent starts its next turn
/// (`{message, toolCallId}`).
pub const MESSAGE_PATH: &str = "/__internal/message";

/// Chunks per relay request from a child to its parent.
const RELAY_BATCH: u64 = 500;

/// POSTs `body` to `path` of session `id`'s object; `Ok` on a 2xx answer (or one of
/// `accept`), else a message naming what went wrong.
async fn post(
    env: &Env,
    binding: &str,
    id: &str,
    path: &str,
    body: Vec<u8>,
    accept: &[u16],
) -> Result<(), String> {
    let request = ObjectRequest::post(path, body);
    let resp = call_object(env, binding, id, request)
        .await
        .map_err(|e| e.message)?;
    let status = resp.status_code();
    if (200..300).contains(&status) || accept.contains(&status) {
        return Ok(());
    }
    Err(format!("the session's object answered HTTP {status}"))
}

/// Lets `runner` run sub-agent calls as child sessions in Durable Objects of their own.
pub(super) fn register(runner: R, wiring: &Wiring<'_>) -> R {
    let children = DoChildren {
        env: wiring.env.clone(),
        binding: wiring.sessions,
    };
    runner
        .with_children(Rc::new(children))
        .with_waits([WaitKind::subagents()])
}

/// Reaches child sessions through their Durable Objects.
struct DoChildren {
    env: Env,
    /// The Durable Object binding of the session objects.
    binding: &'static str,
}

impl DoChildren {
    async fn post(
        &self,
        child_id: &str,
        path: &str,
        body: Value,
        accept: &[u16],
    ) -> Result<(), String> {
        let body = body.to_string().into_bytes();
        post(&self.env, self.binding, child_id, path, body, accept).await
    }
}

impl Children for DoChildren {
    fn send<'a>(
        &'a self,
        child_id: &'a str,
        order: ChildOrder,
    ) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let op = |name: &str| format!("/v1/sessions/{child_id}/{name}");
            match order {
                ChildOrder::Start {
                    agent,
                    message,
                    parent,
                } => {
                    let request = CreateSession {
                        parent: Some(parent),
                        ..CreateSession::new(child_id.to_string(), agent, message)
                    };
                    let body = serde_json::to_value(&request).map_err(|e| e.to_string())?;
                    // 409: created before (a retried start finds the same child).
                    self.post(child_id, CREATE_PATH, body, &[409]).await
                }
                // 404: never started; 409: ended already.
                ChildOrder::Abort { reason } => {
                    let body = json!({ "reason": reason });
                    self.post(child_id, &op("abort"), body, &[404, 409]).await
                }
                // 409: the child is not running (already ended or interrupted).
                ChildOrder::Interrupt { reason } => {
                    let body = json!({ "reason": reason });
                    self.post(child_id, &op("interrupt"), body, &[409]).await
                }
                ChildOrder::Resume => self.post(child_id, &op("resume"), json!({}), &[409]).await,
                ChildOrder::Message {
                    message,
                    tool_call_id,
                } => {
                    let body = json!({ "message": message, "toolCallId": tool_call_id });
                    self.post(child_id, MESSAGE_PATH, body, &[]).await
                }
                // 404: never started, or deleted before.
                ChildOrder::Delete => self.post(child_id, DELETE_PATH, json!({}), &[404]).await,
            }
        })
    }

    fn pending<'a>(
        &'a self,
        child_id: &'a str,
    ) -> LocalBoxFuture<'a, Result<Vec<PendingCall>, String>> {
        Box::pin(async move {
            let path = format!("/v1/sessions/{child_id}");
            let request = ObjectRequest {
                method: Method::Get,
                path: &path,
                last_event_id: None,
                body: None,
            };
            let mut resp = call_object(&self.env, self.binding, child_id, request)
                .await
                .map_err(|e| e.message)?;
            if resp.status_code() == 404 {
                return Ok(Vec::new()); // not started yet
            }
            let text = resp.text().await.map_err(|e| e.to_string())?;
            let view: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            let calls = view["pendingToolCalls"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let call = |c: Value| -> Option<PendingCall> {
                Some(PendingCall {
                    tool_call_id: c["toolCallId"].as_str()?.into(),
                    tool_name: c["toolName"].as_str()?.into(),
                    arguments: c["arguments"].clone(),
                    kind: serde_json::from_value::<PendingKind>(c["kind"].clone()).ok()?,
                    deadline: c["deadline"].as_u64(),
                    since: 0,
                    output_path: None,
                })
            };
            Ok(calls.into_iter().filter_map(call).collect())
        })
    }
}

impl Inner {
    /// For a child session: relays its new chunks to the parent and, once it ended,
    /// reports its outcome (once per ending). `false` if the parent could not be reached.
    pub(super) async fn report_to_parent(&self, parts: &Parts, id: &str) -> bool {
        let Ok(Some(loaded)) = parts.runner.store().load(id).await else {
            return true;
        };
        let Some(parent) = loaded.head.parent.as_ref() else {
            return true;
        };
        if !self.relay(parts, &parent.session_id, id).await {
            return false;
        }
        let delivered = parts.sql.mark("reported").and_then(|v| v.parse().ok());
        let Some((parent_id, report)) = ended_report(&loaded.head, delivered) else {
            return true;
        };
        let body = match serde_json::to_vec(&report) {
            Ok(body) => body,
            Err(e) => {
                log(
                    Level::Error,
                    "report_failed",
                    json!({ "session": id, "error": e.to_string() }),
                );
                return false;
            }
        };
        match post(
            &self.env,
            self.app.sessions(),
            &parent_id,
            ENDED_PATH,
            body,
            &[],
        )
        .await
        {
            Ok(()) => {
                parts
                    .sql
                    .set_mark("reported", Some(&report.version.to_string()));
                true
            }
            Err(e) => {
                let fields = json!({ "session": id, "parent": parent_id, "error": e });
                log(Level::Warn, "parent_unreachable", fields);
                false
            }
        }
    }

    /// Sends the chunks the parent has not acknowledged yet; `false` if it failed.
    async fn relay(&self, parts: &Parts, parent_id: &str, id: &str) -> bool {
        loop {
            let (upto, chunks) = parts.stream.unrelayed(RELAY_BATCH);
            if upto == parts.stream.relayed() {
                return true;
            }
            let body = json!({ "from": id, "chunks": chunks })
                .to_string()
                .into_bytes();
            let sent = post(
                &self.env,
                self.app.sessions(),
                parent_id,
                RELAY_PATH,
                body,
                &[],
            )
            .await;
            if let Err(e) = sent {
                let fields = json!({ "session": id, "parent": parent_id, "error": e });
                log(Level::Warn, "relay_failed", fields);
                return false;
            }
            parts.stream.mark_relayed(upto);
        }
    }

    /// `/__internal/ended`: a child of this session reports that it ended.
    pub(super) async fn child_ended(
        self: &Rc<Self>,
        parts: &Parts,
        id: &str,
        body: &[u8],
    ) -> Reply {
        let text = std::str::from_utf8(body).map_err(|e| internal("ended", e))?;
        let report: ChildEnded =
            serde_json::from_str(text).map_err(|_| ApiError::validation("Malformed report."))?;
        if parts.runner.child_ended(id, report).await? {
            self.schedule(id);
        }
        accepted()
    }

    /// `/__internal/message`: this persistent child's parent starts its next turn.
    pub(super) async fn parent_message(
        self: &Rc<Self>,
        parts: &Parts,
        id: &str,
        body: &[u8],
    ) -> Reply {
        let body: Value = serde_json::from_slice(body).unwrap_or_default();
        let (Some(message), Some(call)) = (body["message"].as_str(), body["toolCallId"].as_str())
        else {
            return Err(ApiError::validation("Malformed message."));
        };
        parts
            .runner
            .parent_message(id, message.to_string(), call)
            .await?;
        self.schedule(id);
        accepted()
    }

    /// `/__internal/relay`: chunks of a child's stream, appended to this one (and passed
    /// on to this session's own parent, if it has one).
    pub(super) async fn take_relay(self: &Rc<Self>, parts: &Parts, id: &str, body: &[u8]) -> Reply {
        let text = std::str::from_utf8(body).unwrap_or_default();
        let body: Value = serde_json::from_str(text).unwrap_or_default();
        let from = body["from"].as_str().unwrap_or_default();
        if from.is_empty() {
            return Err(ApiError::validation("Malformed relay."));
        }
        let pair = |c: &Value| Some((c[0].as_u64()?, c[1].as_str()?.to_string()));
        let chunks: Vec<(u64, String)> = body["chunks"]
            .as_array()
            .map(|all| all.iter().filter_map(pair).collect())
            .unwrap_or_default();
        parts.stream.append_relayed(from, &chunks);
        let loaded = parts.runner.store().load(id).await.ok().flatten();
        if let Some(parent) = loaded.and_then(|l| l.head.parent) {
            let inner = self.clone();
            let id = id.to_string();
            self.state.wait_until(async move {
                if let Ok(parts) = inner.parts() {
                    inner.relay(&parts, &parent.session_id, &id).await;
                }
            });
        }
        accepted()
    }
}
