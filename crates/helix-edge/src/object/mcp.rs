//! An MCP server's authorization callback, as the session's object takes it (feature
//! `mcp`): the worker's `GET /v1/mcp/callback` passes the state and the code (or the
//! error) to the session the state names; every pending `authorization` call sent with
//! that state is answered with it — as the API token would, the state being the
//! credential — and the run goes on. A state no pending call carries is not found
//! (404) and changes nothing.

use super::capability::{Call, Capability, NOTHING};
use super::{Inner, Reply};
use crate::api::{ApiError, parse_body};
use crate::auth::Principal;
use crate::http::json_response;
use crate::mcp::{CALLBACK_PATH, Callback};
use crate::runner::RunError;
use std::rc::Rc;

/// Taking an MCP server's authorization callback.
pub(super) const MCP: Capability = Capability {
    routes: &[(CALLBACK_PATH, |inner, call| {
        Box::pin(inner.mcp_callback(call))
    })],
    ..NOTHING
};

impl Inner {
    /// The callback: the calls it answers, answered.
    async fn mcp_callback(self: &Rc<Self>, call: &Call<'_>) -> Reply {
        let callback: Callback = parse_body(call.body)?;
        let parts = self.attach(call.id)?;
        let runner = &parts.runner;
        let head = self.head(runner, call.id).await?;
        let submissions = callback.submissions(&head.pending);
        let not_pending = || {
            let message =
                "This authorization is not pending: it is unknown, was used, or its run ended.";
            ApiError::new(404, "authorization_not_pending", message, false)
        };
        if submissions.is_empty() {
            return Err(not_pending());
        }
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
