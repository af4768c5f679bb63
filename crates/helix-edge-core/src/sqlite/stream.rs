//! The stream log in the object's SQLite ([`StreamLog`]), which also fans its events out
//! to the connected SSE clients ([`Clients`]), and a child session's relay of its stream
//! to its parent's.
//!
//! Storage: `events` (sequence, event name, data) and marks in `journal_meta` — the
//! confirmed sequence and the relay cursors. Retention: the newest [`RETAINED_EVENTS`]
//! events ([`retention_cutoff`]); a client asking to resume from before them gets a
//! `truncated` event first, then what is retained.
//!
//! A commit's staged events are written by the commit's own transaction in the object's
//! store ([`commit_statements`](SqliteStreamLog::commit_statements)): the commit and its
//! events are durable together or not at all, so a crash between them leaves nothing to
//! reconcile, and staging costs no write. `release` then only sends them to the
//! clients. A batch released without such a transaction is written then.

use super::{Db, Owned, Row, counter, first_int, int, set_mark, text};
use crate::chunk::StreamEvent;
use crate::host::{Host, Level, LogValue};
use crate::journal::{Frame, Recovery, StreamLog};
use crate::store::rows::Arg;
use futures::channel::mpsc;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// How many events a session keeps for replay.
pub const RETAINED_EVENTS: u64 = 10_000;
/// Events written by one statement of a commit's transaction.
pub const EVENTS_PER_INSERT: usize = 32;
/// Frames a slow client may have queued before it is disconnected.
pub const CLIENT_QUEUE: usize = 1_024;

/// The frames queued for one connected client; an empty frame means "close".
pub type ClientSender = mpsc::Sender<Vec<u8>>;

/// One SSE frame.
pub fn frame(seq: u64, event: &str, data: &str) -> Vec<u8> {
    format!("id: {seq}\nevent: {event}\ndata: {data}\n\n").into_bytes()
}

/// The events to drop after appending sequences `from..=to`: those up to the returned
/// sequence, once every 1,000 events, when more than [`RETAINED_EVENTS`] were written.
pub fn retention_cutoff(from: u64, to: u64) -> Option<u64> {
    let crossed = (from..=to).any(|seq| seq.is_multiple_of(1_000));
    (crossed && to > RETAINED_EVENTS).then(|| to - RETAINED_EVENTS)
}

/// The connected clients of one session: each has a bounded queue of frames; a client
/// that is gone or too far behind is dropped (it resumes with `Last-Event-ID`, losing
/// nothing).
#[derive(Default)]
pub struct Clients(RefCell<Vec<ClientSender>>);

impl Clients {
    /// Adds a client.
    pub fn add(&self, tx: ClientSender) {
        self.0.borrow_mut().push(tx);
    }

    /// Sends a frame to every client, dropping those that are gone or too far behind.
    pub fn broadcast(&self, frame: Vec<u8>) {
        self.0
            .borrow_mut()
            .retain_mut(|tx| tx.try_send(frame.clone()).is_ok());
    }

    /// Ends every connected stream (after `end` or `fail`).
    pub fn close(&self) {
        for mut tx in self.0.borrow_mut().drain(..) {
            let _ = tx.try_send(Vec::new());
        }
    }

    /// Sends `: ping` to every client; returns how many are connected.
    pub fn ping(&self) -> usize {
        self.broadcast(b": ping\n\n".to_vec());
        self.0.borrow().len()
    }
}

/// The stream of one session.
pub struct SqliteStreamLog {
    db: Rc<dyn Db>,
    host: Rc<dyn Host>,
    last_seq: Cell<u64>,
    clients: Clients,
    /// Batches held back until their commit lands (in memory: see the module's doc).
    staged: RefCell<Vec<Staged>>,
}

/// A staged batch, kept as ready SSE parts (event name, data).
struct Staged {
    commit_id: String,
    version: u64,
    events: Vec<(String, String)>,
    /// The first sequence number its events got, once its commit's transaction wrote them.
    written_from: Option<u64>,
}

