//! The Messages request body: system prompt, content blocks (attachments as image,
//! document or text blocks), `tool_use`/`tool_result`, thinking blocks sent back with
//! their signatures, prompt-cache marks, tool choice and the thinking budget.

use super::DEFAULT_MAX_TOKENS;
use crate::attachment::{Attachment, AttachmentKind};
use crate::message::Message;
use crate::model::{CacheTtl, ModelRequest, ToolChoice};
use crate::provider::strict::strict_schema;
use crate::provider_options::pass_through;
use serde_json::{Value, json};

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
                // Thinking goes back as Anthropic signed or redacted it; another provider's
                // (unsigned) reasoning is not Anthropic's to read.
                let mut blocks: Vec<Value> = thinking
                    .iter()
                    .filter_map(|t| match (&t.redacted, &t.signature) {
                        (Some(data), _) => Some(json!({ "type": "redacted_thinking", "data": data })),
                        (None, Some(signature)) => Some(
                            json!({ "type": "thinking", "thinking": t.content, "signature": signature }),
                        ),
                        (None, None) => None,
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
                attachments,
                ..
            } => {
                // Files a tool gave go in its result, after the text.
                let content = match attachments.is_empty() {
                    true => json!(text_of(content)),
                    false => std::iter::once(json!({ "type": "text", "text": text_of(content) }))
                        .chain(attachments.iter().map(content_block))
                        .collect(),
                };
                let mut block = json!({ "type": "tool_result", "tool_use_id": tool_call_id, "content": content });
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
    pass_through(&mut body, &request.settings.anthropic_fields);
    body
}

/// The smallest thinking budget Anthropic accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

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
