//! Running tool calls: one server call with its hooks and chunks, and the calls that
//! end without running (denied, expired, skipped). Results are messages the model sees;
//! a failed call's state writes are discarded.

use super::Runner;
use super::emit::Emitter;
use crate::agent::Agent;
use crate::chunk::{ChunkBody, Executor};
use crate::error::{Coded, ToolError};
use crate::host::LogValue;
use crate::message::{Message, ToolCall};
use crate::state::PatchOp;
use crate::store::Store;
use crate::tool::{Tool, ToolContext};
use serde_json::Value;
use std::rc::Rc;

/// What one call produced.
pub(crate) struct CallOutcome {
    /// The tool message for the transcript.
    pub message: Message,
    /// Its state writes (empty when it failed).
    pub writes: Vec<PatchOp>,
    /// Its result, when it succeeded.
    pub value: Option<Value>,
}

impl<S: Store> Runner<S> {
    /// Runs one server call against `base` (the committed state its step started from),
    /// firing hooks in the canonical order and streaming `tool_start`/`tool_end`.
    pub(crate) async fn run_tool(
        &self,
        agent: &Agent,
        tool: &Tool,
        call: &ToolCall,
        base: Rc<Value>,
        emitter: &Emitter,
    ) -> CallOutcome {
        let hooks = agent.hooks();
        if let Some(h) = hooks {
            h.before_tool(call);
        }
        emitter.chunk(ChunkBody::ToolStart {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
            executor: Executor::Server,
            deadline: None,
        });
        let custom = emitter.clone();
        let ctx = ToolContext::new(
            emitter.session_id(),
            &call.id,
            self.host.now_ms(),
            base,
            Rc::new(move |event_name, data| {
                custom.chunk(ChunkBody::Custom { event_name, data });
            }),
            self.abort.borrow().clone(),
        );
        let started = self.host.now_ms();
        let result = tool
            .execute(call.arguments.clone(), ctx.clone())
            .await
            .and_then(crate::message::bounded_result);
        let ms = self.host.now_ms().saturating_sub(started);
        let code = result
            .as_ref()
            .err()
            .map_or(LogValue::Null, |e| LogValue::Str(e.code()));
        self.host.log(
            crate::host::Level::Debug,
            "tool_executed",
            &[
                ("session", LogValue::Str(emitter.session_id())),
                ("run", LogValue::Str(emitter.run_id())),
                ("tool", LogValue::Str(&call.name)),
                ("ms", LogValue::Num(ms)),
                ("success", LogValue::Bool(result.is_ok())),
                ("code", code),
            ],
        );
        let writes = if result.is_ok() {
            ctx.take_writes()
        } else {
            Vec::new()
        };
        if let Some(h) = hooks
            && !writes.is_empty()
        {
            h.on_state_change(call, &writes);
        }
        let outcome = match result {
            Ok(value) => CallOutcome {
                message: Message::tool_result(call, value.clone()),
                writes,
                value: Some(value),
            },
            Err(err) => CallOutcome {
                message: Message::tool_error(call, err.code(), &err.to_string()),
                writes,
                value: None,
            },
        };
        self.finish_call(agent, call, &outcome.message, emitter);
        outcome
    }

    /// Resolves a call that does not run (denied, unknown, expired, skipped…) as `error`.
    pub(crate) fn end_without_running(
        &self,
        agent: &Agent,
        call: &ToolCall,
        error: &ToolError,
        emitter: &Emitter,
    ) -> Message {
        self.end_with_error(agent, call, error.code(), &error.to_string(), emitter)
    }

    /// Resolves a call as an error with `code` and `text`.
    pub(crate) fn end_with_error(
        &self,
        agent: &Agent,
        call: &ToolCall,
        code: &str,
        text: &str,
        emitter: &Emitter,
    ) -> Message {
        let message = Message::tool_error(call, code, text);
        self.finish_call(agent, call, &message, emitter);
        message
    }

    /// Resolves a call with a result from elsewhere (a client, a sub-agent).
    pub(crate) fn end_with_result(
        &self,
        agent: &Agent,
        call: &ToolCall,
        result: Value,
        emitter: &Emitter,
    ) -> Message {
        let result = match crate::message::bounded_result(result) {
            Ok(result) => result,
            Err(e) => return self.end_without_running(agent, call, &e, emitter),
        };
        let message = Message::tool_result(call, result);
        self.finish_call(agent, call, &message, emitter);
        message
    }

    fn finish_call(&self, agent: &Agent, call: &ToolCall, message: &Message, emitter: &Emitter) {
        if let Some(h) = agent.hooks() {
            h.on_message(message);
            h.after_tool(call, message);
        }
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
        });
    }
}
