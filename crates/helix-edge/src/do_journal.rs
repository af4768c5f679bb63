//! The session's stream journal in the Durable Object's own SQLite storage, and the fan
//! out of its events to the connected SSE clients.
//!
//! Storage: `events` (sequence, event name, data), `journal_meta` (the confirmed
//! sequence and the staged post-commit batch), `step_attempts`, and the suspension
//! context: `answers` (the first answer to each call) and `claims`. Retention: the newest
//! [`RETAINED_EVENTS`] events; a client asking to resume from before them gets a
//! `truncated` event first, then what is retained.
//!
//! Every SQL call here is synchronous and reads every row of its cursor (never `one()`, which
//! resets the object on zero rows).

use crate::chunk::StreamEvent;
use crate::journal::{Journal, Recovery};
use crate::store::{Answer, AnswerOutcome, StoreError, rows};
use futures::channel::mpsc;
use std::cell::{Cell, RefCell};
use worker::js_sys::{Array, JSON};
use worker::wasm_bindgen::JsValue;
use worker::{SqlStorage, SqlStorageValue};

/// How many events a session keeps for replay.
pub const RETAINED_EVENTS: u64 = 10_000;
/// Frames a slow client may have queued before it is disconnected (it resumes with
/// `Last-Event-ID`, losing nothing).
pub const CLIENT_QUEUE: usize = 1_024;

/// One SSE frame.
pub fn frame(seq: u64, event: &str, data: &str) -> Vec<u8> {
    format!("id: {seq}\nevent: {event}\ndata: {data}\n\n").into_bytes()
}

/// The frames queued for one connected client; an empty frame means "close".
pub type ClientSender = mpsc::Sender<Vec<u8>>;

/// The journal of one session.
pub struct DoJournal {
    sql: SqlStorage,
    last_seq: Cell<u64>,
    clients: RefCell<Vec<ClientSender>>,
    /// The staged batches as stored, once read or written: a commit stages and releases
    /// without reading them back from storage.
    staged: RefCell<Option<Vec<Staged>>>,
}

/// The rows of a query as cells, in column order. Decoded by hand rather than through
/// `to_array` (serde_wasm_bindgen), which would grow the bundle by a deserializer per row type.
pub(crate) fn query(
    sql: &SqlStorage,
    q: &str,
    args: Option<Vec<SqlStorageValue>>,
) -> worker::Result<Vec<Vec<SqlStorageValue>>> {
    sql.exec(q, args)?.raw().collect()
}

/// An integer cell.
fn int(row: &[SqlStorageValue], i: usize) -> Option<i64> {
    match row.get(i)? {
        SqlStorageValue::Integer(n) => Some(*n),
        SqlStorageValue::Float(f) => Some(*f as i64),
        _ => None,
    }
}

