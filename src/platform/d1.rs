//! The [`Store`] on D1 (schema in `migrations/`). Every commit is one `batch()`:
//! a version-guarded `UPDATE` of the session row, a guard insert that fails when that
//! update changed nothing (rolling the whole batch back: a lost race is
//! [`StoreError::Stale`], never a partial write), then the new messages, the state
//! patch, the run and the checkpoint. Bytes written per commit follow the size of the
//! change: messages are appended, state is patched, and a full snapshot is written only
//! every [`SNAPSHOT_EVERY`] state changes.

use crate::message::Message;
use crate::state::PatchOp;
use crate::store::{
    Answer, AnswerOutcome, CheckpointRecord, Commit, InterruptRequest, Loaded, NewSession,
    RunRecord, SessionHead, StateChange, Store, StoreError,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::BTreeMap;
use worker::wasm_bindgen::JsValue;
use worker::{D1Database, D1PreparedStatement, D1Result};

/// A full state snapshot is written after this many state changes.
pub const SNAPSHOT_EVERY: u64 = 32;

/// Sessions in D1.
pub struct D1Store {
    db: D1Database,
    /// The latest known state per session, with its version: commits patch it to check
    /// their operations before writing, and snapshots come from it without a read. In a
    /// Durable Object the store serves one session and is its only writer.
    states: RefCell<BTreeMap<String, (u64, Value)>>,
}

fn backend(e: worker::Error) -> StoreError {
    match e {
        worker::Error::D1(d1) => StoreError::Backend(d1.cause()),
        other => StoreError::Backend(other.to_string()),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn rows<T: DeserializeOwned>(result: &D1Result) -> Result<Vec<T>, StoreError> {
    result.results::<T>().map_err(backend)
}

/// Integers go through JS numbers; every value here stays far below 2^53.
fn num(n: u64) -> JsValue {
    JsValue::from_f64(n as f64)
}

fn text(s: &str) -> JsValue {
    JsValue::from_str(s)
}

#[derive(Deserialize)]
struct HeadRow {
    head: String,
    interrupt: Option<String>,
    snapshot_version: u64,
}

#[derive(Deserialize)]
struct StateRow {
    kind: String,
    body: String,
}

#[derive(Deserialize)]
struct BodyRow {
    body: String,
}

#[derive(Deserialize)]
struct AnswerRow {
    tool_call_id: String,
    body: String,
}

#[derive(Deserialize)]
struct CheckpointRow {
    version: u64,
    body: String,
}

/// Folds a snapshot and the patches after it into a state.
fn fold_state(rows: Vec<StateRow>) -> Result<Value, StoreError> {
    let mut rows = rows.into_iter();
    let first = rows
        .next()
        .ok_or_else(|| StoreError::Corrupt("no state snapshot".into()))?;
    if first.kind != "snapshot" {
        return Err(StoreError::Corrupt(
            "the state log does not start with a snapshot".into(),
        ));
    }
    let mut state: Value = from_json(&first.body)?;
    for row in rows {
        if row.kind == "snapshot" {
            state = from_json(&row.body)?;
            continue;
        }
        let ops: Vec<PatchOp> = from_json(&row.body)?;
        for op in &ops {
            op.apply(&mut state)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        }
    }
    Ok(state)
}

impl D1Store {
    /// A store over the `DB` binding.
    pub fn new(db: D1Database) -> Self {
        Self {
            db,
            states: RefCell::new(BTreeMap::new()),
        }
    }

    fn cache(&self, id: &str, version: u64, state: Value) {
        self.states
            .borrow_mut()
            .insert(id.to_string(), (version, state));
    }

    /// The state at `version`, from the cache when it holds that version.
    async fn current_state(&self, id: &str, version: u64) -> Result<Value, StoreError> {
        let cached = self
            .states
            .borrow()
            .get(id)
            .filter(|(v, _)| *v == version)
            .map(|(_, s)| s.clone());
        match cached {
            Some(state) => Ok(state),
            None => self.state_at(id, version).await,
        }
    }

    fn stmt(&self, sql: &str, args: &[JsValue]) -> Result<D1PreparedStatement, StoreError> {
        self.db.prepare(sql).bind(args).map_err(backend)
    }

    /// The state at session `version`: the newest snapshot at or before it, plus patches.
    async fn state_at(&self, id: &str, version: u64) -> Result<Value, StoreError> {
        let sql = "SELECT kind, body FROM state_log WHERE session_id = ?1 AND version <= ?2 AND version >= \
                   (SELECT MAX(version) FROM state_log WHERE session_id = ?1 AND kind = 'snapshot' AND version <= ?2) \
                   ORDER BY version";
        let result = self
            .stmt(sql, &[text(id), num(version)])?
            .all()
            .await
            .map_err(backend)?;
        fold_state(rows(&result)?)
    }

    fn message_inserts(
        &self,
        id: &str,
        base: u64,
        messages: &[Message],
    ) -> Result<Vec<D1PreparedStatement>, StoreError> {
        messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let sql = "INSERT INTO messages (session_id, seq, body) VALUES (?1, ?2, ?3)";
                self.stmt(sql, &[text(id), num(base + i as u64), text(&to_json(m)?)])
            })
            .collect()
    }

    fn run_upsert(&self, id: &str, run: &RunRecord) -> Result<D1PreparedStatement, StoreError> {
        let sql = "INSERT INTO runs (session_id, run_id, turn, body) VALUES (?1, ?2, ?3, ?4) \
                   ON CONFLICT (session_id, run_id) DO UPDATE SET body = excluded.body";
        self.stmt(
            sql,
            &[
                text(id),
                text(&run.run_id),
                num(u64::from(run.turn)),
                text(&to_json(run)?),
            ],
        )
    }

    fn checkpoint_insert(
        &self,
        id: &str,
        version: u64,
        c: &CheckpointRecord,
    ) -> Result<D1PreparedStatement, StoreError> {
        let sql = "INSERT INTO checkpoints (session_id, id, version, body) VALUES (?1, ?2, ?3, ?4)";
        self.stmt(
            sql,
            &[text(id), text(&c.id), num(version), text(&to_json(c)?)],
        )
    }

    fn state_insert(
        &self,
        id: &str,
        version: u64,
        kind: &str,
        body: &str,
    ) -> Result<D1PreparedStatement, StoreError> {
        let sql = "INSERT INTO state_log (session_id, version, kind, body) VALUES (?1, ?2, ?3, ?4)";
        self.stmt(sql, &[text(id), num(version), text(kind), text(body)])
    }

    async fn head_row(&self, id: &str) -> Result<Option<HeadRow>, StoreError> {
        let sql = "SELECT head, interrupt, snapshot_version FROM sessions WHERE id = ?1";
        let result = self.stmt(sql, &[text(id)])?.all().await.map_err(backend)?;
        Ok(rows::<HeadRow>(&result)?.into_iter().next())
    }
}

impl Store for D1Store {
    async fn create(&self, session: NewSession) -> Result<(), StoreError> {
        let id = session.head.id.clone();
        let mut head = session.head;
        head.version = 1;
        head.message_count = session.messages.len() as u64;
        let sql = "INSERT INTO sessions (id, agent, status, version, head, interrupt, snapshot_version, created_at, \
                   updated_at) VALUES (?1, ?2, ?3, 1, ?4, NULL, 1, ?5, ?5)";
        let status = to_json(&head.status)?;
        let mut batch = vec![self.stmt(
            sql,
            &[
                text(&id),
                text(&head.agent),
                text(status.trim_matches('"')),
                text(&to_json(&head)?),
                num(head.created_at),
            ],
        )?];
        batch.extend(self.message_inserts(&id, 0, &session.messages)?);
        batch.push(self.state_insert(&id, 1, "snapshot", &to_json(&session.state)?)?);
        let initial = session.state;
        batch.push(self.run_upsert(&id, &head.run)?);
        batch.push(self.checkpoint_insert(&id, 1, &session.checkpoint)?);
        match self.db.batch(batch).await {
            Ok(_) => {
                self.cache(&id, 1, initial);
                Ok(())
            }
            Err(e) => match backend(e) {
                StoreError::Backend(m) if m.contains("UNIQUE constraint failed: sessions.id") => {
                    Err(StoreError::Exists(id))
                }
                other => Err(other),
            },
        }
    }

    async fn load(&self, id: &str) -> Result<Option<Loaded>, StoreError> {
        let Some(row) = self.head_row(id).await? else {
            return Ok(None);
        };
        let head: SessionHead = from_json(&row.head)?;
        let state_sql = "SELECT kind, body FROM state_log WHERE session_id = ?1 AND version >= ?2 ORDER BY version";
        let answers_sql = "SELECT tool_call_id, body FROM answers WHERE session_id = ?1";
        let results = self
            .db
            .batch(vec![
                self.stmt(state_sql, &[text(id), num(row.snapshot_version)])?,
                self.stmt(answers_sql, &[text(id)])?,
            ])
            .await
            .map_err(backend)?;
        let [state_rows, answer_rows] = results.as_slice() else {
            return Err(StoreError::Backend(
                "a read batch returned the wrong number of results".into(),
            ));
        };
        let state = fold_state(rows(state_rows)?)?;
        let mut answers = Vec::new();
        for a in rows::<AnswerRow>(answer_rows)? {
            if head
                .pending
                .iter()
                .any(|p| p.tool_call_id == a.tool_call_id)
            {
                answers.push((a.tool_call_id, from_json(&a.body)?));
            }
        }
        let interrupt: Option<InterruptRequest> =
            row.interrupt.as_deref().map(from_json).transpose()?;
        self.cache(id, head.version, state.clone());
        Ok(Some(Loaded {
            head,
            state,
            answers,
            interrupt,
        }))
    }

    async fn messages(
        &self,
        id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<Message>, StoreError> {
        if self.head_row(id).await?.is_none() {
            return Err(StoreError::NotFound(id.into()));
        }
        let sql = "SELECT body FROM messages WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq";
        let result = self
            .stmt(
                sql,
                &[text(id), num(offset), num(offset.saturating_add(limit))],
            )?
            .all()
            .await
            .map_err(backend)?;
        rows::<BodyRow>(&result)?
            .iter()
            .map(|r| from_json(&r.body))
            .collect()
    }

    async fn commit(
        &self,
        id: &str,
        expected_version: u64,
        commit: Commit,
    ) -> Result<u64, StoreError> {
        let row = self
            .head_row(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(id.into()))?;
        let version = expected_version + 1;
        let mut head = commit.head;
        head.version = version;
        let base = head
            .message_count
            .checked_sub(commit.messages.len() as u64)
            .ok_or_else(|| {
                StoreError::Corrupt(
                    "the commit has more new messages than its message count".into(),
                )
            })?;
        if commit.truncate_messages_to.is_some_and(|n| n != base) {
            return Err(StoreError::Corrupt(
                "a restore must append right after the truncation".into(),
            ));
        }
        let mut snapshot_version = row.snapshot_version;
        let (state_stmt, new_state) = match commit.state {
            StateChange::None => (None, None),
            StateChange::Replace(state) => {
                snapshot_version = version;
                (
                    Some(self.state_insert(id, version, "snapshot", &to_json(&state)?)?),
                    Some(state),
                )
            }
            StateChange::Patch(ops) => {
                // Check the operations against the current state before writing them.
                let mut state = self.current_state(id, expected_version).await?;
                for op in &ops {
                    op.apply(&mut state)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                }
                let stmt = if version - row.snapshot_version >= SNAPSHOT_EVERY {
                    snapshot_version = version;
                    self.state_insert(id, version, "snapshot", &to_json(&state)?)?
                } else {
                    self.state_insert(id, version, "patch", &to_json(&ops)?)?
                };
                (Some(stmt), Some(state))
            }
        };
        let status = to_json(&head.status)?;
        let update = "UPDATE sessions SET version = ?1, status = ?2, head = ?3, updated_at = ?4, snapshot_version = ?5, \
                      interrupt = CASE WHEN ?6 = 1 THEN NULL ELSE interrupt END WHERE id = ?7 AND version = ?8";
        let mut batch = vec![
            self.stmt(
                update,
                &[
                    num(version),
                    text(status.trim_matches('"')),
                    text(&to_json(&head)?),
                    num(head.updated_at),
                    num(snapshot_version),
                    num(u64::from(commit.clear_interrupt)),
                    text(id),
                    num(expected_version),
                ],
            )?,
            // Fails the batch (CHECK ok = 1) when the guarded update matched no row.
            self.stmt(
                "INSERT OR REPLACE INTO cas_guard (id, ok) VALUES (1, changes())",
                &[],
            )?,
        ];
        if let Some(n) = commit.truncate_messages_to {
            batch.push(self.stmt(
                "DELETE FROM messages WHERE session_id = ?1 AND seq >= ?2",
                &[text(id), num(n)],
            )?);
        }
        batch.extend(self.message_inserts(id, base, &commit.messages)?);
        batch.extend(state_stmt);
        batch.push(self.run_upsert(id, &head.run)?);
        if let Some(c) = &commit.checkpoint {
            batch.push(self.checkpoint_insert(id, version, c)?);
        }
        let outcome = self.db.batch(batch).await;
        {
            let mut states = self.states.borrow_mut();
            match (&outcome, new_state) {
                (Ok(_), Some(state)) => {
                    states.insert(id.to_string(), (version, state));
                }
                (Ok(_), None) => {
                    if let Some(entry) = states.get_mut(id).filter(|(v, _)| *v == expected_version)
                    {
                        entry.0 = version;
                    }
                }
                (Err(_), _) => {
                    states.remove(id);
                }
            }
        }
        match outcome {
            Ok(_) => Ok(version),
            Err(e) => match backend(e) {
                StoreError::Backend(m) if m.contains("CHECK constraint failed") => {
                    Err(StoreError::Stale {
                        expected: expected_version,
                    })
                }
                other => Err(other),
            },
        }
    }

    async fn answer(
        &self,
        id: &str,
        tool_call_id: &str,
        answer: Answer,
    ) -> Result<AnswerOutcome, StoreError> {
        let sql = "INSERT INTO answers (session_id, tool_call_id, body, created_at) \
                   SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1) \
                   ON CONFLICT (session_id, tool_call_id) DO NOTHING";
        let now = worker::Date::now().as_millis();
        let result = self
            .stmt(
                sql,
                &[
                    text(id),
                    text(tool_call_id),
                    text(&to_json(&answer)?),
                    num(now),
                ],
            )?
            .run()
            .await
            .map_err(backend)?;
        let changes = result
            .meta()
            .map_err(backend)?
            .and_then(|m| m.changes)
            .unwrap_or(0);
        if changes == 1 {
            return Ok(AnswerOutcome::Stored);
        }
        match self.find_answer(id, tool_call_id).await? {
            Some(existing) => Ok(AnswerOutcome::AlreadyAnswered(existing)),
            None => Err(StoreError::NotFound(id.into())),
        }
    }

    async fn find_answer(
        &self,
        id: &str,
        tool_call_id: &str,
    ) -> Result<Option<Answer>, StoreError> {
        let sql = "SELECT body FROM answers WHERE session_id = ?1 AND tool_call_id = ?2";
        let result = self
            .stmt(sql, &[text(id), text(tool_call_id)])?
            .all()
            .await
            .map_err(backend)?;
        rows::<BodyRow>(&result)?
            .first()
            .map(|r| from_json(&r.body))
            .transpose()
    }

    async fn request_interrupt(&self, id: &str, reason: Option<String>) -> Result<(), StoreError> {
        let body = to_json(&InterruptRequest { reason })?;
        let result = self
            .stmt(
                "UPDATE sessions SET interrupt = ?1 WHERE id = ?2",
                &[text(&body), text(id)],
            )?
            .run()
            .await
            .map_err(backend)?;
        match result.meta().map_err(backend)?.and_then(|m| m.changes) {
            Some(1) => Ok(()),
            _ => Err(StoreError::NotFound(id.into())),
        }
    }

    async fn runs(&self, id: &str) -> Result<Vec<RunRecord>, StoreError> {
        let sql = "SELECT body FROM runs WHERE session_id = ?1 ORDER BY turn";
        let result = self.stmt(sql, &[text(id)])?.all().await.map_err(backend)?;
        rows::<BodyRow>(&result)?
            .iter()
            .map(|r| from_json(&r.body))
            .collect()
    }

    async fn checkpoints(&self, id: &str) -> Result<Vec<CheckpointRecord>, StoreError> {
        let sql = "SELECT body FROM checkpoints WHERE session_id = ?1 ORDER BY version, rowid";
        let result = self.stmt(sql, &[text(id)])?.all().await.map_err(backend)?;
        rows::<BodyRow>(&result)?
            .iter()
            .map(|r| from_json(&r.body))
            .collect()
    }

    async fn checkpoint_state(
        &self,
        id: &str,
        checkpoint_id: &str,
    ) -> Result<Option<(CheckpointRecord, Value)>, StoreError> {
        let sql = "SELECT version, body FROM checkpoints WHERE session_id = ?1 AND id = ?2";
        let result = self
            .stmt(sql, &[text(id), text(checkpoint_id)])?
            .all()
            .await
            .map_err(backend)?;
        let Some(row) = rows::<CheckpointRow>(&result)?.into_iter().next() else {
            return Ok(None);
        };
        let state = self.state_at(id, row.version).await?;
        Ok(Some((from_json(&row.body)?, state)))
    }
}
