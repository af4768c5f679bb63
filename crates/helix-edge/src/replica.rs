//! D1 as the durable, queryable record of every session, fed from the session object's
//! commit log. Each local commit queues the statements it ran, keyed by its version, in
//! the object's `replica_outbox`, in the same transaction ([`Replica::enqueue`]); the
//! object then sends what is queued to D1 in order ([`Replica::replicate`]):
//!
//! - coalesced: every commit queued by then goes in one D1 batch (up to
//!   [`BATCH_BYTES`]), and a short delay after a commit lets the next ones join;
//! - idempotent: each commit's statements are the same version-guarded writes the object
//!   ran, so a batch D1 has applied before (the object died before it could drop it from
//!   the outbox) fails its guard as a whole; the object then reads the version D1 has,
//!   drops what D1 holds, and sends the rest — nothing twice, nothing lost;
//! - retried with backoff by the object's alarm while D1 fails; a D1 outage delays
//!   replication but never blocks a run, until the backlog reaches its bound (then the
//!   session refuses new commits with 503 `storage_backlog`).
//!
//! When the object's storage is gone but D1 has the session (the storage was deleted,
//! or the sessions moved to a new Durable Object namespace), [`Replica::rebuild`] copies
//! it back from D1.

use crate::d1::{D1, batch_json, text};
use crate::storage::sql::{Owned, Sql, int, text as cell_text};
use crate::store::StoreError;
use crate::store::rows::{SqlFailure, Statement};
use std::cell::Cell;
use worker::SqlStorageValue;

/// The most bytes of statements sent in one D1 batch (a commit larger than this goes
/// alone).
pub const BATCH_BYTES: u64 = 900_000;
/// The largest commit queued for D1, as JSON (a row of the object's SQLite holds at
/// most 2 MB); a larger one is refused before anything is written.
pub const OUTBOX_ROW_BYTES: usize = 1_900_000;
/// How long a replication waits after the commit that started it, so that the commits
/// right behind it go in the same batch.
pub const COALESCE_MS: u64 = 250;
/// Replication lags kept for the test build's report.
#[cfg(feature = "test-routes")]
const LAGS_KEPT: usize = 256;

