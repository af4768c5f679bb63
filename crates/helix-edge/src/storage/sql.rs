//! The session object's own SQLite, as the journal parts and the outbox use it: one
//! schema created in one call, rows read as cells, and a small key-value table of
//! marks. Every SQL call here is synchronous and reads every row of its cursor (never
//! `one()`, which resets the object on zero rows).

use crate::store::StoreError;
use worker::{SqlStorage, SqlStorageValue};

/// The object's tables. One call for all: each SQL call costs the object CPU, and every
/// new session's object creates them.
const SCHEMA: &str = "\
    CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, event TEXT NOT NULL, data TEXT NOT NULL); \
    CREATE TABLE IF NOT EXISTS journal_meta (k TEXT PRIMARY KEY, v TEXT NOT NULL); \
    CREATE TABLE IF NOT EXISTS step_attempts (run_id TEXT NOT NULL, step INTEGER NOT NULL, \
      n INTEGER NOT NULL, PRIMARY KEY (run_id, step)); \
    CREATE TABLE IF NOT EXISTS claims (run_id TEXT NOT NULL, step INTEGER NOT NULL, \
      tool_call_id TEXT NOT NULL, instance TEXT NOT NULL, PRIMARY KEY (run_id, step, tool_call_id)); \
    CREATE TABLE IF NOT EXISTS answers (session_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, \
      body TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (session_id, tool_call_id)); \
    CREATE TABLE IF NOT EXISTS routes (tool_call_id TEXT PRIMARY KEY, owner TEXT NOT NULL); \
    CREATE TABLE IF NOT EXISTS created (session_id TEXT PRIMARY KEY, pending TEXT)";

/// The object's SQLite storage.
#[derive(Clone)]
pub struct Sql(SqlStorage);

/// One row's cells, in the SELECT's column order.
pub type Row = Vec<SqlStorageValue>;

impl Sql {
    /// Opens the object's storage, creating its tables on first use.
    pub fn open(sql: SqlStorage) -> worker::Result<Self> {
        sql.exec(SCHEMA, None)?;
        Ok(Self(sql))
    }

    /// The rows of a query. Decoded by hand rather than through `to_array`
    /// (serde_wasm_bindgen), which would grow the bundle by a deserializer per row type.
    pub fn query(&self, q: &str, args: Vec<SqlStorageValue>) -> worker::Result<Vec<Row>> {
        self.0.exec(q, Some(args))?.raw().collect()
    }

    /// Runs a statement.
    pub fn run(&self, q: &str, args: Vec<SqlStorageValue>) -> worker::Result<()> {
        self.0.exec(q, Some(args)).map(drop)
    }

    /// A mark kept with the journal (`None` when unset or unreadable).
    pub fn mark(&self, key: &str) -> Option<String> {
        let rows = self
            .query("SELECT v FROM journal_meta WHERE k = ?", vec![key.into()])
            .unwrap_or_default();
        rows.first().and_then(|r| text(r, 0))
    }

    /// Sets (or, with `None`, clears) a mark; whether the write was made.
    pub fn set_mark(&self, key: &str, value: Option<&str>) -> bool {
        let result = match value {
            Some(v) => self.run(
                "INSERT INTO journal_meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                vec![key.into(), v.into()],
            ),
            None => self.run("DELETE FROM journal_meta WHERE k = ?", vec![key.into()]),
        };
        result.map_err(|e| log_error("mark", e)).is_ok()
    }

    /// A numeric mark (0 when unset).
    pub fn counter(&self, key: &str) -> u64 {
        self.mark(key).and_then(|v| v.parse().ok()).unwrap_or(0)
    }
}

/// An integer cell.
pub fn int(row: &[SqlStorageValue], i: usize) -> Option<i64> {
    match row.get(i)? {
        SqlStorageValue::Integer(n) => Some(*n),
        SqlStorageValue::Float(f) => Some(*f as i64),
        _ => None,
    }
}

/// A text cell.
pub fn text(row: &[SqlStorageValue], i: usize) -> Option<String> {
    match row.get(i)? {
        SqlStorageValue::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The integer in the first cell of the first row.
pub fn first_int(rows: &[Row]) -> Option<i64> {
    rows.first().and_then(|r| int(r, 0))
}

/// A storage error as the store reports it: what failed, and why.
pub fn backend(what: &str, e: worker::Error) -> StoreError {
    StoreError::Backend(format!("{what}: {e}"))
}

/// Logs a failed write that has no caller to report to.
pub fn log_error(what: &str, e: worker::Error) {
    let fields = serde_json::json!({ "what": what, "error": e.to_string() });
    crate::worker_host::log(crate::host::Level::Error, "journal_error", fields);
}
