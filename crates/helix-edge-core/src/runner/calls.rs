//! Planning a step's tool calls: the model's calls normalised (object arguments, ids
//! unique in the session), and each assigned how the step handles it.

use super::emit::Emitter;
use crate::agent::{Agent, FINISH_TOOL};
use crate::chunk::ChunkBody;
use crate::message::{Message, ToolCall};
use crate::store::PendingKind;
use serde_json::{Map, Value};

/// How the step handles one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Plan {
    Regular,
    FinishWith,
    Finish,
    Gated(PendingKind),
    /// Another session answers it (a sub-agent, a remote one, a companion operation).
    Child,
    Unknown,
    /// The agent refuses it before anything runs (a loaded skill's `allowed-tools`).
    Refused,
}

impl Plan {
    /// Whether the call runs in the step's plan, in dependency order (regular,
    /// approval-gated, client and child calls).
    pub(crate) fn in_plan(self) -> bool {
        matches!(self, Self::Regular | Self::Gated(_) | Self::Child)
    }
}

/// Makes arguments a JSON object: a string holding an object is parsed (providers and
/// models sometimes double-encode); anything else becomes `{}` with a warning.
fn coerce_arguments(args: Value) -> (Value, Option<String>) {
    match args {
        Value::Object(_) => (args, None),
        Value::Null => (Value::Object(Map::new()), None),
        Value::String(text) => match serde_json::from_str::<Value>(&text) {
            Ok(obj @ Value::Object(_)) => (obj, None),
            _ => (
                Value::Object(Map::new()),
                Some("Tool arguments were not a JSON object; used {}".to_string()),
            ),
        },
        _ => (
            Value::Object(Map::new()),
            Some("Tool arguments were not a JSON object; used {}".to_string()),
        ),
    }
}

/// Normalises the model's calls: object arguments, and ids unique in the session
/// (answers are keyed by call id, and some models repeat ids across turns).
pub(crate) fn normalize_calls(
    raw: Vec<ToolCall>,
    transcript: &[Message],
    step: u32,
    emitter: &Emitter,
) -> Vec<ToolCall> {
    let earlier: Vec<&str> = transcript
        .iter()
        .flat_map(|m| match m {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .map(|c| c.id.as_str())
        .collect();
    let mut taken: Vec<String> = Vec::with_capacity(raw.len());
    raw.into_iter()
        .enumerate()
        .map(|(i, mut call)| {
            if call.id.is_empty() || earlier.contains(&call.id.as_str()) || taken.contains(&call.id)
            {
                call.id = if call.id.is_empty() {
                    format!("call_{step}_{i}")
                } else {
                    format!("{}_{step}_{i}", call.id)
                };
            }
            taken.push(call.id.clone());
            let (arguments, warning) = coerce_arguments(std::mem::take(&mut call.arguments));
            call.arguments = arguments;
            if let Some(message) = warning {
                emitter.chunk(ChunkBody::Error {
                    code: "tool_arguments_coerced".into(),
                    message,
                    recoverable: true,
                });
            }
            call
        })
        .collect()
}

pub(crate) fn plan(agent: &Agent, call: &ToolCall, state: &Value) -> Plan {
    if call.name == FINISH_TOOL && agent.output_schema().is_some() {
        return Plan::Finish;
    }
    match agent.tool(&call.name) {
        None => Plan::Unknown,
        Some(t) if t.child_call().is_some() => Plan::Child,
        Some(t) if t.is_client() => Plan::Gated(PendingKind::Client),
        Some(t) if t.needs_approval(&call.arguments, state) => Plan::Gated(PendingKind::Approval),
        Some(t) if t.is_finish_with() => Plan::FinishWith,
        Some(_) => Plan::Regular,
    }
}
