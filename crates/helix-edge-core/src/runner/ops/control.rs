//! Steering a session from outside: interrupt (a durable flag honoured at the next step
//! boundary), resume, and abort (for good). Each is passed on to the work the session
//! waits on outside it ([`crate::runner::waits`]).

use super::head_only;
use crate::chunk::{ChunkBody, RunStatus, StreamEvent};
use crate::error::ErrorInfo;
use crate::runner::{ChildOrder, RunError, Runner};
use crate::store::{InterruptRequest, SessionStatus, Store, StoreError};

impl<S: Store> Runner<S> {
    /// Requests an interrupt, honoured at the next step boundary.
    pub fn interrupt<'a>(
        &'a self,
        session_id: &'a str,
        reason: Option<String>,
    ) -> impl Future<Output = Result<(), RunError>> + 'a {
        self.request_stop(session_id, InterruptRequest::because(reason))
    }

    /// Requests an interrupt honoured once the calls the run waits on are answered, at
    /// the boundary of the step that takes their results.
    pub fn interrupt_after_calls<'a>(
        &'a self,
        session_id: &'a str,
        reason: Option<String>,
    ) -> impl Future<Output = Result<(), RunError>> + 'a {
        let request = InterruptRequest {
            after_calls: true,
            ..InterruptRequest::because(reason)
        };
        self.request_stop(session_id, request)
    }

    async fn request_stop(
        &self,
        session_id: &str,
        mut request: InterruptRequest,
    ) -> Result<(), RunError> {
        let live = self.load(session_id).await?;
        let reason = request.reason.clone();
        match live.head.status {
            SessionStatus::Active => {
                // A queued follow-up turn stays queued.
                request.then = live.interrupt.as_ref().and_then(|r| r.then.clone());
                self.store
                    .request_interrupt(session_id, request.clone())
                    .await?;
                *self.interrupt_requested.borrow_mut() = Some(request);
                self.order_children(&live.head, ChildOrder::Interrupt { reason })
                    .await;
                Ok(())
            }
            SessionStatus::Aborted => Err(RunError::Aborted),
            _ => Err(RunError::Busy("no run is active")),
        }
    }

    /// Continues an interrupted run (or returns the active run's id, to re-drive it).
    pub async fn resume(&self, session_id: &str) -> Result<String, RunError> {
        let mut live = self.load(session_id).await?;
        match live.head.status {
            SessionStatus::Active => Ok(live.head.run.run_id.clone()),
            SessionStatus::Interrupted => {
                let mut head = live.head.clone();
                head.status = SessionStatus::Active;
                head.run.status = RunStatus::Running;
                head.updated_at = self.host.now_ms();
                let post = vec![self.emitter(&head, None).event(ChunkBody::RunResumed {
                    turn: head.run.turn,
                })];
                self.pipeline()
                    .commit(&mut live, head_only(head, true), post)
                    .await?;
                self.order_children(&live.head, ChildOrder::Resume).await;
                Ok(live.head.run.run_id)
            }
            SessionStatus::Aborted => Err(RunError::Aborted),
            SessionStatus::Completed => Err(RunError::NotResumable("completed")),
            SessionStatus::Failed => Err(RunError::NotResumable("failed")),
        }
    }

    /// Ends the session for good; tools running in this runner see the abort signal.
    pub async fn abort(&self, session_id: &str, reason: Option<String>) -> Result<(), RunError> {
        self.abort.borrow().abort();
        for _ in 0..5 {
            let mut live = self.load(session_id).await?;
            if live.head.status == SessionStatus::Aborted {
                return Ok(());
            }
            let now = self.host.now_ms();
            let mut head = live.head.clone();
            head.status = SessionStatus::Aborted;
            head.pending.clear();
            head.suspended_reason = None;
            head.updated_at = now;
            let mut post = Vec::new();
            if !head.run.status.is_terminal() {
                let error = ErrorInfo {
                    code: "run_aborted".into(),
                    message: reason
                        .clone()
                        .unwrap_or_else(|| "The run was aborted".into()),
                    retryable: false,
                };
                head.run.status = RunStatus::Aborted;
                head.run.completed_at = Some(now);
                head.run.error = Some(error.clone());
                let emitter = self.emitter(&head, None);
                post.push(emitter.event(ChunkBody::RunFinished {
                    status: RunStatus::Aborted,
                }));
                post.push(StreamEvent::Fail { error });
            }
            // A step in progress never commits: its live chunks are disowned.
            if let Some(from) = self.journal.stream.unconfirmed_from() {
                post.insert(
                    0,
                    crate::runner::torn(&self.emitter(&live.head, None), &live.head, from),
                );
            }
            let waited_on = live.head.clone();
            let committed = self
                .pipeline()
                .commit(&mut live, head_only(head, true), post)
                .await;
            match committed {
                Err(RunError::Store(StoreError::Stale { .. })) => continue,
                Ok(()) => {
                    if waited_on.run.status != live.head.run.status {
                        self.observer.run_ended(&live.head, now);
                    }
                    let reason = reason.unwrap_or_else(|| "The parent session was aborted".into());
                    let order = ChildOrder::Abort { reason };
                    // What it waits on ends with it (and its persistent children).
                    self.order_children(&waited_on, order).await;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Err(RunError::Busy("the session kept changing; try again"))
    }
}
