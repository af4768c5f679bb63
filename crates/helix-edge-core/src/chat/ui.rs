//! A session's stream as the AI SDK's UI message stream (v1): each stored event in, the
//! UI message chunks it becomes out, until the run ends or suspends for a human.
//!
//! It reads the events' JSON as stored (the stream log's text), so the worker carries no
//! chunk deserializer. Only chunk types and fields every AI SDK 6 and 7 client accepts
//! are written: an unknown type breaks a client's whole stream.
//!
//! | session chunk | UI chunks |
//! |---|---|
//! | `run_started`, `run_resumed` | `start` (the assistant message's id), then `start-step` before the next content |
//! | `text_delta` | `text-start` once, `text-delta` |
//! | `thinking` | `reasoning-start` once, `reasoning-delta`, `reasoning-end` when complete |
//! | `tool_start` | `tool-input-start`, `tool-input-available` (a call the client already has: nothing) |
//! | `tool_approval_request` | the call's input if new, `tool-approval-request` (approval id = call id) |
//! | `tool_end` | `tool-output-available`, `tool-output-denied` for a denial, `tool-output-error` |
//! | `state_patch` | `data-state-patch` `{patches}`, transient |
//! | `custom` | `data-{eventName}` with the payload |
//! | `subagent_start`, `subagent_end` | `data-subagent` `{toolCallId, status, result?}`, one part per child |
//! | `output` | `data-output` `{output}` |
//! | `error` | `data-error` `{code, message, recoverable}` |
//! | `step_committed` | `finish-step` |
//! | `run_suspended` (a client tool, an approval) | `finish` (`tool-calls`): the answer ends |
//! | `run_interrupted` | `finish` (`other`): the answer ends |
//! | `end` | `finish` (`stop`) |
//! | `fail` | `error` `{errorText}` |
//! | `stream_resync` | `finish-step`: what a torn step streamed stays shown |
//!
//! A child session's own chunks (relayed to the parent's stream) are not part of the
//! parent's message: only `subagent_*` show them.

use crate::error::ToolError;
use serde_json::{Value, json};

/// Turns one response's worth of a session's stream into UI message chunks.
#[derive(Debug)]
pub struct UiStream {
    session_id: String,
    message_id: String,
    started: bool,
    step_open: bool,
    text: Option<String>,
    reasoning: Option<String>,
    parts: u32,
    known_calls: Vec<String>,
    done: bool,
}

impl UiStream {
    /// A response about session `session_id` building (or continuing) assistant message
    /// `message_id`; `known_calls` are the calls whose parts the client already has.
    pub fn new(session_id: &str, message_id: &str, known_calls: Vec<String>) -> Self {
        Self {
            session_id: session_id.to_string(),
            message_id: message_id.to_string(),
            started: false,
            step_open: false,
            text: None,
            reasoning: None,
            parts: 0,
            known_calls,
            done: false,
        }
    }

    /// Whether the response is complete (the run ended or waits for a human).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The UI chunks for one stored event (`event` is `chunk`, `end` or `fail`; `data`
    /// its JSON).
    pub fn event(&mut self, event: &str, data: &Value) -> Vec<Value> {
        let mut out = Vec::new();
        if self.done {
            return out;
        }
        match event {
            "chunk" => self.chunk(data, &mut out),
            "end" => {
                self.start(&mut out);
                self.finish("stop", &mut out);
            }
            "fail" => {
                self.start(&mut out);
                self.close_parts(&mut out);
                let message = data["error"]["message"]
                    .as_str()
                    .unwrap_or("The run failed.");
                out.push(json!({ "type": "error", "errorText": message }));
                self.done = true;
            }
            _ => {}
        }
        out
    }

