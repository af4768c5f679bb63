//! The session tree between objects (feature `subagents`): a parent starting and
//! steering its children ([`DoChildren`]), a child relaying its stream to its parent's
//! and reporting when it ended, and the parent's side of both. Every message is an
//! internal request to the other session's object (the core's protocol:
//! [`ChildOrder::request`], [`Relay`], [`ChildEnded`]; paths never routed by the
//! worker), and every one is idempotent, so each is simply sent again until it goes
//! through.

use super::capability::{Capability, NOTHING, Wiring};
use super::shard::SHARD_PARAM;
use super::{Inner, Reply, accepted};
use crate::api::ApiError;
use crate::host::Level;
use crate::http::{ObjectRequest, call_object};
use crate::runner::waits::{
    CREATE_PATH, ENDED_PATH, MESSAGE_PATH, RELAY_PATH, Relay, parse_message,
};
use crate::runner::{ChildEnded, ChildOrder, Children, Runner, WaitKind, ended_report};
use crate::sqlite;
use crate::storage::ObjectStore;
use crate::store::{PendingCall, Store};
use crate::worker_host::log;
use futures::future::LocalBoxFuture;
use serde_json::json;
use std::rc::Rc;
use worker::{Env, Method};

type R = Runner<ObjectStore>;

/// Chunks per relay request from a child to its parent.
const RELAY_BATCH: u64 = 500;

/// Sub-agents: child sessions in Durable Objects of their own.
pub(super) const SUBAGENTS: Capability = Capability {
    equip: Some(|runner, wiring| with_children(runner, wiring).with_waits([WaitKind::subagents()])),
    routes: &[
        (ENDED_PATH, |inner, call| {
            Box::pin(inner.child_ended(call.id, call.body))
        }),
        (RELAY_PATH, |inner, call| {
            Box::pin(inner.take_relay(call.id, call.body))
        }),
        (MESSAGE_PATH, |inner, call| {
            Box::pin(inner.parent_message(call.id, call.body))
        }),
    ],
    after_slice: Some(|inner, id| Box::pin(inner.report_to_parent(id))),
    ..NOTHING
};

/// `runner` reaching child sessions through their Durable Objects.
fn with_children(runner: R, wiring: &Wiring<'_>) -> R {
    runner.with_children(Rc::new(DoChildren {
        env: wiring.env.clone(),
        binding: wiring.sessions,
        database: wiring.database.to_string(),
    }))
}

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

/// Reaches child sessions through their Durable Objects.
struct DoChildren {
    env: Env,
    /// The Durable Object binding of the session objects.
    binding: &'static str,
    /// The parent's shard of the record: its children are created on it.
    database: String,
}

impl Children for DoChildren {
    fn send<'a>(
        &'a self,
        child_id: &'a str,
        order: ChildOrder,
    ) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let mut request = order.request(child_id)?;
            if request.path == CREATE_PATH {
                request.path = format!("{CREATE_PATH}?{SHARD_PARAM}={}", self.database);
            }
            let body = request.body.to_string().into_bytes();
            let (env, binding) = (&self.env, self.binding);
            post(env, binding, child_id, &request.path, body, request.accept).await
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
                user: None,
                session_token: false,
                traceparent: None,
                body: None,
                stream: false,
            };
            let mut resp = call_object(&self.env, self.binding, child_id, request)
                .await
                .map_err(|e| e.message)?;
            if resp.status_code() == 404 {
                return Ok(Vec::new()); // not started yet
            }
            let text = resp.text().await.map_err(|e| e.to_string())?;
            let view: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            crate::api::pending_calls(&view["pendingToolCalls"]).map_err(str::to_string)
        })
    }
}

impl Inner {
    /// For a child session: relays its new chunks to the parent and, once it ended,
    /// reports its outcome (once per ending). `false` if the parent could not be reached.
    async fn report_to_parent(&self, id: &str) -> bool {
        let Ok(parts) = self.parts() else {
            return true;
        };
        let Ok(Some(loaded)) = parts.runner.store().load(id).await else {
            return true;
        };
        let Some(parent) = loaded.head.parent.as_ref() else {
            return true;
        };
        if !self.relay(&parent.session_id, id).await {
            return false;
        }
        let delivered = sqlite::mark(&*parts.sql, "reported").and_then(|v| v.parse().ok());
        let Some((parent_id, report)) = ended_report(&loaded.head, delivered) else {
            return true;
        };
        let Ok(body) = serde_json::to_vec(&report) else {
            return false;
        };
        let sessions = self.app.sessions();
        match post(&self.env, sessions, &parent_id, ENDED_PATH, body, &[]).await {
            Ok(()) => {
                let version = report.version.to_string();
                sqlite::set_mark(&*parts.sql, "reported", Some(&version)).is_ok()
            }
            Err(e) => {
                let fields = json!({ "session": id, "parent": parent_id, "error": e });
                log(Level::Warn, "parent_unreachable", fields);
                false
            }
        }
    }

    /// Sends the chunks the parent has not acknowledged yet; `false` if it failed.
    async fn relay(&self, parent_id: &str, id: &str) -> bool {
        let Ok(parts) = self.parts() else {
            return false;
        };
        loop {
            let (upto, chunks) = parts.stream.unrelayed(RELAY_BATCH);
            if upto == parts.stream.relayed() {
                return true;
            }
            let relay = Relay {
                from: id.to_string(),
                chunks,
            };
            let Ok(body) = serde_json::to_vec(&relay) else {
                return false;
            };
            let sessions = self.app.sessions();
            if let Err(e) = post(&self.env, sessions, parent_id, RELAY_PATH, body, &[]).await {
                let fields = json!({ "session": id, "parent": parent_id, "error": e });
                log(Level::Warn, "relay_failed", fields);
                return false;
            }
            parts.stream.mark_relayed(upto);
        }
    }

    /// `/__internal/ended`: a child of this session reports that it ended.
    async fn child_ended(self: &Rc<Self>, id: &str, body: &[u8]) -> Reply {
        let parts = self.attach(id)?;
        let report: ChildEnded =
            serde_json::from_slice(body).map_err(|_| ApiError::validation("Malformed report."))?;
        if parts.runner.child_ended(id, report).await? {
            self.schedule(id);
        }
        accepted()
    }

    /// `/__internal/message`: this persistent child's parent starts its next turn.
    async fn parent_message(self: &Rc<Self>, id: &str, body: &[u8]) -> Reply {
        let parts = self.attach(id)?;
        let (message, call) =
            parse_message(body).ok_or_else(|| ApiError::validation("Malformed message."))?;
        parts.runner.parent_message(id, message, &call).await?;
        self.schedule(id);
        accepted()
    }

    /// `/__internal/relay`: chunks of a child's stream, appended to this one (and passed
    /// on to this session's own parent, if it has one).
    async fn take_relay(self: &Rc<Self>, id: &str, body: &[u8]) -> Reply {
        let parts = self.attach(id)?;
        let relay = Relay::parse(body).ok_or_else(|| ApiError::validation("Malformed relay."))?;
        parts.stream.append_relayed(&relay.from, &relay.chunks);
        let loaded = parts.runner.store().load(id).await.ok().flatten();
        if let Some(parent) = loaded.and_then(|l| l.head.parent) {
            let inner = self.clone();
            let id = id.to_string();
            self.state.wait_until(async move {
                inner.relay(&parent.session_id, &id).await;
            });
        }
        accepted()
    }
}
