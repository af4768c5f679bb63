//! The session object's notification outbox, in its SQLite. After each slice the
//! object *reconciles* it with the calls that wait: a call seen waiting for the first
//! time owes each sink a `call.waiting`, a call no longer waiting a `call.resolved`,
//! written in one transaction (so a crash before or after leaves each owed exactly once:
//! the next slice finds what is missing). Deliveries then go out after the slice; each
//! key is delivered until a sink takes it (2xx) or [`MAX_ATTEMPTS`] tries failed, the
//! waits between them doubling from a second ([`crate::backoff`]).

use super::EventKind;
use crate::sqlite::{Db, Owned, int, text};
use crate::store::PendingCall;
use crate::store::rows::Arg;
use serde_json::{Value, json};
use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

/// Tries of one notification before it is given up (about an hour and a half of waits).
pub const MAX_ATTEMPTS: u64 = 13;
/// The most notifications a session keeps (the oldest delivered or given up go first).
const MAX_KEPT: u64 = 500;
/// The most notifications one delivery round sends.
const BATCH: u64 = 16;

const TABLES: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS notify_calls (answer_id TEXT PRIMARY KEY, call TEXT NOT NULL, \
     run_id TEXT NOT NULL, resolved INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS notify_outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, \
     key TEXT NOT NULL UNIQUE, sink INTEGER NOT NULL, type TEXT NOT NULL, call_id TEXT NOT NULL, \
     body TEXT NOT NULL, created_at INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, \
     next_at INTEGER NOT NULL, state TEXT NOT NULL DEFAULT 'pending', status INTEGER, \
     error TEXT, sent_at INTEGER)",
];

/// A call as the outbox remembers it: the run it waits in.
#[derive(Debug, Clone)]
pub struct Waiting<'a> {
    /// The call.
    pub call: &'a PendingCall,
    /// The run it waits in.
    pub run_id: &'a str,
}

/// A notification to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Its idempotency key (`webhook-id`).
    pub key: String,
    /// The sink's index.
    pub sink: usize,
    /// The body, as it is sent every time.
    pub body: String,
    /// Tries so far.
    pub attempts: u64,
}

/// How a try went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// The sink took it (a 2xx).
    Taken {
        /// What it answered.
        status: u16,
    },
    /// It did not.
    Failed {
        /// What it answered, if it answered.
        status: Option<u16>,
        /// Why it failed.
        error: String,
    },
}

/// A call's key: its id and the instant it started waiting (ids repeat: a retried step,
/// a session made again under its name, a call that asks twice).
fn key_of(call: &PendingCall) -> String {
    format!("{}@{}", call.tool_call_id, call.since)
}

/// The outbox in `db`.
pub struct Outbox {
    db: Rc<dyn Db>,
    created: Cell<bool>,
}

impl Outbox {
    /// The outbox in the object's `db`.
    pub fn new(db: Rc<dyn Db>) -> Self {
        Self {
            db,
            created: Cell::new(false),
        }
    }

    fn tables(&self) -> Result<(), String> {
        if !self.created.get() {
            for table in TABLES {
                self.db.query(table, &[])?;
            }
            self.created.set(true);
        }
        Ok(())
    }

