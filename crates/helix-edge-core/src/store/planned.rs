//! [`PlannedStore`]: the D1 store's write plan ([`super::rows`]) run over in-memory
//! rows, without a database, for native benchmarks and storage-growth tests.

use super::rows::{
    Arg, Image, StateRow, Statement, fold_state, plan_commit, plan_create, plan_delete,
};
use super::{
    CheckpointRecord, Commit, InterruptRequest, Loaded, NewSession, RunRecord, StoreError,
    SubSession,
};
use crate::message::Message;
use serde_json::Value;
use std::collections::BTreeMap;

/// The D1 store's write plan over in-memory rows, without a database: it keeps what
/// the D1 store keeps in memory plus the run, checkpoint and state-log rows each batch
/// writes, and records the bytes every batch sends. It passes the conformance suite;
/// native benchmarks and storage-growth tests measure with it.
#[derive(Debug, Default)]
pub struct PlannedStore {
    sessions: std::cell::RefCell<BTreeMap<String, Planned>>,
    written: std::cell::RefCell<Vec<usize>>,
}

#[derive(Debug)]
struct Planned {
    image: Image,
    runs: Vec<RunRecord>,
    checkpoints: Vec<(CheckpointRecord, u64)>,
    /// `(version, kind, body)` rows of the state log.
    state_log: Vec<(u64, String, String)>,
    subsessions: Vec<SubSession>,
}

impl Planned {
    /// Keeps the rows of a batch that reads need beyond the image.
    fn apply(&mut self, batch: &[Statement], checkpoint: Option<CheckpointRecord>) {
        let version = self.image.head.version;
        for s in batch {
            if let (true, [_, _, Arg::Text(kind), Arg::Text(body)]) = (
                s.sql.starts_with("INSERT INTO state_log"),
                s.args.as_slice(),
            ) {
                self.state_log.push((version, kind.clone(), body.clone()));
            }
            if let (true, [_, Arg::Int(kept)]) = (
                s.sql.starts_with("DELETE FROM checkpoints"),
                s.args.as_slice(),
            ) {
                self.checkpoints.retain(|(c, _)| c.message_count <= *kept);
            }
        }
        let run = &self.image.head.run;
        match self.runs.iter_mut().find(|r| r.run_id == run.run_id) {
            Some(existing) => *existing = run.clone(),
            None => self.runs.push(run.clone()),
        }
        self.checkpoints.extend(checkpoint.map(|c| (c, version)));
    }
}

impl PlannedStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes sent by each successful create and commit, in order.
    pub fn bytes_written(&self) -> Vec<usize> {
        self.written.borrow().clone()
    }

    fn record(&self, batch: &[Statement]) {
        let bytes = batch.iter().map(Statement::bytes).sum();
        self.written.borrow_mut().push(bytes);
    }

    fn with<R>(&self, id: &str, f: impl FnOnce(&mut Planned) -> R) -> Result<R, StoreError> {
        let mut sessions = self.sessions.borrow_mut();
        let session = sessions
            .get_mut(id)
            .ok_or_else(|| StoreError::NotFound(id.into()))?;
        Ok(f(session))
    }
}

impl super::Store for PlannedStore {
    async fn create(&self, session: NewSession) -> Result<(), StoreError> {
        let id = session.head.id.clone();
        if self.sessions.borrow().contains_key(&id) {
            return Err(StoreError::Exists(id));
        }
        let checkpoint = session.checkpoint.clone();
        let (batch, image) = plan_create(session)?;
        self.record(&batch);
        let mut planned = Planned {
            image,
            runs: Vec::new(),
            checkpoints: Vec::new(),
            state_log: Vec::new(),
            subsessions: Vec::new(),
        };
        planned.apply(&batch, Some(checkpoint));
        self.sessions.borrow_mut().insert(id, planned);
        Ok(())
    }

    async fn load(&self, id: &str) -> Result<Option<Loaded>, StoreError> {
        Ok(self.sessions.borrow().get(id).map(|p| p.image.loaded()))
    }

    async fn messages(
        &self,
        id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<Message>, StoreError> {
        self.with(id, |p| p.image.messages(offset, limit).unwrap_or_default())
    }

    async fn commit(
        &self,
        id: &str,
        expected_version: u64,
        commit: Commit,
    ) -> Result<u64, StoreError> {
        let checkpoint = commit.checkpoint.clone();
        let children = commit.subsessions.clone();
        let batch = self.with(id, |p| plan_commit(&mut p.image, expected_version, commit))??;
        self.record(&batch);
        self.with(id, |p| {
            p.apply(&batch, checkpoint);
            super::upsert_subsessions(&mut p.subsessions, children);
            p.image.head.version
        })
    }

    async fn request_interrupt(
        &self,
        id: &str,
        request: InterruptRequest,
    ) -> Result<(), StoreError> {
        self.with(id, |p| p.image.interrupt = Some(request))
    }

    async fn runs(&self, id: &str) -> Result<Vec<RunRecord>, StoreError> {
        self.with(id, |p| {
            let mut runs = p.runs.clone();
            runs.sort_by_key(|r| r.turn);
            runs
        })
    }

    async fn checkpoints(&self, id: &str) -> Result<Vec<CheckpointRecord>, StoreError> {
        self.with(id, |p| {
            p.checkpoints.iter().map(|(c, _)| c.clone()).collect()
        })
    }

    async fn checkpoint_state(
        &self,
        id: &str,
        checkpoint_id: &str,
    ) -> Result<Option<(CheckpointRecord, Value)>, StoreError> {
        self.with(id, |p| {
            let Some((c, version)) = p.checkpoints.iter().find(|(c, _)| c.id == checkpoint_id)
            else {
                return Ok(None);
            };
            // As SELECT_STATE_AT: from the newest snapshot at or before the version.
            let upto: Vec<_> = p.state_log.iter().filter(|r| r.0 <= *version).collect();
            let from = upto.iter().rposition(|r| r.1 == "snapshot").unwrap_or(0);
            let rows = upto[from..].iter().map(|r| StateRow {
                kind: &r.1,
                body: &r.2,
            });
            Ok(Some((c.clone(), fold_state(rows)?.0)))
        })?
    }

    async fn subsessions(&self, parent_id: &str) -> Result<Vec<SubSession>, StoreError> {
        let sessions = self.sessions.borrow();
        Ok(sessions
            .get(parent_id)
            .map(|p| p.subsessions.clone())
            .unwrap_or_default())
    }

    async fn delete(&self, id: &str) -> Result<(), StoreError> {
        self.record(&plan_delete(id));
        self.sessions.borrow_mut().remove(id);
        Ok(())
    }
}