    fn chunk(&mut self, chunk: &Value, out: &mut Vec<Value>) {
        if chunk["sessionId"].as_str() != Some(self.session_id.as_str()) {
            return;
        }
        let kind = chunk["type"].as_str().unwrap_or_default();
        if !self.started && !matches!(kind, "run_started" | "run_resumed") {
            // Before this response's run began (a replay starting mid-way) nothing shows.
            return;
        }
        match kind {
            "run_started" | "run_resumed" => self.start(out),
            "text_delta" => {
                self.open_step(out);
                self.close_reasoning(out);
                let id = match &self.text {
                    Some(id) => id.clone(),
                    None => {
                        let id = self.part_id("text");
                        out.push(json!({ "type": "text-start", "id": id }));
                        self.text = Some(id.clone());
                        id
                    }
                };
                out.push(json!({ "type": "text-delta", "id": id, "delta": chunk["delta"] }));
            }
            "thinking" => {
                self.open_step(out);
                self.close_text(out);
                let id = match &self.reasoning {
                    Some(id) => id.clone(),
                    None => {
                        let id = self.part_id("reasoning");
                        out.push(json!({ "type": "reasoning-start", "id": id }));
                        self.reasoning = Some(id.clone());
                        id
                    }
                };
                out.push(json!({ "type": "reasoning-delta", "id": id, "delta": chunk["content"] }));
                if chunk["isComplete"] == true {
                    self.close_reasoning(out);
                }
            }
            "tool_start" => {
                self.open_step(out);
                self.close_parts(out);
                self.tool_input(chunk, out);
            }
            "tool_approval_request" => {
                self.open_step(out);
                self.close_parts(out);
                self.tool_input(chunk, out);
                out.push(json!({
                    "type": "tool-approval-request",
                    "approvalId": chunk["toolCallId"],
                    "toolCallId": chunk["toolCallId"],
                }));
            }
            "tool_end" => {
                self.open_step(out);
                self.close_parts(out);
                self.tool_input(chunk, out);
                let call = &chunk["toolCallId"];
                let denied = ToolError::Denied.to_string();
                out.push(match (chunk["success"] == true, chunk["error"].as_str()) {
                    (true, _) => json!({
                        "type": "tool-output-available",
                        "toolCallId": call,
                        "output": chunk.get("result").cloned().unwrap_or(Value::Null),
                    }),
                    (false, Some(error)) if error == denied => {
                        json!({ "type": "tool-output-denied", "toolCallId": call })
                    }
                    (false, error) => json!({
                        "type": "tool-output-error",
                        "toolCallId": call,
                        "errorText": error.unwrap_or("Tool call failed"),
                    }),
                });
            }
            "state_patch" => out.push(json!({
                "type": "data-state-patch",
                "data": { "patches": chunk["patches"] },
                "transient": true,
            })),
            "custom" => {
                let name = chunk["eventName"].as_str().unwrap_or("custom");
                out.push(json!({ "type": format!("data-{name}"), "data": chunk["data"] }));
            }
            "subagent_start" | "subagent_end" => {
                let ended = kind == "subagent_end";
                let mut data = json!({
                    "toolCallId": chunk["toolCallId"],
                    "status": if ended { "ended" } else { "running" },
                });
                if let Some(result) = chunk.get("result").filter(|_| ended) {
                    data["result"] = result.clone();
                }
                out.push(json!({ "type": "data-subagent", "id": chunk["subSessionId"], "data": data }));
            }
            "output" => out.push(json!({ "type": "data-output", "data": { "output": chunk["output"] } })),
            "error" => out.push(json!({
                "type": "data-error",
                "data": { "code": chunk["code"], "message": chunk["message"], "recoverable": chunk["recoverable"] },
            })),
            "step_committed" | "stream_resync" => {
                self.close_parts(out);
                if self.step_open {
                    out.push(json!({ "type": "finish-step" }));
                    self.step_open = false;
                }
            }
            "run_suspended" if chunk["reason"] == "client_tool" => self.finish("tool-calls", out),
            "run_interrupted" => self.finish("other", out),
            _ => {}
        }
    }

    /// `start`, once per response.
    fn start(&mut self, out: &mut Vec<Value>) {
        if !self.started {
            self.started = true;
            out.push(json!({ "type": "start", "messageId": self.message_id }));
        }
    }

    fn open_step(&mut self, out: &mut Vec<Value>) {
        if !self.step_open {
            self.step_open = true;
            out.push(json!({ "type": "start-step" }));
        }
    }

    fn part_id(&mut self, kind: &str) -> String {
        self.parts += 1;
        format!("{}-{kind}-{}", self.message_id, self.parts)
    }

