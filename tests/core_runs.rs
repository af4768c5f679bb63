//! End-to-end runs of the pure core on the in-memory store: every kind of step, every
//! kind of human-in-the-loop answer, and the stream they produce.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod common;

use common::*;
use helix_edge::chunk::{ChunkBody, RunStatus, StreamEvent};
use helix_edge::message::Message;
use helix_edge::runner::{Progress, RunError, Submission};
use helix_edge::store::{PendingKind, SessionStatus};
use serde_json::{Value, json};

fn approve(
    runner: &helix_edge::runner::Runner<std::rc::Rc<helix_edge::store::MemoryStore>>,
    call: &str,
    yes: bool,
) {
    block(runner.submit(
        SESSION,
        Submission::Approval {
            tool_call_id: call.into(),
            approved: yes,
            reason: None,
        },
    ))
    .unwrap();
}

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
    assert_eq!(
        w.messages(),
        vec![Message::user("hi"), Message::assistant_text("Hello there")]
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

#[test]
fn an_approved_call_suspends_then_runs_once_and_the_run_completes() {
    let w = World::new();
    let r = w.runner("p1");
    let call = w.model.call("delete_file", json!({"path": "/tmp/x"}));
    w.model.calls(vec![call.clone()]).text("Deleted.");
    w.create(&r, "tester", "delete /tmp/x");
    assert_eq!(
        drive(&r),
        Progress::Suspended {
            next_deadline: None
        }
    );

    let s = w.session();
    assert_eq!(s.head.status, SessionStatus::Active);
    assert_eq!(s.head.pending.len(), 1);
    assert_eq!(s.head.pending[0].kind, PendingKind::Approval);
    assert!(w.chunks().iter().any(|c| matches!(c, ChunkBody::ToolApprovalRequest { tool_call_id, .. } if *tool_call_id == call.id)));
    assert!(matches!(
        w.chunks().last(),
        Some(ChunkBody::RunSuspended { .. })
    ));
    assert_eq!(
        w.exec.count("delete_file"),
        0,
        "nothing runs before approval"
    );

    approve(&r, &call.id, true);
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(w.exec.count("delete_file"), 1);
    let chunks = w.chunks();
    assert!(
        chunks
            .iter()
            .any(|c| matches!(c, ChunkBody::RunResumed { turn: 1 }))
    );
    assert!(
        chunks
            .iter()
            .any(|c| matches!(c, ChunkBody::ToolEnd { success: true, .. }))
    );
    let runs = block(helix_edge::store::Store::runs(&*w.store, SESSION)).unwrap();
    assert_eq!(runs.len(), 1, "the run keeps its id through the suspension");
    assert_eq!(w.session().head.run.status, RunStatus::Completed);
    assert_consistent(&w, &initial());
}

#[test]
fn a_denied_call_never_runs_and_the_model_is_told() {
    let w = World::new();
    let r = w.runner("p1");
    let call = w.model.call("delete_file", json!({"path": "/etc"}));
    w.model.calls(vec![call.clone()]).text("Understood.");
    w.create(&r, "tester", "delete /etc");
    drive(&r);
    approve(&r, &call.id, false);
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    assert_eq!(w.exec.count("delete_file"), 0);
    let Message::Tool {
        content, is_error, ..
    } = &w.model.seen()[1].messages[2]
    else {
        panic!()
    };
    assert!(is_error);
    assert_eq!(content["error"], "Tool call was not approved by the user");
    assert!(w.chunks().iter().any(|c| matches!(c, ChunkBody::ToolEnd { success: false, error: Some(e), .. } if e == "Tool call was not approved by the user")));
    assert_consistent(&w, &initial());
}

#[test]
fn conditional_approval_runs_small_sends_and_gates_large_ones() {
    let w = World::new();
    let r = w.runner("p1");
    let two = w.model.call(
        "send_email",
        json!({"to": ["a", "b"], "subject": "s", "body": "b"}),
    );
    let five = w.model.call(
        "send_email",
        json!({"to": ["a", "b", "c", "d", "e"], "subject": "s", "body": "b"}),
    );
    w.model.calls(vec![two.clone(), five.clone()]).text("Sent.");
    w.create(&r, "tester", "two emails");
    assert!(matches!(drive(&r), Progress::Suspended { .. }));
    assert_eq!(
        w.exec.all(),
        ["send_email 2"],
        "the two-recipient email ran in the suspended step"
    );
    assert_eq!(w.session().head.pending[0].tool_call_id, five.id);

    approve(&r, &five.id, true);
    drive(&r);
    assert_eq!(w.exec.all(), ["send_email 2", "send_email 5"]);
    assert_eq!(w.session().head.status, SessionStatus::Completed);
    assert_consistent(&w, &initial());
}

#[test]
fn a_step_mixing_regular_and_gated_calls_commits_the_regular_ones_first() {
    let w = World::new();
    let r = w.runner("p1");
    let note = w.model.call("add_note", json!({"text": "before"}));
    let del = w.model.call("delete_file", json!({"path": "/x"}));
    let ask = w.model.call("ask_user", json!({"question": "sure?"}));
    w.model
        .calls(vec![note, del.clone(), ask.clone()])
        .text("done");
    w.create(&r, "tester", "mixed");
    drive(&r);

    let s = w.session();
    assert_eq!(
        s.state,
        json!({"notes": [{"text": "before"}]}),
        "the regular call committed"
    );
    assert_eq!(
        s.head.pending.iter().map(|p| p.kind).collect::<Vec<_>>(),
        [PendingKind::Approval, PendingKind::Client]
    );
    let client_start = w.chunks().into_iter().find_map(|c| match c {
        ChunkBody::ToolStart {
            tool_call_id,
            executor,
            deadline,
            ..
        } if tool_call_id == ask.id => Some((executor, deadline)),
        _ => None,
    });
    assert_eq!(
        client_start,
        Some((
            helix_edge::chunk::Executor::Client,
            s.head.pending[1].deadline
        ))
    );

    approve(&r, &del.id, true);
    assert!(
        matches!(drive(&r), Progress::Suspended { .. }),
        "still waiting on the client"
    );
    block(r.submit(
        SESSION,
        Submission::ClientResult {
            tool_call_id: ask.id.clone(),
            outcome: Ok(json!("yes")),
        },
    ))
    .unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let msgs = w.messages();
    assert!(msgs.iter().any(|m| matches!(m, Message::Tool { tool_call_id, content, .. } if *tool_call_id == ask.id && content == "yes")));
    assert_consistent(&w, &initial());
}

#[test]
fn client_results_errors_and_expired_deadlines_become_tool_results() {
    for (case, expect_error) in [
        ("result", None),
        ("error", Some("no camera")),
        ("expire", Some("Tool call timed out waiting for the client")),
    ] {
        let w = World::new();
        let r = w.runner("p1");
        let ask = w.model.call("ask_user", json!({"question": "pic?"}));
        w.model.calls(vec![ask.clone()]).text("ok");
        w.create(&r, "tester", "ask");
        let Progress::Suspended {
            next_deadline: Some(deadline),
        } = drive(&r)
        else {
            panic!("suspended with a deadline")
        };
        match case {
            "result" => block(r.submit(
                SESSION,
                Submission::ClientResult {
                    tool_call_id: ask.id.clone(),
                    outcome: Ok(json!({"url": "u"})),
                },
            ))
            .unwrap(),
            "error" => block(r.submit(
                SESSION,
                Submission::ClientResult {
                    tool_call_id: ask.id.clone(),
                    outcome: Err("no camera".into()),
                },
            ))
            .unwrap(),
            _ => {
                w.host.advance(CLIENT_DEADLINE_MS - 1);
                assert!(
                    matches!(drive(&r), Progress::Suspended { .. }),
                    "{case}: not yet due at {deadline}"
                );
                w.host.advance(1);
            }
        }
        assert_eq!(
            drive(&r),
            Progress::Idle(SessionStatus::Completed),
            "{case}"
        );
        let tool_msg = w
            .messages()
            .into_iter()
            .find(|m| matches!(m, Message::Tool { .. }))
            .unwrap();
        let Message::Tool {
            content, is_error, ..
        } = tool_msg
        else {
            unreachable!()
        };
        match expect_error {
            None => assert_eq!((content, is_error), (json!({"url": "u"}), false), "{case}"),
            Some(text) => assert_eq!(
                (content["error"].as_str(), is_error),
                (Some(text), true),
                "{case}"
            ),
        }
        if case == "expire" {
            let late = block(r.submit(
                SESSION,
                Submission::ClientResult {
                    tool_call_id: ask.id.clone(),
                    outcome: Ok(json!(1)),
                },
            ));
            assert_eq!(
                late,
                Err(RunError::AlreadyResolved(ask.id.clone())),
                "a late answer is refused"
            );
        }
        assert_consistent(&w, &initial());
    }
}

#[test]
fn answers_are_validated_first_answer_wins_and_kinds_must_match() {
    let w = World::new();
    let r = w.runner("p1");
    let del = w.model.call("delete_file", json!({"path": "/x"}));
    let ask = w.model.call("ask_user", json!({"question": "?"}));
    w.model.calls(vec![del.clone(), ask.clone()]).text("ok");
    w.create(&r, "tester", "x");
    drive(&r);

    let wrong = block(r.submit(
        SESSION,
        Submission::ClientResult {
            tool_call_id: del.id.clone(),
            outcome: Ok(json!(1)),
        },
    ));
    assert!(matches!(wrong, Err(RunError::KindMismatch { .. })));
    let wrong = block(r.submit(
        SESSION,
        Submission::Approval {
            tool_call_id: ask.id.clone(),
            approved: true,
            reason: None,
        },
    ));
    assert!(matches!(wrong, Err(RunError::KindMismatch { .. })));
    let unknown = block(r.submit(
        SESSION,
        Submission::Approval {
            tool_call_id: "nope".into(),
            approved: true,
            reason: None,
        },
    ));
    assert_eq!(unknown, Err(RunError::ToolCallNotFound("nope".into())));

    approve(&r, &del.id, false);
    let second = block(r.submit(
        SESSION,
        Submission::Approval {
            tool_call_id: del.id.clone(),
            approved: true,
            reason: None,
        },
    ));
    assert_eq!(second, Err(RunError::AlreadyResolved(del.id.clone())));
    block(r.submit(
        SESSION,
        Submission::ClientResult {
            tool_call_id: ask.id.clone(),
            outcome: Ok(json!(1)),
        },
    ))
    .unwrap();
    drive(&r);
    assert_eq!(
        w.exec.count("delete_file"),
        0,
        "the first answer (deny) stood"
    );
}

#[test]
fn driving_a_resumed_step_twice_at_once_runs_the_approved_tool_once() {
    let w = World::new();
    let r = w.runner("p1");
    let del = w.model.call("delete_file", json!({"path": "/x"}));
    w.model.calls(vec![del.clone()]).text("done");
    w.create(&r, "tester", "x");
    drive(&r);
    approve(&r, &del.id, true);
    let (a, b) = block(async { futures::join!(r.drive(SESSION, 100), r.drive(SESSION, 100)) });
    assert!(
        matches!(
            (&a, &b),
            (Ok(Progress::Idle(_)), Ok(Progress::Busy))
                | (Ok(Progress::Busy), Ok(Progress::Idle(_)))
        ),
        "{a:?} {b:?}"
    );
    assert_eq!(
        drive(&r),
        Progress::Idle(SessionStatus::Completed),
        "a later drive finds nothing to do"
    );
    assert_eq!(w.exec.count("delete_file"), 1);
    assert_consistent(&w, &initial());
}

#[test]
fn an_interrupt_stops_at_the_next_step_and_resume_continues_the_same_run() {
    let w = World::new();
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "a"}))])
        .text("finished");
    w.create(&r, "tester", "x");
    block(r.drive(SESSION, 1)).unwrap();
    block(r.interrupt(SESSION, Some("hold on".into()))).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Interrupted));
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
    block(r.abort(SESSION, Some("changed my mind".into()))).unwrap();
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
        block(helix_edge::store::Store::runs(&*w.store, SESSION))
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
        block(r.retry(SESSION, None)),
        Err(RunError::Busy(_))
    ));
    let again = block(r.create(helix_edge::runner::CreateSession {
        session_id: SESSION.into(),
        agent: "tester".into(),
        message: "dup".into(),
        state: None,
    }));
    assert!(matches!(
        again,
        Err(RunError::Store(helix_edge::store::StoreError::Exists(_)))
    ));
}

