//! The [`Store`] in the session object's own SQLite: the session's commit log. A create
//! or a step commit is one transaction there — the rows the D1 layout plans
//! ([`crate::store::rows`]: a version-guarded update of the session row, its guard, the
//! messages, the state log row, the run, the checkpoint, the child records) and, in the
//! same transaction, the same statements queued in the replica outbox
//! ([`super::Replica`]) and the stream events staged for the commit. A lost race is
//! [`StoreError::Stale`], never a partial write; the platform's output gate holds every
//! answer until the transaction is on disk. Nothing here waits on D1.
//!
//! Reads are served from a write-through [`Image`] of the session (the object is its
//! only writer) and, for what the image does not hold, from the local tables. When the
//! object's storage has no session but D1 does (the storage was lost), the first read
//! rebuilds it from D1.

use super::{Db, Owned, Record, Replica, Row, SqliteStreamLog, backend, int, owned, text};
use crate::message::Message;
use crate::store::rows::{
    self, Arg, Image, SELECT_HEAD, SELECT_STATE, SELECT_STATE_AT, SELECT_SUBSESSIONS, SqlFailure,
    StateRow, Statement, from_json, plan_commit, plan_create,
};
use crate::store::{
    CheckpointRecord, Commit, InterruptRequest, Loaded, NewSession, RunRecord, Store, StoreError,
    SubSession,
};
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;

/// How many commits may wait for D1 before the session refuses new ones.
pub const DEFAULT_BACKLOG_COMMITS: u64 = 1_000;
/// How many bytes of commits may wait for D1 before the session refuses new ones.
pub const BACKLOG_BYTES: u64 = 32 << 20;

/// The refusal of a write while `commits` commits of `bytes` bytes wait for D1, past
/// `max_commits` or [`BACKLOG_BYTES`]: the session answers 503 `storage_backlog`
/// (retryable) instead of growing without bound.
pub fn backlog_refused(commits: u64, bytes: u64, max_commits: u64) -> Option<StoreError> {
    (commits >= max_commits || bytes >= BACKLOG_BYTES)
        .then_some(StoreError::Backlog { commits, bytes })
}

/// The session's store in its object.
pub struct SqliteStore<R: Record> {
    db: Rc<dyn Db>,
    /// The session's image, once read or written (by session id: the conformance suite
    /// keeps several sessions in one object).
    image: RefCell<Option<(String, Image)>>,
    /// Called after every commit that lands (the object replicates it soon).
    on_commit: RefCell<Option<Rc<dyn Fn()>>>,
    /// The session's stream: each commit's staged events are written in its transaction.
    stream: RefCell<Option<Rc<SqliteStreamLog>>>,
    /// D1: where commits are replicated to, and where a lost session is rebuilt from.
    replica: Rc<Replica<R>>,
    /// How many commits may wait for D1 (past it, commits are refused).
    backlog_commits: u64,
}

/// `(kind, body)` rows of the state log.
fn state_log(rows: &[Row]) -> Result<Vec<(String, String)>, StoreError> {
    rows.iter()
        .map(|r| Ok((cell(text(r, 0))?, cell(text(r, 1))?)))
        .collect()
}

fn state_rows(log: &[(String, String)]) -> impl Iterator<Item = StateRow<'_>> {
    log.iter().map(|(kind, body)| StateRow { kind, body })
}

fn cell<T>(value: Option<T>) -> Result<T, StoreError> {
    value.ok_or_else(|| StoreError::Corrupt("a stored row is missing a column".into()))
}

fn id_arg(id: &str) -> Arg {
    Arg::Text(id.into())
}

impl<R: Record> SqliteStore<R> {
    /// The store of the object's session in `db`, replicating to `replica`; at most
    /// `backlog_commits` commits may wait for D1.
    pub fn new(db: Rc<dyn Db>, replica: Rc<Replica<R>>, backlog_commits: u64) -> Self {
        Self {
            db,
            image: RefCell::new(None),
            on_commit: RefCell::new(None),
            stream: RefCell::new(None),
            replica,
            backlog_commits,
        }
    }

