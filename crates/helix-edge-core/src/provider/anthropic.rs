//! Anthropic Messages: the streaming request body (system prompt, content blocks,
//! `tool_use`/`tool_result`, thinking blocks sent back with their signatures), and a
//! decoder that assembles a [`ModelTurn`] from the event stream (`message_start`,
//! `content_block_*`, `message_delta`, `message_stop`, `ping`, `error`).
//!
//! The stream is complete only after `message_stop`; anything less is *truncated*.

use super::strict::strict_schema;
use super::{DecodeStep, Decoder, Frame, Protocol, ProviderConfig, ProviderKind};
use crate::attachment::{Attachment, AttachmentKind};
use crate::error::ProviderError;
use crate::message::{Message, Thinking, ToolCall};
use crate::model::{CacheTtl, Delta, ModelRequest, ModelTurn, StopReason, ToolChoice, Usage};
use crate::provider::sse::SseEvent;
use serde_json::{Map, Value, json};

/// The API version header value this adapter speaks.
pub const API_VERSION: &str = "2023-06-01";

/// The beta that enables strict tool use (constrained decoding of tool arguments); sent
/// only when a tool of the request is strict.
pub const STRICT_TOOLS_BETA: &str = "structured-outputs-2025-11-13";

/// Output cap sent when the agent sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The Messages protocol.
pub struct Anthropic;

impl Protocol for Anthropic {
    fn speaks(&self, kind: ProviderKind) -> bool {
        kind == ProviderKind::Anthropic
    }

    fn base_url(&self) -> &'static str {
        "https://api.anthropic.com/v1"
    }

    fn model(&self) -> &'static str {
        "claude-sonnet-4-5"
    }

    fn request(
        &self,
        config: &ProviderConfig,
        model: &str,
        request: &ModelRequest<'_>,
        headers: &mut Vec<(String, String)>,
    ) -> (&'static str, Value) {
        headers.push(("anthropic-version".into(), API_VERSION.into()));
        let strict = request.tools.iter().any(|t| t.strict);
        let hour = request.settings.prompt_cache == Some(CacheTtl::OneHour);
        let betas: Vec<&str> = [
            strict.then_some(STRICT_TOOLS_BETA),
            hour.then_some(CACHE_TTL_BETA),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !betas.is_empty() {
            headers.push(("anthropic-beta".into(), betas.join(",")));
        }
        if let Some(key) = &config.api_key {
            headers.push(("x-api-key".into(), key.clone()));
        }
        ("/messages", request_body(model, request))
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::new(AnthropicDecoder::new())
    }
}

