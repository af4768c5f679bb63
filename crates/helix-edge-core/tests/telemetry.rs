//! A run's spans (`telemetry`, the GenAI conventions): one trace across an approval, a
//! client tool and a restart; the run's span the parent of every slice and wait, each
//! slice the parent of its model calls, tool calls and commits; tokens as the model
//! reported them; prompts, arguments and results only with content capture on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::model::{ModelTurn, StopReason, Usage};
use helix_edge_core::runner::{Progress, Submission};
use helix_edge_core::store::SessionStatus;
use helix_edge_core::telemetry::{Attr, Span, SpanSink, Telemetry};
use helix_edge_core::trace::TraceContext;
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;
use support::*;

#[derive(Default)]
struct Spans(RefCell<Vec<Span>>);

impl SpanSink for Spans {
    fn record(&self, span: Span) {
        self.0.borrow_mut().push(span);
    }
}

impl Spans {
    fn named(&self, prefix: &str) -> Vec<Span> {
        let spans = self.0.borrow();
        spans
            .iter()
            .filter(|s| s.name.starts_with(prefix))
            .cloned()
            .collect()
    }
}

fn int(span: &Span, key: &str) -> i64 {
    match span.attr(key) {
        Some(Attr::Int(n)) => *n,
        other => panic!("{key} of {}: {other:?}", span.name),
    }
}

fn text<'a>(span: &'a Span, key: &str) -> &'a str {
    match span.attr(key) {
        Some(Attr::Str(s)) => s,
        other => panic!("{key} of {}: {other:?}", span.name),
    }
}

fn used(turn: ModelTurn, input: u64, output: u64) -> ModelTurn {
    ModelTurn {
        usage: Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        },
        ..turn
    }
}

/// A run of `assistant` through an approval, then a client call answered after a
/// restart (a second runner), traced into `spans`.
fn traced_run(spans: &Rc<Spans>, content: bool) -> World {
    let w = World::new();
    let observer = |w: &World| Rc::new(Telemetry::new(spans.clone(), w.host.clone(), content));
    let r1 = w.runner("p1").with_observer(observer(&w));
    let del = w
        .model
        .call("delete_file", json!({"path": "/secret-plans.txt"}));
    let ask = w.model.call("ask_user", json!({"question": "Sure?"}));
    let calls = |calls| ModelTurn {
        tool_calls: calls,
        stop: StopReason::ToolUse,
        ..ModelTurn::default()
    };
    w.model.turn(used(calls(vec![del.clone()]), 11, 3));
    w.model.turn(used(calls(vec![ask.clone()]), 21, 4));
    // The last answer names the model that gave it (a router's pick).
    let done = ModelTurn {
        text: "All done.".into(),
        model: Some("router-pick".into()),
        ..ModelTurn::default()
    };
    w.model.turn(used(done, 31, 5));
    w.create(&r1, "assistant", "Delete the plans, then ask me.");
    assert!(matches!(drive(&r1), Progress::Suspended { .. }));
    w.host.advance(1_000);
    approve(&r1, &del.id, true);
    assert!(matches!(drive(&r1), Progress::Suspended { .. }));
    w.host.advance(2_000);

    // The process restarts: a fresh runner, nothing but the store.
    let r2 = w.runner("p2").with_observer(observer(&w));
    let answer = Submission::ClientResult {
        tool_call_id: ask.id.clone(),
        outcome: Ok(json!("yes, the secret plans")),
    };
    block(r2.submit(SESSION, answer)).unwrap();
    assert_eq!(drive(&r2), Progress::Idle(SessionStatus::Completed));
    w
}