    fn tool_input(&mut self, chunk: &Value, out: &mut Vec<Value>) {
        let Some(call) = chunk["toolCallId"].as_str() else {
            return;
        };
        if self.known_calls.iter().any(|c| c == call) {
            return;
        }
        self.known_calls.push(call.to_string());
        let name = &chunk["toolName"];
        out.push(json!({ "type": "tool-input-start", "toolCallId": call, "toolName": name }));
        out.push(json!({
            "type": "tool-input-available",
            "toolCallId": call,
            "toolName": name,
            "input": chunk.get("arguments").cloned().unwrap_or_else(|| json!({})),
        }));
    }

    fn close_text(&mut self, out: &mut Vec<Value>) {
        if let Some(id) = self.text.take() {
            out.push(json!({ "type": "text-end", "id": id }));
        }
    }

    fn close_reasoning(&mut self, out: &mut Vec<Value>) {
        if let Some(id) = self.reasoning.take() {
            out.push(json!({ "type": "reasoning-end", "id": id }));
        }
    }

    fn close_parts(&mut self, out: &mut Vec<Value>) {
        self.close_text(out);
        self.close_reasoning(out);
    }

    fn finish(&mut self, reason: &str, out: &mut Vec<Value>) {
        self.close_parts(out);
        if self.step_open {
            out.push(json!({ "type": "finish-step" }));
            self.step_open = false;
        }
        out.push(json!({ "type": "finish", "finishReason": reason }));
        self.done = true;
    }
}

/// One UI chunk as an SSE frame.
pub fn ui_frame(chunk: &Value) -> String {
    format!("data: {chunk}\n\n")
}

/// The frame that ends a UI message stream.
pub const UI_DONE: &str = "data: [DONE]\n\n";

#[cfg(test)]
mod tests {
    use super::UiStream;
    use serde_json::{Value, json};

    fn chunk(body: Value) -> Value {
        let mut chunk = json!({ "sessionId": "s", "agentType": "a", "runId": "r", "timestamp": 1 });
        chunk
            .as_object_mut()
            .expect("object")
            .extend(body.as_object().expect("object").clone());
        chunk
    }

