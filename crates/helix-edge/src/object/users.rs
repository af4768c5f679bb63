//! The session's door for users (feature `users`): a request the worker marked as a
//! user's reaches the session only if the user reaches its owner ([`Caller::reaches`]);
//! any other answers 404 `session_not_found`, exactly as a session that does not exist
//! (nothing tells a user that someone else's session is there). What such a request
//! creates — a chat's new session — is the user's.

use super::Parts;
use super::capability::{Capability, NOTHING};
use crate::api::{ApiError, Operation};
use crate::auth::Caller;
use crate::runner::RunError;
use crate::store::{Store, StoreError};
use crate::tool::Tool;
use futures::future::LocalBoxFuture;
use worker::Request;

/// Users at the session's door.
pub(super) const USERS: Capability = Capability {
    door: Some(door),
    ..NOTHING
};

fn door<'a>(
    parts: &'a Parts,
    id: &'a str,
    req: &'a Request,
    operation: Operation,
) -> LocalBoxFuture<'a, Result<Option<Caller>, ApiError>> {
    Box::pin(async move {
        let Some(caller) = crate::users::asking(req)? else {
            return Ok(None);
        };
        let loaded = parts
            .runner
            .store()
            .load(id)
            .await
            .map_err(RunError::from)?;
        let Some(loaded) = loaded else {
            return Ok(Some(caller));
        };
        let owner = loaded.head.owner.as_ref();
        // An approver answers the approvals their role decides (of a tool of the
        // session's agent), and nothing else here: the runner checks each answer.
        let agent = parts.runner.agents().get(&loaded.head.agent);
        let tools = agent.iter().flat_map(|a| a.tools());
        let approver = operation == Operation::SubmitToolResult
            && tools
                .filter_map(Tool::approvers)
                .any(|a| caller.approves(a, owner));
        match caller.reaches(owner) || approver {
            true => Ok(Some(caller)),
            false => Err(RunError::Store(StoreError::NotFound(id.into())).into()),
        }
    })
}
