//! A persistent child's side of its parent's messages: the turn a message starts, at
//! once when the child is idle, or queued in a durable interrupt request (a follow-up)
//! that the drive takes when the running turn reaches a step boundary or ends
//! ([`Runner::parent_message`], [`ChildOrder::Message`](super::ChildOrder::Message)).

use super::ops::ensure_idle;
use super::{Live, RunError, Runner};
use crate::message::Message;
use crate::store::{InterruptRequest, SessionStatus, Store};

impl<S: Store> Runner<S> {
    /// A persistent child's parent starts its next turn with `message`, for the parent's
    /// call `tool_call_id` ([`ChildOrder::Message`]). Idempotent: a child whose turn
    /// answers that call already is left alone.
    pub async fn parent_message(
        &self,
        session_id: &str,
        message: String,
        tool_call_id: &str,
    ) -> Result<(), RunError> {
        let mut live = self.load(session_id).await?;
        let Some(parent) = live.head.parent.as_mut() else {
            return Err(RunError::Busy("the session has no parent"));
        };
        if parent.tool_call_id == tool_call_id {
            return Ok(());
        }
        let then = crate::store::FollowUp {
            message,
            tool_call_id: tool_call_id.to_string(),
        };
        if let Some(queued) = live.interrupt.as_ref().and_then(|r| r.then.as_ref()) {
            return match queued.tool_call_id == tool_call_id {
                true => Ok(()),
                false => Err(RunError::Busy("another message waits for the turn to stop")),
            };
        }
        if live.head.status == SessionStatus::Active {
            // Running (or waiting on answers): the turn stops at its next step boundary,
            // or ends, then this one starts.
            let request = InterruptRequest {
                reason: Some("Its parent sent a new message.".into()),
                then: Some(then),
            };
            self.store
                .request_interrupt(session_id, request.clone())
                .await?;
            *self.interrupt_requested.borrow_mut() = Some(request);
            return Ok(());
        }
        ensure_idle(&live.head)?;
        self.follow_up(&mut live, then).await
    }

    /// Starts a persistent child's next turn, for its parent's call.
    pub(crate) async fn follow_up(
        &self,
        live: &mut Live,
        then: crate::store::FollowUp,
    ) -> Result<(), RunError> {
        if let Some(parent) = live.head.parent.as_mut() {
            parent.tool_call_id = then.tool_call_id;
        }
        self.start_run(live, vec![Message::user(then.message)], None)
            .await
            .map(drop)
    }
}
