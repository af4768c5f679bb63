//! The session copied between the object's storage and the record: [`TABLES`], the rows
//! both hold, read back to rebuild a session whose object lost it ([`Replica::rebuild`])
//! and to check the replication invariant ([`Replica::compare`], [`Replica::dump`]).

use super::{Record, Replica, local};
use crate::host::{Level, LogValue};
use crate::sqlite::{Cell, Owned, Row, int, text};
use crate::store::StoreError;
use crate::store::rows::Arg;
use serde_json::{Map, Value};

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

impl<R: Record> Replica<R> {
    /// Copies session `id` from the record into the object's (empty) storage; `false`
    /// if the record does not have it either.
    pub async fn rebuild(&self, id: &str) -> Result<bool, StoreError> {
        let Some(record) = &self.record else {
            return Ok(false);
        };
        let mut statements: Vec<Owned> = Vec::new();
        let mut messages = 0;
        for (table, select, insert) in TABLES {
            let rows = record.read(select, vec![Arg::Text(id.into())]).await?;
            if *table == "sessions" && rows.is_empty() {
                return Ok(false);
            }
            // A whole copy only: a record that keeps the index (compacted by retention,
            // or `D1_REPLICA=index`, perhaps with rows sent since) is no copy to rebuild
            // from — the transcript must start at 0 and be as long as the head says,
            // and the state must have a snapshot.
            let whole = match *table {
                "sessions" => {
                    let head = rows.first().and_then(|r| text(r, 4)).unwrap_or_default();
                    let head: Value = serde_json::from_str(&head).unwrap_or_default();
                    messages = head["messageCount"].as_u64().unwrap_or(u64::MAX);
                    true
                }
                "messages" => {
                    let first = rows.first().and_then(|r| int(r, 1));
                    rows.len() as u64 == messages && (messages == 0 || first == Some(0))
                }
                "state_log" => rows
                    .iter()
                    .any(|r| text(r, 2).as_deref() == Some("snapshot")),
                _ => true,
            };
            if !whole {
                let fields = [
                    ("session", LogValue::Str(id)),
                    ("table", LogValue::Str(table)),
                ];
                self.host
                    .log(Level::Warn, "session_not_rebuilt_from_index", &fields);
                return Ok(false);
            }
            for row in rows {
                statements.push((insert.to_string(), row.iter().map(arg_of).collect()));
            }
        }
        self.db
            .atomically(&statements)
            .map_err(local("rebuilding the session"))?;
        let fields = [("session", LogValue::Str(id))];
        self.host
            .log(Level::Warn, "session_rebuilt_from_d1", &fields);
        Ok(true)
    }

    /// The replication invariant for session `id`: the rows in the object's storage and
    /// in the record, counted, whether they are equal, and both when they are not.
    pub async fn compare(&self, id: &str) -> Result<Value, StoreError> {
        let (local, remote) = self.dump(id).await?;
        let rows = |dump: &Value| -> usize {
            let tables = dump.as_object().into_iter().flat_map(|t| t.values());
            tables
                .filter_map(|rows| rows.as_array())
                .map(Vec::len)
                .sum()
        };
        let mut report = serde_json::json!({
            "rows": { "local": rows(&local), "remote": rows(&remote) },
            "equal": local == remote,
        });
        if local != remote {
            report["local"] = local;
            report["remote"] = remote;
        }
        Ok(report)
    }

    /// Every row of session `id`, table by table, in the object's storage and in the
    /// record (for the test build's invariant check).
    pub async fn dump(&self, id: &str) -> Result<(Value, Value), StoreError> {
        let record = self.record()?;
        let (mut local_rows, mut remote) = (Map::new(), Map::new());
        let cells = |r: &Row| Value::Array(r.iter().map(json_of).collect());
        let transcript = ["messages", "checkpoints", "state_log"];
        for (table, select, _) in TABLES {
            if self.keeps_index_only() && transcript.contains(table) {
                continue; // the record has none of it
            }
            let args = [Arg::Text(id.into())];
            let rows = self.db.query(select, &args).map_err(local("dumping"))?;
            local_rows.insert(table.to_string(), rows.iter().map(cells).collect());
            let rows = record.read(select, args.to_vec()).await?;
            remote.insert(table.to_string(), rows.iter().map(cells).collect());
        }
        Ok((local_rows.into(), remote.into()))
    }
}

/// A cell read from the record as the argument that writes it back.
fn arg_of(cell: &Cell) -> Arg {
    match cell {
        Cell::Text(s) => Arg::Text(s.clone()),
        Cell::Int(n) => Arg::Int((*n).max(0) as u64),
        Cell::Real(f) => Arg::Int(f.max(0.0) as u64),
        Cell::Null => Arg::Null,
    }
}

/// A cell as JSON (integers whole), for comparisons.
fn json_of(cell: &Cell) -> Value {
    match cell {
        Cell::Text(s) => Value::String(s.clone()),
        Cell::Int(n) => Value::from(*n),
        Cell::Real(f) => Value::from(*f as i64),
        Cell::Null => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_read_back_are_written_back_as_they_were() {
        assert_eq!(arg_of(&Cell::Text("a".into())), Arg::Text("a".into()));
        assert_eq!(arg_of(&Cell::Int(3)), Arg::Int(3));
        assert_eq!(
            arg_of(&Cell::Real(4.0)),
            Arg::Int(4),
            "D1's numbers are JS numbers"
        );
        assert_eq!(arg_of(&Cell::Null), Arg::Null);
        assert_eq!(json_of(&Cell::Real(4.0)), Value::from(4));
    }
}
