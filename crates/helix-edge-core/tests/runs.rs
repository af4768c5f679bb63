//! End-to-end runs of the pure core on the in-memory store: text answers, tool loops,
//! parallel tools, structured output, interrupts, aborts and limits, and the stream they
//! produce. Human-in-the-loop runs are in `hitl.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::chunk::{ChunkBody, RunStatus, StreamEvent};
use helix_edge_core::message::Message;
use helix_edge_core::runner::{Progress, RunError};
use helix_edge_core::store::SessionStatus;
use serde_json::{Value, json};
use support::*;

fn initial() -> Value {
    json!({"notes": []})
}

#[test]
fn a_plain_text_answer_completes_and_ends_the_stream() {
    let w = World::new();
    let r = w.runner("p1");
    w.model.text("Hello there");
    w.create(&r, "tester", "hi");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    let s = w.session();
    assert_eq!(s.head.status, SessionStatus::Completed);
    assert_eq!(s.head.run.status, RunStatus::Completed);
    let usage = json!({"usage": {"inputTokens": 10, "outputTokens": 5, "cacheReadTokens": 0, "cacheWriteTokens": 0},
                       "stopReason": "end_turn"});
    let answer = Message::Assistant {
        content: "Hello there".into(),
        tool_calls: vec![],
        thinking: vec![],
        metadata: usage.as_object().cloned(),
    };
    assert_eq!(
        w.messages(),
        vec![Message::user("hi"), answer],
        "usage is recorded per step"
    );
    let chunks = w.chunks();
    assert!(matches!(chunks[0], ChunkBody::RunStarted { turn: 1 }));
    let text: String = chunks
        .iter()
        .filter_map(|c| match c {
            ChunkBody::TextDelta { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello there");
    assert!(matches!(
        chunks.last(),
        Some(ChunkBody::RunFinished {
            status: RunStatus::Completed
        })
    ));
    assert!(matches!(
        w.journal.events().last(),
        Some(StreamEvent::End { output: None })
    ));
    assert_eq!(
        w.model.seen()[0].messages,
        vec![Message::user("hi")],
        "the model sees the message as submitted"
    );
    assert_consistent(&w, &initial());
}

#[test]
fn a_tool_loop_runs_the_tool_then_answers_with_its_result_in_view() {
    let w = World::new();
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "milk"}))])
        .text("Noted.");
    w.create(&r, "tester", "note milk");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    let seen = w.model.seen();
    assert_eq!(seen.len(), 2);
    let Message::Tool {
        content, is_error, ..
    } = &seen[1].messages[2]
    else {
        panic!("a tool result")
    };
    assert_eq!((content, *is_error), (&json!({"count": 1}), false));
    assert_eq!(w.session().state, json!({"notes": [{"text": "milk"}]}));
    assert_eq!(patch_paths(&w), ["/notes/-"]);
    assert_eq!(w.session().head.step_count, 2);
    assert_eq!(
        w.session().head.run.usage.input_tokens,
        20,
        "usage is summed per run"
    );
    assert_consistent(&w, &initial());
}

#[test]
fn parallel_appends_to_one_array_all_survive_in_call_order() {
    let w = World::new();
    let r = w.runner("p1");
    let calls = (0..5)
        .map(|i| w.model.call("add_note", json!({"text": format!("n{i}")})))
        .collect();
    w.model.calls(calls).text("ok");
    w.create(&r, "tester", "five notes");
    drive(&r);

    let notes: Vec<Value> = (0..5).map(|i| json!({"text": format!("n{i}")})).collect();
    assert_eq!(w.session().state, json!({ "notes": notes }));
    // Each tool saw only the committed state plus its own write.
    let results: Vec<Value> = w
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results, vec![json!({"count": 1}); 5]);
    assert_eq!(patch_paths(&w), vec!["/notes/-"; 5]);
    assert_consistent(&w, &initial());
}

/// `canResume` and `resumeReason` as `GET /v1/sessions/{id}` shows them.
fn resumable(w: &World) -> (bool, String) {
    let view = session_view(w);
    let reason = view["resumeReason"].as_str().unwrap().to_string();
    (view["canResume"].as_bool().unwrap(), reason)
}

