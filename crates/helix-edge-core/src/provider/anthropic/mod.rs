//! Anthropic Messages: the streaming request body ([`request`]: system prompt, content
//! blocks, `tool_use`/`tool_result`, thinking blocks sent back with their signatures),
//! and a decoder that assembles a [`ModelTurn`] from the event stream (`message_start`,
//! `content_block_*`, `message_delta`, `message_stop`, `ping`, `error`).
//!
//! The stream is complete only after `message_stop`; anything less is *truncated*.

mod request;

use super::{DecodeStep, Decoder, Frame, Protocol, ProviderConfig, ProviderKind};
use crate::error::ProviderError;
use crate::message::{Thinking, ToolCall};
use crate::model::{CacheTtl, Delta, ModelRequest, ModelTurn, StopReason, Usage};
use crate::provider::sse::SseEvent;
pub use request::{CACHE_TTL_BETA, request_body};
use serde_json::{Map, Value};

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
    ) -> (&'static str, String) {
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
        ("/messages", request_body(model, request).to_string())
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        Box::new(AnthropicDecoder::new())
    }
}

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
    /// The model `message_start` names.
    model: Option<String>,
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
                let message = value.get("message");
                if let Some(usage) = message.and_then(|m| m.get("usage")) {
                    self.usage(usage);
                }
                let model = message.and_then(|m| m.get("model")).and_then(Value::as_str);
                self.model = model.map(String::from);
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
            model: self.model,
        })
    }
}
