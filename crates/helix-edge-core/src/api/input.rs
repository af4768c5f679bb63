//! What users send the agent: the `input` of a create — a string; an object with one
//! `message` (and its `metadata`, `attachments` and the initial `state`) or a list of
//! `messages` (and `state`); or a bare list of messages — the conversation a create may
//! start from (`messages`), and a follow-up's body. Everything becomes transcript
//! messages, checked here: nothing blank, attachments valid, history well formed.

use super::ApiError;
use crate::attachment::{Attachment, validate_all};
use crate::message::Message;
use serde::Deserialize;
use serde_json::{Map, Value};

/// At most this many user messages in one input.
pub const MAX_INPUT_MESSAGES: usize = 50;

/// One user message as submitted: a string, or an object with `message` and optional
/// `metadata` and `attachments`.
#[derive(Debug, Clone, PartialEq)]
pub struct UserInput {
    message: String,
    metadata: Option<Map<String, Value>>,
    attachments: Vec<Attachment>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UserObject {
    message: String,
    #[serde(default, deserialize_with = "crate::wire::present")]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    attachments: Vec<Attachment>,
}

impl<'de> Deserialize<'de> for UserInput {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = UserInput;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a message string or an object with `message`")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<UserInput, E> {
                Ok(UserInput::text(text.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<UserInput, A::Error> {
                let map = serde::de::value::MapAccessDeserializer::new(map);
                let o = UserObject::deserialize(map)?;
                Ok(UserInput {
                    message: o.message,
                    metadata: o.metadata,
                    attachments: o.attachments,
                })
            }
        }
        d.deserialize_any(Either)
    }
}

impl UserInput {
    fn text(message: String) -> Self {
        Self {
            message,
            metadata: None,
            attachments: Vec::new(),
        }
    }

    /// The transcript message; `at` names it in errors (`input.messages[2]`).
    fn into_message(self, at: &str) -> Result<Message, ApiError> {
        if is_blank(&self.message) && self.attachments.is_empty() {
            return Err(ApiError::validation(format!("{at} must not be empty.")));
        }
        validate_all(&self.attachments).map_err(|e| ApiError::validation(format!("{at}.{e}.")))?;
        Ok(Message::User {
            content: self.message,
            attachments: self.attachments,
            metadata: self.metadata,
        })
    }
}

/// The object form of an input or a follow-up: one `message` (with its `metadata` and
/// `attachments`) or a list of `messages`, and, on create, `state`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputObject {
    #[serde(default, deserialize_with = "crate::wire::present")]
    message: Option<String>,
    #[serde(default, deserialize_with = "crate::wire::present")]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    attachments: Vec<Attachment>,
    #[serde(default, deserialize_with = "crate::wire::present")]
    messages: Option<Vec<UserInput>>,
    /// Keys that override the agent's initial state (create only).
    #[serde(default, deserialize_with = "crate::wire::present")]
    pub state: Option<Map<String, Value>>,
}

impl InputObject {
    /// The user messages, checked; `at` is the field's name in errors.
    pub fn into_messages(self, at: &str) -> Result<Vec<Message>, ApiError> {
        let rich = RichInput {
            message: self.message,
            metadata: self.metadata,
            attachments: self.attachments,
            messages: self.messages,
        };
        rich.into_messages(at)
    }
}

/// The user messages a body gives: one `message` with its `metadata` and `attachments`,
/// or a list of `messages` (each with its own).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RichInput {
    /// One message's text.
    pub message: Option<String>,
    /// That message's metadata.
    pub metadata: Option<Map<String, Value>>,
    /// That message's attachments.
    pub attachments: Vec<Attachment>,
    /// Several messages instead.
    pub messages: Option<Vec<UserInput>>,
}

impl RichInput {
    /// Whether it gives nothing at all.
    pub fn is_empty(&self) -> bool {
        self.message.is_none()
            && self.metadata.is_none()
            && self.attachments.is_empty()
            && self.messages.is_none()
    }

    /// The user messages, checked (exactly one of `message` and `messages`); `at` is the
    /// field's name in errors.
    pub fn into_messages(self, at: &str) -> Result<Vec<Message>, ApiError> {
        match (self.message, self.messages) {
            (Some(message), None) => {
                let one = UserInput {
                    message,
                    metadata: self.metadata,
                    attachments: self.attachments,
                };
                Ok(vec![one.into_message(&format!("{at}.message"))?])
            }
            (None, Some(list)) if self.metadata.is_none() && self.attachments.is_empty() => {
                user_messages(list, &format!("{at}.messages"))
            }
            (None, Some(_)) => Err(ApiError::validation(format!(
                "{at}: metadata and attachments go on each of the messages."
            ))),
            _ => Err(ApiError::validation(format!(
                "{at} has exactly one of message and messages."
            ))),
        }
    }
}

