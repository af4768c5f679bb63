//! When a session's work happens, decided here so that the platform only executes it:
//! the session's object runs work in bounded slices after its HTTP answers, with an
//! alarm as the durable trigger that carries it on after an eviction or a crash.
//!
//! - Before each slice the object arms the alarm [`GUARD`] ahead: if the slice never
//!   ends (the process died), the alarm drives again.
//! - After a slice, [`next_alarm`] says when the alarm fires next (or that it is
//!   cleared): at the earliest deadline of a suspended run, at once when the slice's
//!   step budget ran out with work left, [`RETRY`] after an infrastructure failure, and
//!   no later than [`RETRY`] while a child session still owes its parent a report.
//! - A read that finds the session with work and nobody on it continues it
//!   ([`needs_drive`]): a client call past its deadline, or a run waiting for nobody.

use crate::runner::{Progress, RunError};
use crate::store::{PendingKind, SessionHead, SessionStatus};
use std::time::Duration;

/// Model steps per slice, so that each invocation stays short.
pub const STEPS_PER_SLICE: u32 = 4;
/// The alarm armed before a slice fires this long after, if the slice never ends.
pub const GUARD: Duration = Duration::from_secs(15);
/// How soon to try again after a slice failed on an infrastructure error, or while a
/// child session's report to its parent has not gone through.
pub const RETRY: Duration = Duration::from_secs(5);

/// What to do with the session's alarm after a slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alarm {
    /// Fire in this long.
    In(Duration),
    /// Nothing is due: clear it.
    Clear,
    /// Leave it as it is (another slice is under way and re-arms when it ends).
    Leave,
}

/// The alarm after a slice that ended with `progress` at `now_ms`; `reported` is
/// whether a child session's report to its parent (if it owes one) went through.
pub fn next_alarm(progress: &Result<Progress, RunError>, now_ms: u64, reported: bool) -> Alarm {
    let next = match progress {
        Ok(Progress::Suspended { next_deadline }) => {
            next_deadline.map(|at| Duration::from_millis(at.saturating_sub(now_ms).max(1)))
        }
        Ok(Progress::Idle(_)) => None,
        Ok(Progress::Yielded) => Some(Duration::from_millis(1)),
        Ok(Progress::Busy) => return Alarm::Leave,
        Err(_) => Some(RETRY),
    };
    match (next, reported) {
        (Some(wait), true) => Alarm::In(wait),
        (None, true) => Alarm::Clear,
        (Some(wait), false) => Alarm::In(wait.min(RETRY)),
        (None, false) => Alarm::In(RETRY),
    }
}

/// Whether the commits of a slice that ended with `progress` go to D1 at once (the run
/// ended: nothing will join them) or a little later, so that the commits right behind
/// them (an answer's, the next step's) join the batch.
pub fn replicate_at_once(progress: &Result<Progress, RunError>) -> bool {
    matches!(progress, Ok(Progress::Idle(_)))
}

/// The alarm after a slice (see [`next_alarm`]) when commits still wait for D1
/// (`waiting`) after its replication, and the time of the alarm set only so that the
/// replication is retried, if that is why it is set: the replication clears it once D1
/// has everything.
pub fn slice_alarm(
    progress: &Result<Progress, RunError>,
    now_ms: u64,
    reported: bool,
    waiting: bool,
) -> (Alarm, Option<u64>) {
    let alarm = next_alarm(progress, now_ms, reported && !waiting);
    let fallback = waiting && next_alarm(progress, now_ms, reported) == Alarm::Clear;
    (alarm, fallback.then(|| now_ms + RETRY.as_millis() as u64))
}

/// [`slice_alarm`]'s answer when work a capability keeps falls due at `due_ms` (a
/// schedule's fire): the alarm brought forward to it, and never a fallback the
/// replication may clear.
pub fn due_alarm(alarm: Alarm, due_ms: u64, now_ms: u64) -> (Alarm, Option<u64>) {
    (no_later(alarm, Some(due_ms), now_ms), None)
}

