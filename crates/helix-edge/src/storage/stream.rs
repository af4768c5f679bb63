//! The stream log in the session object's SQLite ([`StreamLog`]), which also fans its
//! events out to the connected SSE clients, and a child session's relay of its stream
//! to its parent's.
//!
//! Storage: `events` (sequence, event name, data) and marks in `journal_meta` — the
//! confirmed sequence, the staged post-commit batches, and the relay cursors. Retention:
//! the newest [`RETAINED_EVENTS`] events; a client asking to resume from before them
//! gets a `truncated` event first, then what is retained.

use super::clients::{ClientSender, Clients, frame};
use super::sql::{Sql, first_int, int, log_error, text};
use crate::chunk::StreamEvent;
use crate::journal::{Frame, Recovery, StreamLog};
use std::cell::{Cell, RefCell};
use worker::SqlStorageValue;
use worker::js_sys::{Array, JSON};
use worker::wasm_bindgen::JsValue;

/// How many events a session keeps for replay.
pub const RETAINED_EVENTS: u64 = 10_000;

/// The stream of one session.
pub struct SqlStreamLog {
    sql: Sql,
    last_seq: Cell<u64>,
    clients: Clients,
    /// The staged batches as stored, once read or written: a commit stages and releases
    /// without reading them back from storage.
    staged: RefCell<Option<Vec<Staged>>>,
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

impl SqlStreamLog {
    /// The stream in `sql`.
    pub fn open(sql: Sql) -> worker::Result<Self> {
        let rows = sql.query("SELECT MAX(seq) FROM events", Vec::new())?;
        let last = first_int(&rows).unwrap_or(0) as u64;
        Ok(Self {
            sql,
            last_seq: Cell::new(last),
            clients: Clients::default(),
            staged: RefCell::new(None),
        })
    }

    /// Takes the staged batches (from the kept copy when there is one); give them back
    /// with [`keep_staged`](Self::keep_staged) or [`set_staged`](Self::set_staged).
    fn staged(&self) -> Vec<Staged> {
        if let Some(staged) = self.staged.take() {
            return staged;
        }
        self.sql
            .mark("staged")
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
        if self.sql.set_mark("staged", json.as_deref()) {
            self.keep_staged(staged);
        }
    }

    fn set_confirmed(&self) {
        self.sql
            .set_mark("confirmed", Some(&self.last_seq.get().to_string()));
    }

    /// Appends an event durably and sends it to every connected client.
    fn append(&self, name: &str, data: &str) -> u64 {
        let seq = self.last_seq.get() + 1;
        let inserted = self.sql.run(
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
            let dropped = self
                .sql
                .run("DELETE FROM events WHERE seq <= ?", vec![cutoff.into()]);
            if let Err(e) = dropped {
                log_error("retention", e);
            }
        }
        self.clients.broadcast(frame(seq, name, data));
        if name == "end" || name == "fail" {
            self.clients.close();
        }
        seq
    }

    /// Registers a client and returns the frames it must get first: every retained
    /// event after `after` (with a `truncated` notice if some are gone).
    pub fn subscribe(&self, after: u64, tx: ClientSender) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        let oldest = self.sql.query("SELECT MIN(seq) FROM events", Vec::new());
        let oldest =
            first_int(&oldest.unwrap_or_default()).map_or(self.last_seq.get() + 1, |s| s as u64);
        if after + 1 < oldest {
            let data =
                serde_json::json!({ "fromSequence": oldest, "requestedAfter": after }).to_string();
            frames.push(frame(oldest - 1, "truncated", &data));
        }
        frames.extend(
            self.replay(after)
                .into_iter()
                .map(|f| frame(f.seq, &f.event, &f.data)),
        );
        self.clients.add(tx);
        frames
    }

    /// Ends every connected stream.
    pub fn close_clients(&self) {
        self.clients.close();
    }

    /// Sends `: ping` to every client; returns how many are connected.
    pub fn ping(&self) -> usize {
        self.clients.ping()
    }

    /// The confirmed chunks not yet relayed to the parent session (a child's stream is
    /// also shown on its parent's), at most `limit` events from the cursor on: the last
    /// sequence looked at and the chunks' `(sequence, data)`. Unconfirmed chunks (a
    /// step that has not committed) wait: they may yet be torn.
    pub fn unrelayed(&self, limit: u64) -> (u64, Vec<(u64, String)>) {
        let after = self.relayed();
        let upto = self.sql.counter("confirmed").min(after + limit);
        if upto <= after {
            return (after, Vec::new());
        }
        let rows = self
            .sql
            .query(
                "SELECT seq, data FROM events WHERE seq > ? AND seq <= ? AND event = 'chunk' ORDER BY seq",
                vec![
                    SqlStorageValue::from(after as i64),
                    SqlStorageValue::from(upto as i64),
                ],
            )
            .unwrap_or_default();
        let chunks = rows
            .iter()
            .filter_map(|r| Some((int(r, 0)? as u64, text(r, 1)?)))
            .collect();
        (upto, chunks)
    }

    /// How far the parent acknowledged this stream.
    pub fn relayed(&self) -> u64 {
        self.sql.counter("relayed")
    }

    /// The parent acknowledged everything up to `seq`.
    pub fn mark_relayed(&self, seq: u64) {
        self.sql.set_mark("relayed", Some(&seq.to_string()));
    }

    /// Appends chunks relayed from child session `from`, skipping those already
    /// appended (relays are retried: each is appended exactly once). They are durable
    /// in the child, so they count as confirmed when nothing unconfirmed precedes them.
    pub fn append_relayed(&self, from: &str, chunks: &[(u64, String)]) {
        let key = format!("relay:{from}");
        let mut cursor = self.sql.counter(&key);
        let settled = self.sql.counter("confirmed") == self.last_seq.get();
        for (seq, data) in chunks {
            if *seq > cursor {
                self.append("chunk", data);
                cursor = *seq;
            }
        }
        self.sql.set_mark(&key, Some(&cursor.to_string()));
        if settled {
            self.set_confirmed();
        }
    }
}

impl StreamLog for SqlStreamLog {
    fn emit(&self, event: StreamEvent) -> u64 {
        self.append(event.name(), &event.data_json())
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
                self.append(name, data);
            }
            // Rival writes of this or an older version lost the compare-and-set.
            staged.retain(|s| s.version > batch.version);
            self.set_staged(staged);
        } else {
            self.keep_staged(staged);
        }
        self.set_confirmed();
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
        let confirmed = self.sql.counter("confirmed");
        Recovery {
            torn_from: (self.last_seq.get() > confirmed).then_some(confirmed + 1),
        }
    }

    fn confirm(&self, _version: u64) {
        self.set_confirmed();
    }

    fn replay(&self, after: u64) -> Vec<Frame> {
        let rows = self
            .sql
            .query(
                "SELECT seq, event, data FROM events WHERE seq > ? ORDER BY seq",
                vec![SqlStorageValue::from(after as i64)],
            )
            .unwrap_or_default();
        let frame = |r: &Vec<SqlStorageValue>| {
            Some(Frame {
                seq: int(r, 0)? as u64,
                event: text(r, 1)?,
                data: text(r, 2)?,
            })
        };
        rows.iter().filter_map(frame).collect()
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