/// Whether `text` has nothing but whitespace: Unicode's, and the byte-order mark (so
/// that both the document's pattern and JavaScript's `\s` agree with it).
pub fn is_blank(text: &str) -> bool {
    text.chars().all(|c| c.is_whitespace() || c == '\u{feff}')
}

/// The pattern of a text that is not blank, for the OpenAPI document: the characters
/// [`is_blank`] skips, written out (regex dialects disagree on `\s`).
pub const NOT_BLANK: &str = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]";

/// A list of user messages, checked (1 to [`MAX_INPUT_MESSAGES`]).
pub fn user_messages(list: Vec<UserInput>, at: &str) -> Result<Vec<Message>, ApiError> {
    if list.is_empty() || list.len() > MAX_INPUT_MESSAGES {
        return Err(ApiError::validation(format!(
            "{at} holds 1 to {MAX_INPUT_MESSAGES} messages."
        )));
    }
    list.into_iter()
        .enumerate()
        .map(|(i, m)| m.into_message(&format!("{at}[{i}]")))
        .collect()
}

/// State overrides: top-level keys over the agent's initial state.
pub type StateOverrides = Map<String, Value>;

/// `input` of `POST /v1/sessions`.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Just the message.
    Text(String),
    /// A message with its metadata and attachments, or a list of messages; and state.
    Object(InputObject),
    /// A list of user messages.
    List(Vec<UserInput>),
}