    /// Writes each commit's staged events (from `stream`) in the commit's transaction.
    pub fn with_stream(&self, stream: Rc<SqliteStreamLog>) {
        *self.stream.borrow_mut() = Some(stream);
    }

    /// Calls `f` after every create and commit that lands.
    pub fn on_commit(&self, f: Rc<dyn Fn()>) {
        *self.on_commit.borrow_mut() = Some(f);
    }

    fn committed(&self) {
        let hook = self.on_commit.borrow().clone();
        if let Some(hook) = hook {
            hook();
        }
    }

    fn keep(&self, id: &str, image: Image) {
        *self.image.borrow_mut() = Some((id.to_string(), image));
    }

    fn query(&self, q: &str, args: &[Arg]) -> Result<Vec<Row>, StoreError> {
        self.db
            .query(q, args)
            .map_err(|e| backend("reading the session", e))
    }

    /// Runs `batch` locally, queues it for D1 as `version` of `id`, and writes the
    /// stream events staged for `commit_id`: one transaction.
    fn write(
        &self,
        id: &str,
        version: u64,
        commit_id: &str,
        batch: &[Statement],
    ) -> Result<(), StoreError> {
        // The compare-and-set guard is D1's: here the image's version was checked, and the
        // object is the session's only writer.
        let local = batch.iter().filter(|s| !s.is_guard());
        let mut statements: Vec<Owned> = local.map(owned).collect();
        statements.push(self.replica.enqueue(id, version, batch)?);
        let stream = self.stream.borrow().clone();
        let events = stream.as_ref().and_then(|s| s.commit_statements(commit_id));
        let with_events = events.is_some();
        statements.extend(events.into_iter().flatten());
        let written = self.db.atomically(&statements).map_err(StoreError::Backend);
        match &written {
            Ok(()) => {
                if let (Some(stream), true) = (stream, with_events) {
                    stream.written(commit_id);
                }
                self.committed();
            }
            Err(_) => self.replica.recount(),
        }
        written
    }

    /// The session's image from the local tables; `None` if there is no session.
    fn read_image(&self, id: &str) -> Result<Option<Image>, StoreError> {
        let head = self.query(SELECT_HEAD, &[id_arg(id)])?;
        let Some(head) = head.first() else {
            return Ok(None);
        };
        let state = self.query(SELECT_STATE, &[id_arg(id)])?;
        let log = state_log(&state)?;
        let snapshot = cell(int(head, 2))? as u64;
        let interrupt = text(head, 1);
        Image::from_rows(
            &cell(text(head, 0))?,
            interrupt.as_deref(),
            snapshot,
            state_rows(&log),
        )
        .map(Some)
    }

    /// Runs `f` on the session's image: kept, read from the local tables, or — when the
    /// object's storage has lost the session — rebuilt from D1. `None` if there is no
    /// such session anywhere.
    async fn with_image<T>(
        &self,
        id: &str,
        f: impl FnOnce(&mut Image) -> T,
    ) -> Result<Option<T>, StoreError> {
        if let Some((_, image)) = self.image.borrow_mut().as_mut().filter(|(k, _)| k == id) {
            return Ok(Some(f(image)));
        }
        let mut image = match self.read_image(id)? {
            Some(image) => image,
            None => {
                if !self.replica.rebuild(id).await? {
                    return Ok(None);
                }
                self.read_image(id)?
                    .ok_or_else(|| StoreError::Corrupt("the rebuilt session is missing".into()))?
            }
        };
        let result = f(&mut image);
        self.keep(id, image);
        Ok(Some(result))
    }

