//! The commit pipeline ([`Pipeline`]): how a drive's writes become durable and their
//! events visible. A commit is staged in the stream under a fresh commit id, sent with
//! compare-and-set on the session's version, and its events released only once it
//! landed (dropped if it did not). A step's commit that the run goes on from may instead
//! go out *ahead*, together with the next model call ([`Ahead`]): the model needs it in
//! its prompt, not landed. [`Live`] shows it at once; the stream holds the model's
//! deltas back until it lands, so they still follow its batch; if it fails, `Live` goes
//! back to what it showed before and the model's answer is dropped. Anything else waits
//! for it to land first ([`Pipeline::settle`]).

use super::{Live, RunError};
use crate::chunk::StreamEvent;
use crate::host::{Host, Level, LogValue};
use crate::journal::StreamLog;
use crate::store::{Commit, SessionHead, Store};
use futures::future::LocalBoxFuture;
use std::rc::Rc;

/// A step commit out ahead of the next model call.
#[derive(Debug, Clone)]
pub(crate) struct Ahead {
    commit_id: String,
    expected: u64,
    /// The commit (its records of children are what a parent knows of them before it
    /// lands).
    pub commit: Commit,
    kept: Kept,
}

/// What [`Ahead`] keeps while its commit is out: what `Live` showed before it.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    prior: SessionHead,
    prior_len: usize,
    /// The step it closes, logged as `step_committed` once it lands.
    step: Option<u32>,
    /// When it was sent (ms).
    sent: u64,
}

/// Carries a drive's commits to the store and their events to the stream.
pub(crate) struct Pipeline<'r, S: Store> {
    pub store: &'r S,
    pub stream: &'r Rc<dyn StreamLog>,
    pub host: &'r Rc<dyn Host>,
    pub observer: &'r Rc<dyn super::Observer>,
}

impl<S: Store> Pipeline<'_, S> {
    /// Commits `commit` with compare-and-set, releasing `post` (events that must only be
    /// seen once the commit is durable) after it lands, and updates `live`.
    pub(crate) async fn commit(
        &self,
        live: &mut Live,
        mut commit: Commit,
        post: Vec<StreamEvent>,
    ) -> Result<(), RunError> {
        let commit_id = self.stage(&live.head, post);
        commit.head.commit_id = commit_id.clone();
        let head = commit.head.clone();
        let messages = commit.messages.clone();
        let truncate = commit.truncate_messages_to;
        let clears_interrupt = commit.clear_interrupt;
        let sent = self.host.now_ms();
        let version = self
            .land(&live.head.id, &commit_id, live.head.version, commit)
            .await?;
        let now = self.host.now_ms();
        self.observer
            .committed(&head.id, head.step_count, sent, now);
        live.head = head;
        live.head.version = version;
        if let Some(n) = truncate {
            live.transcript.truncate(n as usize);
        }
        live.transcript.extend(messages);
        if clears_interrupt {
            live.interrupt = None;
        }
        Ok(())
    }

    /// Stages `post` under a new commit id for the commit after `head`.
    pub(crate) fn stage(&self, head: &SessionHead, post: Vec<StreamEvent>) -> String {
        let commit_id = self.host.new_id("commit");
        self.stream.stage(&commit_id, head.version + 1, post);
        commit_id
    }

    /// Sends a staged commit; its batch is released if it lands, dropped if not. Boxed:
    /// every way a run commits shares one copy of the store's commit (a smaller bundle).
    fn land<'a>(
        &'a self,
        id: &'a str,
        commit_id: &'a str,
        expected: u64,
        commit: Commit,
    ) -> LocalBoxFuture<'a, Result<u64, RunError>> {
        Box::pin(async move {
            let result = self.store.commit(id, expected, commit).await;
            let version = result.inspect_err(|_| self.stream.discard(commit_id))?;
            self.stream.release(commit_id);
            Ok(version)
        })
    }

    /// Stages `commit` (which only appends messages) and shows it in `live` at once; it
    /// goes out with the next model call, or when [`settle`](Self::settle)d.
    pub(crate) fn send_ahead(
        &self,
        live: &mut Live,
        mut commit: Commit,
        post: Vec<StreamEvent>,
        step: Option<u32>,
    ) {
        let commit_id = self.stage(&live.head, post);
        commit.head.commit_id = commit_id.clone();
        let expected = live.head.version;
        let mut head = commit.head.clone();
        head.version = expected + 1;
        let prior = std::mem::replace(&mut live.head, head);
        let prior_len = live.transcript.len();
        live.transcript.extend(commit.messages.iter().cloned());
        let kept = Kept {
            prior,
            prior_len,
            step,
            sent: 0,
        };
        live.ahead = Some(Ahead {
            commit_id,
            expected,
            commit,
            kept,
        });
    }

    /// Sends the commit sent ahead and waits for it to land; returns how it ended with
    /// what [`landed`](Self::landed) needs.
    pub(crate) async fn land_ahead(&self, id: &str, ahead: Ahead) -> (Result<u64, RunError>, Kept) {
        let Ahead {
            commit_id,
            expected,
            commit,
            mut kept,
        } = ahead;
        kept.sent = self.host.now_ms();
        (self.land(id, &commit_id, expected, commit).await, kept)
    }

    /// Brings `live` in line with how the commit sent ahead ended: durable at its
    /// version, or back where it was before it.
    pub(crate) fn landed(
        &self,
        live: &mut Live,
        kept: Kept,
        landed: Result<u64, RunError>,
    ) -> Result<(), RunError> {
        match landed {
            Ok(version) => {
                live.head.version = version;
                let now = self.host.now_ms();
                let step = live.head.step_count;
                self.observer.committed(&live.head.id, step, kept.sent, now);
                if let Some(step) = kept.step {
                    let fields = [
                        ("session", LogValue::Str(&live.head.id)),
                        ("run", LogValue::Str(&live.head.run.run_id)),
                        ("step", LogValue::Num(step.into())),
                        ("pending", LogValue::Num(0)),
                        ("code", LogValue::Null),
                    ];
                    self.host.log(Level::Debug, "step_committed", &fields);
                }
                Ok(())
            }
            Err(e) => {
                live.head = kept.prior;
                live.transcript.truncate(kept.prior_len);
                Err(e)
            }
        }
    }

    /// Lands the commit sent ahead, if any: afterwards `live` is durable.
    pub(crate) async fn settle(&self, live: &mut Live) -> Result<(), RunError> {
        let Some(ahead) = live.ahead.take() else {
            return Ok(());
        };
        let (landed, kept) = self.land_ahead(&live.head.id, ahead).await;
        self.landed(live, kept, landed)
    }

    /// Drops the commit sent ahead without sending it (the run was aborted).
    pub(crate) fn drop_ahead(&self, live: &mut Live) {
        if let Some(ahead) = live.ahead.take() {
            self.stream.discard(&ahead.commit_id);
            self.landed(live, ahead.kept, Err(RunError::Aborted)).ok();
        }
    }
}
