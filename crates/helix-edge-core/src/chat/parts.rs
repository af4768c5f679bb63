//! The UI message chunks (AI SDK UI message stream v1) as types, and their SSE frame.

use serde::Serialize;
use serde_json::Value;

pub(super) static NULL: Value = Value::Null;

/// The UI message chunks helix-edge sends (AI SDK 6 and 7 both read each of them).
#[derive(Serialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub(super) enum Part<'a> {
    Start {
        message_id: &'a str,
    },
    StartStep,
    FinishStep,
    Finish {
        finish_reason: &'static str,
    },
    Error {
        error_text: &'a str,
    },
    TextStart {
        id: &'a str,
    },
    TextDelta {
        id: &'a str,
        delta: &'a Value,
    },
    TextEnd {
        id: &'a str,
    },
    ReasoningStart {
        id: &'a str,
    },
    ReasoningDelta {
        id: &'a str,
        delta: &'a Value,
    },
    ReasoningEnd {
        id: &'a str,
    },
    ToolInputStart {
        tool_call_id: &'a str,
        tool_name: &'a Value,
    },
    ToolInputAvailable {
        tool_call_id: &'a str,
        tool_name: &'a Value,
        input: &'a Value,
    },
    ToolApprovalRequest {
        approval_id: &'a str,
        tool_call_id: &'a str,
    },
    ToolOutputAvailable {
        tool_call_id: &'a str,
        output: &'a Value,
    },
    ToolOutputDenied {
        tool_call_id: &'a str,
    },
    ToolOutputError {
        tool_call_id: &'a str,
        error_text: &'a str,
    },
}

/// A `data-*` chunk.
#[derive(Serialize)]
pub(super) struct DataPart<'a, D: Serialize> {
    #[serde(rename = "type")]
    pub(super) kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) id: Option<&'a Value>,
    pub(super) data: D,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) transient: bool,
}

impl<'a, D: Serialize> DataPart<'a, D> {
    pub(super) fn new(kind: &'a str, data: D) -> Self {
        Self {
            kind,
            id: None,
            data,
            transient: false,
        }
    }
}

#[derive(Serialize)]
pub(super) struct Patches<'a> {
    pub(super) patches: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Subagent<'a> {
    pub(super) tool_call_id: &'a Value,
    pub(super) status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) result: Option<&'a Value>,
}

#[derive(Serialize)]
pub(super) struct Output<'a> {
    pub(super) output: &'a Value,
}

#[derive(Serialize)]
pub(super) struct RunError<'a> {
    pub(super) code: &'a Value,
    pub(super) message: &'a Value,
    pub(super) recoverable: &'a Value,
}

/// Appends one chunk as an SSE frame.
pub(super) fn push(out: &mut String, chunk: &impl Serialize) {
    if let Ok(json) = serde_json::to_string(chunk) {
        out.push_str("data: ");
        out.push_str(&json);
        out.push_str("\n\n");
    }
}
