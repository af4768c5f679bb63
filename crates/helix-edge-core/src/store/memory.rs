//! An in-memory [`Store`] for native tests and examples. It keeps full state copies per
//! checkpoint (fine in tests; the D1 backend stores state incrementally).

use super::{
    CheckpointRecord, Commit, InterruptRequest, Loaded, NewSession, RunRecord, SessionHead,
    StateChange, Store, StoreError, SubSession, upsert_subsessions,
};
use crate::message::Message;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

#[derive(Debug, Clone)]
struct Entry {
    head: SessionHead,
    state: Value,
    messages: Vec<Message>,
    interrupt: Option<InterruptRequest>,
    runs: Vec<RunRecord>,
    checkpoints: Vec<(CheckpointRecord, Value)>,
    subsessions: Vec<SubSession>,
}

/// Sessions kept in memory. Share one between runners through a reference or `Rc`.
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: RefCell<HashMap<String, Entry>>,
    commits: Cell<u64>,
    /// Yield to the executor before every operation, as real IO does, so that
    /// concurrent operations interleave at their awaits.
    yields: bool,
}

/// A future that is pending once, then ready.
struct YieldNow(bool);

impl std::future::Future for YieldNow {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

impl MemoryStore {
    /// An empty store whose operations complete without yielding.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store that yields before every operation (interleaves like IO).
    pub fn yielding() -> Self {
        Self {
            yields: true,
            ..Self::default()
        }
    }

    async fn io(&self) {
        if self.yields {
            YieldNow(false).await;
        }
    }

    /// How many commits succeeded (for tests that count writes).
    pub fn commit_count(&self) -> u64 {
        self.commits.get()
    }

    fn with<R>(
        &self,
        id: &str,
        f: impl FnOnce(&mut Entry) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let mut sessions = self.sessions.borrow_mut();
        let entry = sessions
            .get_mut(id)
            .ok_or_else(|| StoreError::NotFound(id.into()))?;
        f(entry)
    }
}

fn upsert_run(runs: &mut Vec<RunRecord>, run: &RunRecord) {
    match runs.iter_mut().find(|r| r.run_id == run.run_id) {
        Some(existing) => *existing = run.clone(),
        None => runs.push(run.clone()),
    }
}

impl Store for MemoryStore {
    async fn create(&self, session: NewSession) -> Result<(), StoreError> {
        self.io().await;
        let mut sessions = self.sessions.borrow_mut();
        if sessions.contains_key(&session.head.id) {
            return Err(StoreError::Exists(session.head.id));
        }
        let mut head = session.head;
        head.version = 1;
        head.message_count = session.messages.len() as u64;
        let runs = vec![head.run.clone()];
        let checkpoints = vec![(session.checkpoint, session.state.clone())];
        sessions.insert(
            head.id.clone(),
            Entry {
                head,
                state: session.state,
                messages: session.messages,
                interrupt: None,
                runs,
                checkpoints,
                subsessions: Vec::new(),
            },
        );
        Ok(())
    }

    async fn load(&self, id: &str) -> Result<Option<Loaded>, StoreError> {
        self.io().await;
        let sessions = self.sessions.borrow();
        Ok(sessions.get(id).map(|e| Loaded {
            head: e.head.clone(),
            state: e.state.clone(),
            interrupt: e.interrupt.clone(),
        }))
    }

    async fn messages(
        &self,
        id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<Vec<Message>, StoreError> {
        self.io().await;
        self.with(id, |e| {
            let start = (offset as usize).min(e.messages.len());
            let end = start.saturating_add(limit as usize).min(e.messages.len());
            Ok(e.messages[start..end].to_vec())
        })
    }

    async fn commit(
        &self,
        id: &str,
        expected_version: u64,
        commit: Commit,
    ) -> Result<u64, StoreError> {
        self.io().await;
        self.with(id, |e| {
            if e.head.version != expected_version {
                return Err(StoreError::Stale {
                    expected: expected_version,
                });
            }
            let base = commit
                .truncate_messages_to
                .map_or(e.messages.len() as u64, |n| n.min(e.messages.len() as u64));
            if commit.head.message_count != base + commit.messages.len() as u64 {
                return Err(StoreError::Corrupt(format!(
                    "commit says {} messages, but {} + {} were written",
                    commit.head.message_count,
                    base,
                    commit.messages.len()
                )));
            }
            if let Some(c) = &commit.checkpoint
                && e.checkpoints.iter().any(|(k, _)| k.id == c.id)
            {
                return Err(StoreError::Corrupt(format!(
                    "checkpoint {} exists already",
                    c.id
                )));
            }
            // Apply the state change to a copy first, so that a bad patch changes nothing.
            let state = match commit.state {
                StateChange::None => None,
                StateChange::Replace(v) => Some(v),
                StateChange::Patch(ops) => {
                    let mut next = e.state.clone();
                    for op in &ops {
                        op.apply(&mut next)
                            .map_err(|err| StoreError::Corrupt(err.to_string()))?;
                    }
                    Some(next)
                }
            };
            if let Some(state) = state {
                e.state = state;
            }
            e.messages.truncate(base as usize);
            e.messages.extend(commit.messages);
            if let Some(n) = commit.truncate_messages_to {
                // The abandoned branch's checkpoints: their messages are gone.
                e.checkpoints.retain(|(c, _)| c.message_count <= n);
            }
            e.head = commit.head;
            e.head.version = expected_version + 1;
            upsert_run(&mut e.runs, &e.head.run);
            if let Some(ckpt) = commit.checkpoint {
                e.checkpoints.push((ckpt, e.state.clone()));
            }
            if commit.clear_interrupt {
                e.interrupt = None;
            }
            upsert_subsessions(&mut e.subsessions, commit.subsessions);
            self.commits.set(self.commits.get() + 1);
            Ok(e.head.version)
        })
    }

    async fn request_interrupt(
        &self,
        id: &str,
        request: InterruptRequest,
    ) -> Result<(), StoreError> {
        self.io().await;
        self.with(id, |e| {
            e.interrupt = Some(request);
            Ok(())
        })
    }

    async fn runs(&self, id: &str) -> Result<Vec<RunRecord>, StoreError> {
        self.io().await;
        self.with(id, |e| Ok(e.runs.clone()))
    }

    async fn checkpoints(&self, id: &str) -> Result<Vec<CheckpointRecord>, StoreError> {
        self.io().await;
        self.with(id, |e| {
            Ok(e.checkpoints.iter().map(|(c, _)| c.clone()).collect())
        })
    }

    async fn checkpoint_state(
        &self,
        id: &str,
        checkpoint_id: &str,
    ) -> Result<Option<(CheckpointRecord, Value)>, StoreError> {
        self.io().await;
        self.with(id, |e| {
            Ok(e.checkpoints
                .iter()
                .find(|(c, _)| c.id == checkpoint_id)
                .cloned())
        })
    }

    async fn subsessions(&self, parent_id: &str) -> Result<Vec<SubSession>, StoreError> {
        self.io().await;
        let sessions = self.sessions.borrow();
        Ok(sessions
            .get(parent_id)
            .map(|e| e.subsessions.clone())
            .unwrap_or_default())
    }

    async fn delete(&self, id: &str) -> Result<(), StoreError> {
        self.io().await;
        self.sessions.borrow_mut().remove(id);
        Ok(())
    }
}