/// The session's tables as both stores hold them: what is dumped, compared and rebuilt,
/// with the statement that inserts one row.
pub const TABLES: &[(&str, &str, &str)] = &[
    (
        "sessions",
        "SELECT id, agent, status, version, head, interrupt, snapshot_version, created_at, updated_at \
         FROM sessions WHERE id = ?1",
        "INSERT INTO sessions (id, agent, status, version, head, interrupt, snapshot_version, created_at, \
         updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    ),
    (
        "messages",
        "SELECT session_id, seq, body FROM messages WHERE session_id = ?1 ORDER BY seq",
        "INSERT INTO messages (session_id, seq, body) VALUES (?1, ?2, ?3)",
    ),
    (
        "state_log",
        "SELECT session_id, version, kind, body FROM state_log WHERE session_id = ?1 ORDER BY version",
        "INSERT INTO state_log (session_id, version, kind, body) VALUES (?1, ?2, ?3, ?4)",
    ),
    (
        "runs",
        "SELECT session_id, run_id, turn, body FROM runs WHERE session_id = ?1 ORDER BY turn, run_id",
        "INSERT INTO runs (session_id, run_id, turn, body) VALUES (?1, ?2, ?3, ?4)",
    ),
    (
        "checkpoints",
        "SELECT session_id, id, version, body FROM checkpoints WHERE session_id = ?1 ORDER BY version, id",
        "INSERT INTO checkpoints (session_id, id, version, body) VALUES (?1, ?2, ?3, ?4)",
    ),
    (
        "subsessions",
        "SELECT parent_id, child_id, agent, tool_call_id, status, created_at, updated_at, name, mode \
         FROM subsessions WHERE parent_id = ?1 ORDER BY child_id",
        "INSERT INTO subsessions (parent_id, child_id, agent, tool_call_id, status, created_at, updated_at, name, mode) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    ),
];

/// The replication of one session's object to D1.
pub struct Replica {
    sql: Sql,
    d1: Option<D1>,
    /// Commits and bytes waiting, once counted (kept up to date by every write).
    waiting: Cell<Option<(u64, u64)>>,
    /// A replication is under way (there is one at a time; it takes everything queued).
    sending: Cell<bool>,
    /// Consecutive failed attempts, for the backoff.
    failures: Cell<u32>,
    /// A session is being erased: nothing is sent meanwhile.
    paused: Cell<bool>,
}

/// How a replication ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Replicated {
    /// Everything queued is in D1 (`commits` were sent now).
    Caught {
        /// Commits sent.
        commits: u64,
    },
    /// Another replication is under way.
    Busy,
    /// D1 failed; retry after this many milliseconds.
    Failed {
        /// The backoff.
        retry_ms: u64,
        /// Why.
        error: StoreError,
    },
}

/// The backoff after `failures` consecutive failures: 1 s, doubling, at most 60 s.
pub fn backoff_ms(failures: u32) -> u64 {
    1_000u64.saturating_mul(1 << failures.min(6)).min(60_000)
}

fn sql_value(v: &serde_json::Value) -> SqlStorageValue {
    match v {
        serde_json::Value::String(s) => SqlStorageValue::from(s.as_str()),
        serde_json::Value::Number(n) => SqlStorageValue::from(n.as_i64().unwrap_or_default()),
        _ => SqlStorageValue::Null,
    }
}

/// A local cell as the JSON value a D1 cell would read as.
#[cfg(feature = "test-routes")]
fn json_cell(v: &SqlStorageValue) -> serde_json::Value {
    match v {
        SqlStorageValue::String(s) => serde_json::Value::String(s.clone()),
        SqlStorageValue::Integer(n) => serde_json::json!(n),
        SqlStorageValue::Float(f) => serde_json::json!(*f as i64),
        _ => serde_json::Value::Null,
    }
}

impl Replica {
    /// The replication of the object's session in `sql` to `d1` (none: nothing to
    /// replicate to, as when the binding is missing; every send then fails).
    pub fn new(sql: Sql, d1: Option<D1>) -> Self {
        Self {
            sql,
            d1,
            waiting: Cell::new(None),
            sending: Cell::new(false),
            failures: Cell::new(0),
            paused: Cell::new(false),
        }
    }

    /// Commits and bytes waiting for D1.
    pub fn backlog(&self) -> (u64, u64) {
        if let Some(known) = self.waiting.get() {
            return known;
        }
        let rows = self
            .sql
            .query(
                "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM replica_outbox",
                Vec::new(),
            )
            .unwrap_or_default();
        let known = rows.first().map_or((0, 0), |r| {
            (int(r, 0).unwrap_or(0) as u64, int(r, 1).unwrap_or(0) as u64)
        });
        self.waiting.set(Some(known));
        known
    }

    /// The statement that queues `batch`, committed as `version` of session `id`, for
    /// D1 — run in the commit's own transaction.
    pub fn enqueue(
        &self,
        id: &str,
        version: u64,
        batch: &[Statement],
    ) -> Result<Owned, StoreError> {
        let json = batch_json(batch)
            .ok_or_else(|| StoreError::Corrupt("cannot queue the commit for D1".into()))?;
        // One row of the object's SQLite holds at most 2 MB.
        if json.len() > OUTBOX_ROW_BYTES {
            let (what, bytes, limit) = ("commit", json.len(), OUTBOX_ROW_BYTES);
            return Err(StoreError::TooLarge { what, bytes, limit });
        }
        let bytes = json.len() as u64;
        let (commits, total) = self.backlog();
        self.waiting.set(Some((commits + 1, total + bytes)));
        let now = worker::Date::now().as_millis();
        let args = vec![
            SqlStorageValue::from(id),
            SqlStorageValue::from(version as i64),
            SqlStorageValue::from(json),
            SqlStorageValue::from(bytes as i64),
            SqlStorageValue::from(now as i64),
        ];
        let q = "INSERT INTO replica_outbox (session_id, version, batch, bytes, committed_at) \
                 VALUES (?, ?, ?, ?, ?)";
        Ok((q.to_string(), args))
    }

    /// Forgets the counts (after a failed transaction, which may have counted a commit
    /// that was rolled back).
    pub fn recount(&self) {
        self.waiting.set(None);
    }

    /// Test builds: how long each replicated commit waited for D1 (ms), oldest first
    /// (kept in the object's storage, so that they outlive its eviction).
    #[cfg(feature = "test-routes")]
    pub fn lags(&self) -> Vec<u64> {
        let kept = self.sql.mark("replica_lags").unwrap_or_default();
        kept.split(',').filter_map(|n| n.parse().ok()).collect()
    }

    /// Test builds: records the lags of commits D1 just took.
    #[cfg(feature = "test-routes")]
    fn record_lags(&self, committed_at: &[u64]) {
        let now = worker::Date::now().as_millis();
        let mut lags = self.lags();
        lags.extend(committed_at.iter().map(|at| now.saturating_sub(*at)));
        let excess = lags.len().saturating_sub(LAGS_KEPT);
        let kept: Vec<String> = lags[excess..].iter().map(u64::to_string).collect();
        self.sql.set_mark("replica_lags", Some(&kept.join(",")));
    }

    fn d1(&self) -> Result<&D1, StoreError> {
        self.d1
            .as_ref()
            .ok_or_else(|| StoreError::Backend("the D1 binding is missing".into()))
    }

    /// Sends everything queued to D1, in order, until the outbox is empty or D1 fails.
    pub async fn replicate(&self) -> Replicated {
        if self.paused.get() || self.sending.replace(true) {
            return Replicated::Busy;
        }
        let outcome = self.send_all().await;
        self.sending.set(false);
        match outcome {
            Ok(commits) => {
                self.failures.set(0);
                Replicated::Caught { commits }
            }
            Err(error) => {
                let failures = self.failures.get();
                self.failures.set(failures + 1);
                let retry_ms = backoff_ms(failures);
                Replicated::Failed { retry_ms, error }
            }
        }
    }

    async fn send_all(&self) -> Result<u64, StoreError> {
        let d1 = self.d1()?;
        let mut sent = 0;
        loop {
            let rows = self
                .sql
                .query(
                    "SELECT seq, session_id, version, batch, bytes, committed_at FROM replica_outbox \
                     ORDER BY seq LIMIT 256",
                    Vec::new(),
                )
                .map_err(|e| crate::storage::sql::backend("reading the outbox", e))?;
            if rows.is_empty() {
                self.waiting.set(Some((0, 0)));
                return Ok(sent);
            }
            let malformed = || StoreError::Corrupt("an outbox row is malformed".into());
            let mut prepared = Vec::new();
            let (mut bytes, mut last, mut taken) = (0u64, 0i64, Vec::new());
            for row in &rows {
                let size = int(row, 4).unwrap_or(0) as u64;
                if !taken.is_empty() && bytes + size > BATCH_BYTES {
                    break;
                }
                let (Some(seq), Some(batch)) = (int(row, 0), cell_text(row, 3)) else {
                    return Err(malformed());
                };
                prepared.extend(d1.prepared_json(&batch)?);
                bytes += size;
                last = seq;
                taken.push(int(row, 5).unwrap_or(0) as u64);
            }
            let first = &rows[0];
            match d1.batch(prepared).await {
                Ok(()) => {
                    self.acknowledge_upto(last)?;
                    sent += taken.len() as u64;
                    #[cfg(feature = "test-routes")]
                    self.record_lags(&taken);
                }
                // The batch's guard failed: D1 holds the first commit already (sent
                // before, by a process that did not live to drop it). Drop what D1 has
                // of that session and go on.
                Err(StoreError::Backend(m))
                    if matches!(
                        SqlFailure::of(&m),
                        SqlFailure::Check | SqlFailure::Unique("sessions.id")
                    ) =>
                {
                    let (Some(session), Some(version)) = (cell_text(first, 1), int(first, 2))
                    else {
                        return Err(malformed());
                    };
                    let held = self.version_in_d1(&session).await?;
                    if held < version as u64 {
                        return Err(StoreError::Backend(format!(
                            "D1 holds version {held} of session {session}, but the next commit queued is {version}"
                        )));
                    }
                    self.acknowledge(&session, held)?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// D1 holds every queued commit up to outbox row `seq`: drop them.
    fn acknowledge_upto(&self, seq: i64) -> Result<(), StoreError> {
        self.sql
            .run(
                "DELETE FROM replica_outbox WHERE seq <= ?",
                vec![SqlStorageValue::from(seq)],
            )
            .map_err(|e| crate::storage::sql::backend("clearing the outbox", e))?;
        self.waiting.set(None);
        Ok(())
    }

    /// D1 holds every commit of session `id` up to `version`: drop them.
    fn acknowledge(&self, id: &str, version: u64) -> Result<(), StoreError> {
        self.sql
            .run(
                "DELETE FROM replica_outbox WHERE session_id = ? AND version <= ?",
                vec![
                    SqlStorageValue::from(id),
                    SqlStorageValue::from(version as i64),
                ],
            )
            .map_err(|e| crate::storage::sql::backend("clearing the outbox", e))?;
        self.waiting.set(None);
        Ok(())
    }

    /// Removes session `id` from D1, then runs `local` (which removes it, and what waits
    /// for D1 of it, from the object), with replication paused throughout: a send under
    /// way finishes first, and nothing of the session is sent after D1 dropped it. When
    /// D1 fails nothing local is touched, so the session stays whole and the erasure
    /// can be repeated.
    pub async fn erase(
        &self,
        id: &str,
        local: impl FnOnce() -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.paused.set(true);
        let erased = self.erase_paused(id, local).await;
        self.paused.set(false);
        erased
    }

    async fn erase_paused(
        &self,
        id: &str,
        local: impl FnOnce() -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // A replication under way (D1 may be slow) finishes first: at most 30 s.
        for _ in 0..600 {
            if !self.sending.get() {
                break;
            }
            worker::Delay::from(std::time::Duration::from_millis(50)).await;
        }
        if self.sending.get() {
            return Err(StoreError::Backend(
                "a replication to D1 is still under way".into(),
            ));
        }
        if let Some(d1) = &self.d1 {
            let json = batch_json(&crate::store::rows::plan_delete(id))
                .ok_or_else(|| StoreError::Corrupt("cannot encode the deletion".into()))?;
            d1.batch(d1.prepared_json(&json)?).await?;
        }
        local()?;
        self.waiting.set(None);
        Ok(())
    }

    /// The version of session `id` D1 holds (0: none).
    async fn version_in_d1(&self, id: &str) -> Result<u64, StoreError> {
        let rows = self
            .d1()?
            .read("SELECT version FROM sessions WHERE id = ?1", &[text(id)])
            .await?;
        rows.first().map_or(Ok(0), |r| r.int(0))
    }

    /// Copies session `id` from D1 into the object's (empty) storage; `false` if D1
    /// does not have it either.
    pub async fn rebuild(&self, id: &str, sql: &Sql) -> Result<bool, StoreError> {
        let Some(d1) = &self.d1 else {
            return Ok(false);
        };
        let mut statements: Vec<Owned> = Vec::new();
        for (table, select, insert) in TABLES {
            let rows = d1.read(select, &[text(id)]).await?;
            if *table == "sessions" && rows.is_empty() {
                return Ok(false);
            }
            for row in rows {
                let args = row.cells().iter().map(sql_value).collect();
                statements.push((insert.to_string(), args));
            }
        }
        sql.atomically(statements)?;
        let fields = serde_json::json!({ "session": id });
        crate::worker_host::log(crate::host::Level::Warn, "session_rebuilt_from_d1", fields);
        Ok(true)
    }

    /// Every row of session `id`, table by table, in the object's storage and in D1
    /// (for the test build's invariant check).
    #[cfg(feature = "test-routes")]
    pub async fn dump(
        &self,
        id: &str,
    ) -> Result<(serde_json::Value, serde_json::Value), StoreError> {
        let d1 = self.d1()?;
        let (mut local, mut remote) = (serde_json::Map::new(), serde_json::Map::new());
        for (table, select, _) in TABLES {
            let rows = self
                .sql
                .query(select, vec![SqlStorageValue::from(id)])
                .map_err(|e| crate::storage::sql::backend("dumping", e))?;
            let cells = |r: &Vec<SqlStorageValue>| {
                serde_json::Value::Array(r.iter().map(json_cell).collect())
            };
            local.insert(table.to_string(), rows.iter().map(cells).collect());
            let rows: Vec<crate::d1::Row> = d1.read(select, &[text(id)]).await?;
            let cells = |r: &crate::d1::Row| serde_json::Value::Array(r.cells());
            remote.insert(table.to_string(), rows.iter().map(cells).collect());
        }
        Ok((local.into(), remote.into()))
    }
}