/// A text cell.
pub(crate) fn text(row: &[SqlStorageValue], i: usize) -> Option<String> {
    match row.get(i)? {
        SqlStorageValue::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// The integer in the first cell of the first row.
fn first_int(rows: &[Vec<SqlStorageValue>]) -> Option<i64> {
    rows.first().and_then(|r| int(r, 0))
}

/// A staged batch, kept as ready SSE parts (event name, data) so that releasing it never
/// parses events back (which would also put a chunk deserializer in the bundle).
struct Staged {
    commit_id: String,
    version: u64,
    events: Vec<(String, String)>,
}

/// Staged batches as stored, `[[commit id, version, [[event, data], …]], …]`, written and
/// read with the runtime's `JSON` (no serde code for them in the bundle). Text that does
/// not parse is no batch.
fn parse_staged(text: &str) -> Vec<Staged> {
    let Ok(all) = JSON::parse(text) else {
        return Vec::new();
    };
    let part = |e: JsValue| {
        let e = Array::from(&e);
        Some((e.get(0).as_string()?, e.get(1).as_string()?))
    };
    let batch = |s: JsValue| {
        let s = Array::from(&s);
        Some(Staged {
            commit_id: s.get(0).as_string()?,
            version: s.get(1).as_f64()? as u64,
            events: Array::from(&s.get(2))
                .iter()
                .map(part)
                .collect::<Option<_>>()?,
        })
    };
    Array::from(&all).iter().filter_map(batch).collect()
}

/// `JSON.stringify` of arrays of strings and numbers, which cannot fail.
fn staged_json(staged: &[Staged]) -> String {
    let all = Array::new();
    for s in staged {
        let part = |(event, data): &(String, String)| {
            Array::of2(&JsValue::from_str(event), &JsValue::from_str(data))
        };
        let events: Array = s.events.iter().map(part).collect();
        let version = JsValue::from_f64(s.version as f64);
        all.push(&Array::of3(
            &JsValue::from_str(&s.commit_id),
            &version,
            &events,
        ));
    }
    let json = JSON::stringify(&all).ok().and_then(|j| j.as_string());
    json.unwrap_or_default()
}

/// A storage error as the store reports it: what failed, and why.
pub(crate) fn backend(what: &str, e: worker::Error) -> StoreError {
    StoreError::Backend(format!("{what}: {e}"))
}

fn log_error(what: &str, e: worker::Error) {
    let fields = serde_json::json!({ "what": what, "error": e.to_string() });
    crate::worker_host::log(crate::host::Level::Error, "journal_error", fields);
}

impl DoJournal {
    /// Opens (and on first use creates) the journal tables, and the outbox's
    /// ([`Outbox`](super::outbox::Outbox)).
    pub fn open(sql: SqlStorage) -> worker::Result<Self> {
        // One call for all tables: each SQL call costs the object CPU, and every new
        // session's object opens its journal.
        sql.exec(
            "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, event TEXT NOT NULL, data TEXT NOT NULL); \
             CREATE TABLE IF NOT EXISTS journal_meta (k TEXT PRIMARY KEY, v TEXT NOT NULL); \
             CREATE TABLE IF NOT EXISTS step_attempts (run_id TEXT NOT NULL, step INTEGER NOT NULL, \
             n INTEGER NOT NULL, PRIMARY KEY (run_id, step)); \
             CREATE TABLE IF NOT EXISTS claims (run_id TEXT NOT NULL, step INTEGER NOT NULL, \
             tool_call_id TEXT NOT NULL, instance TEXT NOT NULL, PRIMARY KEY (run_id, step, tool_call_id)); \
             CREATE TABLE IF NOT EXISTS answers (session_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, \
             body TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (session_id, tool_call_id)); \
             CREATE TABLE IF NOT EXISTS created (session_id TEXT PRIMARY KEY, pending TEXT)",
            None,
        )?;
        let rows = query(&sql, "SELECT MAX(seq) FROM events", None)?;
        let last = first_int(&rows).unwrap_or(0) as u64;
        Ok(Self {
            sql,
            last_seq: Cell::new(last),
            clients: RefCell::new(Vec::new()),
            staged: RefCell::new(None),
        })
    }

    fn meta(&self, key: &str) -> Option<String> {
        let rows = query(
            &self.sql,
            "SELECT v FROM journal_meta WHERE k = ?",
            Some(vec![SqlStorageValue::from(key)]),
        )
        .unwrap_or_default();
        rows.first().and_then(|r| text(r, 0))
    }

    /// Whether the write was made.
    fn set_meta(&self, key: &str, value: Option<&str>) -> bool {
        let result = match value {
            Some(v) => self.sql.exec(
                "INSERT INTO journal_meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                vec![key.into(), v.into()],
            ),
            None => self.sql.exec("DELETE FROM journal_meta WHERE k = ?", vec![key.into()]),
        };
        result.map_err(|e| log_error("meta", e)).is_ok()
    }

    /// Takes the staged batches (from the kept copy when there is one); give them back
    /// with [`keep_staged`](Self::keep_staged) or [`set_staged`](Self::set_staged).
    fn staged(&self) -> Vec<Staged> {
        if let Some(staged) = self.staged.take() {
            return staged;
        }
        self.meta("staged")
            .map(|text| parse_staged(&text))
            .unwrap_or_default()
    }

    /// Gives back batches taken with [`staged`](Self::staged), unchanged.
    fn keep_staged(&self, staged: Vec<Staged>) {
        *self.staged.borrow_mut() = Some(staged);
    }

    fn set_staged(&self, staged: Vec<Staged>) {
        if staged.is_empty() && self.staged.borrow().as_ref().is_some_and(Vec::is_empty) {
            return;
        }
        let json = (!staged.is_empty()).then(|| staged_json(&staged));
        let written = self.set_meta("staged", json.as_deref());
        if written {
            self.keep_staged(staged);
        }
    }

    fn confirmed(&self) -> u64 {
        self.meta("confirmed")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Appends an event durably and sends it to every connected client.
    fn append(&self, event: &StreamEvent) -> u64 {
        self.append_parts(event.name(), &event.data_json())
    }

    fn append_parts(&self, name: &str, data: &str) -> u64 {
        let seq = self.last_seq.get() + 1;
        let inserted = self.sql.exec(
            "INSERT INTO events (seq, event, data) VALUES (?, ?, ?)",
            vec![SqlStorageValue::from(seq as i64), name.into(), data.into()],
        );
        if let Err(e) = inserted {
            log_error("append", e);
            return self.last_seq.get();
        }
        self.last_seq.set(seq);
        if seq.is_multiple_of(1_000) && seq > RETAINED_EVENTS {
            let cutoff = (seq - RETAINED_EVENTS) as i64;
            if let Err(e) = self
                .sql
                .exec("DELETE FROM events WHERE seq <= ?", vec![cutoff.into()])
            {
                log_error("retention", e);
            }
        }
        self.broadcast(frame(seq, name, data));
        if name == "end" || name == "fail" {
            self.close_clients();
        }
        seq
    }

    /// Sends a frame to every client, dropping those that are gone or too far behind.
    fn broadcast(&self, frame: Vec<u8>) {
        self.clients
            .borrow_mut()
            .retain_mut(|tx| tx.try_send(frame.clone()).is_ok());
    }

    /// Ends every connected stream (after `end` or `fail`).
    pub fn close_clients(&self) {
        for mut tx in self.clients.borrow_mut().drain(..) {
            let _ = tx.try_send(Vec::new());
        }
    }

    /// Registers a client and returns the frames it must get first: every retained
    /// event after `after` (with a `truncated` notice if some are gone).
    pub fn subscribe(&self, after: u64, tx: ClientSender) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        let oldest = query(&self.sql, "SELECT MIN(seq) FROM events", None).unwrap_or_default();
        let oldest = first_int(&oldest).map_or(self.last_seq.get() + 1, |s| s as u64);
        if after + 1 < oldest {
            let data =
                serde_json::json!({ "fromSequence": oldest, "requestedAfter": after }).to_string();
            frames.push(frame(oldest - 1, "truncated", &data));
        }
        let rows = query(
            &self.sql,
            "SELECT seq, event, data FROM events WHERE seq > ? ORDER BY seq",
            Some(vec![SqlStorageValue::from(after as i64)]),
        )
        .unwrap_or_default();
        frames.extend(
            rows.iter()
                .filter_map(|r| Some(frame(int(r, 0)? as u64, &text(r, 1)?, &text(r, 2)?))),
        );
        self.clients.borrow_mut().push(tx);
        frames
    }

    /// The confirmed chunks not yet relayed to the parent session (a child's stream is
    /// also shown on its parent's), at most `limit` events from the cursor on: the last
    /// sequence looked at and the chunks' `(sequence, data)`. Unconfirmed chunks (a
    /// step that has not committed) wait: they may yet be torn.
    pub fn unrelayed(&self, limit: u64) -> (u64, Vec<(u64, String)>) {
        let after: u64 = self
            .meta("relayed")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let upto = self.confirmed().min(after + limit);
        if upto <= after {
            return (after, Vec::new());
        }
        let rows = query(
            &self.sql,
            "SELECT seq, data FROM events WHERE seq > ? AND seq <= ? AND event = 'chunk' ORDER BY seq",
            Some(vec![
                SqlStorageValue::from(after as i64),
                SqlStorageValue::from(upto as i64),
            ]),
        )
        .unwrap_or_default();
        let chunks = rows
            .iter()
            .filter_map(|r| Some((int(r, 0)? as u64, text(r, 1)?)))
            .collect();
        (upto, chunks)
    }

    /// The parent acknowledged everything up to `seq`.
    pub fn mark_relayed(&self, seq: u64) {
        self.set_meta("relayed", Some(&seq.to_string()));
    }

    /// Appends chunks relayed from child session `from`, skipping those already
    /// appended (relays are retried: each is appended exactly once). They are durable
    /// in the child, so they count as confirmed when nothing unconfirmed precedes them.
    pub fn append_relayed(&self, from: &str, chunks: &[(u64, String)]) {
        let key = format!("relay:{from}");
        let mut cursor: u64 = self.meta(&key).and_then(|v| v.parse().ok()).unwrap_or(0);
        let settled = self.confirmed() == self.last_seq.get();
        for (seq, data) in chunks {
            if *seq > cursor {
                self.append_parts("chunk", data);
                cursor = *seq;
            }
        }
        self.set_meta(&key, Some(&cursor.to_string()));
        if settled {
            self.set_meta("confirmed", Some(&self.last_seq.get().to_string()));
        }
    }

    /// A flag kept with the journal (`None` when unset).
    pub fn flag(&self, key: &str) -> Option<String> {
        self.meta(key)
    }

    /// Sets a flag kept with the journal; whether it was written.
    pub fn set_flag(&self, key: &str, value: &str) -> bool {
        self.set_meta(key, Some(value))
    }

    /// Sends `: ping` to every client; returns how many are connected.
    pub fn ping(&self) -> usize {
        self.broadcast(b": ping\n\n".to_vec());
        self.clients.borrow().len()
    }
}

impl Journal for DoJournal {
    fn emit(&self, event: StreamEvent) -> u64 {
        self.append(&event)
    }

    fn stage(&self, commit_id: &str, version: u64, events: Vec<StreamEvent>) {
        let events = events
            .iter()
            .map(|e| (e.name().to_string(), e.data_json()))
            .collect();
        let mut staged = self.staged();
        staged.push(Staged {
            commit_id: commit_id.into(),
            version,
            events,
        });
        self.set_staged(staged);
    }

    fn release(&self, commit_id: &str) {
        let mut staged = self.staged();
        if let Some(pos) = staged.iter().position(|s| s.commit_id == commit_id) {
            let batch = staged.remove(pos);
            for (name, data) in &batch.events {
                self.append_parts(name, data);
            }
            // Rival writes of this or an older version lost the compare-and-set.
            staged.retain(|s| s.version > batch.version);
            self.set_staged(staged);
        } else {
            self.keep_staged(staged);
        }
        self.set_meta("confirmed", Some(&self.last_seq.get().to_string()));
    }

    fn discard(&self, commit_id: &str) {
        let mut staged = self.staged();
        staged.retain(|s| s.commit_id != commit_id);
        self.set_staged(staged);
    }

    fn recover(&self, _version: u64, commit_id: &str) -> Recovery {
        let staged = self.staged();
        let landed = staged.iter().any(|s| s.commit_id == commit_id);
        self.keep_staged(staged);
        if landed {
            self.release(commit_id);
        }
        // Whatever else is staged lost the compare-and-set.
        self.set_staged(Vec::new());
        let confirmed = self.confirmed();
        Recovery {
            torn_from: (self.last_seq.get() > confirmed).then_some(confirmed + 1),
        }
    }

    fn confirm(&self, _version: u64) {
        self.set_meta("confirmed", Some(&self.last_seq.get().to_string()));
    }

    fn begin_step(&self, run_id: &str, step: u32) -> u32 {
        let rows = query(
            &self.sql,
            "INSERT INTO step_attempts (run_id, step, n) VALUES (?, ?, 1) \
             ON CONFLICT (run_id, step) DO UPDATE SET n = n + 1 RETURNING n",
            Some(vec![run_id.into(), SqlStorageValue::from(i64::from(step))]),
        );
        match rows {
            Ok(rows) => first_int(&rows).map_or(1, |n| n as u32),
            Err(e) => {
                log_error("begin_step", e);
                1
            }
        }
    }

    fn claim(
        &self,
        run_id: &str,
        step: u32,
        tool_call_id: &str,
        instance: &str,
    ) -> Result<String, StoreError> {
        let key = || -> Vec<SqlStorageValue> {
            vec![run_id.into(), i64::from(step).into(), tool_call_id.into()]
        };
        // Synchronous check-and-insert, as for answers.
        let select =
            "SELECT instance FROM claims WHERE run_id = ? AND step = ? AND tool_call_id = ?";
        let rows =
            query(&self.sql, select, Some(key())).map_err(|e| backend("reading the claim", e))?;
        if let Some(owner) = rows.first().and_then(|r| text(r, 0)) {
            return Ok(owner);
        }
        let mut args = key();
        args.push(instance.into());
        // The output gate holds the tool's requests until this write is durable.
        self.sql
            .exec(
                "INSERT INTO claims (run_id, step, tool_call_id, instance) VALUES (?, ?, ?, ?)",
                args,
            )
            .map_err(|e| backend("storing the claim", e))?;
        Ok(instance.to_string())
    }

    fn answer(
        &self,
        session_id: &str,
        tool_call_id: &str,
        answer: &Answer,
    ) -> Result<AnswerOutcome, StoreError> {
        // Synchronous check-and-insert: no other request of this object runs in between.
        if let Some(existing) = self.find_answer(session_id, tool_call_id)? {
            return Ok(AnswerOutcome::AlreadyAnswered(existing));
        }
        let args = vec![
            session_id.into(),
            tool_call_id.into(),
            rows::to_json(answer)?.into(),
            SqlStorageValue::from(worker::Date::now().as_millis() as i64),
        ];
        self.sql
            .exec(
                "INSERT INTO answers (session_id, tool_call_id, body, created_at) VALUES (?, ?, ?, ?)",
                args,
            )
            .map_err(|e| backend("storing the answer", e))?;
        Ok(AnswerOutcome::Stored)
    }

    fn find_answer(
        &self,
        session_id: &str,
        tool_call_id: &str,
    ) -> Result<Option<Answer>, StoreError> {
        let select = "SELECT body FROM answers WHERE session_id = ? AND tool_call_id = ?";
        let rows = query(
            &self.sql,
            select,
            Some(vec![session_id.into(), tool_call_id.into()]),
        )
        .map_err(|e| backend("reading the answer", e))?;
        match rows.first().and_then(|r| text(r, 0)) {
            Some(body) => rows::from_json(&body).map(Some),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_bindgen_test::wasm_bindgen_test;

    /// Staged batches are stored as plain JSON through the runtime's `JSON`: they come
    /// back as written, event data with quotes, escapes and non-ASCII text included.
    #[wasm_bindgen_test]
    fn staged_batches_round_trip_through_their_stored_json() {
        let batches = [
            Staged {
                commit_id: "commit_1".into(),
                version: 7,
                events: vec![
                    (
                        "chunk".into(),
                        r#"{"type":"text_delta","delta":"a \"q\" \\ é"}"#.into(),
                    ),
                    ("end".into(), "{}".into()),
                ],
            },
            Staged {
                commit_id: "commit_2".into(),
                version: 9_007_199_254_740_991,
                events: vec![],
            },
        ];
        let json = staged_json(&batches);
        let back = parse_staged(&json);
        assert_eq!(back.len(), 2);
        for (a, b) in batches.iter().zip(&back) {
            assert_eq!(
                (&a.commit_id, a.version, &a.events),
                (&b.commit_id, b.version, &b.events)
            );
        }
        assert!(
            parse_staged("not json").is_empty(),
            "unreadable text is no batch"
        );
        assert!(
            parse_staged(r#"[["c", "x", []]]"#).is_empty(),
            "a batch needs its version"
        );
    }
}
