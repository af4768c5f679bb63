//! The step machine: what a drive does next, decided from plain values — the session as
//! loaded, the agent's step limit and the drive's budget. Every transition of a run is
//! here; [`super::drive`] only carries out what [`next`] decides.
//!
//! In order, the first that applies:
//! 1. the run was aborted while this drive ran → [`Next::Stop`];
//! 2. the turn has stopped (interrupted, completed or failed) with a follow-up queued
//!    and nothing pending → [`Next::FollowUp`] (a persistent child's next message);
//! 3. the session is not active → [`Next::Idle`];
//! 4. an interrupt was requested → [`Next::Interrupt`], unless a queued follow-up (or
//!    the request itself) waits for the calls its turn waits on;
//! 5. calls are pending → [`Next::Resolve`] (resume once each is answered or expired);
//! 6. the run reached the agent's step limit → [`Next::Fail`] (`max_steps_exceeded`);
//! 7. the slice's budget is spent → [`Next::Yield`];
//! 8. otherwise → [`Next::Step`], a model step — unless that step already began
//!    [`max_attempts`](exhausted) times without committing (a crash loop).
//!
//! Only a model step goes out while the previous step's commit is still in flight
//! (the commit sent ahead); every other transition needs it landed first
//! ([`Next::needs_landed`]).

use crate::error::ErrorInfo;
use crate::store::{FollowUp, InterruptRequest, SessionHead, SessionStatus};

/// What the drive does next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Next {
    /// The session was aborted during this drive: stop without committing anything.
    Stop,
    /// Start the follow-up turn queued behind the turn that stopped.
    FollowUp(FollowUp),
    /// Nothing to do: the session is in this status.
    Idle(SessionStatus),
    /// Honour the interrupt request: the run stops at this step boundary.
    Interrupt(InterruptRequest),
    /// Settle the pending calls and resume the run once every one is answered.
    Resolve,
    /// End the run as failed.
    Fail(ErrorInfo),
    /// The slice's budget is spent with work left: drive again.
    Yield,
    /// Take a model step.
    Step,
}

impl Next {
    /// Whether the commit sent ahead must land before this is carried out (all but a
    /// model step, which goes out together with it).
    pub(crate) fn needs_landed(&self) -> bool {
        !matches!(self, Self::Step)
    }
}

/// How many model steps this drive may still take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Steps taken so far in this drive.
    pub taken: u32,
    /// Steps this drive may take.
    pub max: u32,
}

/// The session as the machine sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen<'a> {
    /// The durable head (or the head of the commit sent ahead).
    pub head: &'a SessionHead,
    /// The interrupt requested, durably or during this drive.
    pub interrupt: Option<&'a InterruptRequest>,
    /// Whether the run was aborted during this drive.
    pub aborted: bool,
}

/// The next transition of the session (see the module's list).
pub(crate) fn next(seen: Seen<'_>, max_steps: u32, budget: Budget) -> Next {
    let Seen {
        head,
        interrupt,
        aborted,
    } = seen;
    if aborted {
        return Next::Stop;
    }
    let follow_up = interrupt.and_then(|r| r.then.clone());
    let stopped = matches!(
        head.status,
        SessionStatus::Interrupted | SessionStatus::Completed | SessionStatus::Failed
    );
    if let (true, Some(then)) = (stopped, &follow_up)
        && head.pending.is_empty()
    {
        return Next::FollowUp(then.clone());
    }
    if head.status != SessionStatus::Active {
        return Next::Idle(head.status);
    }
    // A follow-up waits for the calls its turn waits on: it is taken once they are
    // answered and the turn reaches a step boundary (or ends); so does an interrupt
    // that asks to.
    let waits = follow_up.is_some() || interrupt.is_some_and(|r| r.after_calls);
    let deferred = !head.pending.is_empty() && waits;
    if let (false, Some(request)) = (deferred, interrupt) {
        return Next::Interrupt(request.clone());
    }
    if !head.pending.is_empty() {
        return Next::Resolve;
    }
    if head.run.step_count >= max_steps {
        return Next::Fail(ErrorInfo {
            code: "max_steps_exceeded".into(),
            message: format!("The run reached its limit of {max_steps} steps"),
            retryable: false,
        });
    }
    if budget.taken >= budget.max {
        return Next::Yield;
    }
    Next::Step
}

