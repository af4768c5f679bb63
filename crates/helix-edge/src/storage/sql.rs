//! The session object's own SQLite, as the store, the journal parts and the replica
//! outbox use it: one schema created in one call, atomic batches of statements
//! (`transactionSync`), rows read as cells, and a small key-value table of marks. Every
//! SQL call here is synchronous and reads every row of its cursor (never `one()`, which
//! resets the object on zero rows).

use crate::store::StoreError;
use crate::store::rows::{Arg, Statement};
use std::cell::RefCell;
use std::rc::Rc;
use worker::js_sys::{Function, Reflect};
use worker::wasm_bindgen::closure::Closure;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::{SqlStorage, SqlStorageValue};

/// The object's tables: the store's (laid out as in D1), the stream's `events`, the
/// `journal_meta` key-value table (marks, step attempts, answers, claims, routes), and
/// the replica outbox. One call for all, and few tables: every new session's object
/// creates them, and that was the largest SQL cost of a session's first request.
const SCHEMA: &str = "\
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
const UPGRADE: &str =
    "ALTER TABLE subsessions ADD COLUMN name TEXT; ALTER TABLE subsessions ADD COLUMN mode TEXT";
/// A query that works once [`UPGRADE`] is applied.
const UPGRADE_PROBE: &str = "SELECT name, mode FROM subsessions LIMIT 0";

/// The object's SQLite storage.
#[derive(Clone)]
pub struct Sql {
    sql: SqlStorage,
    /// The object's `DurableObjectStorage`, for `transactionSync`.
    storage: JsValue,
}

/// One row's cells, in the SELECT's column order.
pub type Row = Vec<SqlStorageValue>;

impl Sql {
    /// Opens the object's storage, creating its tables on first use.
    pub fn open(state: &worker::State) -> worker::Result<Self> {
        let storage = state.storage();
        let sql = storage.sql();
        sql.exec(SCHEMA, None)?;
        let storage: JsValue = state
            .as_raw()
            .storage()
            .map_err(worker::Error::from)?
            .into();
        let this = Self { sql, storage };
        if this.sql.exec(UPGRADE_PROBE, None).is_err() {
            this.sql.exec(UPGRADE, None)?;
        }
        Ok(this)
    }

    /// The rows of a query. Decoded by hand rather than through `to_array`
    /// (serde_wasm_bindgen), which would grow the bundle by a deserializer per row type.
    pub fn query(&self, q: &str, args: Vec<SqlStorageValue>) -> worker::Result<Vec<Row>> {
        self.sql.exec(q, Some(args))?.raw().collect()
    }

    /// Runs a statement.
    pub fn run(&self, q: &str, args: Vec<SqlStorageValue>) -> worker::Result<()> {
        self.sql.exec(q, Some(args)).map(drop)
    }

    /// Runs `statements` as one transaction: all of them, or, if one fails, none (the
    /// error is that statement's).
    pub fn atomically(&self, statements: Vec<Owned>) -> Result<(), StoreError> {
        let failure: Rc<RefCell<Option<String>>> = Rc::default();
        let sql = self.sql.clone();
        let failed = failure.clone();
        let body = Closure::once(move || -> Result<JsValue, JsValue> {
            for (q, args) in statements {
                if let Err(e) = sql.exec(&q, Some(args)) {
                    let message = e.to_string();
                    *failed.borrow_mut() = Some(message.clone());
                    // Throwing makes transactionSync roll back everything before.
                    return Err(JsValue::from_str(&message));
                }
            }
            Ok(JsValue::UNDEFINED)
        });
        let run = Reflect::get(&self.storage, &JsValue::from_str("transactionSync"))
            .ok()
            .and_then(|f| f.dyn_into::<Function>().ok())
            .ok_or_else(|| StoreError::Backend("transactionSync is not available".into()))?;
        match run.call1(&self.storage, body.as_ref().unchecked_ref()) {
            Ok(_) => Ok(()),
            Err(thrown) => {
                let message = failure
                    .borrow_mut()
                    .take()
                    .or_else(|| thrown.as_string())
                    .unwrap_or_else(|| "the transaction failed".into());
                Err(StoreError::Backend(message))
            }
        }
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

/// A statement with owned parameters, for [`Sql::atomically`].
pub type Owned = (String, Vec<SqlStorageValue>);

/// A planned statement as the object's SQLite runs it.
pub fn owned(s: &Statement) -> Owned {
    let arg = |a: &Arg| match a {
        Arg::Text(t) => SqlStorageValue::from(t.as_str()),
        // Every value the plans bind stays far below 2^53.
        Arg::Int(n) => SqlStorageValue::from(*n as i64),
        Arg::Null => SqlStorageValue::Null,
    };
    (s.sql.to_string(), s.args.iter().map(arg).collect())
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
