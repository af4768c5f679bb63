//! `SessionObject`: the Durable Object that owns one session (SPEC §1). This foundation
//! version only declares the class the `SESSIONS` binding names; no route reaches it yet.

use crate::api::ApiError;
use worker::{DurableObject, Env, Request, Response, Result, State, durable_object};

/// One agent session: its live state, stream buffer and suspension context.
#[durable_object]
pub struct SessionObject {
    #[allow(dead_code)] // Used once sessions are served.
    state: State,
}

impl DurableObject for SessionObject {
    fn new(state: State, _env: Env) -> Self {
        Self { state }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        super::error(&ApiError::route_not_found(&req.path()))
    }
}