    /// The state at session `version`: the newest snapshot at or before it, plus patches.
    fn state_at(&self, id: &str, version: u64) -> Result<Value, StoreError> {
        let rows = self.query(SELECT_STATE_AT, &[id_arg(id), Arg::Int(version)])?;
        let log = state_log(&rows)?;
        Ok(rows::fold_state(state_rows(&log))?.0)
    }

    /// Bodies in the first column of `q`'s rows, as JSON.
    fn bodies<T: serde::de::DeserializeOwned>(
        &self,
        q: &str,
        id: &str,
    ) -> Result<Vec<T>, StoreError> {
        let rows = self.query(q, &[id_arg(id)])?;
        rows.iter().map(|r| from_json(&cell(text(r, 0))?)).collect()
    }
}

impl<R: Record> Store for SqliteStore<R> {
    async fn create(&self, session: NewSession) -> Result<(), StoreError> {
        let id = session.head.id.clone();
        let commit_id = session.head.commit_id.clone();
        let (batch, image) = plan_create(session)?;
        match self.write(&id, 1, &commit_id, &batch) {
            Ok(()) => {
                self.keep(&id, image);
                Ok(())
            }
            Err(StoreError::Backend(m))
                if SqlFailure::of(&m) == SqlFailure::Unique("sessions.id") =>
            {
                Err(StoreError::Exists(id))
            }
            Err(e) => Err(e),
        }
    }

    async fn load(&self, id: &str) -> Result<Option<Loaded>, StoreError> {
        self.with_image(id, |image| image.loaded()).await
    }