#[test]
fn an_interrupt_stops_at_the_next_step_and_resume_continues_the_same_run() {
    let w = World::new();
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "a"}))])
        .text("finished");
    w.create(&r, "tester", "x");
    assert_eq!(resumable(&w), (false, "running".into()));
    block(r.drive(SESSION, 1)).unwrap();
    block(r.interrupt(SESSION, Some("hold on".into()))).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Interrupted));
    assert_eq!(resumable(&w), (true, "interrupted".into()));
    assert_eq!(w.session().head.run.status, RunStatus::Interrupted);
    assert!(
        w.chunks()
            .iter()
            .any(|c| matches!(c, ChunkBody::RunInterrupted { reason: Some(r) } if r == "hold on"))
    );
    assert_eq!(
        drive(&r),
        Progress::Idle(SessionStatus::Interrupted),
        "stays interrupted"
    );

    let run_id = block(r.resume(SESSION)).unwrap();
    assert_eq!(
        run_id,
        w.session().head.run.run_id,
        "resume continues the same run"
    );
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(resumable(&w), (false, "completed".into()));
    assert!(
        w.chunks()
            .iter()
            .any(|c| matches!(c, ChunkBody::RunResumed { turn: 1 }))
    );
    assert_consistent(&w, &initial());
}

#[test]
fn abort_is_terminal() {
    let w = World::new();
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("delete_file", json!({"path": "/x"}))]);
    w.create(&r, "tester", "x");
    drive(&r);
    assert_eq!(resumable(&w), (false, "awaiting_tool_results".into()));
    block(r.abort(SESSION, Some("changed my mind".into()))).unwrap();
    assert_eq!(resumable(&w), (false, "aborted".into()));
    let s = w.session();
    assert_eq!(
        (s.head.status, s.head.run.status),
        (SessionStatus::Aborted, RunStatus::Aborted)
    );
    assert!(s.head.pending.is_empty());
    assert!(
        matches!(w.journal.events().last(), Some(StreamEvent::Fail { error }) if error.code == "run_aborted")
    );
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Aborted));
    assert_eq!(
        block(r.send_message(SESSION, "more".into())),
        Err(RunError::Aborted)
    );
    assert_eq!(block(r.resume(SESSION)), Err(RunError::Aborted));
    block(r.abort(SESSION, None)).unwrap();
    assert_eq!(w.exec.count("delete_file"), 0);
}

#[test]
fn reaching_max_steps_fails_the_run() {
    let w = World::new();
    let r = w.runner("p1");
    for i in 0..7 {
        w.model.calls(vec![
            w.model.call("add_note", json!({"text": format!("{i}")})),
        ]);
    }
    w.create(&r, "tester", "loop");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Failed));
    let s = w.session();
    assert_eq!(
        s.head.error.as_ref().map(|e| e.code.as_str()),
        Some("max_steps_exceeded")
    );
    assert_eq!(s.head.run.step_count, 6);
    assert_eq!(resumable(&w), (false, "failed".into()));
    assert!(matches!(
        w.journal.events().last(),
        Some(StreamEvent::Fail { .. })
    ));
    assert_consistent(&w, &initial());
}

#[test]
fn structured_output_is_validated_repaired_and_nudged_for() {
    // A JSON string holding a valid object is repaired; an invalid one goes back to the model.
    let w = World::new();
    let r = w.runner("p1");
    w.model.text("Here is my summary in prose.");
    w.model.output(json!({"summary": 42}));
    w.model
        .output(Value::String(r#"{"summary": "all good"}"#.into()));
    w.create(&r, "summarizer", "summarize");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let s = w.session();
    assert_eq!(s.head.output, Some(json!({"summary": "all good"})));
    assert_eq!(s.head.run.nudges, 1);
    let seen = w.model.seen();
    assert!(
        matches!(&seen[1].messages[2], Message::User { content, .. } if content.contains("__finish__"))
    );
    let Message::Tool {
        content,
        is_error: true,
        ..
    } = &seen[2].messages[4]
    else {
        panic!("invalid output is a tool error")
    };
    assert!(
        content["error"]
            .as_str()
            .unwrap()
            .contains("/summary must be of type")
    );
    assert!(seen[0].tools.contains(&"__finish__".to_string()));
    assert!(
        matches!(w.journal.events().last(), Some(StreamEvent::End { output: Some(o) }) if o["summary"] == "all good")
    );
    assert!(
        w.chunks()
            .iter()
            .any(|c| matches!(c, ChunkBody::Output { .. }))
    );

    // Text every time: bounded nudges, then a clear failure.
    let w = World::new();
    let r = w.runner("p1");
    w.model.text("a").text("b").text("c");
    w.create(&r, "summarizer", "summarize");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Failed));
    assert_eq!(w.session().head.error.unwrap().code, "output_missing");
    assert_eq!(w.model.seen().len(), 3);
}

