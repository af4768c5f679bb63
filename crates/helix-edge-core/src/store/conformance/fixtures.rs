//! The records the checks build sessions from, and small helpers.

use crate::chunk::RunStatus;
use crate::message::Message;
use crate::model::{StopReason, Usage};
use crate::state::PatchOp;
use crate::store::{
    CallWait, CheckpointRecord, CheckpointStatus, Commit, Loaded, NewSession, PendingKind,
    RunRecord, SessionHead, SessionStatus, StateChange, Store, StoreError, WaitOutcome,
};
use serde_json::json;

pub(super) fn head(id: &str) -> SessionHead {
    SessionHead {
        id: id.into(),
        agent: "assistant".into(),
        status: SessionStatus::Active,
        version: 1,
        commit_id: String::new(),
        step_count: 0,
        message_count: 1,
        run: RunRecord {
            run_id: format!("{id}-run1"),
            turn: 1,
            status: RunStatus::Running,
            step_count: 0,
            started_at: 1_000,
            completed_at: None,
            error: None,
            usage: Usage::default(),
            usage_by_model: Default::default(),
            nudges: 0,
            deferred_output: None,
            input_at: 0,
            options: None,
            trace: None,
        },
        pending: vec![],
        suspended_reason: None,
        output: None,
        error: None,
        checkpoint_id: None,
        created_at: 1_000,
        updated_at: 1_000,
        parent: None,
        forked_from: None,
        owner: None,
    }
}

pub(super) fn new_session(id: &str) -> NewSession {
    NewSession {
        head: head(id),
        state: json!({"notes": []}),
        messages: vec![Message::user("hello")],
        checkpoint: first_checkpoint(id),
    }
}

/// A checkpoint with every optional field set, so that a backend which drops one fails.
pub(super) fn first_checkpoint(id: &str) -> CheckpointRecord {
    CheckpointRecord {
        id: format!("{id}-k0"),
        step_count: 0,
        message_count: 1,
        timestamp: 1_000,
        status: CheckpointStatus::Active,
        run_id: format!("{id}-run1"),
        usage: Some(Usage {
            input_tokens: 12,
            output_tokens: 3,
            cache_read_tokens: 8,
            cache_write_tokens: 0,
        }),
        stop_reason: Some(StopReason::ToolUse),
        waits: vec![CallWait {
            tool_call_id: "call_1".into(),
            tool_name: "delete_file".into(),
            kind: PendingKind::Approval,
            waited_ms: 1_500,
            outcome: WaitOutcome::Approved,
        }],
    }
}

pub(super) fn e(err: StoreError) -> String {
    format!("unexpected store error: {err}")
}

/// A commit appending one assistant message and one note, with a checkpoint.
pub(super) fn step_commit(h: &SessionHead, text: &str, ckpt: &str) -> Commit {
    let mut head = h.clone();
    head.step_count += 1;
    head.run.step_count += 1;
    head.message_count += 1;
    head.checkpoint_id = Some(ckpt.into());
    Commit {
        truncate_messages_to: None,
        messages: vec![Message::assistant_text(text)],
        state: StateChange::Patch(vec![PatchOp::Add {
            path: "/notes/-".into(),
            value: json!({"text": text}),
        }]),
        checkpoint: Some(CheckpointRecord {
            id: ckpt.into(),
            step_count: head.step_count,
            message_count: head.message_count,
            timestamp: 2_000,
            status: CheckpointStatus::Active,
            run_id: head.run.run_id.clone(),
            usage: None,
            stop_reason: None,
            waits: Vec::new(),
        }),
        clear_interrupt: false,
        subsessions: Vec::new(),
        head,
    }
}

pub(super) async fn loaded<S: Store>(store: &S, id: &str) -> Result<Loaded, String> {
    store
        .load(id)
        .await
        .map_err(e)?
        .ok_or_else(|| format!("session {id} vanished"))
}

/// The records of a session that is gone: none, or `NotFound`.
pub(super) fn gone<T>(read: Result<Vec<T>, StoreError>) -> Result<Vec<T>, String> {
    match read {
        Err(StoreError::NotFound(_)) => Ok(Vec::new()),
        other => other.map_err(e),
    }
}
