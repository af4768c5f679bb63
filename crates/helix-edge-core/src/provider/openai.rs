//! OpenAI-compatible Chat Completions (OpenAI, Groq, DeepSeek, Mistral, OpenRouter,
//! local servers, and Workers AI's OpenAI endpoint): the streaming request body, and a
//! decoder that assembles a [`ModelTurn`] from `chat.completion.chunk` events.
//!
//! Decoding rules, from real provider traffic (`tests/fixtures/openai`):
//! - Tool-call fragments are keyed by `index`; a fragment without one continues the
//!   last call unless it brings a new id. The first non-empty `id` and `name` win;
//!   later fragments may repeat them as `""`. Arguments concatenate.
//! - Reasoning arrives as `reasoning_content` (DeepSeek) or `reasoning` (Groq).
//! - `finish_reason` and `usage` may share a chunk or come in separate ones.
//! - The stream is complete after `[DONE]` or a `finish_reason`; one that ends before
//!   either is *truncated*.

use super::strict::strict_schema;
use super::{DecodeStep, Decoder, Frame, Protocol, ProviderConfig, ProviderKind};
use crate::attachment::{Attachment, AttachmentKind};
use crate::error::ProviderError;
use crate::message::{Message, ToolCall};
use crate::model::{CacheTtl, Delta, ModelRequest, ModelTurn, StopReason, ToolChoice, Usage};
use crate::provider::sse::SseEvent;
use crate::provider_options::pass_through;
use serde::Serialize;
use serde_json::{Map, Value, json};

/// The Chat Completions protocol.
pub struct OpenAi;

impl Protocol for OpenAi {
    fn speaks(&self, kind: ProviderKind) -> bool {
        matches!(kind, ProviderKind::OpenAi | ProviderKind::WorkersAi)
    }

    fn base_url(&self) -> &'static str {
        "https://api.openai.com/v1"
    }

    fn model(&self) -> &'static str {
        "gpt-4o-mini"
    }

    fn request(
        &self,
        config: &ProviderConfig,
        model: &str,
        request: &ModelRequest<'_>,
        headers: &mut Vec<(String, String)>,
    ) -> (&'static str, String) {
        if let Some(key) = &config.api_key {
            headers.push(("authorization".into(), format!("Bearer {key}")));
        }
        let field = match config.base_url.contains("api.openai.com") {
            true => MaxTokensField::MaxCompletionTokens,
            false => MaxTokensField::MaxTokens,
        };
        let include_usage = config.kind == ProviderKind::OpenAi;
        let body = request_body(model, request, field, include_usage);
        ("/chat/completions", body)
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::new(OpenAiDecoder::new())
    }
}

/// How to spell the output-token cap: OpenAI's own API wants `max_completion_tokens`
/// (reasoning models reject `max_tokens`); compatible servers want `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_completion_tokens`.
    MaxCompletionTokens,
    /// `max_tokens`.
    MaxTokens,
}

/// An attachment as a Chat Completions content part: an image by URL or data URL, an
/// inline file as `file_data`; a file by URL has no part of its own, so the model is
/// told where it is.
fn content_part(a: &Attachment) -> Value {
    match (a.kind, a.data_url(), &a.url) {
        (AttachmentKind::Image, Some(data), _) => {
            json!({ "type": "image_url", "image_url": { "url": data } })
        }
        (AttachmentKind::Image, None, Some(url)) => {
            json!({ "type": "image_url", "image_url": { "url": url } })
        }
        (AttachmentKind::File, Some(data), _) => json!({
            "type": "file",
            "file": { "filename": a.name.as_deref().unwrap_or("file"), "file_data": data }
        }),
        _ => json!({ "type": "text", "text": a.placeholder() }),
    }
}

/// One message as Chat Completions reads it, serialized straight from the transcript
/// (a `Value` tree of a long transcript costs several times the bytes it writes).
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Wire<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: std::borrow::Cow<'a, str>,
    },
}

