//! How a call ends: the tool message the model reads (a result, stored in the state when
//! the call has an output path; or an error) and the `tool_end` chunk the stream shows.
//! Nothing here runs a tool.

use super::emit::Emitter;
use crate::chunk::ChunkBody;
use crate::error::{Coded, ToolError};
use crate::message::{Message, ToolCall};
use crate::state::PatchOp;
use crate::store::{Approvers, Owner};
use serde_json::Value;

/// Resolves a call that does not run (denied, unknown, expired, skipped…) as `error`.
pub(crate) fn end_without_running(
    call: &ToolCall,
    error: &ToolError,
    emitter: &Emitter,
) -> Message {
    end_with_error(call, error.code(), &error.to_string(), emitter)
}

/// Resolves a denied call. The model sees the denial, saying who did not approve it
/// (`denial`), and, when the decider gave one, their reason (`{"error": "Tool call was
/// not approved by the user", "code": "tool_denied", "reason": "not today"}`); the
/// stream's `tool_end`, sent before the reason is added, carries the denial's text as
/// for any error.
pub(crate) fn end_denied(
    call: &ToolCall,
    reason: Option<&str>,
    decided_by: Option<&Owner>,
    approvers: Option<&Approvers>,
    emitter: &Emitter,
) -> Message {
    let denied = ToolError::Denied;
    let text = denial(decided_by, approvers);
    let mut message = Message::tool_error(call, denied.code(), &text);
    decided(&mut message, decided_by);
    tool_end(call, &message, decided_by, emitter);
    if let (Some(reason), Message::Tool { content, .. }) = (
        reason.map(str::trim).filter(|r| !r.is_empty()),
        &mut message,
    ) {
        content["reason"] = Value::from(reason);
    }
    message
}

/// Who did not approve a call, as the model reads it: its deadline, when nobody decided
/// in time; an approver holding the role the call needed, when a user did; else the
/// user (the session's own, or the application answering for them).
fn denial(decided_by: Option<&Owner>, approvers: Option<&Approvers>) -> String {
    match (decided_by, approvers) {
        (Some(by), _) if by.subject == Owner::DEADLINE => {
            "Tool call was not approved before its deadline".into()
        }
        (Some(by), Some(rule)) if by.subject != Owner::DECISION_LINK => format!(
            "Tool call was not approved by an approver holding the role '{}'",
            rule.role
        ),
        _ => ToolError::Denied.to_string(),
    }
}

/// Records on a call's result who approved or denied it (`metadata.decidedBy`), when
/// a user did.
pub(crate) fn decided(message: &mut Message, by: Option<&Owner>) {
    if let (Some(by), Message::Tool { metadata, .. }) = (by, message) {
        let by = by.to_json();
        metadata
            .get_or_insert_default()
            .insert(DECIDED_BY.into(), by);
    }
}

/// The metadata key of who decided a call's approval.
const DECIDED_BY: &str = "decidedBy";

/// Resolves a call whose `_when` does not hold: it did not run, and the model reads
/// why (`{"skipped": "skipped: its condition _when '…' does not hold"}`), as a result
/// rather than an error — a conditional step not taken is the plan working.
pub(crate) fn end_skipped(call: &ToolCall, why: &str, emitter: &Emitter) -> Message {
    let message = Message::tool_result(call, serde_json::json!({ "skipped": why }));
    tool_end(call, &message, None, emitter);
    message
}

/// Resolves a call as an error with `code` and `text`.
pub(crate) fn end_with_error(
    call: &ToolCall,
    code: &str,
    text: &str,
    emitter: &Emitter,
) -> Message {
    let message = Message::tool_error(call, code, text);
    tool_end(call, &message, None, emitter);
    message
}

/// Resolves a call with a result from elsewhere (a client, a sub-agent), stored at
/// `output` in `state` when the call has an output path: the message and the write.
pub(crate) fn end_with_result(
    call: &ToolCall,
    result: Value,
    output: Option<&str>,
    state: &Value,
    emitter: &Emitter,
) -> (Message, Option<PatchOp>) {
    let result = match crate::message::bounded_result(result) {
        Ok(result) => result,
        Err(e) => return (end_without_running(call, &e, emitter), None),
    };
    let (message, stored) = result_message(call, result, output, state);
    tool_end(call, &message, None, emitter);
    (message, stored)
}

/// A successful result as the model reads it and, with an output path, the write that
/// stores it in the state: the model then reads `{"result": …, "storedAt": path}`, or a
/// `"storeError"` beside the result when the path's parent is not in `state` (and
/// nothing is written).
pub(crate) fn result_message(
    call: &ToolCall,
    value: Value,
    output: Option<&str>,
    state: &Value,
) -> (Message, Option<PatchOp>) {
    let Some(path) = output else {
        return (Message::tool_result(call, value), None);
    };
    // Whether an add applies does not depend on its value.
    let probe = PatchOp::Add {
        path: path.to_string(),
        value: Value::Null,
    };
    if !crate::state::applies_to(state, &probe) {
        let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
        let content = serde_json::json!({
            "result": value,
            "storeError": format!("not stored: the state has no {parent} to hold {path}"),
        });
        return (Message::tool_result(call, content), None);
    }
    let content = crate::memory::output::stored(value.clone(), path);
    let write = PatchOp::Add {
        path: path.to_string(),
        value,
    };
    (Message::tool_result(call, content), Some(write))
}

/// Streams `tool_end` for a call's result message (approved or denied by `decided_by`,
/// when a user decided).
pub(crate) fn tool_end(
    call: &ToolCall,
    message: &Message,
    decided_by: Option<&Owner>,
    emitter: &Emitter,
) {
    let (success, result, error) = match message {
        Message::Tool {
            content,
            is_error: false,
            ..
        } => (true, Some(content.clone()), None),
        Message::Tool { content, .. } => {
            let text = content
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("Tool call failed");
            (false, None, Some(text.to_string()))
        }
        _ => (false, None, None),
    };
    emitter.chunk(ChunkBody::ToolEnd {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        success,
        result,
        error,
        decided_by: decided_by.cloned(),
    });
}