/// The JSON type decides the form, so nothing is buffered to try one after the other.
impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Any;
        impl<'de> serde::de::Visitor<'de> for Any {
            type Value = Input;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a message string, an object with `message` or `messages`, or a list of messages")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Input, E> {
                Ok(Input::Text(text.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Input, A::Error> {
                let map = serde::de::value::MapAccessDeserializer::new(map);
                InputObject::deserialize(map).map(Input::Object)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Input, A::Error> {
                let seq = serde::de::value::SeqAccessDeserializer::new(seq);
                Vec::<UserInput>::deserialize(seq).map(Input::List)
            }
        }
        d.deserialize_any(Any)
    }
}

impl Input {
    /// The user messages and the state overrides, checked.
    pub fn into_parts(self) -> Result<(Vec<Message>, Option<StateOverrides>), ApiError> {
        match self {
            Input::Text(text) => Ok((vec![UserInput::text(text).into_message("input")?], None)),
            Input::Object(mut object) => {
                let state = object.state.take();
                Ok((object.into_messages("input")?, state))
            }
            Input::List(list) => Ok((user_messages(list, "input")?, None)),
        }
    }
}

/// Checks the conversation a session starts from: user, assistant and tool messages
/// only; every tool message answers a call of the assistant message before it, once;
/// every call is answered before the next user or assistant message; user messages
/// are not blank; user and tool messages' attachments are valid.
pub fn check_history(history: &[Message]) -> Result<(), ApiError> {
    let bad = |i: usize, why: &str| ApiError::validation(format!("messages[{i}]: {why}."));
    let mut open: Vec<(&str, &str)> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, m) in history.iter().enumerate() {
        match m {
            Message::System { .. } => {
                return Err(bad(
                    i,
                    "system messages come from the agent, not the history",
                ));
            }
            Message::User {
                content,
                attachments,
                ..
            } => {
                if !open.is_empty() {
                    return Err(bad(i, "the tool calls before it are not all answered"));
                }
                if is_blank(content) && attachments.is_empty() {
                    return Err(bad(i, "a user message must not be empty"));
                }
                validate_all(attachments).map_err(|e| bad(i, &e))?;
            }
            Message::Assistant { tool_calls, .. } => {
                if !open.is_empty() {
                    return Err(bad(i, "the tool calls before it are not all answered"));
                }
                for call in tool_calls {
                    if call.id.is_empty() || seen.contains(&call.id.as_str()) {
                        return Err(bad(i, "tool call ids must be present and unique"));
                    }
                    if !call.arguments.is_object() {
                        return Err(bad(i, "tool call arguments must be objects"));
                    }
                    seen.push(&call.id);
                    open.push((&call.id, &call.name));
                }
            }
            Message::Tool {
                tool_call_id,
                tool_name,
                attachments,
                ..
            } => {
                match open.iter().position(|(id, _)| id == tool_call_id) {
                    Some(at) if open[at].1 == tool_name => {
                        open.remove(at);
                    }
                    Some(_) => return Err(bad(i, "toolName differs from the call's name")),
                    None => return Err(bad(i, "it answers no open tool call")),
                }
                validate_all(attachments).map_err(|e| bad(i, &e))?;
            }
        }
    }
    match open.first() {
        Some((id, _)) => Err(ApiError::validation(format!(
            "messages: tool call '{id}' is never answered."
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::parse_body;
    use serde_json::json;

    #[derive(Deserialize)]
    struct Body {
        input: Input,
    }

    fn parts(input: Value) -> Result<(Vec<Message>, Option<StateOverrides>), ApiError> {
        let body: Body = parse_body(json!({ "input": input }).to_string().as_bytes())?;
        body.input.into_parts()
    }

    #[test]
    fn every_input_form_becomes_user_messages() {
        let (m, s) = parts(json!("hi")).unwrap();
        assert_eq!((m, s), (vec![Message::user("hi")], None));
        let (m, s) =
            parts(json!({"message": "hi", "metadata": {"hidden": true}, "state": {"k": 1}}))
                .unwrap();
        assert!(matches!(&m[0], Message::User { metadata: Some(md), .. } if md["hidden"] == true));
        assert_eq!(s.unwrap()["k"], 1);
        let (m, _) = parts(json!(["a", {"message": "b", "attachments": [
            {"type": "image", "mediaType": "image/png", "url": "https://e.x/p.png"}
        ]}]))
        .unwrap();
        assert_eq!(m.len(), 2);
        assert!(matches!(&m[1], Message::User { attachments, .. } if attachments.len() == 1));
        let (m, s) = parts(json!({"messages": ["a", "b"], "state": {"k": 2}})).unwrap();
        assert_eq!((m.len(), s.unwrap()["k"].clone()), (2, json!(2)));
        // An image alone is a message.
        assert!(
            parts(json!({"message": "", "attachments": [
                {"type": "image", "mediaType": "image/png", "url": "https://e.x/p.png"}
            ]}))
            .is_ok()
        );
    }

    #[test]
    fn bad_inputs_are_refused_naming_the_field() {
        let err = |input: Value| parts(input).unwrap_err().message;
        assert!(err(json!("  ")).contains("input must not be empty"));
        assert!(err(json!([])).contains("1 to 50"));
        assert!(err(json!(["ok", " "])).contains("input[1]"));
        assert!(err(json!({"message": "a", "messages": ["b"]})).contains("exactly one"));
        assert!(err(json!({"state": {}})).contains("exactly one"));
        assert!(err(json!({"messages": ["a"], "metadata": {}})).contains("each of the messages"));
        assert!(err(json!({"message": "a", "attachments": [{"type": "image", "mediaType": "image/bmp", "url": "https://x"}]}))
            .contains("input.message.attachments[0]"));
        assert!(err(json!([{"message": "a", "extra": 1}])).contains("unknown field"));
        assert!(err(json!(42)).contains("a message string"));
    }

    #[test]
    fn a_history_must_be_well_formed() {
        let history = |v: Value| -> Vec<Message> { serde_json::from_value(v).unwrap() };
        let call = json!({"id": "c1", "name": "add_note", "arguments": {"text": "x"}});
        let good = history(json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "toolCalls": [call]},
            {"role": "tool", "toolCallId": "c1", "toolName": "add_note", "content": {"count": 1}, "isError": false},
            {"role": "assistant", "content": "done"}
        ]));
        assert_eq!(check_history(&good), Ok(()));
        let err = |v: Value| check_history(&history(v)).unwrap_err().message;
        assert!(err(json!([{"role": "system", "content": "x"}])).contains("system"));
        assert!(
            err(json!([{"role": "assistant", "content": "", "toolCalls": [call]}]))
                .contains("never answered")
        );
        assert!(
            err(json!([
                {"role": "assistant", "content": "", "toolCalls": [call]},
                {"role": "user", "content": "too soon"}
            ]))
            .contains("not all answered")
        );
        assert!(err(json!([{"role": "tool", "toolCallId": "c9", "toolName": "x", "content": 1, "isError": false}]))
            .contains("no open tool call"));
        assert!(
            err(json!([
                {"role": "assistant", "content": "", "toolCalls": [call, call]}
            ]))
            .contains("unique")
        );
    }
}
