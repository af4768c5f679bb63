//! An MCP server's authorization, as the session's object takes it (feature `mcp`):
//!
//! - `GET …/authorize?state=…` (a session route: whoever may answer the call) starts
//!   it: a redirect to the server's sign-in and a cookie for this flow, whose digest the
//!   session keeps in its vault ([`Binding`]).
//! - The worker's `GET /v1/mcp/callback` passes the state, the code (or the error) and
//!   that cookie to the session the state names. Without the cookie of the browser that
//!   started the flow it is 403 `authorization_not_yours` and nothing changes; with it
//!   every pending `authorization` call sent with that state is answered — as the API
//!   token would — and the run goes on. A state no pending call carries is not found
//!   (404) and changes nothing.

use super::capability::{Call, Capability, NOTHING};
use super::{Inner, Reply};
use crate::api::{ApiError, Operation, parse_body};
use crate::auth::Principal;
use crate::http::{internal, json_response};
use crate::mcp::{Binding, CALLBACK_PATH, Callback, sign_in_url};
use crate::runner::RunError;
use std::rc::Rc;

/// Taking an MCP server's authorization callback.
pub(super) const MCP: Capability = Capability {
    routes: &[(CALLBACK_PATH, |inner, call| {
        Box::pin(inner.mcp_callback(call))
    })],
    operations: &[(Operation::McpAuthorize, |inner, call| {
        Box::pin(inner.mcp_authorize(call))
    })],
    ..NOTHING
};

fn not_pending() -> ApiError {
    let message = "This authorization is not pending: it is unknown, was used, or its run ended.";
    ApiError::new(404, "authorization_not_pending", message, false)
}

impl Inner {
    /// The start: where the flow's sign-in is, and the cookie that binds it to the
    /// browser of whoever opened this link with the session's credentials.
    async fn mcp_authorize(self: &Rc<Self>, call: &Call<'_>) -> Reply {
        let state = crate::api::query_pairs(&call.req.inner().url())
            .into_iter()
            .find(|(k, _)| k == "state")
            .map(|(_, v)| v)
            .ok_or_else(|| ApiError::validation("state is missing."))?;
        let parts = self.attach(call.id)?;
        let head = self.head(&parts.runner, call.id).await?;
        let (start, sign_in) = sign_in_url(&head.pending, &state).ok_or_else(not_pending)?;
        let mut random = [0u8; 32];
        getrandom::fill(&mut random).map_err(|e| internal("random", e))?;
        let binding = Binding::new(&state, &random);
        parts
            .runner
            .vault(call.id)
            .set(&Binding::key(&state), &Binding::digest(&binding.value))
            .map_err(|e| internal("vault", e))?;
        let headers = worker::Headers::new();
        let set = |k: &str, v: &str| headers.set(k, v).map_err(|e| internal("headers", e));
        set("location", sign_in)?;
        set(
            "set-cookie",
            &binding.set_cookie(start.starts_with("https://")),
        )?;
        set("cache-control", "no-store")?;
        // The start link may carry a token (`?token=`): never sent on as a referrer.
        set("referrer-policy", "no-referrer")?;
        Ok(worker::Response::empty()
            .map_err(|e| internal("redirect", e))?
            .with_status(302)
            .with_headers(headers))
    }

    /// The callback: the calls it answers, answered — only in the browser that started
    /// the flow.
    async fn mcp_callback(self: &Rc<Self>, call: &Call<'_>) -> Reply {
        let callback: Callback = parse_body(call.body)?;
        let parts = self.attach(call.id)?;
        let runner = &parts.runner;
        let head = self.head(runner, call.id).await?;
        let submissions = callback.submissions(&head.pending);
        if submissions.is_empty() {
            return Err(not_pending());
        }
        let vault = runner.vault(call.id);
        let key = Binding::key(&callback.state);
        let kept = vault.get(&key).map_err(|e| internal("vault", e))?;
        if !Binding::holds(kept.as_deref(), callback.binding.as_deref()) {
            let message = "This authorization was started in another browser: open its link \
                           from the session that asked, signed in as whoever answers it.";
            return Err(ApiError::new(
                403,
                "authorization_not_yours",
                message,
                false,
            ));
        }
        vault.remove(&key).map_err(|e| internal("vault", e))?;
        let mut answered = 0;
        for submission in submissions {
            match runner
                .submit_as(call.id, submission, &Principal::Admin)
                .await
            {
                Ok(_) => answered += 1,
                Err(RunError::AlreadyResolved(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if answered == 0 {
            return Err(not_pending());
        }
        self.schedule(call.id);
        json_response(200, &serde_json::json!({ "answered": answered }))
    }
}
