//! `interrupt` for a run that waits on a human: its pending calls are cancelled with a
//! tool result the model sees (an approval denied, a client call answered with an error,
//! each saying why), the run stops at that step boundary (`interrupted`), and the queue's
//! first message — the one that interrupted — runs next.

use crate::runner::{RunError, Runner, Submission};
use crate::store::{PendingKind, SessionHead, Store};

/// Whether the run of `head` waits on a human alone (approvals, client calls), so that
/// [`cancel_pending`] can end its wait; a run waiting on sub-agents is left to them.
pub fn cancellable(head: &SessionHead) -> bool {
    let human = |kind| matches!(kind, PendingKind::Approval | PendingKind::Client);
    !head.pending.is_empty() && head.pending.iter().all(|p| human(p.kind))
}

/// Asks the run of `head` to stop once the calls it waits on are answered, then answers
/// each with `reason`: the caller drives the session on, the run takes the results in
/// one step and stops at its boundary. An answer given meanwhile stands (a call is
/// answered at most once).
pub async fn cancel_pending<S: Store>(
    runner: &Runner<S>,
    head: &SessionHead,
    reason: &str,
) -> Result<(), RunError> {
    let id = &head.id;
    runner
        .interrupt_after_calls(id, Some(reason.to_string()))
        .await?;
    for call in &head.pending {
        let tool_call_id = call.tool_call_id.clone();
        let submission = match call.kind {
            PendingKind::Approval => Submission::Approval {
                tool_call_id,
                approved: false,
                reason: Some(reason.to_string()),
            },
            PendingKind::Client => Submission::ClientResult {
                tool_call_id,
                outcome: Err(reason.to_string()),
            },
            kind @ (PendingKind::Authorization | PendingKind::Elicitation) => Submission::Input {
                tool_call_id,
                kind,
                answer: serde_json::json!({ "action": "cancel" }),
            },
            PendingKind::Child => continue,
        };
        match runner.submit(id, submission).await {
            Ok(_) | Err(RunError::AlreadyResolved(_) | RunError::ToolCallNotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
