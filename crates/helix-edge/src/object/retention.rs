//! Retention's erasure, as a session's object carries it out (feature `retention`): the
//! cron trigger picked the session from the record, which may be behind; the object
//! erases it only if its own head still says it is a root that ended before the cutoff
//! (a follow-up since, or a run going on, keeps it: 409).

use super::capability::{Capability, NOTHING};
use super::{Inner, Reply};
use crate::api::ApiError;
use crate::http::internal;
use crate::store::SessionStatus;
use crate::store::retention::RETIRE_PATH;
use std::rc::Rc;

/// The object's side of retention: its internal erasure path.
pub(super) const RETENTION: Capability = Capability {
    routes: &[(RETIRE_PATH, |inner, call| {
        Box::pin(inner.retire(call.id, call.body))
    })],
    ..NOTHING
};

impl Inner {
    /// Erases session `id` if it ended before `{"endedBefore": ms}` and is a root; 404
    /// when there is none, 409 when it is not ended (or not before the cutoff).
    async fn retire(self: &Rc<Self>, id: &str, body: &[u8]) -> Reply {
        let body: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| internal("retire", e))?;
        let before = body["endedBefore"]
            .as_u64()
            .ok_or_else(|| internal("retire", "no endedBefore"))?;
        let parts = self.attach(id)?;
        let head = self.head(&parts.runner, id).await?;
        let ended = matches!(
            head.status,
            SessionStatus::Completed | SessionStatus::Failed | SessionStatus::Aborted
        );
        if !ended || head.updated_at >= before || head.parent.is_some() {
            let message = format!("Session {id} is not a root that ended before the cutoff.");
            return Err(ApiError::new(409, "session_not_ended", message, false));
        }
        self.delete(&parts, id, false).await
    }
}
