//! OpenTelemetry spans of runs, after the GenAI semantic conventions, built from what
//! the runner observes ([`Telemetry`] is an [`Observer`]) and handed to a
//! [`SpanSink`] (the platform's OTLP exporter):
//!
//! - `invoke_agent {agent}`: the run, from its start to its end, across every
//!   suspension and restart — its id is the one on the run's record
//!   ([`RunTrace`](crate::trace::RunTrace)); the caller's `traceparent` is its parent,
//!   and a sub-agent's run is a child of its parent's run. Sent when the run ends.
//! - `agent_slice {agent}`: each stretch of work on the run (a start, each resumption,
//!   a continuation), a child of the run's span, linked to it.
//! - `chat {model}`, `execute_tool {tool}` and `commit`, children of their slice; a
//!   tool call answered by a person or a client says how (`helix.tool.answer`) and who
//!   decided.
//! - `await_human` / `await_children`: each wait, from the suspension to the
//!   resumption, a child of the run's span.
//!
//! Prompts, arguments and results (`gen_ai.input.messages`, `gen_ai.tool.call.*`, …)
//! are only recorded when content capture is on.

mod kept;
mod span;

pub use kept::{Export, ExportCounts, KeptSpans, MAX_KEPT};
pub use span::{Attr, Span, SpanKind, SpanSink};

use crate::host::LogValue::Str;
use crate::host::{Host, Level};
use crate::message::Message;
use crate::runner::{ModelCall, Observer, ToolEnd, Waited};
use crate::store::SessionHead;
use crate::trace::RunTrace;
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;

/// The most bytes of one content attribute (longer ones are cut, marked `…`).
pub const MAX_CONTENT_BYTES: usize = 16 * 1024;

/// A slice of work on a run, open between `slice_started` and `slice_ended`.
struct Slice {
    session: String,
    agent: String,
    run_id: String,
    trace: RunTrace,
    span_id: String,
    start: u64,
    version: u64,
    cause: &'static str,
    /// Whether a span of it was recorded (a slice that did nothing is not sent).
    busy: bool,
    /// Whether its run had ended when it started.
    ended: bool,
}

/// Builds spans from what a runner observes.
pub struct Telemetry {
    sink: Rc<dyn SpanSink>,
    host: Rc<dyn Host>,
    content: bool,
    slices: RefCell<Vec<Slice>>,
}

impl Telemetry {
    /// Spans for `sink`, with ids from `host`; prompts, arguments and results are
    /// recorded only when `content` is on.
    pub fn new(sink: Rc<dyn SpanSink>, host: Rc<dyn Host>, content: bool) -> Self {
        Self {
            sink,
            host,
            content,
            slices: RefCell::new(Vec::new()),
        }
    }

    /// Records a span that belongs to `session`'s open slice (its parent); `build`
    /// fills it in. Nothing when no slice of the session is open.
    fn in_slice(&self, session: &str, build: impl FnOnce(&Slice, &mut Span)) {
        let mut slices = self.slices.borrow_mut();
        let Some(slice) = slices.iter_mut().find(|s| s.session == session) else {
            return;
        };
        slice.busy = true;
        let mut span = Span {
            trace_id: slice.trace.trace_id.clone(),
            span_id: self.host.random_hex(8),
            parent_span_id: Some(slice.span_id.clone()),
            name: String::new(),
            kind: SpanKind::Internal,
            start_ms: 0,
            end_ms: 0,
            attributes: vec![
                ("gen_ai.conversation.id", session.into()),
                ("helix.run.id", slice.run_id.as_str().into()),
            ],
            links: Vec::new(),
            error: None,
        };
        build(slice, &mut span);
        drop(slices);
        self.sink.record(span);
    }

    /// Writes out what was recorded (a slice's spans, together).
    fn flush(&self, session: &str) {
        if let Err(e) = self.sink.flush() {
            let fields = [("session", Str(session)), ("error", Str(&e))];
            self.host.log(Level::Warn, "spans_not_kept", &fields);
        }
    }

    /// `text`, cut to [`MAX_CONTENT_BYTES`].
    fn content(text: String) -> Attr {
        if text.len() <= MAX_CONTENT_BYTES {
            return Attr::Str(text);
        }
        let mut end = MAX_CONTENT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        Attr::Str(format!("{}…", &text[..end]))
    }

    /// The newest of `messages` that fit in [`MAX_CONTENT_BYTES`], as a JSON array in
    /// their order (each serialized once; the transcript's older part is left out).
    fn newest(messages: &[Message]) -> Attr {
        let mut kept: Vec<String> = Vec::new();
        let mut size = 2;
        for message in messages.iter().rev() {
            let json = serde_json::to_string(message).unwrap_or_default();
            if size + json.len() + 1 > MAX_CONTENT_BYTES && !kept.is_empty() {
                break;
            }
            size += json.len() + 1;
            kept.push(json);
        }
        kept.reverse();
        Self::content(format!("[{}]", kept.join(",")))
    }