#[test]
fn finish_with_runs_after_the_others_sees_their_writes_and_ends_the_run() {
    let w = World::new();
    let r = w.runner("p1");
    let finish = w.model.call("finish", json!({"text": "bye"}));
    let note = w.model.call("add_note", json!({"text": "n"}));
    w.model.calls(vec![finish, note]);
    w.create(&r, "tester", "x");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.session().head.output,
        Some(json!({"final": "bye", "notesSeen": 1}))
    );
    assert_eq!(w.model.seen().len(), 1, "no further model call");
    assert_consistent(&w, &initial());
}

#[test]
fn bad_calls_become_errors_the_model_can_act_on() {
    let w = World::new();
    let r = w.runner("p1");
    let mut garbage = w.model.call("add_note", json!("not json"));
    garbage.arguments = Value::String("{not json".into());
    let wrapped = w
        .model
        .call("add_note", Value::String(r#"{"text": "wrapped"}"#.into()));
    let unknown = w.model.call("teleport", json!({}));
    let failing = w.model.call("fail", json!({}));
    w.model
        .calls(vec![garbage, wrapped, unknown, failing])
        .text("ok");
    w.create(&r, "tester", "x");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let codes: Vec<String> = w
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                content,
                is_error: true,
                ..
            } => content["code"].as_str().map(String::from),
            _ => None,
        })
        .collect();
    assert_eq!(
        codes,
        [
            "tool_input_invalid",
            "tool_not_found",
            "tool_execution_failed"
        ]
    );
    assert_eq!(w.session().state, json!({"notes": [{"text": "wrapped"}]}));
    assert!(w.chunks().iter().any(|c| matches!(c, ChunkBody::Error { code, recoverable: true, .. } if code == "tool_arguments_coerced")));
    assert_consistent(&w, &initial());
}

#[test]
fn a_follow_up_message_starts_a_new_run_in_the_same_session() {
    let w = World::new();
    let r = w.runner("p1");
    w.model.text("first").text("second");
    w.create(&r, "tester", "one");
    drive(&r);
    let first_run = w.session().head.run.run_id;
    let run_id = block(r.send_message(SESSION, "two".into())).unwrap();
    assert_ne!(run_id, first_run);
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let s = w.session();
    assert_eq!((s.head.run.turn, s.head.run.run_id.clone()), (2, run_id));
    assert_eq!(w.messages().len(), 4);
    assert_eq!(
        block(helix_edge_core::store::Store::runs(&*w.store, SESSION))
            .unwrap()
            .len(),
        2
    );
    assert!(
        w.chunks()
            .iter()
            .any(|c| matches!(c, ChunkBody::RunStarted { turn: 2 }))
    );
}

#[test]
fn busy_sessions_refuse_new_messages_and_retries() {
    let w = World::new();
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("delete_file", json!({"path": "/x"}))]);
    w.create(&r, "tester", "x");
    drive(&r);
    assert!(matches!(
        block(r.send_message(SESSION, "hi".into())),
        Err(RunError::Busy(_))
    ));
    assert!(matches!(
        block(r.retry(SESSION, None, None)),
        Err(RunError::Busy(_))
    ));
    let again = block(r.create(create_request("tester", "dup")));
    assert!(matches!(
        again,
        Err(RunError::Store(helix_edge_core::store::StoreError::Exists(
            _
        )))
    ));
}

#[test]
fn tools_can_emit_custom_events_and_the_prompt_can_follow_the_state() {
    use helix_edge_core::agent::{Agent, Agents};
    use helix_edge_core::error::ToolError;
    use helix_edge_core::tool::Tool;
    let agent = Agent::builder("counter")
        .initial_state(json!({"count": 0}))
        .system_prompt_fn(|state| format!("count is {}", state["count"]))
        .tool(Tool::new("bump", "d", |_: Value, ctx| async move {
            ctx.emit("progress", json!({"pct": 50}));
            let n = ctx.get("/count").and_then(|v| v.as_u64()).unwrap_or(0);
            ctx.set("/count", json!(n + 1))?;
            Ok::<_, ToolError>(json!({"count": n + 1}))
        }))
        .build()
        .unwrap();
    let mut w = World::new();
    w.agents = Agents::new().with(agent).unwrap();
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("bump", json!({}))])
        .text("ok");
    w.create(&r, "counter", "bump it");
    drive(&r);
    let seen = w.model.seen();
    assert_eq!(
        (seen[0].system.as_str(), seen[1].system.as_str()),
        ("count is 0", "count is 1")
    );
    assert!(w.chunks().iter().any(|c| matches!(c, ChunkBody::Custom { event_name, data } if event_name == "progress" && data["pct"] == 50)));
    assert_eq!(patch_paths(&w), ["/count"]);
    assert_consistent(&w, &json!({"count": 0}));
}