/// The content of an inline `text/*` file, for a text document block.
fn attachment_text(a: &Attachment) -> Option<String> {
    use base64::Engine;
    if !a.media_type.starts_with("text/") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(a.data.as_ref()?)
        .ok()?;
    String::from_utf8(bytes).ok()
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Appends a message, merging it into the previous one when the roles match (the API
/// wants alternating roles; tool results and a following user text share one message).
fn push(messages: &mut Vec<Value>, role: &str, mut blocks: Vec<Value>) {
    if let Some(last) = messages.last_mut()
        && last["role"] == role
        && let Some(content) = last["content"].as_array_mut()
    {
        content.append(&mut blocks);
        return;
    }
    messages.push(json!({ "role": role, "content": blocks }));
}

/// An attachment as a Messages content block: an image, a PDF document (base64 or URL),
/// or a text document (inline `text/*`); any other file is named in a text block.
fn content_block(a: &Attachment) -> Value {
    let source = match (&a.data, &a.url) {
        (Some(data), _) => json!({ "type": "base64", "media_type": a.media_type, "data": data }),
        (None, Some(url)) => json!({ "type": "url", "url": url }),
        (None, None) => return json!({ "type": "text", "text": a.placeholder() }),
    };
    let mut block = match a.kind {
        AttachmentKind::Image => return json!({ "type": "image", "source": source }),
        AttachmentKind::File if a.media_type == "application/pdf" => {
            json!({ "type": "document", "source": source })
        }
        AttachmentKind::File => match attachment_text(a) {
            Some(text) => json!({
                "type": "document",
                "source": { "type": "text", "media_type": "text/plain", "data": text }
            }),
            None => return json!({ "type": "text", "text": a.placeholder() }),
        },
    };
    if let Some(name) = &a.name {
        block["title"] = json!(name);
    }
    block
}

/// The beta that enables the one-hour prompt cache; sent only when it is asked for.
pub const CACHE_TTL_BETA: &str = "extended-cache-ttl-2025-04-11";

/// A `cache_control` breakpoint living `ttl`.
fn cache_control(ttl: CacheTtl) -> Value {
    match ttl {
        CacheTtl::FiveMinutes => json!({ "type": "ephemeral" }),
        CacheTtl::OneHour => json!({ "type": "ephemeral", "ttl": "1h" }),
    }
}

/// Puts a cache breakpoint on the last block of the two latest user turns: the newest
/// writes the conversation so far to the cache, the one before reads what the previous
/// call wrote. With the system prompt's and the last tool's, that is the four breakpoints
/// a request may carry.
fn mark_latest_turns(messages: &mut [Value], cc: &Value) {
    let user_turns = messages.iter_mut().rev().filter(|m| m["role"] == "user");
    for turn in user_turns.take(2) {
        if let Some(block) = turn["content"].as_array_mut().and_then(|b| b.last_mut()) {
            block["cache_control"] = cc.clone();
        }
    }
}

/// The request body for a streaming call.
pub fn request_body(model: &str, request: &ModelRequest<'_>) -> Value {
    let mut system = request.system.clone();
    let mut messages: Vec<Value> = Vec::new();
    for message in request.messages {
        match message {
            Message::System { content, .. } => {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(content);
            }
            Message::User {
                content,
                attachments,
                ..
            } => {
                // Images and documents before the text, as Anthropic advises.
                let mut blocks: Vec<Value> = attachments.iter().map(content_block).collect();
                if !content.is_empty() || blocks.is_empty() {
                    blocks.push(json!({ "type": "text", "text": content }));
                }
                push(&mut messages, "user", blocks)
            }
            Message::Assistant {
                content,
                tool_calls,
                thinking,
                ..
            } => {
                let mut blocks: Vec<Value> = thinking
                    .iter()
                    .map(|t| match &t.redacted {
                        Some(data) => json!({ "type": "redacted_thinking", "data": data }),
                        None => json!({ "type": "thinking", "thinking": t.content, "signature": t.signature }),
                    })
                    .collect();
                if !content.is_empty() {
                    blocks.push(json!({ "type": "text", "text": content }));
                }
                blocks.extend(tool_calls.iter().map(|c| {
                    json!({ "type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments })
                }));
                push(&mut messages, "assistant", blocks);
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let mut block = json!({ "type": "tool_result", "tool_use_id": tool_call_id, "content": text_of(content) });
                if *is_error {
                    block["is_error"] = json!(true);
                }
                push(&mut messages, "user", vec![block]);
            }
        }
    }
    let thinking = request
        .settings
        .thinking_budget
        .map(|b| b.max(MIN_THINKING_BUDGET));
    let max_tokens = request
        .settings
        .max_output_tokens
        .unwrap_or(DEFAULT_MAX_TOKENS);
    // The thinking budget counts against max_tokens, which must stay above it.
    let max_tokens = thinking.map_or(max_tokens, |b| max_tokens.max(b + DEFAULT_MAX_TOKENS));
    let cache = request.settings.prompt_cache.map(cache_control);
    if let Some(cc) = &cache {
        mark_latest_turns(&mut messages, cc);
    }
    let mut body =
        json!({ "model": model, "max_tokens": max_tokens, "stream": true, "messages": messages });
    if !system.is_empty() {
        body["system"] = match &cache {
            Some(cc) => json!([{ "type": "text", "text": system, "cache_control": cc }]),
            None => json!(system),
        };
    }
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                let mut tool = json!({ "name": t.name, "description": t.description });
                if t.strict {
                    tool["input_schema"] = strict_schema(&t.input_schema);
                    tool["strict"] = json!(true);
                } else {
                    tool["input_schema"] = t.input_schema.clone();
                }
                tool
            })
            .collect();
        if let (Some(cc), Some(last)) = (&cache, tools.last_mut()) {
            last["cache_control"] = cc.clone();
        }
        body["tools"] = Value::Array(tools);
        if let Some(choice) = &request.settings.tool_choice {
            body["tool_choice"] = match choice {
                ToolChoice::Auto => json!({ "type": "auto" }),
                ToolChoice::Required => json!({ "type": "any" }),
                ToolChoice::None => json!({ "type": "none" }),
                ToolChoice::Tool(name) => json!({ "type": "tool", "name": name }),
            };
        }
    }
    match thinking {
        // Extended thinking takes no temperature of its own.
        Some(budget) => body["thinking"] = json!({ "type": "enabled", "budget_tokens": budget }),
        None => {
            if let Some(t) = request.settings.temperature {
                body["temperature"] = json!(t);
            }
        }
    }
    body
}

/// The smallest thinking budget Anthropic accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

#[derive(Debug)]
enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
        initial: Value,
    },
    Thinking(Thinking),
    /// A block type this adapter does not model (server tools and their results).
    Other,
}