#[test]
fn a_run_is_one_trace_across_its_suspensions_and_a_restart() {
    let spans = Rc::new(Spans::default());
    let w = traced_run(&spans, false);
    let all = spans.0.borrow().clone();
    let head = w.session().head;
    let trace = head.run.trace.clone().unwrap();
    assert!(
        all.iter().all(|s| s.trace_id == trace.trace_id),
        "one trace"
    );

    let runs = spans.named("invoke_agent ");
    assert_eq!(runs.len(), 1, "the run's span, sent once it ended");
    let run = &runs[0];
    assert_eq!(run.span_id, trace.span_id);
    assert_eq!(run.parent_span_id, None, "no caller's trace to continue");
    assert_eq!(
        (
            text(run, "gen_ai.agent.name"),
            text(run, "helix.run.status")
        ),
        ("assistant", "completed")
    );
    assert_eq!(int(run, "gen_ai.usage.input_tokens"), 63);
    let by_model: Vec<_> = head
        .run
        .usage_by_model
        .iter()
        .map(|(m, u)| (m.as_str(), u.input_tokens, u.output_tokens))
        .collect();
    assert_eq!(
        by_model,
        [("router-pick", 31, 5), ("unknown", 32, 7)],
        "the model that answered, else the one asked for"
    );

    let slices = spans.named("agent_slice ");
    let causes: Vec<_> = slices
        .iter()
        .map(|s| text(s, "helix.slice.cause"))
        .collect();
    assert_eq!(causes, ["start", "resume", "resume"]);
    let outcomes: Vec<_> = slices
        .iter()
        .map(|s| text(s, "helix.slice.outcome"))
        .collect();
    assert_eq!(outcomes, ["suspended", "suspended", "completed"]);
    for slice in &slices {
        assert_eq!(
            slice.parent_span_id.as_deref(),
            Some(trace.span_id.as_str())
        );
        assert_eq!(slice.links, [trace.context()], "linked to the run");
    }
    let slice_ids: Vec<&str> = slices.iter().map(|s| s.span_id.as_str()).collect();
    for span in all.iter().filter(|s| {
        ["chat ", "execute_tool ", "commit"]
            .iter()
            .any(|p| s.name.starts_with(p))
    }) {
        let parent = span.parent_span_id.as_deref().unwrap();
        assert!(slice_ids.contains(&parent), "{} is in a slice", span.name);
        assert!(span.start_ms <= span.end_ms);
    }

    let chats = spans.named("chat ");
    let tokens: Vec<_> = chats
        .iter()
        .map(|c| {
            (
                int(c, "gen_ai.usage.input_tokens"),
                int(c, "gen_ai.usage.output_tokens"),
            )
        })
        .collect();
    assert_eq!(tokens, [(11, 3), (21, 4), (31, 5)], "as the model reported");
    assert_eq!(text(&chats[0], "gen_ai.operation.name"), "chat");
    assert!(
        chats
            .iter()
            .all(|c| c.attr("gen_ai.input.messages").is_none())
    );

    let tools = spans.named("execute_tool ");
    let answers: Vec<_> = tools
        .iter()
        .map(|t| (text(t, "gen_ai.tool.name"), text(t, "helix.tool.answer")))
        .collect();
    assert_eq!(
        answers,
        [("delete_file", "approved"), ("ask_user", "client")]
    );
    assert!(
        tools
            .iter()
            .all(|t| t.attr("gen_ai.tool.call.arguments").is_none())
    );

    let waits = spans.named("await_human");
    let waited: Vec<_> = waits.iter().map(|w| int(w, "helix.wait.ms")).collect();
    assert_eq!(
        waited,
        [1_000, 2_000],
        "from each suspension to its resumption"
    );
    assert!(
        waits
            .iter()
            .all(|w| w.parent_span_id.as_deref() == Some(trace.span_id.as_str()))
    );
    let text_of_all = serde_json::to_string(&all).unwrap();
    assert!(
        !text_of_all.contains("secret-plans"),
        "no content when it is off"
    );
}

#[test]
fn content_capture_records_prompts_arguments_and_results() {
    let spans = Rc::new(Spans::default());
    traced_run(&spans, true);
    let chats = spans.named("chat ");
    assert!(text(&chats[0], "gen_ai.input.messages").contains("Delete the plans"));
    let tools = spans.named("execute_tool ");
    assert!(text(&tools[0], "gen_ai.tool.call.arguments").contains("secret-plans"));
    assert!(text(&tools[1], "gen_ai.tool.call.result").contains("yes, the secret plans"));
}

#[test]
fn a_callers_traceparent_is_the_parent_of_the_run() {
    let spans = Rc::new(Spans::default());
    let w = World::new();
    let telemetry = Telemetry::new(spans.clone(), w.host.clone(), false);
    let r = w.runner("p1").with_observer(Rc::new(telemetry));
    let caller =
        TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
    w.model.text("Hi.");
    let request = helix_edge_core::runner::CreateSession {
        trace: Some(caller.clone()),
        ..create_request("assistant", "Hello")
    };
    block(r.create(request)).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let run = &spans.named("invoke_agent ")[0];
    assert_eq!(run.trace_id, caller.trace_id);
    assert_eq!(run.parent_span_id, Some(caller.span_id));
}

#[test]
fn an_aborted_run_and_one_left_interrupted_each_end_their_span() {
    let spans = Rc::new(Spans::default());
    let w = World::new();
    let telemetry = Telemetry::new(spans.clone(), w.host.clone(), false);
    let r = w.runner("p1").with_observer(Rc::new(telemetry));
    let del = w.model.call("delete_file", json!({"path": "/a"}));
    w.model.calls(vec![del]);
    w.create(&r, "assistant", "Delete /a.");
    assert!(matches!(drive(&r), Progress::Suspended { .. }));
    // Aborted while it waits: no drive sees it end, the abort ends its span.
    block(r.abort(SESSION, Some("changed my mind".into()))).unwrap();
    let runs = spans.named("invoke_agent ");
    assert_eq!(runs.len(), 1);
    assert_eq!(text(&runs[0], "helix.run.status"), "aborted");
    assert!(
        runs[0]
            .error
            .as_deref()
            .unwrap()
            .contains("changed my mind")
    );

    // A run interrupted at a step boundary ends its span when the next run starts.
    let spans = Rc::new(Spans::default());
    let w = World::new();
    let telemetry = Telemetry::new(spans.clone(), w.host.clone(), false);
    let r = w.runner("p1").with_observer(Rc::new(telemetry));
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "x"}))])
        .text("Next.");
    w.create(&r, "assistant", "Note x.");
    block(r.interrupt(SESSION, None)).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Interrupted));
    let first = w.session().head.run.run_id;
    assert!(spans.named("invoke_agent ").is_empty(), "it may go on");
    block(r.send_message(SESSION, "Something else.".into())).unwrap();
    let runs = spans.named("invoke_agent ");
    assert_eq!(runs.len(), 1, "the interrupted run ended as the next began");
    assert_eq!(text(&runs[0], "helix.run.id"), first);
    assert_eq!(text(&runs[0], "helix.run.status"), "interrupted");
}
