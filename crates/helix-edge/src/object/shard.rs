//! Which D1 database (shard) of the queryable record a session's rows go to. A root
//! session's shard is `shard_of` its id over the shards the deployment names when it is
//! created; a child's is its parent's (named on the child's creation). The choice is a
//! mark in the object's storage, read whenever the object starts, so naming more shards
//! later never moves a session. A session without the mark is on the first shard: every
//! session a deployment created before it had shards (so the first name stays first).

use super::{Inner, Parts};
use crate::api::ApiError;
use crate::http::internal;
use crate::runner::CreateSession;
use crate::setup::Setup;
use crate::sqlite;
use std::rc::Rc;
use worker::Request;

/// The mark that names a session's shard (its D1 binding).
pub(super) const SHARD_MARK: &str = "d1";

/// The query parameter of a child's creation that names its parent's shard.
pub(super) const SHARD_PARAM: &str = "d1";

impl Inner {
    /// The parts for creating `request`'s session `id`, on its shard: an object that
    /// serves no session yet records the shard before anything is written (and starts
    /// its parts again if they reached another database).
    pub(super) fn placed(
        &self,
        id: &str,
        req: &Request,
        request: &CreateSession,
    ) -> Result<Rc<Parts>, ApiError> {
        let parts = self.parts()?;
        let sql = &*parts.sql;
        let placed = sqlite::mark(sql, SHARD_MARK).is_some();
        let setup = Setup::get(&self.env, &self.app)?;
        let shards = &setup.shards;
        // One database is the first, which needs no mark.
        if placed || shards.len() <= 1 || sqlite::mark(sql, "session_id").is_some() {
            return self.attach(id);
        }
        let pairs = crate::api::query_pairs(&req.inner().url());
        let given = pairs
            .into_iter()
            .find(|(k, v)| k == SHARD_PARAM && shards.contains(v))
            .map(|(_, v)| v);
        let root = request.parent.as_ref().map_or(id, |p| p.root_id.as_str());
        let shard = given.unwrap_or_else(|| setup.shard_for(root).to_string());
        sqlite::set_mark(sql, SHARD_MARK, Some(&shard)).map_err(|e| internal("shard", e))?;
        if shard != parts.database {
            *self.parts.borrow_mut() = None;
        }
        self.attach(id)
    }
}