/// A user message's content: its text, or content parts (text and files).
#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(&'a str),
    Parts(Vec<Value>),
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    /// The arguments as a JSON string, as the API takes them.
    arguments: String,
}

impl<'a> Wire<'a> {
    fn of(message: &'a Message) -> Self {
        match message {
            Message::System { content, .. } => Wire::System { content },
            Message::User {
                content,
                attachments,
                ..
            } if attachments.is_empty() => Wire::User {
                content: UserContent::Text(content),
            },
            Message::User {
                content,
                attachments,
                ..
            } => {
                let mut parts = Vec::with_capacity(attachments.len() + 1);
                if !content.is_empty() {
                    parts.push(json!({ "type": "text", "text": content }));
                }
                parts.extend(attachments.iter().map(content_part));
                Wire::User {
                    content: UserContent::Parts(parts),
                }
            }
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => Wire::Assistant {
                content: (!content.is_empty()).then_some(content.as_str()),
                tool_calls: tool_calls.iter().map(WireCall::of).collect(),
            },
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => Wire::Tool {
                tool_call_id,
                content: match content {
                    Value::String(s) => s.as_str().into(),
                    other => other.to_string().into(),
                },
            },
        }
    }
}

impl<'a> WireCall<'a> {
    fn of(call: &'a ToolCall) -> Self {
        WireCall {
            id: &call.id,
            r#type: "function",
            function: WireFunction {
                name: &call.name,
                arguments: call.arguments.to_string(),
            },
        }
    }
}

/// The messages of a request, the system prompt first. Chat Completions' tool messages
/// take text only: the files tools give with their results follow the step's tool
/// messages as one user message.
fn wire_messages<'a>(request: &'a ModelRequest<'_>) -> Vec<Wire<'a>> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(Wire::System {
            content: &request.system,
        });
    }
    let mut files: Vec<Value> = Vec::new();
    let flush = |files: &mut Vec<Value>, messages: &mut Vec<Wire<'a>>| {
        if !files.is_empty() {
            let content = UserContent::Parts(std::mem::take(files));
            messages.push(Wire::User { content });
        }
    };
    for message in request.messages {
        if !matches!(message, Message::Tool { .. }) {
            flush(&mut files, &mut messages);
        }
        if let Message::Tool {
            tool_call_id,
            tool_name,
            attachments,
            ..
        } = message
            && !attachments.is_empty()
        {
            let said = format!("Files from the result of {tool_name} (call {tool_call_id}):");
            files.push(json!({ "type": "text", "text": said }));
            files.extend(attachments.iter().map(content_part));
        }
        messages.push(Wire::of(message));
    }
    flush(&mut files, &mut messages);
    messages
}

/// The request body for a streaming call: the messages serialized from the transcript,
/// the rest of the body (small) built as a `Value`.
pub fn request_body(
    model: &str,
    request: &ModelRequest<'_>,
    field: MaxTokensField,
    include_usage: bool,
) -> String {
    let envelope = envelope(model, request, field, include_usage).to_string();
    // Serializing borrowed strings, `Value`s and string-keyed maps cannot fail.
    let messages = serde_json::to_string(&wire_messages(request)).unwrap_or_default();
    // The envelope is an object with `model` in it: `{"model":…}`.
    format!("{{\"messages\":{messages},{}", &envelope[1..])
}

