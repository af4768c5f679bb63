//! How long approvals and client calls wait: each pending call records when the run
//! suspended on it and each answer when it was submitted, so a resumption knows every
//! call's wait. It goes to the run's record (`GET …/runs`), the call's tool message
//! (`metadata.waitedMs`) and structured log lines that never carry arguments or results.

use super::{Live, Runner};
use crate::host::Level;
use crate::host::LogValue::{Num, Str};
use crate::store::{Answer, CallWait, PendingCall, PendingKind, Store, WaitOutcome};

/// The wait of a call that was answered with `answer` (none: it expired at `now`).
pub(crate) fn wait_of(p: &PendingCall, answer: Option<&Answer>, now: u64) -> CallWait {
    let (outcome, at) = match answer {
        Some(Answer::Approval {
            approved,
            answered_at,
            ..
        }) => {
            let outcome = if *approved {
                WaitOutcome::Approved
            } else {
                WaitOutcome::Denied
            };
            (outcome, *answered_at)
        }
        Some(Answer::ClientResult { answered_at, .. }) => (WaitOutcome::Result, *answered_at),
        Some(Answer::ClientError { answered_at, .. }) => (WaitOutcome::Error, *answered_at),
        _ => (WaitOutcome::Expired, p.deadline.unwrap_or(now).min(now)),
    };
    CallWait {
        tool_call_id: p.tool_call_id.clone(),
        tool_name: p.tool_name.clone(),
        kind: p.kind,
        waited_ms: at.saturating_sub(p.since),
        outcome,
    }
}

impl<S: Store> Runner<S> {
    /// `tool_call_suspended` for each approval and client call the run now waits on.
    pub(crate) fn log_suspended(&self, live: &Live) {
        for p in live
            .head
            .pending
            .iter()
            .filter(|p| p.kind != PendingKind::Child)
        {
            let fields = [
                ("toolCallId", Str(&p.tool_call_id)),
                ("tool", Str(&p.tool_name)),
                ("kind", Str(p.kind.as_str())),
                (
                    "deadline",
                    p.deadline.map_or(crate::host::LogValue::Null, Num),
                ),
            ];
            self.log(live, Level::Info, "tool_call_suspended", &fields);
        }
    }

    /// `tool_call_submitted` or `tool_call_timed_out` for an answer just stored.
    pub(crate) fn log_answered(&self, live: &Live, p: &PendingCall, answer: &Answer) {
        let now = self.host.now_ms();
        let wait = wait_of(p, Some(answer), now);
        let event = match wait.outcome {
            WaitOutcome::Expired => "tool_call_timed_out",
            _ => "tool_call_submitted",
        };
        let outcome = match wait.outcome {
            WaitOutcome::Approved => "approved",
            WaitOutcome::Denied => "denied",
            WaitOutcome::Result => "result",
            WaitOutcome::Error => "error",
            WaitOutcome::Expired => "expired",
        };
        // Who decided an approval, when a user did (their subject): the audit trail.
        let decided_by = match answer {
            Answer::Approval {
                decided_by: Some(user),
                ..
            } => Str(&user.subject),
            _ => crate::host::LogValue::Null,
        };
        let fields = [
            ("toolCallId", Str(&p.tool_call_id)),
            ("tool", Str(&p.tool_name)),
            ("kind", Str(p.kind.as_str())),
            ("outcome", Str(outcome)),
            ("waitedMs", Num(wait.waited_ms)),
            ("decidedBy", decided_by),
        ];
        self.log(live, Level::Info, event, &fields);
    }
}