    /// The run's own span, once it ended.
    fn run_span(&self, head: &SessionHead, trace: &RunTrace, now: u64) -> Span {
        let run = &head.run;
        let mut attributes = vec![
            ("gen_ai.operation.name", "invoke_agent".into()),
            ("gen_ai.agent.name", head.agent.as_str().into()),
            ("gen_ai.conversation.id", head.id.as_str().into()),
            ("helix.run.id", run.run_id.as_str().into()),
            ("helix.run.turn", u64::from(run.turn).into()),
            ("helix.run.status", run.status.as_str().into()),
            ("helix.run.steps", u64::from(run.step_count).into()),
            ("gen_ai.usage.input_tokens", run.usage.input_tokens.into()),
            ("gen_ai.usage.output_tokens", run.usage.output_tokens.into()),
        ];
        if let Some(parent) = &head.parent {
            attributes.push(("helix.parent.session", parent.session_id.as_str().into()));
        }
        Span {
            trace_id: trace.trace_id.clone(),
            span_id: trace.span_id.clone(),
            parent_span_id: trace.parent_span_id.clone(),
            name: format!("invoke_agent {}", head.agent),
            kind: SpanKind::Internal,
            start_ms: run.started_at,
            end_ms: run.completed_at.unwrap_or(now),
            attributes,
            links: Vec::new(),
            error: run
                .error
                .as_ref()
                .map(|e| format!("{}: {}", e.code, e.message)),
        }
    }
}

impl Observer for Telemetry {
    fn slice_started(&self, head: &SessionHead, now: u64) {
        let mut slices = self.slices.borrow_mut();
        slices.retain(|s| s.session != head.id);
        let Some(trace) = head.run.trace.clone() else {
            return; // a run recorded before traces
        };
        let cause = match () {
            _ if !head.pending.is_empty() => "resume",
            _ if head.run.step_count == 0 => "start",
            _ => "continue",
        };
        slices.push(Slice {
            session: head.id.clone(),
            agent: head.agent.clone(),
            run_id: head.run.run_id.clone(),
            trace,
            span_id: self.host.random_hex(8),
            start: now,
            version: head.version,
            cause,
            busy: false,
            ended: head.run.status.is_terminal(),
        });
    }

    fn slice_ended(&self, head: &SessionHead, now: u64) {
        let slice = {
            let mut slices = self.slices.borrow_mut();
            let Some(i) = slices.iter().position(|s| s.session == head.id) else {
                return;
            };
            slices.swap_remove(i)
        };
        if !slice.busy && slice.version == head.version {
            return; // nothing happened
        }
        let outcome = match () {
            _ if head.run.status.is_terminal() => head.run.status.as_str(),
            _ if !head.pending.is_empty() => "suspended",
            _ => "continues",
        };
        let mut attributes = vec![
            ("gen_ai.operation.name", "invoke_agent".into()),
            ("gen_ai.agent.name", slice.agent.as_str().into()),
            ("gen_ai.conversation.id", head.id.as_str().into()),
            ("helix.run.id", slice.run_id.as_str().into()),
            ("helix.slice.cause", slice.cause.into()),
            ("helix.slice.outcome", outcome.into()),
        ];
        if let (Some(reason), false) = (head.suspended_reason, head.pending.is_empty()) {
            attributes.push(("helix.suspend.reason", reason.as_str().into()));
        }
        let run = slice.trace.context();
        self.sink.record(Span {
            trace_id: slice.trace.trace_id.clone(),
            span_id: slice.span_id,
            parent_span_id: Some(run.span_id.clone()),
            name: format!("agent_slice {}", slice.agent),
            kind: SpanKind::Internal,
            start_ms: slice.start,
            end_ms: now,
            attributes,
            links: vec![run],
            error: None,
        });
        if !slice.ended && head.run.status.is_terminal() {
            self.sink.record(self.run_span(head, &slice.trace, now));
        }
        self.flush(&head.id);
    }

    fn run_started(&self, before: &SessionHead, after: &SessionHead, now: u64) {
        let open = self.slices.borrow().iter().any(|s| s.session == after.id);
        if open {
            self.slice_ended(before, now);
        }
        // A run that was interrupted, never to go on, ends as the next one starts.
        if let (Some(trace), false) = (&before.run.trace, before.run.status.is_terminal()) {
            self.sink.record(self.run_span(before, trace, now));
            self.flush(&before.id);
        }
        if open {
            self.slice_started(after, now);
        }
    }