/// The body but its messages.
fn envelope(
    model: &str,
    request: &ModelRequest<'_>,
    field: MaxTokensField,
    include_usage: bool,
) -> Value {
    let mut body = json!({ "model": model, "stream": true });
    if include_usage {
        body["stream_options"] = json!({ "include_usage": true });
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                let mut function = json!({ "name": t.name, "description": t.description });
                if t.strict {
                    function["parameters"] = strict_schema(&t.input_schema);
                    function["strict"] = json!(true);
                } else {
                    function["parameters"] = t.input_schema.clone();
                }
                json!({ "type": "function", "function": function })
            })
            .collect();
        body["tool_choice"] = match &request.settings.tool_choice {
            None | Some(ToolChoice::Auto) => json!("auto"),
            Some(ToolChoice::Required) => json!("required"),
            Some(ToolChoice::None) => json!("none"),
            Some(ToolChoice::Tool(name)) => {
                json!({ "type": "function", "function": { "name": name } })
            }
        };
    }
    if let Some(effort) = request.settings.reasoning_effort {
        body["reasoning_effort"] = json!(effort.as_str());
    }
    if let Some(ttl) = request.settings.prompt_cache {
        // Calls of one session share their prefix: route them to the same cache.
        body["prompt_cache_key"] = json!(request.session_id);
        if ttl == CacheTtl::OneHour {
            body["prompt_cache_retention"] = json!("24h");
        }
    }
    if let Some(t) = request.settings.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(n) = request.settings.max_output_tokens {
        let key = match field {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        };
        body[key] = json!(n);
    }
    pass_through(&mut body, &request.settings.openai_fields);
    body
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles a turn from Chat Completions stream events.
#[derive(Debug, Default)]
pub struct OpenAiDecoder {
    text: String,
    reasoning: String,
    in_reasoning: bool,
    /// Calls by their stream index, in index order (a turn has a handful).
    calls: Vec<(u64, PartialCall)>,
    last_index: Option<u64>,
    finish: Option<StopReason>,
    /// A refusal's text (`delta.refusal`): the turn then ends as a refusal.
    refusal: String,
    usage: Usage,
    /// The model the chunks name.
    model: Option<String>,
    done: bool,
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "stop" | "end_turn" => StopReason::EndTurn,
        "tool_calls" | "function_call" | "tool_use" => StopReason::ToolUse,
        "length" | "max_tokens" => StopReason::MaxTokens,
        "content_filter" => StopReason::ContentFilter,
        "refusal" => StopReason::Refusal,
        "error" => StopReason::Error,
        _ => StopReason::Unknown,
    }
}

fn count(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

impl OpenAiDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    fn end_reasoning(&mut self, out: &mut Vec<Delta>) {
        if self.in_reasoning {
            self.in_reasoning = false;
            out.push(Delta::Thinking {
                content: String::new(),
                is_complete: true,
            });
        }
    }

    fn call_at(&self, index: u64) -> Option<&PartialCall> {
        let at = self.calls.binary_search_by_key(&index, |(k, _)| *k).ok()?;
        Some(&self.calls[at].1)
    }

    fn tool_fragment(&mut self, fragment: &Value) {
        let id = fragment.get("id").and_then(Value::as_str).unwrap_or("");
        let index = match fragment.get("index").and_then(Value::as_u64) {
            Some(i) => i,
            // No index (Mistral): a new id starts a call; otherwise continue the last.
            None => match self.last_index {
                Some(last) if id.is_empty() || self.call_at(last).is_some_and(|c| c.id == id) => {
                    last
                }
                _ => self.calls.last().map_or(0, |(k, _)| k + 1),
            },
        };
        self.last_index = Some(index);
        let at = match self.calls.binary_search_by_key(&index, |(k, _)| *k) {
            Ok(at) => at,
            Err(at) => {
                self.calls.insert(at, (index, PartialCall::default()));
                at
            }
        };
        let call = &mut self.calls[at].1;
        if call.id.is_empty() && !id.is_empty() {
            call.id = id.into();
        }
        let function = fragment.get("function");
        if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str)
            && call.name.is_empty()
            && !name.is_empty()
        {
            call.name = name.into();
        }
        if let Some(args) = function
            .and_then(|f| f.get("arguments"))
            .and_then(Value::as_str)
        {
            call.arguments.push_str(args);
        }
    }
}

