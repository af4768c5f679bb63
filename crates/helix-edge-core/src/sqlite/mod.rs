//! The session object's own SQLite, as the core uses it through [`Db`] (the platform
//! runs the statements; native tests run them on a real SQLite): one schema created in
//! one call, the session's store and commit log ([`SqliteStore`]), the three parts of
//! its journal ([`SqliteStreamLog`], [`SqliteAttempts`], [`SqliteSuspension`]), the
//! replication of its commits to the queryable record ([`Replica`]) and a small
//! key-value table of marks (the object's session id, a child's relay and report
//! cursors). Every call is synchronous and reads every row.

mod conformance;
mod journal;
mod replica;
mod store;
mod stream;

pub use conformance::suites;
pub use journal::{SqliteAttempts, SqliteSuspension};
pub use replica::{
    BATCH_BYTES, Batch, COALESCE_MS, OUTBOX_ROW_BYTES, Outboxed, Record, Replica, Replicated, Sent,
    TABLES, backoff_ms, batch_of, held_after_guard, sends,
};
pub use store::{BACKLOG_BYTES, DEFAULT_BACKLOG_COMMITS, SqliteStore, backlog_refused};
pub use stream::{
    CLIENT_QUEUE, ClientSender, Clients, EVENTS_PER_INSERT, RETAINED_EVENTS, SqliteStreamLog,
    frame, retention_cutoff,
};

use crate::store::StoreError;
use crate::store::rows::{Arg, Statement};

/// One SQL value read back.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// NULL.
    Null,
    /// INTEGER.
    Int(i64),
    /// REAL.
    Real(f64),
    /// TEXT.
    Text(String),
}

impl Cell {
    /// The integer it holds (a REAL truncated).
    pub fn int(&self) -> Option<i64> {
        match self {
            Self::Int(n) => Some(*n),
            Self::Real(f) => Some(*f as i64),
            _ => None,
        }
    }

    /// The text it holds.
    pub fn text(&self) -> Option<&str> {
        match self {
            Self::Text(s) => Some(s),
            _ => None,
        }
    }
}

/// One row's cells, in the SELECT's column order.
pub type Row = Vec<Cell>;

/// A statement with its own SQL text (the stream's multi-row inserts build theirs).
pub type Owned = (String, Vec<Arg>);

/// The object's SQLite: synchronous, one writer. Errors are SQLite's messages.
pub trait Db {
    /// The rows of a query (or of a statement's `RETURNING`).
    fn query(&self, sql: &str, args: &[Arg]) -> Result<Vec<Row>, String>;
    /// Runs `statements` as one transaction: all of them, or, if one fails, none (the
    /// error is that statement's).
    fn atomically(&self, statements: &[Owned]) -> Result<(), String>;
}

/// A planned statement, owned.
pub fn owned(s: &Statement) -> Owned {
    (s.sql.to_string(), s.args.clone())
}

/// The integer in cell `i` of `row`.
pub fn int(row: &[Cell], i: usize) -> Option<i64> {
    row.get(i)?.int()
}

/// The text in cell `i` of `row`.
pub fn text(row: &[Cell], i: usize) -> Option<String> {
    row.get(i)?.text().map(str::to_string)
}

/// The integer in the first cell of the first row.
pub fn first_int(rows: &[Row]) -> Option<i64> {
    rows.first().and_then(|r| int(r, 0))
}

/// A local storage error: what failed, and why.
pub fn backend(what: &str, e: String) -> StoreError {
    StoreError::Backend(format!("{what}: {e}"))
}

/// The object's tables: the store's (laid out as in D1), the stream's `events`, the
/// `journal_meta` key-value table (marks, step attempts, answers, claims, routes), and
/// the replica outbox. One call for all, and few tables: every new session's object
/// creates them, and that was the largest SQL cost of a session's first request.
pub const SCHEMA: &str = "\
    CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, event TEXT NOT NULL, data TEXT NOT NULL); \
    CREATE TABLE IF NOT EXISTS journal_meta (k TEXT PRIMARY KEY, v TEXT NOT NULL); \
    CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, agent TEXT NOT NULL, status TEXT NOT NULL, \
      version INTEGER NOT NULL, head TEXT NOT NULL, interrupt TEXT, snapshot_version INTEGER NOT NULL, \
      created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL); \
    CREATE TABLE IF NOT EXISTS messages (session_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, \
      PRIMARY KEY (session_id, seq)); \
    CREATE TABLE IF NOT EXISTS state_log (session_id TEXT NOT NULL, version INTEGER NOT NULL, \
      kind TEXT NOT NULL CHECK (kind IN ('snapshot', 'patch')), body TEXT NOT NULL, PRIMARY KEY (session_id, version)); \
    CREATE TABLE IF NOT EXISTS runs (session_id TEXT NOT NULL, run_id TEXT NOT NULL, turn INTEGER NOT NULL, \
      body TEXT NOT NULL, PRIMARY KEY (session_id, run_id)); \
    CREATE TABLE IF NOT EXISTS checkpoints (session_id TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, \
      body TEXT NOT NULL, PRIMARY KEY (session_id, id)); \
    CREATE TABLE IF NOT EXISTS subsessions (parent_id TEXT NOT NULL, child_id TEXT NOT NULL, agent TEXT NOT NULL, \
      tool_call_id TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, \
      name TEXT, mode TEXT, PRIMARY KEY (parent_id, child_id)); \
    CREATE TABLE IF NOT EXISTS replica_outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, \
      version INTEGER NOT NULL, batch TEXT NOT NULL, bytes INTEGER NOT NULL, committed_at INTEGER NOT NULL)";

/// The tables' changes since their first version (the schema above has them), for an
/// object created before them: applied when the probe, a query that needs them, fails
/// (in the same synchronous turn as the object's first request, so nothing runs against
/// the old tables).
pub const UPGRADE: &str =
    "ALTER TABLE subsessions ADD COLUMN name TEXT; ALTER TABLE subsessions ADD COLUMN mode TEXT";
/// A query that works once [`UPGRADE`] is applied.
pub const UPGRADE_PROBE: &str = "SELECT name, mode FROM subsessions LIMIT 0";

/// A mark kept with the journal (`None` when unset or unreadable).
pub fn mark(db: &dyn Db, key: &str) -> Option<String> {
    let rows = db
        .query(
            "SELECT v FROM journal_meta WHERE k = ?",
            &[Arg::Text(key.into())],
        )
        .unwrap_or_default();
    rows.first().and_then(|r| text(r, 0))
}

/// Sets (or, with `None`, clears) a mark.
pub fn set_mark(db: &dyn Db, key: &str, value: Option<&str>) -> Result<(), String> {
    let key = Arg::Text(key.into());
    match value {
        Some(v) => db.query(
            "INSERT INTO journal_meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
            &[key, Arg::Text(v.into())],
        ),
        None => db.query("DELETE FROM journal_meta WHERE k = ?", &[key]),
    }
    .map(drop)
}

/// A numeric mark (0 when unset).
pub fn counter(db: &dyn Db, key: &str) -> u64 {
    mark(db, key).and_then(|v| v.parse().ok()).unwrap_or(0)
}