    fn run_ended(&self, head: &SessionHead, now: u64) {
        if let Some(trace) = &head.run.trace {
            self.sink.record(self.run_span(head, trace, now));
            self.flush(&head.id);
        }
    }

    fn model_called(&self, session: &str, call: &ModelCall<'_>) {
        self.in_slice(session, |_, span| {
            let (started, first, ended) = call.times;
            span.name = format!("chat {}", call.name.model);
            span.kind = SpanKind::Client;
            (span.start_ms, span.end_ms) = (started, ended);
            let attrs = &mut span.attributes;
            attrs.extend([
                ("gen_ai.operation.name", "chat".into()),
                ("gen_ai.system", call.name.system.as_str().into()),
                ("gen_ai.request.model", call.name.model.as_str().into()),
                ("helix.step", u64::from(call.step).into()),
            ]);
            if let Some(first) = first {
                let ttft = first.saturating_sub(started);
                attrs.push(("helix.time_to_first_token_ms", ttft.into()));
            }
            if self.content {
                let (system, messages) = call.prompt;
                attrs.push(("gen_ai.system_instructions", Self::content(system.into())));
                attrs.push(("gen_ai.input.messages", Self::newest(messages)));
            }
            match call.outcome {
                Ok(turn) => {
                    let model = turn.model.as_deref().unwrap_or(&call.name.model);
                    let reasons = vec![turn.stop.as_str().to_string()];
                    attrs.extend([
                        ("gen_ai.response.model", model.into()),
                        ("gen_ai.response.finish_reasons", Attr::Strs(reasons)),
                        ("gen_ai.usage.input_tokens", turn.usage.input_tokens.into()),
                        (
                            "gen_ai.usage.output_tokens",
                            turn.usage.output_tokens.into(),
                        ),
                    ]);
                    let cached = turn.usage.cache_read_tokens;
                    if cached > 0 {
                        attrs.push(("gen_ai.usage.cache_read.input_tokens", cached.into()));
                    }
                    if self.content {
                        let output = json!([{ "role": "assistant", "content": turn.text,
                            "toolCalls": turn.tool_calls }]);
                        attrs.push(("gen_ai.output.messages", Self::content(output.to_string())));
                    }
                }
                Err(e) => {
                    attrs.push(("error.type", crate::error::Coded::code(e).into()));
                    span.error = Some(e.to_string());
                }
            }
        });
    }

    fn tool_ended(&self, session: &str, end: &ToolEnd<'_>) {
        self.in_slice(session, |_, span| {
            span.name = format!("execute_tool {}", end.call.name);
            (span.start_ms, span.end_ms) = end.times;
            let attrs = &mut span.attributes;
            attrs.extend([
                ("gen_ai.operation.name", "execute_tool".into()),
                ("gen_ai.tool.name", end.call.name.as_str().into()),
                ("gen_ai.tool.call.id", end.call.id.as_str().into()),
                ("helix.step", u64::from(end.step).into()),
                ("helix.tool.answer", end.answer.into()),
            ]);
            if let Some(who) = end.decided_by {
                attrs.push(("helix.tool.decided_by", who.subject.as_str().into()));
            }
            if self.content {
                let arguments = end.call.arguments.to_string();
                attrs.push(("gen_ai.tool.call.arguments", Self::content(arguments)));
            }
            if let Message::Tool {
                content, is_error, ..
            } = end.result
            {
                if self.content {
                    let result = content.to_string();
                    attrs.push(("gen_ai.tool.call.result", Self::content(result)));
                }
                if *is_error {
                    let code = content.get("code").and_then(|c| c.as_str());
                    attrs.push(("error.type", code.unwrap_or("tool_error").into()));
                    let message = content.get("error").and_then(|e| e.as_str());
                    span.error = Some(message.unwrap_or("the call failed").into());
                }
            }
        });
    }

    fn waited(&self, session: &str, wait: &Waited<'_>, now: u64) {
        self.in_slice(session, |slice, span| {
            span.name = match wait.reason {
                "awaiting_children" => "await_children".into(),
                _ => "await_human".into(),
            };
            span.parent_span_id = Some(slice.trace.span_id.clone());
            (span.start_ms, span.end_ms) = (wait.since, now);
            let ids: Vec<String> = wait.calls.iter().map(|c| c.tool_call_id.clone()).collect();
            span.attributes.extend([
                ("helix.wait.reason", wait.reason.into()),
                ("helix.wait.calls", Attr::Strs(ids)),
                ("helix.wait.ms", now.saturating_sub(wait.since).into()),
            ]);
        });
    }

    fn committed(&self, session: &str, step: u32, from: u64, to: u64) {
        self.in_slice(session, |_, span| {
            span.name = "commit".into();
            (span.start_ms, span.end_ms) = (from, to);
            span.attributes.push(("helix.step", u64::from(step).into()));
        });
    }
}