impl SqliteStreamLog {
    /// The stream in `db`; failed writes are logged through `host`.
    pub fn open(db: Rc<dyn Db>, host: Rc<dyn Host>) -> Result<Self, String> {
        let rows = db.query("SELECT MAX(seq) FROM events", &[])?;
        let last = first_int(&rows).unwrap_or(0) as u64;
        Ok(Self {
            db,
            host,
            last_seq: Cell::new(last),
            clients: Clients::default(),
            staged: RefCell::new(Vec::new()),
        })
    }

    fn failed(&self, what: &str, e: String) {
        let fields = [("what", LogValue::Str(what)), ("error", LogValue::Str(&e))];
        self.host.log(Level::Error, "journal_error", &fields);
    }

    fn query(&self, sql: &str, args: &[Arg]) -> Vec<Row> {
        self.db.query(sql, args).unwrap_or_default()
    }

    fn set_confirmed(&self) {
        let seq = self.last_seq.get().to_string();
        if let Err(e) = set_mark(&*self.db, "confirmed", Some(&seq)) {
            self.failed("confirm", e);
        }
    }

    /// The statements that write the batch staged for commit `commit_id`, to run in the
    /// commit's own transaction, with the confirmed mark at its end; `None` when nothing
    /// is staged for it. Call [`written`](Self::written) once the transaction landed.
    pub fn commit_statements(&self, commit_id: &str) -> Option<Vec<Owned>> {
        let staged = self.staged.borrow();
        let batch = staged.iter().find(|s| s.commit_id == commit_id)?;
        let from = self.last_seq.get() + 1;
        // One multi-row insert per few dozen events: each SQL call costs the object CPU.
        let mut statements: Vec<Owned> = Vec::new();
        for (n, chunk) in batch.events.chunks(EVENTS_PER_INSERT).enumerate() {
            let first = from + (n * EVENTS_PER_INSERT) as u64;
            let mut args = Vec::with_capacity(chunk.len() * 3);
            for (i, (name, data)) in chunk.iter().enumerate() {
                args.push(Arg::Int(first + i as u64));
                args.push(Arg::Text(name.clone()));
                args.push(Arg::Text(data.clone()));
            }
            let rows = vec!["(?, ?, ?)"; chunk.len()].join(", ");
            statements.push((
                format!("INSERT INTO events (seq, event, data) VALUES {rows}"),
                args,
            ));
        }
        let confirmed = (from + batch.events.len() as u64 - 1).to_string();
        statements.push((
            "INSERT INTO journal_meta (k, v) VALUES ('confirmed', ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
                .to_string(),
            vec![Arg::Text(confirmed)],
        ));
        Some(statements)
    }

    /// The transaction with [`commit_statements`](Self::commit_statements) of
    /// `commit_id` landed: its events have their sequence numbers.
    pub fn written(&self, commit_id: &str) {
        let mut staged = self.staged.borrow_mut();
        if let Some(batch) = staged.iter_mut().find(|s| s.commit_id == commit_id) {
            let from = self.last_seq.get() + 1;
            batch.written_from = Some(from);
            self.last_seq.set(from + batch.events.len() as u64 - 1);
        }
    }

    /// Sends a stored event to every connected client (and ends their streams after
    /// `end` or `fail`).
    fn broadcast(&self, seq: u64, name: &str, data: &str) {
        self.clients.broadcast(frame(seq, name, data));
        if name == "end" || name == "fail" {
            self.clients.close();
        }
    }

    /// Drops the oldest events past [`RETAINED_EVENTS`] once `from..=to` were appended.
    fn retain(&self, from: u64, to: u64) {
        if let Some(cutoff) = retention_cutoff(from, to) {
            let dropped = self
                .db
                .query("DELETE FROM events WHERE seq <= ?", &[Arg::Int(cutoff)]);
            if let Err(e) = dropped {
                self.failed("retention", e);
            }
        }
    }