    async fn messages(
        &self,
        id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<Message>, StoreError> {
        let known = self
            .with_image(id, |image| {
                let whole = offset == 0 && limit >= image.head.message_count;
                (image.messages(offset, limit), whole)
            })
            .await?;
        let whole = match known {
            None => return Err(StoreError::NotFound(id.into())),
            Some((Some(messages), _)) => return Ok(messages),
            Some((None, whole)) => whole,
        };
        let rows = self.query(
            "SELECT body FROM messages WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq",
            &[id_arg(id), Arg::Int(offset), Arg::Int(offset.saturating_add(limit))],
        )?;
        let messages = rows
            .iter()
            .map(|r| from_json(&cell(text(r, 0))?))
            .collect::<Result<Vec<Message>, _>>()?;
        // The whole transcript: keep it with the image.
        if whole
            && let Some((_, image)) = self.image.borrow_mut().as_mut().filter(|(k, _)| k == id)
            && image.head.message_count == messages.len() as u64
        {
            image.messages = Some(messages.clone());
        }
        Ok(messages)
    }

    async fn lend_transcript(&self, id: &str, count: u64) -> Result<Vec<Message>, StoreError> {
        let lent = self.image.borrow_mut().as_mut().and_then(|(kept, image)| {
            let whole = image.messages.as_ref()?.len() as u64 == image.head.message_count;
            (kept == id && whole && count == image.head.message_count)
                .then(|| image.messages.take())
                .flatten()
        });
        match lent {
            Some(transcript) => Ok(transcript),
            None => self.messages(id, 0, count).await,
        }
    }

    fn give_back(&self, id: &str, version: u64, transcript: Vec<Message>) {
        if let Some((_, image)) = self.image.borrow_mut().as_mut().filter(|(kept, image)| {
            kept == id
                && image.head.version == version
                && image.head.message_count == transcript.len() as u64
        }) && image.messages.is_none()
        {
            image.messages = Some(transcript);
        }
    }

    async fn commit(
        &self,
        id: &str,
        expected_version: u64,
        commit: Commit,
    ) -> Result<u64, StoreError> {
        let (commits, bytes) = self.replica.backlog();
        if let Some(refused) = backlog_refused(commits, bytes, self.backlog_commits) {
            return Err(refused);
        }
        self.with_image(id, |_| ())
            .await?
            .ok_or_else(|| StoreError::NotFound(id.into()))?;
        // Taken out while it is planned: should the write fail, it is read again.
        let Some((_, mut image)) = self.image.borrow_mut().take() else {
            return Err(StoreError::NotFound(id.into()));
        };
        let commit_id = commit.head.commit_id.clone();
        let batch = plan_commit(&mut image, expected_version, commit)?;
        let version = image.head.version;
        self.write(id, version, &commit_id, &batch)?;
        self.keep(id, image);
        Ok(version)
    }

    async fn request_interrupt(
        &self,
        id: &str,
        request: InterruptRequest,
    ) -> Result<(), StoreError> {
        let body = rows::to_json(&request)?;
        let updated = self.query(
            "UPDATE sessions SET interrupt = ?1 WHERE id = ?2 RETURNING id",
            &[Arg::Text(body), id_arg(id)],
        )?;
        if updated.is_empty() {
            return Err(StoreError::NotFound(id.into()));
        }
        if let Some((_, image)) = self.image.borrow_mut().as_mut().filter(|(k, _)| k == id) {
            image.interrupt = Some(request);
        }
        Ok(())
    }

    async fn runs(&self, id: &str) -> Result<Vec<RunRecord>, StoreError> {
        self.bodies(
            "SELECT body FROM runs WHERE session_id = ?1 ORDER BY turn",
            id,
        )
    }

    async fn checkpoints(&self, id: &str) -> Result<Vec<CheckpointRecord>, StoreError> {
        let q = "SELECT body FROM checkpoints WHERE session_id = ?1 ORDER BY version, rowid";
        self.bodies(q, id)
    }

    async fn checkpoint_state(
        &self,
        id: &str,
        checkpoint_id: &str,
    ) -> Result<Option<(CheckpointRecord, Value)>, StoreError> {
        let rows = self.query(
            "SELECT version, body FROM checkpoints WHERE session_id = ?1 AND id = ?2",
            &[id_arg(id), Arg::Text(checkpoint_id.into())],
        )?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let version = cell(int(row, 0))? as u64;
        let state = self.state_at(id, version)?;
        Ok(Some((from_json(&cell(text(row, 1))?)?, state)))
    }

    async fn subsessions(&self, parent_id: &str) -> Result<Vec<SubSession>, StoreError> {
        let rows = self.query(SELECT_SUBSESSIONS, &[id_arg(parent_id)])?;
        rows.iter()
            .map(|r| {
                Ok(SubSession {
                    child_id: cell(text(r, 0))?,
                    agent: cell(text(r, 1))?,
                    tool_call_id: cell(text(r, 2))?,
                    status: rows::child_status(&cell(text(r, 3))?)?,
                    created_at: cell(int(r, 4))? as u64,
                    updated_at: cell(int(r, 5))? as u64,
                    // Only persistent children have them.
                    name: text(r, 6),
                    mode: text(r, 7).map(|m| rows::child_mode(&m)).transpose()?,
                })
            })
            .collect()
    }

    async fn delete(&self, id: &str) -> Result<(), StoreError> {
        self.replica
            .erase(id, || {
                let mut statements: Vec<Owned> = rows::plan_delete(id).iter().map(owned).collect();
                let outbox = "DELETE FROM replica_outbox WHERE session_id = ?";
                statements.push((outbox.into(), vec![id_arg(id)]));
                self.db
                    .atomically(&statements)
                    .map_err(StoreError::Backend)?;
                self.image.borrow_mut().take_if(|(kept, _)| kept == id);
                Ok(())
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backlog_past_either_bound_refuses_writes() {
        assert_eq!(backlog_refused(999, 0, 1_000), None);
        assert_eq!(
            backlog_refused(1_000, 10, 1_000),
            Some(StoreError::Backlog {
                commits: 1_000,
                bytes: 10
            })
        );
        assert!(backlog_refused(1, BACKLOG_BYTES, 1_000).is_some());
        assert_eq!(backlog_refused(1, BACKLOG_BYTES - 1, 1_000), None);
    }
}