/// The failure of a run whose `step` began for the `attempt`th time, past
/// `max_attempts`: it was started that often without committing, so the run stops
/// instead of spending model calls forever. `None` while attempts are left.
pub(crate) fn exhausted(step: u32, attempt: u32, max_attempts: u32) -> Option<ErrorInfo> {
    (attempt > max_attempts).then(|| ErrorInfo {
        code: "framework_recovery_exhausted".into(),
        message: format!(
            "Step {step} was started {} times without committing; the run stops instead of retrying \
             forever",
            attempt - 1
        ),
        retryable: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{PendingCall, PendingKind};
    use serde_json::json;

    fn head(status: SessionStatus, pending: usize, run_steps: u32) -> SessionHead {
        let pending: Vec<PendingCall> = (0..pending)
            .map(|i| PendingCall {
                tool_call_id: format!("c{i}"),
                tool_name: "t".into(),
                arguments: json!({}),
                kind: PendingKind::Approval,
                deadline: None,
                since: 0,
                output_path: None,
                approvers: None,
                request: None,
            })
            .collect();
        serde_json::from_value(json!({
            "id": "s", "agent": "a", "status": status, "version": 3, "stepCount": run_steps,
            "messageCount": 2, "pending": pending, "createdAt": 0, "updatedAt": 0,
            "run": {"runId": "r", "turn": 1, "status": "running", "stepCount": run_steps, "startedAt": 0}
        }))
        .unwrap()
    }

    fn interrupt(follow_up: bool) -> InterruptRequest {
        InterruptRequest {
            reason: Some("stop".into()),
            then: follow_up.then(|| FollowUp {
                message: "next".into(),
                tool_call_id: "p1".into(),
            }),
            after_calls: false,
        }
    }

    const ROOM: Budget = Budget { taken: 0, max: 4 };

    fn decide(head: &SessionHead, interrupt: Option<&InterruptRequest>) -> Next {
        let seen = Seen {
            head,
            interrupt,
            aborted: false,
        };
        next(seen, 20, ROOM)
    }

    #[test]
    fn an_active_run_with_nothing_pending_takes_a_model_step() {
        let h = head(SessionStatus::Active, 0, 0);
        assert_eq!(decide(&h, None), Next::Step);
        assert!(
            !Next::Step.needs_landed(),
            "it goes out with the commit in flight"
        );
    }

    #[test]
    fn an_abort_stops_the_drive_before_anything_else() {
        let h = head(SessionStatus::Active, 1, 0);
        let request = interrupt(true);
        let seen = Seen {
            head: &h,
            interrupt: Some(&request),
            aborted: true,
        };
        assert_eq!(next(seen, 20, ROOM), Next::Stop);
        assert!(Next::Stop.needs_landed());
    }

    #[test]
    fn a_session_that_is_not_active_is_idle_in_its_status() {
        for status in [
            SessionStatus::Completed,
            SessionStatus::Failed,
            SessionStatus::Interrupted,
            SessionStatus::Aborted,
        ] {
            let h = head(status, 0, 1);
            assert_eq!(decide(&h, None), Next::Idle(status));
        }
    }

    #[test]
    fn a_queued_follow_up_starts_once_its_turn_stopped_with_nothing_pending() {
        let request = interrupt(true);
        for status in [
            SessionStatus::Interrupted,
            SessionStatus::Completed,
            SessionStatus::Failed,
        ] {
            let h = head(status, 0, 1);
            let then = request.then.clone().unwrap();
            assert_eq!(decide(&h, Some(&request)), Next::FollowUp(then));
        }
        let aborted = head(SessionStatus::Aborted, 0, 1);
        assert_eq!(
            decide(&aborted, Some(&request)),
            Next::Idle(SessionStatus::Aborted),
            "an aborted session starts nothing"
        );
    }

    #[test]
    fn an_interrupt_is_honoured_at_the_step_boundary() {
        let request = interrupt(false);
        let running = head(SessionStatus::Active, 0, 1);
        assert_eq!(
            decide(&running, Some(&request)),
            Next::Interrupt(request.clone())
        );
        let waiting = head(SessionStatus::Active, 2, 1);
        assert_eq!(
            decide(&waiting, Some(&request)),
            Next::Interrupt(request.clone()),
            "a plain interrupt does not wait for the pending calls"
        );
    }

    #[test]
    fn a_follow_up_waits_for_the_calls_its_turn_waits_on() {
        let request = interrupt(true);
        let waiting = head(SessionStatus::Active, 1, 1);
        assert_eq!(decide(&waiting, Some(&request)), Next::Resolve);
        let answered = head(SessionStatus::Active, 0, 1);
        assert_eq!(
            decide(&answered, Some(&request)),
            Next::Interrupt(request.clone()),
            "then the turn stops at its step boundary"
        );
    }

    #[test]
    fn an_interrupt_after_the_calls_waits_for_their_results() {
        let request = InterruptRequest {
            after_calls: true,
            ..interrupt(false)
        };
        let waiting = head(SessionStatus::Active, 1, 1);
        assert_eq!(decide(&waiting, Some(&request)), Next::Resolve);
        let answered = head(SessionStatus::Active, 0, 1);
        assert_eq!(
            decide(&answered, Some(&request)),
            Next::Interrupt(request.clone()),
            "the step that takes the results is the boundary"
        );
    }

    #[test]
    fn pending_calls_are_resolved() {
        let h = head(SessionStatus::Active, 2, 1);
        assert_eq!(decide(&h, None), Next::Resolve);
    }

    #[test]
    fn the_step_limit_fails_the_run_and_the_budget_yields() {
        let at_limit = head(SessionStatus::Active, 0, 20);
        match decide(&at_limit, None) {
            Next::Fail(e) => {
                assert_eq!(e.code, "max_steps_exceeded");
                assert_eq!(e.message, "The run reached its limit of 20 steps");
                assert!(!e.retryable);
            }
            other => panic!("{other:?}"),
        }
        let h = head(SessionStatus::Active, 0, 3);
        let seen = Seen {
            head: &h,
            interrupt: None,
            aborted: false,
        };
        let spent = Budget { taken: 4, max: 4 };
        assert_eq!(next(seen, 20, spent), Next::Yield);
        let pending = head(SessionStatus::Active, 1, 3);
        let seen = Seen {
            head: &pending,
            ..seen
        };
        assert_eq!(
            next(seen, 20, spent),
            Next::Resolve,
            "answers are taken whatever the budget"
        );
    }

    #[test]
    fn a_step_begun_too_often_fails_the_run_as_recovery_exhausted() {
        assert_eq!(exhausted(3, 3, 3), None);
        let e = exhausted(3, 4, 3).unwrap();
        assert_eq!(e.code, "framework_recovery_exhausted");
        assert_eq!(
            e.message,
            "Step 3 was started 3 times without committing; the run stops instead of retrying forever"
        );
        assert!(e.retryable);
    }
}