impl Decoder for OpenAiDecoder {
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<Delta>,
    ) -> Result<DecodeStep, ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(DecodeStep {
                frame: Frame::Known,
                terminal: true,
            });
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| ProviderError::Corrupt(format!("a stream chunk is not JSON ({e})")))?;
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("unknown error")
                .to_string();
            let kind = error
                .get("type")
                .or_else(|| error.get("code"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let retryable = matches!(
                kind,
                "server_error" | "overloaded_error" | "rate_limit_exceeded" | "timeout"
            );
            return Err(ProviderError::Stream { message, retryable });
        }
        let Some(obj) = chunk.as_object() else {
            return Ok(DecodeStep {
                frame: Frame::Unknown,
                terminal: false,
            });
        };
        if self.model.is_none() {
            let model = obj.get("model").and_then(Value::as_str);
            self.model = model.filter(|m| !m.is_empty()).map(String::from);
        }
        if let Some(usage) = obj.get("usage").filter(|u| u.is_object()) {
            self.usage.input_tokens = count(usage, "prompt_tokens");
            self.usage.output_tokens = count(usage, "completion_tokens");
            self.usage.cache_read_tokens = usage
                .get("prompt_tokens_details")
                .map(|d| count(d, "cached_tokens"))
                .filter(|n| *n > 0)
                .unwrap_or_else(|| count(usage, "prompt_cache_hit_tokens"));
        }
        let choices = obj.get("choices").and_then(Value::as_array);
        let Some(choice) = choices.and_then(|c| c.iter().find(|c| count(c, "index") == 0)) else {
            let known = obj.contains_key("usage") || obj.contains_key("choices");
            return Ok(DecodeStep {
                frame: if known { Frame::Known } else { Frame::Unknown },
                terminal: false,
            });
        };
        if let Some(delta) = choice.get("delta").and_then(Value::as_object) {
            let reasoning = delta
                .get("reasoning_content")
                .or_else(|| delta.get("reasoning"))
                .and_then(Value::as_str);
            if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
                self.in_reasoning = true;
                self.reasoning.push_str(text);
                out.push(Delta::Thinking {
                    content: text.into(),
                    is_complete: false,
                });
            }
            if let Some(text) = delta
                .get("content")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                self.end_reasoning(out);
                self.text.push_str(text);
                out.push(Delta::Text(text.into()));
            }
            if let Some(text) = delta.get("refusal").and_then(Value::as_str) {
                self.refusal.push_str(text);
            }
            if let Some(fragments) = delta.get("tool_calls").and_then(Value::as_array) {
                self.end_reasoning(out);
                for fragment in fragments {
                    self.tool_fragment(fragment);
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.end_reasoning(out);
            self.finish = Some(stop_reason(reason));
        }
        Ok(DecodeStep {
            frame: Frame::Known,
            terminal: false,
        })
    }

    fn finish(mut self: Box<Self>, out: &mut Vec<Delta>) -> Result<ModelTurn, ProviderError> {
        if !self.done && self.finish.is_none() {
            return Err(ProviderError::Truncated);
        }
        self.end_reasoning(out);
        let tool_calls = std::mem::take(&mut self.calls)
            .into_iter()
            .map(|(_, c)| ToolCall {
                id: c.id,
                name: c.name,
                arguments: if c.arguments.trim().is_empty() {
                    Value::Object(Map::new())
                } else {
                    serde_json::from_str(&c.arguments).unwrap_or(Value::String(c.arguments))
                },
            })
            .collect::<Vec<_>>();
        let refused = !self.refusal.is_empty();
        let stop = match self.finish {
            _ if refused => StopReason::Refusal,
            Some(StopReason::EndTurn) if !tool_calls.is_empty() => StopReason::ToolUse,
            Some(stop) => stop,
            None if tool_calls.is_empty() => StopReason::EndTurn,
            None => StopReason::ToolUse,
        };
        let thinking = if self.reasoning.is_empty() {
            vec![]
        } else {
            vec![crate::message::Thinking {
                content: std::mem::take(&mut self.reasoning),
                ..Default::default()
            }]
        };
        Ok(ModelTurn {
            text: self.text,
            thinking,
            tool_calls,
            stop,
            stop_detail: refused.then_some(self.refusal),
            usage: self.usage,
            model: self.model,
        })
    }
}