    fn types(out: &[Value]) -> Vec<String> {
        out.iter()
            .map(|c| c["type"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    fn feed(ui: &mut UiStream, events: &[(&str, Value)]) -> Vec<Value> {
        events.iter().flat_map(|(e, d)| ui.event(e, d)).collect()
    }

    #[test]
    fn a_turn_up_to_an_approval_then_its_continuation() {
        let mut ui = UiStream::new("s", "m1", Vec::new());
        let out = feed(
            &mut ui,
            &[
                ("chunk", chunk(json!({"type": "run_started", "turn": 1}))),
                (
                    "chunk",
                    chunk(json!({"type": "thinking", "content": "hm", "isComplete": true})),
                ),
                (
                    "chunk",
                    chunk(json!({"type": "text_delta", "delta": "I will "})),
                ),
                (
                    "chunk",
                    chunk(json!({"type": "text_delta", "delta": "delete it."})),
                ),
                (
                    "chunk",
                    chunk(
                        json!({"type": "tool_approval_request", "toolCallId": "c1", "toolName": "delete_file", "arguments": {"path": "/x"}}),
                    ),
                ),
                (
                    "chunk",
                    chunk(json!({"type": "state_patch", "patches": []})),
                ),
                (
                    "chunk",
                    chunk(json!({"type": "step_committed", "checkpointId": "k1"})),
                ),
                (
                    "chunk",
                    chunk(
                        json!({"type": "run_suspended", "reason": "client_tool", "toolCallIds": ["c1"]}),
                    ),
                ),
                (
                    "chunk",
                    chunk(json!({"type": "text_delta", "delta": "never sent"})),
                ),
            ],
        );
        assert_eq!(
            types(&out),
            [
                "start",
                "start-step",
                "reasoning-start",
                "reasoning-delta",
                "reasoning-end",
                "text-start",
                "text-delta",
                "text-delta",
                "text-end",
                "tool-input-start",
                "tool-input-available",
                "tool-approval-request",
                "data-state-patch",
                "finish-step",
                "finish",
            ]
        );
        assert_eq!(out[0]["messageId"], "m1");
        assert_eq!(out[10]["input"], json!({"path": "/x"}));
        assert_eq!(out[11]["approvalId"], "c1");
        assert_eq!(out[14]["finishReason"], "tool-calls");
        assert!(ui.is_done());

        // The next response continues m1; the client has c1's part already.
        let mut ui = UiStream::new("s", "m1", vec!["c1".into()]);
        let out = feed(
            &mut ui,
            &[
                ("chunk", chunk(json!({"type": "run_resumed", "turn": 1}))),
                (
                    "chunk",
                    chunk(
                        json!({"type": "tool_start", "toolCallId": "c1", "toolName": "delete_file", "arguments": {}, "executor": "server"}),
                    ),
                ),
                (
                    "chunk",
                    chunk(
                        json!({"type": "tool_end", "toolCallId": "c1", "toolName": "delete_file", "success": true, "result": {"deleted": "/x"}}),
                    ),
                ),
                (
                    "chunk",
                    chunk(
                        json!({"type": "tool_start", "sessionId": "child", "toolCallId": "x", "toolName": "t", "arguments": {}, "executor": "server"}),
                    ),
                ),
                (
                    "chunk",
                    chunk(json!({"type": "text_delta", "delta": "Done."})),
                ),
                ("end", json!({})),
            ],
        );
        assert_eq!(
            types(&out),
            [
                "start",
                "start-step",
                "tool-output-available",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step",
                "finish",
            ]
        );
        assert_eq!(out[2]["output"], json!({"deleted": "/x"}));
        assert_eq!(out[7]["finishReason"], "stop");
    }

    #[test]
    fn denials_errors_and_failures_have_their_own_parts() {
        let mut ui = UiStream::new("s", "m", vec!["c1".into()]);
        let denied = crate::error::ToolError::Denied.to_string();
        let out = feed(
            &mut ui,
            &[
                ("chunk", chunk(json!({"type": "run_resumed", "turn": 1}))),
                (
                    "chunk",
                    chunk(
                        json!({"type": "tool_end", "toolCallId": "c1", "toolName": "t", "success": false, "error": denied}),
                    ),
                ),
                (
                    "chunk",
                    chunk(
                        json!({"type": "tool_end", "toolCallId": "c2", "toolName": "t", "success": false, "error": "boom"}),
                    ),
                ),
                (
                    "chunk",
                    chunk(json!({"type": "custom", "eventName": "progress", "data": {"pct": 50}})),
                ),
                (
                    "chunk",
                    chunk(
                        json!({"type": "subagent_end", "subSessionId": "k", "toolCallId": "c3", "result": {"summary": "s"}}),
                    ),
                ),
                (
                    "fail",
                    json!({"error": {"code": "x", "message": "It broke."}}),
                ),
            ],
        );
        assert_eq!(
            types(&out),
            [
                "start",
                "start-step",
                "tool-output-denied",
                "tool-input-start",
                "tool-input-available",
                "tool-output-error",
                "data-progress",
                "data-subagent",
                "error",
            ]
        );
        assert_eq!(out[5]["errorText"], "boom");
        assert_eq!(
            out[7]["data"],
            json!({"toolCallId": "c3", "status": "ended", "result": {"summary": "s"}})
        );
        assert_eq!(out[8]["errorText"], "It broke.");
        assert!(ui.is_done());
    }

    #[test]
    fn nothing_shows_before_the_run_begins_and_a_suspension_on_children_goes_on() {
        let mut ui = UiStream::new("s", "m", Vec::new());
        let out = feed(
            &mut ui,
            &[
                (
                    "chunk",
                    chunk(json!({"type": "text_delta", "delta": "an earlier run"})),
                ),
                ("chunk", chunk(json!({"type": "run_started", "turn": 2}))),
                (
                    "chunk",
                    chunk(
                        json!({"type": "run_suspended", "reason": "awaiting_children", "toolCallIds": ["c"]}),
                    ),
                ),
            ],
        );
        assert_eq!(types(&out), ["start"]);
        assert!(!ui.is_done());
    }
}
