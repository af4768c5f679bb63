//! Commits sent ahead: a step's commit that goes out together with the next model call
//! instead of before it ([`Ahead`]), and how `live` follows it landing or failing.

use super::{Live, RunError, Runner};
use crate::host::{Level, LogValue};
use crate::store::{Commit, SessionHead, Store};

/// A step commit that goes out together with the next model call instead of before it:
/// the model does not need it to have landed, only to be in its prompt. `live` shows it
/// at once; the stream holds the model's deltas back until it lands, so they still
/// follow its batch; if it fails, `live` goes back to what it showed before and the
/// model's answer is dropped. Anything else the drive does waits for it to land first
/// ([`Runner::settle`]).
#[derive(Debug, Clone)]
pub(crate) struct Ahead {
    commit_id: String,
    expected: u64,
    commit: Commit,
    kept: Kept,
}

/// What [`Ahead`] keeps while its commit is out.
#[derive(Debug, Clone)]
pub(crate) struct Kept {
    prior: SessionHead,
    prior_len: usize,
    /// The step it closes, logged as `step_committed` once it lands.
    step: Option<u32>,
}

impl Ahead {
    /// The child records its commit writes.
    #[cfg(feature = "persistent-children")]
    pub(crate) fn subsessions(&self) -> &[crate::store::SubSession] {
        &self.commit.subsessions
    }
}

impl<S: Store> Runner<S> {
    /// Stages `commit` (which only appends messages) and shows it in `live` at once; it
    /// goes out with the next model call, or when [`settle`](Self::settle)d.
    pub(crate) fn send_ahead(
        &self,
        live: &mut Live,
        mut commit: Commit,
        post: Vec<crate::chunk::StreamEvent>,
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
            kept,
        } = ahead;
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
                if let Some(step) = kept.step {
                    let fields = [
                        ("step", LogValue::Num(step.into())),
                        ("pending", LogValue::Num(0)),
                        ("code", LogValue::Null),
                    ];
                    self.log(live, Level::Debug, "step_committed", &fields);
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
    pub(super) fn drop_ahead(&self, live: &mut Live) {
        if let Some(ahead) = live.ahead.take() {
            self.journal.stream.discard(&ahead.commit_id);
            self.landed(live, ahead.kept, Err(RunError::Aborted)).ok();
        }
    }
}