/// `alarm`, brought forward to `due_ms` (if given) at `now_ms`: work a capability keeps
/// (a schedule's fire) is due then. An alarm left to a slice under way stays left.
pub fn no_later(alarm: Alarm, due_ms: Option<u64>, now_ms: u64) -> Alarm {
    let Some(due) = due_ms else { return alarm };
    let wait = Duration::from_millis(due.saturating_sub(now_ms).max(1));
    match alarm {
        Alarm::In(current) => Alarm::In(current.min(wait)),
        Alarm::Clear => Alarm::In(wait),
        Alarm::Leave => Alarm::Leave,
    }
}

/// Whether a read that finds `head` at `now_ms` should continue the session: a client
/// call is past its deadline, or — after a restart, before the alarm comes back — the
/// run waits for nobody (no pending call, or every one answered) and nothing is
/// `driving` it. `answered` says whether a call has an answer.
pub fn needs_drive(
    head: &SessionHead,
    answered: impl Fn(&str) -> bool,
    driving: bool,
    now_ms: u64,
) -> bool {
    let expired = head
        .pending
        .iter()
        .any(|p| p.deadline.is_some_and(|d| d <= now_ms));
    let stalled = head.status == SessionStatus::Active
        && !driving
        && head
            .pending
            .iter()
            .all(|p| p.kind != PendingKind::Child && answered(&p.tool_call_id));
    expired || stalled
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{PendingCall, StoreError};
    use serde_json::json;

    fn head(status: SessionStatus, pending: Vec<PendingCall>) -> SessionHead {
        serde_json::from_value(json!({
            "id": "s", "agent": "a", "status": status, "version": 3, "stepCount": 1,
            "messageCount": 2, "pending": pending, "createdAt": 0, "updatedAt": 0,
            "run": {"runId": "r", "turn": 1, "status": "running", "stepCount": 1, "startedAt": 0}
        }))
        .unwrap()
    }

    fn call(id: &str, kind: PendingKind, deadline: Option<u64>) -> PendingCall {
        PendingCall {
            tool_call_id: id.into(),
            tool_name: "t".into(),
            arguments: json!({}),
            kind,
            deadline,
            since: 0,
            output_path: None,
            approvers: None,
            request: None,
        }
    }

    #[test]
    fn a_suspended_run_wakes_at_its_earliest_deadline_and_an_idle_one_not_at_all() {
        let suspended = Ok(Progress::Suspended {
            next_deadline: Some(10_500),
        });
        assert_eq!(
            next_alarm(&suspended, 10_000, true),
            Alarm::In(Duration::from_millis(500))
        );
        let overdue = Ok(Progress::Suspended {
            next_deadline: Some(9_000),
        });
        assert_eq!(
            next_alarm(&overdue, 10_000, true),
            Alarm::In(Duration::from_millis(1)),
            "a deadline already passed fires at once"
        );
        let waiting = Ok(Progress::Suspended {
            next_deadline: None,
        });
        assert_eq!(next_alarm(&waiting, 0, true), Alarm::Clear);
        let idle = Ok(Progress::Idle(SessionStatus::Completed));
        assert_eq!(next_alarm(&idle, 0, true), Alarm::Clear);
    }

    #[test]
    fn work_left_continues_at_once_failures_retry_and_a_busy_slice_leaves_the_alarm() {
        assert_eq!(
            next_alarm(&Ok(Progress::Yielded), 0, true),
            Alarm::In(Duration::from_millis(1))
        );
        let failed = Err(RunError::Store(StoreError::Backend("down".into())));
        assert_eq!(next_alarm(&failed, 0, true), Alarm::In(RETRY));
        assert_eq!(next_alarm(&Ok(Progress::Busy), 0, false), Alarm::Leave);
    }

    #[test]
    fn a_report_that_did_not_go_through_is_tried_again_within_the_retry_delay() {
        let idle = Ok(Progress::Idle(SessionStatus::Completed));
        assert_eq!(next_alarm(&idle, 0, false), Alarm::In(RETRY));
        let later = Ok(Progress::Suspended {
            next_deadline: Some(60_000),
        });
        assert_eq!(next_alarm(&later, 0, false), Alarm::In(RETRY));
        let sooner = Ok(Progress::Suspended {
            next_deadline: Some(100),
        });
        assert_eq!(
            next_alarm(&sooner, 0, false),
            Alarm::In(Duration::from_millis(100))
        );
    }

    #[test]
    fn a_slice_that_leaves_commits_for_d1_sets_the_alarm_to_retry_them() {
        let idle = Ok(Progress::Idle(SessionStatus::Completed));
        assert!(replicate_at_once(&idle));
        let waiting = Ok(Progress::Suspended {
            next_deadline: None,
        });
        assert!(
            !replicate_at_once(&waiting),
            "the answer's commits join later"
        );
        assert_eq!(slice_alarm(&idle, 0, true, false), (Alarm::Clear, None));
        assert_eq!(
            slice_alarm(&idle, 1_000, true, true),
            (Alarm::In(RETRY), Some(1_000 + RETRY.as_millis() as u64)),
            "only replication is left: a fallback the replication clears"
        );
        let due = Ok(Progress::Suspended {
            next_deadline: Some(1_500),
        });
        assert_eq!(
            slice_alarm(&due, 1_000, true, true),
            (Alarm::In(Duration::from_millis(500)), None),
            "the run's own alarm comes first and is no fallback"
        );
        assert_eq!(
            slice_alarm(&idle, 0, false, false),
            (Alarm::In(RETRY), None),
            "an undelivered report is retried, not a fallback"
        );
        let (alarm, _) = slice_alarm(&idle, 1_000, true, true);
        assert_eq!(
            due_alarm(alarm, 3_000, 1_000),
            (Alarm::In(Duration::from_millis(2_000)), None),
            "a schedule's fire is due: the alarm is no fallback the replication may clear"
        );
    }

    #[test]
    fn an_alarm_is_brought_forward_to_a_due_fire_and_a_cleared_one_set_for_it() {
        let at = |ms| Alarm::In(Duration::from_millis(ms));
        assert_eq!(no_later(Alarm::Clear, Some(1_500), 1_000), at(500));
        assert_eq!(no_later(at(100), Some(1_500), 1_000), at(100));
        assert_eq!(no_later(at(900), Some(1_500), 1_000), at(500));
        assert_eq!(
            no_later(Alarm::Clear, Some(400), 1_000),
            at(1),
            "overdue: at once"
        );
        assert_eq!(no_later(Alarm::Clear, None, 1_000), Alarm::Clear);
        assert_eq!(no_later(Alarm::Leave, Some(1_500), 1_000), Alarm::Leave);
    }

    #[test]
    fn a_read_continues_a_run_that_waits_for_nobody_or_is_past_a_deadline() {
        let none = |_: &str| false;
        let all = |_: &str| true;
        let active = head(SessionStatus::Active, vec![]);
        assert!(needs_drive(&active, none, false, 0), "nothing pending");
        assert!(!needs_drive(&active, none, true, 0), "a drive is under way");
        let waiting = head(
            SessionStatus::Active,
            vec![call("c", PendingKind::Approval, None)],
        );
        assert!(
            !needs_drive(&waiting, none, false, 0),
            "waits for the human"
        );
        assert!(
            needs_drive(&waiting, all, false, 0),
            "answered, nobody drives"
        );
        let child = head(
            SessionStatus::Active,
            vec![call("k", PendingKind::Child, None)],
        );
        assert!(
            !needs_drive(&child, all, false, 0),
            "a child wakes its parent"
        );
        let due = head(
            SessionStatus::Active,
            vec![call("c", PendingKind::Client, Some(50))],
        );
        assert!(!needs_drive(&due, none, true, 49));
        assert!(needs_drive(&due, none, true, 50), "past its deadline");
        let done = head(SessionStatus::Completed, vec![]);
        assert!(!needs_drive(&done, none, false, 0));
    }
}