/// Assembles a turn from Messages stream events.
#[derive(Debug, Default)]
pub struct AnthropicDecoder {
    text: String,
    blocks: Vec<(u64, Block)>,
    thinking: Vec<Thinking>,
    calls: Vec<ToolCall>,
    stop: Option<StopReason>,
    /// The provider's explanation of the stop (a refusal's), if it gave one.
    stop_detail: Option<String>,
    usage: Usage,
    done: bool,
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "stop_sequence" => StopReason::StopSequence,
        "pause_turn" => StopReason::PauseTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "refusal" => StopReason::Refusal,
        _ => StopReason::Unknown,
    }
}

fn count(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

impl AnthropicDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    fn usage(&mut self, usage: &Value) {
        if let Some(n) = count(usage, "input_tokens") {
            self.usage.input_tokens = n;
        }
        if let Some(n) = count(usage, "output_tokens") {
            self.usage.output_tokens = n;
        }
        if let Some(n) = count(usage, "cache_read_input_tokens") {
            self.usage.cache_read_tokens = n;
        }
        if let Some(n) = count(usage, "cache_creation_input_tokens") {
            self.usage.cache_write_tokens = n;
        }
    }

    fn block(&mut self, index: u64) -> Result<&mut Block, ProviderError> {
        self.blocks
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
            .ok_or_else(|| {
                ProviderError::Corrupt(format!("a delta for block {index}, which never started"))
            })
    }

    fn start(&mut self, index: u64, block: &Value, out: &mut Vec<Delta>) {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let text = |key: &str| {
            block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let b = match kind {
            "text" => {
                let initial = text("text");
                if !initial.is_empty() {
                    self.text.push_str(&initial);
                    out.push(Delta::Text(initial));
                }
                Block::Text
            }
            "tool_use" => Block::Tool {
                id: text("id"),
                name: text("name"),
                json: String::new(),
                initial: block
                    .get("input")
                    .cloned()
                    .unwrap_or(Value::Object(Map::new())),
            },
            "thinking" => {
                let initial = text("thinking");
                if !initial.is_empty() {
                    out.push(Delta::Thinking {
                        content: initial.clone(),
                        is_complete: false,
                    });
                }
                Block::Thinking(Thinking {
                    content: initial,
                    ..Default::default()
                })
            }
            "redacted_thinking" => Block::Thinking(Thinking {
                redacted: Some(text("data")),
                ..Default::default()
            }),
            _ => Block::Other,
        };
        self.blocks.push((index, b));
    }

    fn delta(
        &mut self,
        index: u64,
        delta: &Value,
        out: &mut Vec<Delta>,
    ) -> Result<Frame, ProviderError> {
        let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
        let field = |key: &str| {
            delta
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let mut text_delta = None;
        let frame = match (self.block(index)?, kind) {
            (Block::Text, "text_delta") => {
                text_delta = Some(field("text"));
                Frame::Known
            }
            (Block::Tool { json, .. }, "input_json_delta") => {
                json.push_str(&field("partial_json"));
                Frame::Known
            }
            (Block::Thinking(t), "thinking_delta") => {
                let piece = field("thinking");
                t.content.push_str(&piece);
                if !piece.is_empty() {
                    out.push(Delta::Thinking {
                        content: piece,
                        is_complete: false,
                    });
                }
                Frame::Known
            }
            (Block::Thinking(t), "signature_delta") => {
                t.signature = Some(field("signature"));
                Frame::Known
            }
            _ => Frame::Unknown, // citations and deltas of unmodelled blocks
        };
        if let Some(text) = text_delta.filter(|t| !t.is_empty()) {
            self.text.push_str(&text);
            out.push(Delta::Text(text));
        }
        Ok(frame)
    }

    fn stop_block(&mut self, index: u64, out: &mut Vec<Delta>) -> Result<(), ProviderError> {
        let pos = self.blocks.iter().position(|(i, _)| *i == index);
        let Some(pos) = pos else {
            return Err(ProviderError::Corrupt(format!(
                "block {index} stopped but never started"
            )));
        };
        match self.blocks.remove(pos).1 {
            Block::Tool {
                id,
                name,
                json,
                initial,
            } => {
                let arguments = if json.trim().is_empty() {
                    initial
                } else {
                    serde_json::from_str(&json).unwrap_or(Value::String(json))
                };
                self.calls.push(ToolCall {
                    id,
                    name,
                    arguments,
                });
            }
            Block::Thinking(t) => {
                out.push(Delta::Thinking {
                    content: String::new(),
                    is_complete: true,
                });
                self.thinking.push(t);
            }
            Block::Text | Block::Other => {}
        }
        Ok(())
    }
}

impl Decoder for AnthropicDecoder {
    fn event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<Delta>,
    ) -> Result<DecodeStep, ProviderError> {
        let value: Value = serde_json::from_str(&event.data)
            .map_err(|e| ProviderError::Corrupt(format!("a stream event is not JSON ({e})")))?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("");
        let index = count(&value, "index").unwrap_or(0);
        let frame = match kind {
            "message_start" => {
                if let Some(usage) = value.get("message").and_then(|m| m.get("usage")) {
                    self.usage(usage);
                }
                Frame::Known
            }
            "content_block_start" => {
                let block = value.get("content_block").cloned().unwrap_or(Value::Null);
                self.start(index, &block, out);
                Frame::Known
            }
            "content_block_delta" => {
                let delta = value.get("delta").cloned().unwrap_or(Value::Null);
                self.delta(index, &delta, out)?
            }
            "content_block_stop" => {
                self.stop_block(index, out)?;
                Frame::Known
            }
            "message_delta" => {
                if let Some(reason) = value
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop = Some(stop_reason(reason));
                }
                if let Some(detail) = value
                    .get("delta")
                    .and_then(|d| d.get("stop_details"))
                    .and_then(|d| d.get("explanation"))
                    .and_then(Value::as_str)
                {
                    self.stop_detail = Some(detail.to_string());
                }
                if let Some(usage) = value.get("usage") {
                    self.usage(usage);
                }
                Frame::Known
            }
            "message_stop" => {
                self.done = true;
                return Ok(DecodeStep {
                    frame: Frame::Known,
                    terminal: true,
                });
            }
            "ping" => Frame::Known,
            "error" => {
                let error = value.get("error").cloned().unwrap_or(Value::Null);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error")
                    .to_string();
                let kind = error.get("type").and_then(Value::as_str).unwrap_or("");
                let retryable =
                    matches!(kind, "overloaded_error" | "api_error" | "rate_limit_error");
                return Err(ProviderError::Stream { message, retryable });
            }
            _ => Frame::Unknown,
        };
        Ok(DecodeStep {
            frame,
            terminal: false,
        })
    }

    fn finish(self: Box<Self>, _out: &mut Vec<Delta>) -> Result<ModelTurn, ProviderError> {
        if !self.done {
            return Err(ProviderError::Truncated);
        }
        let stop = self.stop.unwrap_or(if self.calls.is_empty() {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        });
        Ok(ModelTurn {
            text: self.text,
            thinking: self.thinking,
            tool_calls: self.calls,
            stop,
            stop_detail: self.stop_detail,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inline_text_file_is_read_as_text_and_other_files_are_not() {
        let file = |media: &str, data: &str| -> Attachment {
            serde_json::from_value(json!({"type": "file", "mediaType": media, "data": data}))
                .unwrap()
        };
        let text = file("text/plain", "aMOpbGxv");
        assert_eq!(attachment_text(&text).as_deref(), Some("héllo"));
        assert_eq!(attachment_text(&file("application/pdf", "aMOpbGxv")), None);
        assert_eq!(attachment_text(&file("text/plain", "not base64!")), None);
    }
}