#[test]
fn an_interrupt_requested_during_a_drive_stops_it_at_the_next_step() {
    let w = World::new();
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "a"}))]);
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "b"}))])
        .text("done");
    w.create(&r, "tester", "x");
    let (progress, interrupted) =
        block(async { futures::join!(r.drive(SESSION, 100), r.interrupt(SESSION, None)) });
    interrupted.unwrap();
    assert_eq!(
        progress.unwrap(),
        Progress::Idle(SessionStatus::Interrupted)
    );
    assert!(
        w.model.remaining() > 0,
        "the drive stopped before using every scripted turn"
    );
    block(r.resume(SESSION)).unwrap();
    assert_eq!(
        drive(&r),
        Progress::Idle(SessionStatus::Completed),
        "the request is honoured once"
    );
    assert_eq!(
        w.session().state,
        json!({"notes": [{"text": "a"}, {"text": "b"}]})
    );
    assert_consistent(&w, &json!({"notes": []}));
}

#[test]
fn call_ids_are_made_unique_in_the_session_before_anything_is_keyed_by_them() {
    let w = World::new();
    let r = w.runner("p1");
    let note = |id: &str, text: &str| {
        let mut call = w.model.call("add_note", json!({ "text": text }));
        call.id = id.into();
        call
    };
    // Step 1: an empty id and an id repeated within the turn; step 2: an id of step 1.
    w.model
        .calls(vec![note("", "a"), note("dup", "b"), note("dup", "c")])
        .calls(vec![note("dup", "d"), note("fresh", "e")])
        .text("done");
    w.create(&r, "tester", "notes");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    let ids = |pick: fn(&Message) -> Vec<String>| -> Vec<String> {
        w.messages().iter().flat_map(pick).collect()
    };
    let called = ids(|m| match m {
        Message::Assistant { tool_calls, .. } => tool_calls.iter().map(|c| c.id.clone()).collect(),
        _ => vec![],
    });
    assert_eq!(called, ["call_1_0", "dup", "dup_1_2", "dup_2_0", "fresh"]);
    let answered = ids(|m| match m {
        Message::Tool { tool_call_id, .. } => vec![tool_call_id.clone()],
        _ => vec![],
    });
    assert_eq!(answered, called, "every call is answered under its own id");
    let state = w.session().state;
    let notes: Vec<&str> = state["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["text"].as_str())
        .collect();
    assert_eq!(notes, ["a", "b", "c", "d", "e"]);
    assert_consistent(&w, &initial());
}

#[test]
fn an_interrupted_session_with_pending_calls_takes_no_follow_up_until_they_are_answered() {
    let w = World::new();
    let r = w.runner("p1");
    let del = w.model.call("delete_file", json!({"path": "/x"}));
    w.model
        .calls(vec![del.clone()])
        .text("deleted")
        .text("hello again");
    w.create(&r, "tester", "x");
    drive(&r);
    block(r.interrupt(SESSION, None)).unwrap();
    drive(&r);
    assert_eq!(w.session().head.status, SessionStatus::Interrupted);
    assert_eq!(
        block(r.send_message(SESSION, "something else".into())),
        Err(RunError::Busy(
            "calls are pending: resume the session and answer them first"
        )),
        "a new run would leave the call unanswered in the transcript"
    );
    assert_eq!(w.session().head.pending.len(), 1, "nothing changed");
    block(r.resume(SESSION)).unwrap();
    block(r.submit(
        SESSION,
        helix_edge_core::runner::Submission::Approval {
            tool_call_id: del.id.clone(),
            approved: true,
            reason: None,
        },
    ))
    .unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    block(r.send_message(SESSION, "something else".into())).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_consistent(&w, &initial());
}
