//! Running tool calls: one server call with its hooks and chunks, and the calls that
//! end without running (denied, expired, skipped). Results are messages the model sees;
//! a failed call's state writes are discarded.

use super::Runner;
use super::calls::{share, unshare};
use super::emit::Emitter;
use crate::agent::Agent;
use crate::chunk::{ChunkBody, Executor};
use crate::error::{Coded, ToolError};
use crate::host::LogValue;
use crate::message::{Message, ToolCall};
use crate::state::PatchOp;
use crate::store::Store;
use crate::tool::{Tool, ToolContext};
use futures::future::{Either, join_all, select};
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

/// A server call about to run: its index (in the step or the resumption), the call
/// with the arguments it runs with, and where its result is stored, if anywhere.
pub(crate) type Run<'a> = (usize, &'a ToolCall, Option<&'a str>);

impl<S: Store> Runner<S> {
    /// Runs server calls in parallel, all from `state` (the state before them: taken
    /// while they run, put back after), and returns their outcomes with their indexes.
    /// Every server call runs through here.
    pub(crate) async fn run_parallel(
        &self,
        agent: &Agent,
        runs: &[Run<'_>],
        state: &mut Value,
        emitter: &Emitter,
    ) -> Vec<(usize, CallOutcome)> {
        let base = share(state);
        let outcomes = join_all(runs.iter().filter_map(|&(i, call, output)| {
            let tool = agent.tool(&call.name)?;
            let base = base.clone();
            Some(async move {
                let outcome = self
                    .run_tool(agent, tool, call, output, base, emitter)
                    .await;
                (i, outcome)
            })
        }))
        .await;
        *state = unshare(base);
        outcomes
    }

    /// Runs one server call against `base` (the committed state its step started from),
    /// firing `before_tool` and streaming `tool_start`/`tool_end`; `call` has the
    /// arguments it runs with (references resolved) and `output` is where its result is
    /// stored, if anywhere. The hooks on its result fire later, in call order
    /// ([`result_hooks`]).
    pub(crate) async fn run_tool(
        &self,
        agent: &Agent,
        tool: &Tool,
        call: &ToolCall,
        output: Option<&str>,
        base: Rc<Value>,
        emitter: &Emitter,
    ) -> CallOutcome {
        if let Some(h) = agent.hooks() {
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
        let signal = self.abort.borrow().child();
        let ctx = ToolContext::new(
            emitter.session_id(),
            &call.id,
            self.host.now_ms(),
            base.clone(),
            Rc::new(move |event_name, data| {
                custom.chunk(ChunkBody::Custom { event_name, data });
            }),
            signal.clone(),
        );
        let started = self.host.now_ms();
        let limit = u64::try_from(agent.tool_timeout(tool).as_millis()).unwrap_or(u64::MAX);
        let run = tool.execute(call.arguments.clone(), ctx.clone());
        let result = match select(run, self.host.sleep(limit)).await {
            Either::Left((result, _)) => result,
            Either::Right(((), _)) => {
                // The call's future is dropped here; work it started elsewhere sees the signal.
                signal.abort();
                Err(ToolError::ExecutionTimedOut { ms: limit })
            }
        };
        let result = result
            .and_then(|value| tool.check_output(&value).map(|()| value))
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
        let mut writes = if result.is_ok() {
            ctx.take_writes()
        } else {
            Vec::new()
        };
        let outcome = match result {
            Ok(value) => {
                let (message, stored) = result_message(call, value.clone(), output, &base);
                writes.extend(stored);
                CallOutcome {
                    message,
                    writes,
                    value: Some(value),
                }
            }
            Err(err) => CallOutcome {
                message: Message::tool_error(call, err.code(), &err.to_string()),
                writes,
                value: None,
            },
        };
        tool_end(call, &outcome.message, emitter);
        outcome
    }

    /// Resolves a call that does not run (denied, unknown, expired, skipped…) as `error`.
    pub(crate) fn end_without_running(
        &self,
        call: &ToolCall,
        error: &ToolError,
        emitter: &Emitter,
    ) -> Message {
        self.end_with_error(call, error.code(), &error.to_string(), emitter)
    }

    /// Resolves a denied call. The model sees the denial and, when the user gave one,
    /// their reason (`{"error": "Tool call was not approved by the user", "code":
    /// "tool_denied", "reason": "not today"}`); the stream's `tool_end`, sent before the
    /// reason is added, carries the denial's text as for any error.
    pub(crate) fn end_denied(
        &self,
        call: &ToolCall,
        reason: Option<&str>,
        emitter: &Emitter,
    ) -> Message {
        let mut message = self.end_without_running(call, &ToolError::Denied, emitter);
        if let (Some(reason), Message::Tool { content, .. }) = (
            reason.map(str::trim).filter(|r| !r.is_empty()),
            &mut message,
        ) {
            content["reason"] = Value::from(reason);
        }
        message
    }

    /// Resolves a call as an error with `code` and `text`.
    pub(crate) fn end_with_error(
        &self,
        call: &ToolCall,
        code: &str,
        text: &str,
        emitter: &Emitter,
    ) -> Message {
        let message = Message::tool_error(call, code, text);
        tool_end(call, &message, emitter);
        message
    }

    /// Resolves a call with a result from elsewhere (a client, a sub-agent), stored at
    /// `output` in `state` when the call has an output path: the message and the write.
    pub(crate) fn end_with_result(
        &self,
        call: &ToolCall,
        result: Value,
        output: Option<&str>,
        state: &Value,
        emitter: &Emitter,
    ) -> (Message, Option<PatchOp>) {
        let result = match crate::message::bounded_result(result) {
            Ok(result) => result,
            Err(e) => return (self.end_without_running(call, &e, emitter), None),
        };
        let (message, stored) = result_message(call, result, output, state);
        tool_end(call, &message, emitter);
        (message, stored)
    }
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
    let Some(path) = output.filter(|_| cfg!(feature = "plans")) else {
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

/// Fires the hooks on a step's (or a resumption's) results in the model's call order,
/// whatever order the calls finished in: per call `on_state_change` (if it wrote),
/// `on_message` and `after_tool`; then `on_message` for any message after the results
/// (a nudge). `results` and `writes` are indexed like `calls`.
pub(crate) fn result_hooks(
    agent: &Agent,
    calls: &[ToolCall],
    results: &[Option<Message>],
    writes: &[Vec<PatchOp>],
) {
    let Some(h) = agent.hooks() else {
        return;
    };
    for (i, message) in results.iter().enumerate() {
        let Some(message) = message else {
            continue;
        };
        match calls.get(i) {
            Some(call) => {
                if let Some(w) = writes.get(i).filter(|w| !w.is_empty()) {
                    h.on_state_change(call, w);
                }
                h.on_message(message);
                h.after_tool(call, message);
            }
            None => h.on_message(message),
        }
    }
}

/// Streams `tool_end` for a call's result message.
fn tool_end(call: &ToolCall, message: &Message, emitter: &Emitter) {
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
