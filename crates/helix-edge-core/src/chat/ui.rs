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

use super::parts::{DataPart, NULL, Output, Part, Patches, RunError, Subagent, push};
use crate::error::ToolError;
use serde_json::Value;

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

    /// The SSE frames of the UI chunks for one stored event (`event` is `chunk`, `end`
    /// or `fail`; `data` its JSON); empty when it shows nothing.
    pub fn frames(&mut self, event: &str, data: &Value) -> String {
        let mut out = String::new();
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
                push(
                    &mut out,
                    &Part::Error {
                        error_text: message,
                    },
                );
                self.done = true;
            }
            _ => {}
        }
        out
    }

    fn chunk(&mut self, chunk: &Value, out: &mut String) {
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
                if self.text.is_none() {
                    let id = self.part_id("text");
                    push(out, &Part::TextStart { id: &id });
                    self.text = Some(id);
                }
                let id = self.text.as_deref().unwrap_or_default();
                push(
                    out,
                    &Part::TextDelta {
                        id,
                        delta: &chunk["delta"],
                    },
                );
            }
            "thinking" => {
                self.open_step(out);
                self.close_text(out);
                if self.reasoning.is_none() {
                    let id = self.part_id("reasoning");
                    push(out, &Part::ReasoningStart { id: &id });
                    self.reasoning = Some(id);
                }
                let id = self.reasoning.as_deref().unwrap_or_default();
                push(
                    out,
                    &Part::ReasoningDelta {
                        id,
                        delta: &chunk["content"],
                    },
                );
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
                let call = chunk["toolCallId"].as_str().unwrap_or_default();
                push(
                    out,
                    &Part::ToolApprovalRequest {
                        approval_id: call,
                        tool_call_id: call,
                    },
                );
            }
            "tool_end" => {
                self.open_step(out);
                self.close_parts(out);
                self.tool_input(chunk, out);
                let tool_call_id = chunk["toolCallId"].as_str().unwrap_or_default();
                let denied = ToolError::Denied.to_string();
                match (chunk["success"] == true, chunk["error"].as_str()) {
                    (true, _) => push(
                        out,
                        &Part::ToolOutputAvailable {
                            tool_call_id,
                            output: chunk.get("result").unwrap_or(&NULL),
                        },
                    ),
                    (false, Some(error)) if error == denied => {
                        push(out, &Part::ToolOutputDenied { tool_call_id })
                    }
                    (false, error) => push(
                        out,
                        &Part::ToolOutputError {
                            tool_call_id,
                            error_text: error.unwrap_or("Tool call failed"),
                        },
                    ),
                }
            }
            "state_patch" => {
                let mut part = DataPart::new(
                    "data-state-patch",
                    Patches {
                        patches: &chunk["patches"],
                    },
                );
                part.transient = true;
                push(out, &part);
            }
            "custom" => {
                let name = format!("data-{}", chunk["eventName"].as_str().unwrap_or("custom"));
                push(out, &DataPart::new(&name, &chunk["data"]));
            }
            "subagent_start" | "subagent_end" => {
                let ended = kind == "subagent_end";
                let mut part = DataPart::new(
                    "data-subagent",
                    Subagent {
                        tool_call_id: &chunk["toolCallId"],
                        status: if ended { "ended" } else { "running" },
                        result: chunk.get("result").filter(|_| ended),
                    },
                );
                part.id = Some(&chunk["subSessionId"]);
                push(out, &part);
            }
            "output" => push(
                out,
                &DataPart::new(
                    "data-output",
                    Output {
                        output: &chunk["output"],
                    },
                ),
            ),
            "error" => push(
                out,
                &DataPart::new(
                    "data-error",
                    RunError {
                        code: &chunk["code"],
                        message: &chunk["message"],
                        recoverable: &chunk["recoverable"],
                    },
                ),
            ),
            "step_committed" | "stream_resync" => {
                self.close_parts(out);
                if self.step_open {
                    push(out, &Part::FinishStep);
                    self.step_open = false;
                }
            }
            "run_suspended" if chunk["reason"] == "client_tool" => self.finish("tool-calls", out),
            "run_interrupted" => self.finish("other", out),
            _ => {}
        }
    }

    /// `start`, once per response.
    fn start(&mut self, out: &mut String) {
        if !self.started {
            self.started = true;
            push(
                out,
                &Part::Start {
                    message_id: &self.message_id,
                },
            );
        }
    }

    fn open_step(&mut self, out: &mut String) {
        if !self.step_open {
            self.step_open = true;
            push(out, &Part::StartStep);
        }
    }

    fn part_id(&mut self, kind: &str) -> String {
        self.parts += 1;
        format!("{}-{kind}-{}", self.message_id, self.parts)
    }

    fn tool_input(&mut self, chunk: &Value, out: &mut String) {
        let Some(tool_call_id) = chunk["toolCallId"].as_str() else {
            return;
        };
        if self.known_calls.iter().any(|c| c == tool_call_id) {
            return;
        }
        self.known_calls.push(tool_call_id.to_string());
        let tool_name = &chunk["toolName"];
        push(
            out,
            &Part::ToolInputStart {
                tool_call_id,
                tool_name,
            },
        );
        let input = match chunk.get("arguments") {
            Some(arguments) => arguments,
            None => &Value::Object(serde_json::Map::new()),
        };
        push(
            out,
            &Part::ToolInputAvailable {
                tool_call_id,
                tool_name,
                input,
            },
        );
    }

    fn close_text(&mut self, out: &mut String) {
        if let Some(id) = self.text.take() {
            push(out, &Part::TextEnd { id: &id });
        }
    }

    fn close_reasoning(&mut self, out: &mut String) {
        if let Some(id) = self.reasoning.take() {
            push(out, &Part::ReasoningEnd { id: &id });
        }
    }

    fn close_parts(&mut self, out: &mut String) {
        self.close_text(out);
        self.close_reasoning(out);
    }

    fn finish(&mut self, reason: &'static str, out: &mut String) {
        self.close_parts(out);
        if self.step_open {
            push(out, &Part::FinishStep);
            self.step_open = false;
        }
        push(
            out,
            &Part::Finish {
                finish_reason: reason,
            },
        );
        self.done = true;
    }
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

    /// The chunks of the frames `ui` makes of `events`.
    fn feed(ui: &mut UiStream, events: &[(&str, Value)]) -> Vec<Value> {
        let frames: String = events.iter().map(|(e, d)| ui.frames(e, d)).collect();
        frames
            .split("\n\n")
            .filter(|f| !f.is_empty())
            .map(|f| {
                let json = f.strip_prefix("data: ").expect("a data frame");
                serde_json::from_str(json).expect("JSON")
            })
            .collect()
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
