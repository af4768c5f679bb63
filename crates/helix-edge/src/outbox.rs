//! Sessions created in this object whose rows are not in D1 yet. A create is durable
//! here, in the object's own storage, before it is acknowledged; its rows go to D1 in
//! one batch with the session's first commit (or alone, before anything else reads or
//! writes the session in D1). So creating a session costs no D1 round trip, and the
//! object, which every request for its session id reaches, is where one creator wins.

use crate::storage::Sql;
use crate::storage::sql::{backend, text};
use crate::store::StoreError;

/// The object's record of the sessions created in it.
pub struct Outbox {
    sql: Sql,
}

impl Outbox {
    /// The outbox in the object's storage.
    pub fn new(sql: Sql) -> Self {
        Self { sql }
    }

    /// Records `id` as created here with its rows still to send (`pending`, JSON);
    /// `false` if it was created before. Synchronous: no other request of the object
    /// runs between the check and the insert.
    pub fn create(&self, id: &str, pending: &str) -> Result<bool, StoreError> {
        let inserted = self.sql.query(
            "INSERT INTO created (session_id, pending) VALUES (?, ?) ON CONFLICT (session_id) DO NOTHING \
             RETURNING session_id",
            vec![id.into(), pending.into()],
        )
        .map_err(|e| backend("recording the session", e))?;
        Ok(!inserted.is_empty())
    }

    /// The rows of `id` that are not in D1 yet.
    pub fn pending(&self, id: &str) -> Result<Option<String>, StoreError> {
        let rows = self
            .sql
            .query(
                "SELECT pending FROM created WHERE session_id = ?",
                vec![id.into()],
            )
            .map_err(|e| backend("reading the outbox", e))?;
        Ok(rows.first().and_then(|r| text(r, 0)))
    }

    /// The sessions whose rows are not in D1 yet.
    pub fn unsent(&self) -> Result<Vec<String>, StoreError> {
        let rows = self
            .sql
            .query(
                "SELECT session_id FROM created WHERE pending IS NOT NULL",
                Vec::new(),
            )
            .map_err(|e| backend("reading the outbox", e))?;
        Ok(rows.iter().filter_map(|r| text(r, 0)).collect())
    }

    /// `id`'s rows are in D1.
    pub fn sent(&self, id: &str) -> Result<(), StoreError> {
        self.sql
            .run(
                "UPDATE created SET pending = NULL WHERE session_id = ?",
                vec![id.into()],
            )
            .map_err(|e| backend("clearing the outbox", e))
    }
}
