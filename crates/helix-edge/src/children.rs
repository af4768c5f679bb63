//! Durable Object to Durable Object messages of the session tree: a parent starting and
//! steering its child sessions ([`DoChildren`]), and a child relaying its stream to its
//! parent and waking it when it ends. Each message is an internal request to the other
//! session's object; `/__internal/*` paths are never forwarded by the public router.

use crate::entry::call_object;
use crate::runner::{ChildOrder, Children};
use futures::future::LocalBoxFuture;
use serde_json::json;
use worker::{Env, Method};

/// Internal path: create a child session (`{agent, message, parent}`).
pub const START_PATH: &str = "/__internal/child";
/// Internal path: a child ended; drive the parent.
pub const WAKE_PATH: &str = "/__internal/wake";
/// Internal path: chunks of a child's stream for the parent's (`{from, chunks}`).
pub const RELAY_PATH: &str = "/__internal/relay";

/// POSTs `body` to `path` of session `id`'s object; `Ok` on a 2xx answer (or one of
/// `accept`), else a message naming what went wrong.
pub async fn post(
    env: &Env,
    binding: &str,
    id: &str,
    path: &str,
    body: serde_json::Value,
    accept: &[u16],
) -> Result<(), String> {
    let resp = call_object(
        env,
        binding,
        id,
        Method::Post,
        path,
        None,
        Some(body.to_string().into_bytes()),
    )
    .await
    .map_err(|e| e.message)?;
    let status = resp.status_code();
    if (200..300).contains(&status) || accept.contains(&status) {
        return Ok(());
    }
    Err(format!("the session's object answered HTTP {status}"))
}

/// Reaches child sessions through their Durable Objects.
pub struct DoChildren {
    env: Env,
    /// The Durable Object binding of the session objects.
    binding: &'static str,
}

impl DoChildren {
    /// Children of the sessions served with `env`.
    pub fn new(env: Env, binding: &'static str) -> Self {
        Self { env, binding }
    }
}

impl Children for DoChildren {
    fn send<'a>(
        &'a self,
        child_id: &'a str,
        order: ChildOrder,
    ) -> LocalBoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let env = &self.env;
            let op = |name: &str| format!("/v1/sessions/{child_id}/{name}");
            match order {
                // 409: created before (a retried start finds the same child).
                ChildOrder::Start {
                    agent,
                    message,
                    parent,
                } => {
                    let body = json!({ "agent": agent, "message": message, "parent": parent });
                    post(env, self.binding, child_id, START_PATH, body, &[409]).await
                }
                ChildOrder::Abort { reason } => {
                    post(
                        env,
                        self.binding,
                        child_id,
                        &op("abort"),
                        json!({ "reason": reason }),
                        &[],
                    )
                    .await
                }
                // 409: the child is not running (already ended or interrupted).
                ChildOrder::Interrupt { reason } => {
                    let body = json!({ "reason": reason });
                    post(env, self.binding, child_id, &op("interrupt"), body, &[409]).await
                }
                ChildOrder::Resume => {
                    post(
                        env,
                        self.binding,
                        child_id,
                        &op("resume"),
                        json!({}),
                        &[409],
                    )
                    .await
                }
            }
        })
    }
}
