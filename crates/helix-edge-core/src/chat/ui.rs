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
    /// The queued run the response waits for (its message waits while another runs).
    awaited: Option<String>,
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
            awaited: None,
        }
    }

    /// A response for a message queued behind a busy run (`whenBusy`): it shows
    /// nothing of the runs before `run_id`'s, begins when that one starts, and ends
    /// with a `data-error` if the message is dropped instead (an `error` chunk
    /// `queued_message_dropped` naming the run). Each event goes to
    /// [`pass_over`](Self::pass_over) first.
    pub fn awaiting(mut self, run_id: &str) -> Self {
        self.awaited = Some(run_id.to_string());
        self
    }

    /// Whether the response still waits for its queued run to start.
    pub fn is_awaiting(&self) -> bool {
        self.awaited.is_some() && !self.done
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

    /// While the awaited run has not started: `Some` with the frames for `event`, one the
    /// response passes over (none, or those that end it when the message was dropped);
    /// `None` once the run started, or when it awaits nothing: [`frames`](Self::frames)
    /// shows the event.
    pub fn pass_over(&mut self, event: &str, data: &Value) -> Option<String> {
        let awaited = self.awaited.as_deref()?;
        let mut out = String::new();
        let ours = event == "chunk" && data["sessionId"].as_str() == Some(&self.session_id);
        if ours && data["type"] == "run_started" && data["runId"] == awaited {
            self.awaited = None;
            return None;
        }
        let dropped = ours
            && data["code"] == "queued_message_dropped"
            && data["message"]
                .as_str()
                .is_some_and(|m| m.contains(awaited));
        if dropped {
            self.awaited = None;
            self.start(&mut out);
            self.chunk(data, &mut out);
            self.finish("error", &mut out);
        }
        Some(out)
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
#[path = "ui_tests.rs"]
mod tests;
