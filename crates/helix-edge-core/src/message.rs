//! The transcript: messages exchanged between the user, the model and the tools, in the
//! JSON form they are stored in and served by `GET /v1/sessions/{id}/messages`.

use crate::attachment::Attachment;
use crate::wire::wire_enum;
use crate::wire::{present, required};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The largest tool result kept in a transcript, as JSON: a server tool's larger result
/// becomes a `tool_result_too_large` error the model can act on, and a client's is
/// refused with 413 (each message is one D1 row, and a row holds at most 2 MB).
pub const MAX_TOOL_RESULT_BYTES: usize = 512 * 1024;

/// The size of `value` as JSON text, without building the text.
pub fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

/// The JSON size of a tool result over [`MAX_TOOL_RESULT_BYTES`]; `None` if it fits.
pub fn oversized_result(value: &Value) -> Option<usize> {
    let bytes = json_len(value);
    (bytes > MAX_TOOL_RESULT_BYTES).then_some(bytes)
}

/// `value`, or the error a result over [`MAX_TOOL_RESULT_BYTES`] becomes.
pub fn bounded_result(value: Value) -> Result<Value, crate::error::ToolError> {
    match oversized_result(&value) {
        Some(bytes) => Err(crate::error::ToolError::ResultTooLarge {
            bytes,
            limit: MAX_TOOL_RESULT_BYTES,
        }),
        None => Ok(value),
    }
}

/// The metadata key naming the call an instance's result belongs to.
const INSTANCE_OF: &str = "instanceOf";

/// One message of a session's transcript.
// Written by the derive, read through `MessageWire` (see `crate::wire`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case", try_from = "MessageWire")]
pub enum Message {
    /// Instructions; agents usually give them through the system prompt instead.
    System {
        /// The text.
        content: String,
        /// Free-form annotations (never sent to the model).
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Map<String, Value>>,
    },
    /// What the user said, exactly as submitted.
    User {
        /// The text.
        content: String,
        /// Files attached to it (images, PDFs…), sent to the model with the text.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<Attachment>,
        /// Free-form annotations (never sent to the model), such as `{"hidden": true}`
        /// for a message a UI does not show.
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Map<String, Value>>,
    },
    /// What the model answered.
    Assistant {
        /// Text of the answer (may be empty when it only calls tools).
        content: String,
        /// Tool calls, in the model's order.
        #[serde(rename = "toolCalls", skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// Reasoning blocks the provider returned, kept so they can be sent back.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        thinking: Vec<Thinking>,
        /// Free-form annotations (never sent to the model).
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Map<String, Value>>,
    },
    /// The outcome of one tool call.
    Tool {
        /// The call this answers.
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        /// The tool's name.
        #[serde(rename = "toolName")]
        tool_name: String,
        /// The result, or `{"error": message}` when `is_error`.
        content: Value,
        /// Whether the call failed.
        #[serde(rename = "isError")]
        is_error: bool,
        /// Files the tool gave with its result (a chart it rendered, a page it
        /// fetched), sent to the model in the provider's form.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<Attachment>,
        /// Free-form annotations (never sent to the model).
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Map<String, Value>>,
    },
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::User {
            content: content.into(),
            attachments: Vec::new(),
            metadata: None,
        }
    }

    /// The call whose instance this is the result of (a call run once per item with
    /// `_forEach`): such results are kept in the transcript, and the model reads them
    /// gathered in the call's own result instead.
    pub fn instance_of(&self) -> Option<&str> {
        match self {
            Self::Tool {
                metadata: Some(m), ..
            } => m.get(INSTANCE_OF)?.as_str(),
            _ => None,
        }
    }

    /// This tool result as that of instance `item` of call `call_id`.
    pub fn into_instance(mut self, call_id: &str, item: usize) -> Self {
        if let Self::Tool { metadata, .. } = &mut self {
            let m = metadata.get_or_insert_default();
            m.insert(INSTANCE_OF.into(), Value::from(call_id));
            m.insert("item".into(), Value::from(item));
        }
        self
    }

    /// Drops an assistant message's reasoning blocks (for readers that do not want them).
    pub fn strip_thinking(&mut self) {
        if let Self::Assistant { thinking, .. } = self {
            thinking.clear();
        }
    }

    /// Whether it is a corrective nudge the runtime added (not the user's words).
    pub fn is_nudge(&self) -> bool {
        matches!(self, Self::User { metadata: Some(m), .. } if m.get("nudge") == Some(&Value::Bool(true)))
    }

    /// An assistant message with only text.
    pub fn assistant_text(content: impl Into<String>) -> Self {
        Self::Assistant {
            content: content.into(),
            tool_calls: vec![],
            thinking: vec![],
            metadata: None,
        }
    }

    /// A successful tool result.
    pub fn tool_result(call: &ToolCall, result: Value) -> Self {
        Self::Tool {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: result,
            is_error: false,
            attachments: Vec::new(),
            metadata: None,
        }
    }

    /// A failed tool call, as the model sees it.
    pub fn tool_error(call: &ToolCall, code: &str, message: &str) -> Self {
        Self::Tool {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: serde_json::json!({ "error": message, "code": code }),
            is_error: true,
            attachments: Vec::new(),
            metadata: None,
        }
    }
}

