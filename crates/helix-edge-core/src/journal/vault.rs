//! A session's vault: what its tools keep privately and durably — an MCP server's
//! tokens, a connection's session, a call's place in a conversation it waits in. Kept
//! in the session's object (its own SQLite) beside the answers; never in the record
//! (D1), the stream, the transcript or the logs. A fork or a copy starts without it.

use super::Suspension;
use crate::store::StoreError;
use std::rc::Rc;

/// Session `session_id`'s vault, as a tool reads it ([`crate::tool::ToolContext::vault`]).
#[derive(Clone)]
pub struct Vault {
    session_id: Rc<str>,
    suspension: Rc<dyn Suspension>,
}

impl Vault {
    /// The vault of session `session_id` in `suspension`'s backend.
    pub fn new(session_id: &str, suspension: Rc<dyn Suspension>) -> Self {
        Self {
            session_id: session_id.into(),
            suspension,
        }
    }

    /// The session's id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// What is kept under `key`.
    pub fn get(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.suspension.kept(&self.session_id, key)
    }

    /// Keeps `value` under `key` (durable once this returns).
    pub fn set(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.suspension.keep(&self.session_id, key, Some(value))
    }

    /// Forgets what is kept under `key`.
    pub fn remove(&self, key: &str) -> Result<(), StoreError> {
        self.suspension.keep(&self.session_id, key, None)
    }
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault")
            .field("session_id", &self.session_id)
            .finish()
    }
}
