//! Deleting the object's session for good (`DELETE /v1/sessions/{id}`, or its parent's
//! order to delete a child): the runner stops the run, deletes the children and the
//! session's rows here and in D1 ([`crate::runner::Runner::delete`]); then connected
//! streams are closed and everything else the object stored goes — the stream buffer,
//! claims, answers, the alarm.

use super::{Inner, Parts, Reply};
use crate::api::ApiError;
use crate::http::internal;
use crate::runner::RunError;
use crate::store::StoreError;
use worker::Response;

impl Inner {
    /// Deletes the session; 204, or 404 when there is none (what a previous deletion
    /// left of the object's storage goes then too).
    pub(super) async fn delete(&self, parts: &Parts, id: &str, by_parent: bool) -> Reply {
        let deleted = parts.runner.delete(id, by_parent).await;
        if matches!(
            deleted,
            Ok(()) | Err(RunError::Store(StoreError::NotFound(_)))
        ) {
            parts.stream.close_clients();
            self.erase().await?;
        }
        deleted?;
        let resp = Response::empty().map_err(|e| internal("delete", e))?;
        Ok(resp.with_status(204))
    }

    /// Deletes everything the object stored, and forgets what it opened.
    pub(super) async fn erase(&self) -> Result<(), ApiError> {
        let storage = self.state.storage();
        storage
            .delete_alarm()
            .await
            .map_err(|e| internal("delete alarm", e))?;
        storage
            .delete_all()
            .await
            .map_err(|e| internal("delete storage", e))?;
        self.parts.borrow_mut().take();
        self.id.borrow_mut().take();
        Ok(())
    }
}