    /// Writes what `waiting` (the calls that wait on a person now; a sub-agent's call is
    /// its child's to notify) owes `sinks` sinks, at `now` (ms): `body(call, run, kind,
    /// sink, key)` makes each body. Returns how many notifications it added.
    pub fn reconcile(
        &self,
        session: &str,
        waiting: &[Waiting<'_>],
        sinks: usize,
        now: u64,
        body: impl Fn(&PendingCall, &str, EventKind, usize, &str) -> String,
    ) -> Result<usize, String> {
        self.tables()?;
        // The calls seen waiting and not resolved yet (a call's key has the instant it
        // started waiting: a resolved one never waits again under it).
        let q = "SELECT answer_id, call, run_id FROM notify_calls WHERE resolved = 0";
        let known = self.db.query(q, &[])?;
        let known: HashMap<String, (Option<String>, Option<String>)> = known
            .iter()
            .filter_map(|r| Some((text(r, 0)?, (text(r, 1), text(r, 2)))))
            .collect();
        let mut statements: Vec<Owned> = Vec::new();
        let mut added = 0;
        let mut owe = |statements: &mut Vec<Owned>,
                       call: &PendingCall,
                       run: &str,
                       kind: EventKind| {
            for sink in 0..sinks {
                let key = format!("{session}:{}:{}:{sink}", key_of(call), kind.as_str());
                let insert = "INSERT OR IGNORE INTO notify_outbox (key, sink, type, call_id, body, \
                              created_at, next_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)";
                let args = vec![
                    Arg::Text(key.clone()),
                    Arg::Int(sink as u64),
                    Arg::Text(kind.as_str().into()),
                    Arg::Text(call.tool_call_id.clone()),
                    Arg::Text(body(call, run, kind, sink, &key)),
                    Arg::Int(now),
                ];
                statements.push((insert.into(), args));
                added += 1;
            }
        };
        let now_waiting: Vec<String> = waiting.iter().map(|w| key_of(w.call)).collect();
        for w in waiting {
            if known.contains_key(&key_of(w.call)) {
                continue;
            }
            let call = serde_json::to_string(w.call).map_err(|e| e.to_string())?;
            let remember =
                "INSERT OR IGNORE INTO notify_calls (answer_id, call, run_id) VALUES (?1, ?2, ?3)";
            let args = vec![
                Arg::Text(key_of(w.call)),
                Arg::Text(call),
                Arg::Text(w.run_id.into()),
            ];
            statements.push((remember.into(), args));
            owe(&mut statements, w.call, w.run_id, EventKind::Waiting);
        }
        for (answer_id, (call, run)) in &known {
            if now_waiting.contains(answer_id) {
                continue;
            }
            let call: Option<PendingCall> =
                call.as_deref().and_then(|c| serde_json::from_str(c).ok());
            let resolve = "UPDATE notify_calls SET resolved = 1 WHERE answer_id = ?1";
            statements.push((resolve.into(), vec![Arg::Text(answer_id.clone())]));
            if let Some(call) = call {
                owe(
                    &mut statements,
                    &call,
                    run.as_deref().unwrap_or_default(),
                    EventKind::Resolved,
                );
            }
        }
        if statements.is_empty() {
            return Ok(0);
        }
        let prune = "DELETE FROM notify_outbox WHERE state != 'pending' AND seq <= \
                     (SELECT MAX(seq) FROM notify_outbox) - ?1";
        statements.push((prune.into(), vec![Arg::Int(MAX_KEPT)]));
        let forget = "DELETE FROM notify_calls WHERE resolved = 1 AND rowid <= \
                      (SELECT MAX(rowid) FROM notify_calls) - ?1";
        statements.push((forget.into(), vec![Arg::Int(MAX_KEPT)]));
        self.db.atomically(&statements)?;
        Ok(added)
    }

    /// The notifications due at `now`, oldest first (a round's worth).
    pub fn due(&self, now: u64) -> Result<Vec<Delivery>, String> {
        self.tables()?;
        let q = "SELECT key, sink, body, attempts FROM notify_outbox \
                 WHERE state = 'pending' AND next_at <= ?1 ORDER BY seq LIMIT ?2";
        let rows = self.db.query(q, &[Arg::Int(now), Arg::Int(BATCH)])?;
        Ok(rows
            .iter()
            .filter_map(|r| {
                Some(Delivery {
                    key: text(r, 0)?,
                    sink: usize::try_from(int(r, 1)?).ok()?,
                    body: text(r, 2)?,
                    attempts: u64::try_from(int(r, 3)?).ok()?,
                })
            })
            .collect())
    }

    /// The notifications due at `now`, taken for `lease_ms`: until it is recorded (or the
    /// lease ends, after a crash mid-delivery) none is due again.
    pub fn take(&self, now: u64, lease_ms: u64) -> Result<Vec<Delivery>, String> {
        let due = self.due(now)?;
        let lease = "UPDATE notify_outbox SET next_at = ?2 WHERE key = ?1";
        let statements: Vec<Owned> = due
            .iter()
            .map(|d| {
                (
                    lease.to_string(),
                    vec![Arg::Text(d.key.clone()), Arg::Int(now + lease_ms)],
                )
            })
            .collect();
        if !statements.is_empty() {
            self.db.atomically(&statements)?;
        }
        Ok(due)
    }

    /// Records how delivering `d` went at `now`: taken, to try again after a wait, or
    /// (after [`MAX_ATTEMPTS`]) given up. Returns whether it was given up.
    pub fn record(&self, d: &Delivery, how: &Delivered, now: u64) -> Result<bool, String> {
        self.tables()?;
        let attempts = d.attempts + 1;
        let (sql, args, given_up) = match how {
            Delivered::Taken { status } => (
                "UPDATE notify_outbox SET state = 'sent', attempts = ?2, status = ?3, error = NULL, \
                 sent_at = ?4 WHERE key = ?1",
                vec![Arg::Int(u64::from(*status)), Arg::Int(now)],
                false,
            ),
            Delivered::Failed { status, error } => {
                let mut backoff = crate::backoff::Backoff::default();
                let mut next = now;
                for _ in 0..attempts {
                    next = backoff.failed(now).1;
                }
                let given_up = attempts >= MAX_ATTEMPTS;
                let state = if given_up { "failed" } else { "pending" };
                let status = status.map_or(Arg::Null, |s| Arg::Int(u64::from(s)));
                (
                    "UPDATE notify_outbox SET state = ?3, attempts = ?2, status = ?4, error = ?5, \
                     next_at = ?6 WHERE key = ?1",
                    vec![
                        Arg::Text(state.into()),
                        status,
                        Arg::Text(error.chars().take(500).collect()),
                        Arg::Int(next),
                    ],
                    given_up,
                )
            }
        };
        let mut all = vec![Arg::Text(d.key.clone()), Arg::Int(attempts)];
        all.extend(args);
        self.db.query(sql, &all)?;
        Ok(given_up)
    }

    /// When the next delivery falls due (ms), if one is owed.
    pub fn next_due(&self) -> Result<Option<u64>, String> {
        self.tables()?;
        let rows = self.db.query(
            "SELECT MIN(next_at) FROM notify_outbox WHERE state = 'pending'",
            &[],
        )?;
        Ok(rows
            .first()
            .and_then(|r| int(r, 0))
            .and_then(|n| u64::try_from(n).ok()))
    }

    /// The session's notifications, newest first (`GET …/notifications`).
    pub fn list(&self, sinks: &[String]) -> Result<Vec<Value>, String> {
        self.tables()?;
        let q = "SELECT key, sink, type, call_id, state, attempts, status, error, created_at, \
                 sent_at, next_at FROM notify_outbox ORDER BY seq DESC";
        let rows = self.db.query(q, &[])?;
        Ok(rows
            .iter()
            .map(|r| {
                let sink = int(r, 1).and_then(|s| usize::try_from(s).ok());
                let mut v = json!({
                    "id": text(r, 0), "type": text(r, 2), "toolCallId": text(r, 3),
                    "sink": sink.and_then(|s| sinks.get(s)).cloned(),
                    "state": text(r, 4), "attempts": int(r, 5), "createdAt": int(r, 8),
                });
                let extra = [
                    ("status", int(r, 6).map(Value::from)),
                    ("error", text(r, 7).map(Value::from)),
                    ("sentAt", int(r, 9).map(Value::from)),
                ];
                for (k, value) in extra.into_iter().filter_map(|(k, v)| Some((k, v?))) {
                    v[k] = value;
                }
                if text(r, 4).as_deref() == Some("pending") {
                    v["nextAttemptAt"] = int(r, 10).into();
                }
                v
            })
            .collect())
    }
}
