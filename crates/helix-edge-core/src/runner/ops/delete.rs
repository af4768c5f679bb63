//! Deleting a session for good, as an erasure request needs: its run is stopped, its
//! children are deleted first (each by its own runner, through [`Children`]), then
//! everything the store holds of it. The journal (stream, claims, answers) lives with
//! the session on its platform and goes with it there.

use crate::host::Level;
use crate::host::LogValue::{Num, Str};
use crate::runner::{ChildOrder, RunError, Runner};
use crate::store::{Store, StoreError};
use futures::future::join_all;

impl<S: Store> Runner<S> {
    /// Deletes session `session_id`: a drive in progress stops (its tools see the abort
    /// signal), every child session it ever started is deleted, then the session.
    /// A sub-agent's session is deleted only with its parent (`by_parent`); otherwise
    /// [`RunError::SubAgentSession`]. [`StoreError::NotFound`] when there is no such
    /// session (a second delete). A child that cannot be deleted fails the whole
    /// deletion before the session itself is touched: repeating it finishes the job.
    pub async fn delete(&self, session_id: &str, by_parent: bool) -> Result<(), RunError> {
        let loaded = self.store.load(session_id).await?;
        let head = loaded
            .ok_or_else(|| StoreError::NotFound(session_id.into()))?
            .head;
        if let (Some(parent), false) = (&head.parent, by_parent) {
            return Err(RunError::SubAgentSession(parent.root_id.clone()));
        }
        self.abort.borrow().abort();
        // What it waits on beyond its recorded children ends (remote sessions).
        self.waits_deleted(&head).await;
        let children = self.store.subsessions(session_id).await?;
        let orders = children
            .iter()
            .map(|c| self.children.send(&c.child_id, ChildOrder::Delete));
        for (child, sent) in children.iter().zip(join_all(orders).await) {
            if let Err(why) = sent {
                let detail = format!("deleting sub-agent session '{}': {why}", child.child_id);
                return Err(StoreError::Backend(detail).into());
            }
        }
        self.store.delete(session_id).await?;
        let fields = [
            ("session", Str(session_id)),
            ("children", Num(children.len() as u64)),
        ];
        self.host.log(Level::Info, "session_deleted", &fields);
        Ok(())
    }
}
