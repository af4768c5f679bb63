//! The session's door for users (feature `users`): a request the worker marked as a
//! user's reaches the session only if the user reaches its owner ([`Caller::reaches`]);
//! any other answers 404 `session_not_found`, exactly as a session that does not exist
//! (nothing tells a user that someone else's session is there). What such a request
//! creates — a chat's new session — is the user's.

use super::Parts;
use super::capability::{Capability, NOTHING};
use crate::api::ApiError;
use crate::runner::RunError;
use crate::store::{Owner, Store, StoreError};
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
) -> LocalBoxFuture<'a, Result<Option<Owner>, ApiError>> {
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
        match loaded {
            Some(l) if !caller.reaches(l.head.owner.as_ref()) => {
                Err(RunError::Store(StoreError::NotFound(id.into())).into())
            }
            _ => Ok(Some(caller.user)),
        }
    })
}
