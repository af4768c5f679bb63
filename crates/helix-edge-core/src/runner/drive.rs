//! The driver: carries out what the step machine ([`super::machine`]) decides, one
//! transition at a time, until the session suspends, ends, or the slice's budget is
//! spent. It decides nothing itself: every branch is a [`Next`].

use super::machine::{self, Budget, Next, Seen};
use super::ops::head_only;
use super::{Live, Progress, RunError, Runner};
use crate::abort::AbortSignal;
use crate::agent::{Agent, RUN_TOOLS};
use crate::chunk::{ChunkBody, RunStatus};
use crate::error::ErrorInfo;
use crate::host::{Level, LogValue};
use crate::store::{InterruptRequest, SessionStatus, Store, StoreError};
use std::rc::Rc;

/// Resets the `driving` flag however a drive ends (including being dropped).
struct DriveGuard<'a>(&'a std::cell::Cell<bool>);

impl Drop for DriveGuard<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

impl<S: Store> Runner<S> {
    /// Does the session's pending work, up to `max_steps` model steps: resolves answered
    /// or expired calls, honours interrupts, runs steps and commits each. Returns when
    /// the session suspends, ends, or the budget is spent.
    pub async fn drive(&self, id: &str, max_steps: u32) -> Result<Progress, RunError> {
        if self.driving.replace(true) {
            return Ok(Progress::Busy);
        }
        let _guard = DriveGuard(&self.driving);
        // A fresh signal before the first await, so an abort that arrives at any await
        // of this drive reaches its tools.
        *self.abort.borrow_mut() = AbortSignal::new();
        // Before anything else, bring the journal in line with durable state: a previous
        // process may have died mid-step (the stream is told with `stream_resync`).
        let mut live = self.load_with(id, true, true).await?;
        let defined = self.agent(&live.head.agent)?;
        // A build whose capabilities add no tools at a drive's start awaits nothing here.
        let mut agent = match RUN_TOOLS.is_empty() {
            true => defined.clone(),
            false => self.with_run_tools(defined.clone(), &live).await,
        };
        let mut budget = Budget {
            taken: 0,
            max: max_steps,
        };
        self.observer.slice_started(&live.head, self.host.now_ms());
        let progress = self.drive_loop(&mut live, &defined, &mut agent, &mut budget);
        let progress = progress.await;
        self.observer.slice_ended(&live.head, self.host.now_ms());
        progress
    }

    /// The drive's transitions, until one gives its progress.
    async fn drive_loop(
        &self,
        live: &mut Live,
        defined: &Rc<Agent>,
        agent: &mut Rc<Agent>,
        budget: &mut Budget,
    ) -> Result<Progress, RunError> {
        let id = live.head.id.clone();
        let id = id.as_str();
        let mut stale = 0;
        loop {
            let waited = !live.head.pending.is_empty();
            match self.advance(live, agent, budget).await {
                // Listed again once a suspension is resumed: the user may have connected
                // a server meanwhile.
                Ok(None) if waited && live.head.pending.is_empty() && !RUN_TOOLS.is_empty() => {
                    *agent = self.with_run_tools(defined.clone(), live).await;
                }
                Ok(Some(progress)) => {
                    let transcript = std::mem::take(&mut live.transcript);
                    self.store.give_back(id, live.head.version, transcript);
                    return Ok(progress);
                }
                Ok(None) => {}
                // An abort is being committed by `abort`; this drive must not commit.
                Err(RunError::Aborted) => return Ok(Progress::Idle(SessionStatus::Aborted)),
                Err(RunError::Store(StoreError::Stale { .. })) if stale < 5 => {
                    // Someone else committed (an abort, say): continue from their state.
                    stale += 1;
                    *live = self.load_with(id, false, true).await?;
                    // The step that lost streamed chunks of its own: they are disowned.
                    self.resync(live);
                }
                // Content over a storage limit: nothing was written, and redoing the step
                // would only repeat it. The run fails with the reason instead.
                Err(RunError::Store(e @ StoreError::TooLarge { .. })) => {
                    self.fail_run(live, ErrorInfo::of(&e)).await?;
                    return Ok(Progress::Idle(SessionStatus::Failed));
                }
                Err(e) => {
                    // A commit that failed leaves its step's live chunks unconfirmed: the
                    // next load disowns them.
                    self.recovered.set(false);
                    return Err(e);
                }
            }
        }
    }

    /// Carries out the machine's next transition; `None` means "keep going".
    async fn advance(
        &self,
        live: &mut Live,
        agent: &Agent,
        budget: &mut Budget,
    ) -> Result<Option<Progress>, RunError> {
        if live.interrupt.is_none() {
            live.interrupt = self.interrupt_requested.borrow().clone();
        }
        let seen = Seen {
            head: &live.head,
            interrupt: live.interrupt.as_ref(),
            aborted: self.abort.borrow().is_aborted(),
        };
        let mut next = machine::next(seen, agent.max_steps(), *budget);
        if next == Next::Step {
            // A step that keeps beginning without committing (a crash loop) fails the run.
            let step = live.head.step_count + 1;
            let attempt = self
                .journal
                .attempts
                .begin_step(&live.head.run.run_id, step);
            if let Some(error) = machine::exhausted(step, attempt, self.config.max_step_attempts) {
                next = Next::Fail(error);
            }
        }
        let pipeline = self.pipeline();
        if next == Next::Stop {
            // The abort is being committed by `abort`: nothing more goes out.
            pipeline.drop_ahead(live);
            return Err(RunError::Aborted);
        }
        if next.needs_landed() {
            pipeline.settle(live).await?;
        }
        match next {
            Next::Stop => Err(RunError::Aborted),
            Next::FollowUp(then) => {
                self.follow_up(live, then).await?;
                Ok(None)
            }
            Next::Idle(status) => Ok(Some(Progress::Idle(status))),
            Next::Interrupt(request) => {
                self.commit_interrupted(live, request).await?;
                Ok(None)
            }
            Next::Resolve => self.resume_step(live, agent).await,
            Next::Fail(error) => {
                self.fail_run(live, error).await?;
                Ok(Some(Progress::Idle(SessionStatus::Failed)))
            }
            Next::Yield => Ok(Some(Progress::Yielded)),
            Next::Step => {
                self.model_step(live, agent).await?;
                budget.taken += 1;
                Ok(None)
            }
        }
    }

    /// The run stops at this step boundary: `interrupted` (a queued follow-up keeps its
    /// request until its turn has started).
    async fn commit_interrupted(
        &self,
        live: &mut Live,
        request: InterruptRequest,
    ) -> Result<(), RunError> {
        let mut head = live.head.clone();
        head.status = SessionStatus::Interrupted;
        head.run.status = RunStatus::Interrupted;
        head.updated_at = self.host.now_ms();
        let emitter = self.emitter(&head, None);
        let post = vec![emitter.event(ChunkBody::RunInterrupted {
            reason: request.reason,
        })];
        let clear = request.then.is_none();
        self.pipeline()
            .commit(live, head_only(head, clear), post)
            .await?;
        let step = u64::from(live.head.step_count);
        let fields = [("step", LogValue::Num(step))];
        self.log(live, Level::Info, "run_interrupted", &fields);
        // Honoured: the durable flag was cleared by the commit, the in-memory one here.
        self.interrupt_requested.borrow_mut().take();
        Ok(())
    }
}