#[test]
fn hooks_fire_in_the_canonical_order() {
    use helix_edge::agent::{Agent, Agents, Hooks};
    use std::cell::RefCell;
    use std::rc::Rc;
    struct Log(Rc<RefCell<Vec<String>>>);
    impl Hooks for Log {
        fn before_tool(&self, c: &helix_edge::message::ToolCall) {
            self.0.borrow_mut().push(format!("before {}", c.name));
        }
        fn on_state_change(
            &self,
            c: &helix_edge::message::ToolCall,
            w: &[helix_edge::state::PatchOp],
        ) {
            self.0
                .borrow_mut()
                .push(format!("state {} {}", c.name, w.len()));
        }
        fn on_message(&self, m: &Message) {
            let kind = match m {
                Message::Tool { .. } => "tool",
                _ => "assistant",
            };
            self.0.borrow_mut().push(format!("message {kind}"));
        }
        fn after_tool(&self, c: &helix_edge::message::ToolCall, _: &Message) {
            self.0.borrow_mut().push(format!("after {}", c.name));
        }
    }
    let log = Rc::new(RefCell::new(Vec::new()));
    let agent = Agent::builder("hooked")
        .initial_state(json!({"notes": []}))
        .tool(helix_edge::agents::add_note_tool())
        .hooks(Log(log.clone()))
        .build()
        .unwrap();
    let mut w = World::new();
    w.agents = Agents::new().with(agent);
    let r = w.runner("p1");
    w.model
        .calls(vec![w.model.call("add_note", json!({"text": "x"}))])
        .text("ok");
    w.create(&r, "hooked", "x");
    drive(&r);
    assert_eq!(
        *log.borrow(),
        [
            "message assistant",
            "before add_note",
            "state add_note 1",
            "message tool",
            "after add_note",
            "message assistant"
        ]
    );
}

#[test]
fn tools_can_emit_custom_events_and_the_prompt_can_follow_the_state() {
    use helix_edge::agent::{Agent, Agents};
    use helix_edge::error::ToolError;
    use helix_edge::tool::Tool;
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
    w.agents = Agents::new().with(agent);
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
