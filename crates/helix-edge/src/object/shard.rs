//! Which D1 database (shard) of the queryable record a session's rows go to. A root
//! session's shard is `shard_of` its id over the shards the deployment names when it is
//! created; a child's is its parent's (named on the child's creation). The choice is a
//! mark in the object's storage, read whenever the object starts, so naming more shards
//! later never moves a session. A session without the mark is on the first shard: every
//! session a deployment created before it had shards (so the first name stays first).

use super::Inner;
use crate::api::ApiError;
use crate::host::Level;
use crate::http::internal;
use crate::setup::Setup;
use crate::sqlite;
use crate::worker_host::log;
use worker::Request;

/// The mark that names a session's shard (its D1 binding).
pub(super) const SHARD_MARK: &str = "d1";

/// The query parameter of a child's creation that names its parent's shard.
pub(super) const SHARD_PARAM: &str = "d1";

impl Inner {
    /// Records the shard of session `id`, about to be created in this object: `given`
    /// (a child's parent's, if it is one of the shards), else its root's by the root's
    /// id — a child told no shard is on the first, where a parent from before shards
    /// lives. Nothing for an object that already has a session or a shard, or a
    /// deployment with one database. The parts start again if they reached another
    /// database.
    pub(super) fn place(
        &self,
        id: &str,
        given: Option<String>,
        root: &str,
    ) -> Result<(), ApiError> {
        let parts = self.parts()?;
        let sql = &*parts.sql;
        let setup = Setup::get(&self.env, &self.app)?;
        let shards = &setup.shards;
        let fresh =
            sqlite::mark(sql, SHARD_MARK).is_none() && sqlite::mark(sql, "session_id").is_none();
        // One database is the first, which needs no mark.
        if !fresh || shards.len() <= 1 {
            return Ok(());
        }
        let shard = match given.filter(|g| shards.contains(g)) {
            Some(given) => given,
            None if root == id => setup.shard_for(root).to_string(),
            None => {
                let fields = serde_json::json!({ "session": id, "root": root });
                log(Level::Warn, "child_without_shard", fields);
                setup.first_shard().to_string()
            }
        };
        sqlite::set_mark(sql, SHARD_MARK, Some(&shard)).map_err(|e| internal("shard", e))?;
        if shard != parts.database {
            *self.parts.borrow_mut() = None;
        }
        Ok(())
    }

    /// The shard a create request names (a child's, from its parent).
    pub(super) fn given_shard(req: &Request) -> Option<String> {
        let pairs = crate::api::query_pairs(&req.inner().url());
        pairs
            .into_iter()
            .find(|(k, _)| k == SHARD_PARAM)
            .map(|(_, v)| v)
    }
}