    /// Appends an event durably and sends it to every connected client.
    fn append(&self, name: &str, data: &str) -> u64 {
        let seq = self.last_seq.get() + 1;
        let inserted = self.db.query(
            "INSERT INTO events (seq, event, data) VALUES (?, ?, ?)",
            &[
                Arg::Int(seq),
                Arg::Text(name.into()),
                Arg::Text(data.into()),
            ],
        );
        if let Err(e) = inserted {
            self.failed("append", e);
            return self.last_seq.get();
        }
        self.last_seq.set(seq);
        self.retain(seq, seq);
        self.broadcast(seq, name, data);
        seq
    }

    /// The sequence number of the newest event.
    pub fn last_seq(&self) -> u64 {
        self.last_seq.get()
    }

    /// The sequence number of the newest event a commit confirmed: a step in progress
    /// streams after it (its live chunks, until it commits).
    pub fn committed_seq(&self) -> u64 {
        self.unconfirmed_from()
            .map_or(self.last_seq.get(), |from| from - 1)
    }

    /// The sequence number of the newest retained `run_started` of session `id` (not
    /// of a child's, relayed here), if any.
    pub fn run_start(&self, id: &str) -> Option<u64> {
        let prefix = format!("{{\"sessionId\":{}", serde_json::Value::from(id));
        let rows = self.query(
            "SELECT MAX(seq) FROM events WHERE event = 'chunk' AND instr(data, ?) = 1 AND instr(data, '\"type\":\"run_started\"') > 0",
            &[Arg::Text(prefix)],
        );
        first_int(&rows).map(|s| s as u64)
    }

    /// Registers a client and returns the frames it must get first: the
    /// [`backlog`](Self::backlog) after `after`.
    pub fn subscribe(&self, after: u64, tx: ClientSender) -> Vec<Vec<u8>> {
        let frames = self.backlog(after);
        self.clients.add(tx);
        frames
    }

    /// Every retained event after `after`, as SSE frames (with a `truncated` notice if
    /// some are gone).
    pub fn backlog(&self, after: u64) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        let oldest = self.query("SELECT MIN(seq) FROM events", &[]);
        let oldest = first_int(&oldest).map_or(self.last_seq.get() + 1, |s| s as u64);
        // Before what is retained, or past the end (the stream was lost with the object's
        // storage and started over): the client must refetch the session first.
        if after + 1 < oldest || after > self.last_seq.get() {
            let data =
                serde_json::json!({ "fromSequence": oldest, "requestedAfter": after }).to_string();
            frames.push(frame(oldest - 1, "truncated", &data));
        }
        frames.extend(
            self.replay(after)
                .into_iter()
                .map(|f| frame(f.seq, &f.event, &f.data)),
        );
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
        let upto = counter(&*self.db, "confirmed").min(after + limit);
        if upto <= after {
            return (after, Vec::new());
        }
        let rows = self.query(
            "SELECT seq, data FROM events WHERE seq > ? AND seq <= ? AND event = 'chunk' ORDER BY seq",
            &[Arg::Int(after), Arg::Int(upto)],
        );
        let chunks = rows
            .iter()
            .filter_map(|r| Some((int(r, 0)? as u64, text(r, 1)?)))
            .collect();
        (upto, chunks)
    }

    /// How far the parent acknowledged this stream.
    pub fn relayed(&self) -> u64 {
        counter(&*self.db, "relayed")
    }

    /// The parent acknowledged everything up to `seq`.
    pub fn mark_relayed(&self, seq: u64) {
        if let Err(e) = set_mark(&*self.db, "relayed", Some(&seq.to_string())) {
            self.failed("relay", e);
        }
    }

    /// How far the chunks relayed from child session `from` go (its sequence).
    pub fn relayed_from(&self, from: &str) -> u64 {
        counter(&*self.db, &format!("relay:{from}"))
    }

    /// Appends chunks relayed from child session `from`, skipping those already
    /// appended (relays are retried: each is appended exactly once). They are durable
    /// in the child, so they count as confirmed when nothing unconfirmed precedes them.
    pub fn append_relayed(&self, from: &str, chunks: &[(u64, String)]) {
        let key = format!("relay:{from}");
        let mut cursor = counter(&*self.db, &key);
        let settled = counter(&*self.db, "confirmed") == self.last_seq.get();
        for (seq, data) in chunks {
            if *seq > cursor {
                self.append("chunk", data);
                cursor = *seq;
            }
        }
        if let Err(e) = set_mark(&*self.db, &key, Some(&cursor.to_string())) {
            self.failed("relay", e);
        }
        if settled {
            self.set_confirmed();
        }
    }
}