/// Any [`Message`] as one flat record (see [`crate::wire`]).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MessageWire {
    role: Role,
    #[serde(default, deserialize_with = "present")]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    thinking: Vec<Thinking>,
    #[serde(default)]
    attachments: Vec<Attachment>,
    #[serde(default, deserialize_with = "present")]
    metadata: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "present")]
    tool_call_id: Option<String>,
    #[serde(default, deserialize_with = "present")]
    tool_name: Option<String>,
    #[serde(default)]
    is_error: bool,
}

wire_enum! {
    #[derive(Clone, Copy)]
    enum Role {
        System = "system",
        User = "user",
        Assistant = "assistant",
        Tool = "tool",
    }
}

impl TryFrom<MessageWire> for Message {
    type Error = String;

    fn try_from(w: MessageWire) -> Result<Self, String> {
        let text = |content: Option<Value>| match content {
            Some(Value::String(text)) => Ok(text),
            Some(other) => Err(format!("`content` must be a string, not {other}")),
            None => Err("missing field `content`".to_string()),
        };
        let metadata = w.metadata;
        Ok(match w.role {
            Role::System => Self::System {
                content: text(w.content)?,
                metadata,
            },
            Role::User => Self::User {
                content: text(w.content)?,
                attachments: w.attachments,
                metadata,
            },
            Role::Assistant => Self::Assistant {
                content: text(w.content.or(Some(Value::String(String::new()))))?,
                tool_calls: w.tool_calls,
                thinking: w.thinking,
                metadata,
            },
            Role::Tool => Self::Tool {
                tool_call_id: required(w.tool_call_id, "toolCallId")?,
                tool_name: required(w.tool_name, "toolName")?,
                content: required(w.content, "content")?,
                is_error: w.is_error,
                attachments: w.attachments,
                metadata,
            },
        })
    }
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The provider's id for the call (unique within the session).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, always a JSON object once normalised.
    pub arguments: Value,
}

/// One block of reasoning returned by the model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thinking {
    /// The reasoning text (empty when the provider withheld it).
    pub content: String,
    /// Provider signature (Anthropic requires it back verbatim on the next turn).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub signature: Option<String>,
    /// Encrypted reasoning the provider redacted (sent back as is).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub redacted: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_serialise_with_a_role_tag_and_camel_case_fields() {
        let call = ToolCall {
            id: "c1".into(),
            name: "add_note".into(),
            arguments: json!({"text": "x"}),
        };
        let msg = Message::Assistant {
            content: String::new(),
            tool_calls: vec![call.clone()],
            thinking: vec![],
            metadata: None,
        };
        assert_eq!(
            serde_json::to_value(&msg).unwrap(),
            json!({"role": "assistant", "content": "", "toolCalls": [
                {"id": "c1", "name": "add_note", "arguments": {"text": "x"}}
            ]})
        );
        let res = Message::tool_result(&call, json!({"count": 1}));
        let v = serde_json::to_value(&res).unwrap();
        assert_eq!(v["toolCallId"], "c1");
        assert_eq!(v["isError"], false);
        let back: Message = serde_json::from_value(v).unwrap();
        assert_eq!(back, res);
    }
}