impl StreamLog for SqliteStreamLog {
    fn emit(&self, event: StreamEvent) -> u64 {
        self.append(event.name(), &event.data_json())
    }

    fn next_sequence(&self) -> u64 {
        self.last_seq.get() + 1
    }

    fn stage(&self, commit_id: &str, version: u64, events: Vec<StreamEvent>) {
        let events = events
            .iter()
            .map(|e| (e.name().to_string(), e.data_json()))
            .collect();
        self.staged.borrow_mut().push(Staged {
            commit_id: commit_id.into(),
            version,
            events,
            written_from: None,
        });
    }

    fn release(&self, commit_id: &str) {
        let batch = {
            let mut staged = self.staged.borrow_mut();
            let Some(pos) = staged.iter().position(|s| s.commit_id == commit_id) else {
                drop(staged);
                self.set_confirmed();
                return;
            };
            let batch = staged.remove(pos);
            // Rival writes of this or an older version lost the compare-and-set.
            staged.retain(|s| s.version > batch.version);
            batch
        };
        match batch.written_from {
            Some(from) => {
                for (i, (name, data)) in batch.events.iter().enumerate() {
                    self.broadcast(from + i as u64, name, data);
                }
                self.retain(from, self.last_seq.get());
            }
            None => {
                for (name, data) in &batch.events {
                    self.append(name, data);
                }
                self.set_confirmed();
            }
        }
    }

    fn discard(&self, commit_id: &str) {
        self.staged
            .borrow_mut()
            .retain(|s| s.commit_id != commit_id);
    }

    fn recover(&self, _version: u64, commit_id: &str) -> Recovery {
        let landed = self
            .staged
            .borrow()
            .iter()
            .any(|s| s.commit_id == commit_id);
        if landed {
            self.release(commit_id);
        }
        // Whatever else is staged lost the compare-and-set (or died with its process).
        self.staged.borrow_mut().clear();
        let confirmed = counter(&*self.db, "confirmed");
        Recovery {
            torn_from: (self.last_seq.get() > confirmed).then_some(confirmed + 1),
        }
    }

    fn confirm(&self, _version: u64) {
        self.set_confirmed();
    }

    fn unconfirmed_from(&self) -> Option<u64> {
        let confirmed = counter(&*self.db, "confirmed");
        (self.last_seq.get() > confirmed).then_some(confirmed + 1)
    }

    fn replay(&self, after: u64) -> Vec<Frame> {
        let rows = self.query(
            "SELECT seq, event, data FROM events WHERE seq > ? ORDER BY seq",
            &[Arg::Int(after)],
        );
        let frame = |r: &Row| {
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

    #[test]
    fn retention_drops_the_oldest_every_thousand_events_past_the_limit() {
        assert_eq!(retention_cutoff(1, 999), None);
        assert_eq!(retention_cutoff(1_000, 1_000), None, "nothing to drop yet");
        assert_eq!(
            retention_cutoff(10_001, 10_999),
            None,
            "no thousand crossed"
        );
        assert_eq!(retention_cutoff(10_990, 11_005), Some(1_005));
        assert_eq!(retention_cutoff(12_000, 12_000), Some(2_000));
    }

    #[test]
    fn frames_are_server_sent_events() {
        assert_eq!(
            frame(7, "chunk", "{}"),
            b"id: 7\nevent: chunk\ndata: {}\n\n".to_vec()
        );
    }
}
