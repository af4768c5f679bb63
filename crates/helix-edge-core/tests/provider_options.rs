//! A run's model options (`providerOptions`): checked against the agent before anything
//! changes, stored with the run, applied over the agent's settings by every model call
//! of that run — across a suspension and another process — and by no other run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::message::Message;
use helix_edge_core::model::{ReasoningEffort, ToolChoice};
use helix_edge_core::runner::{CreateSession, Progress, RunError};
use helix_edge_core::store::{CheckpointStatus, SessionStatus, Store};
use serde_json::{Value, json};
use support::*;

#[test]
fn a_runs_options_go_with_each_of_its_model_calls_across_a_restart_and_end_with_it() {
    let w = World::new();
    let r = w.runner("p1");
    let call = w.model.call("delete_file", json!({"path": "/tmp/x"}));
    w.model
        .calls(vec![call.clone()])
        .text("Deleted.")
        .text("Nothing else.");
    let given = json!({
        "toolChoice": "required", "reasoningEffort": "high", "openai": {"seed": 7}
    });
    let create = CreateSession {
        options: Some(given.clone()),
        ..create_request("tester", "delete /tmp/x")
    };
    block(r.create(create)).unwrap();
    assert_eq!(
        drive(&r),
        Progress::Suspended {
            next_deadline: None
        }
    );
    assert_eq!(
        w.session().head.run.options,
        Some(given.clone()),
        "stored with the run"
    );

    // Another process answers and resumes, from durable state alone.
    let r2 = w.runner("p2");
    approve(&r2, &call.id, true);
    assert_eq!(drive(&r2), Progress::Idle(SessionStatus::Completed));
    block(r2.send_messages(SESSION, vec![Message::user("anything else?")], None, None)).unwrap();
    assert_eq!(drive(&r2), Progress::Idle(SessionStatus::Completed));

    let seen = w.model.seen();
    assert_eq!(seen.len(), 3);
    for (step, s) in seen[..2].iter().enumerate() {
        assert_eq!(
            s.settings.tool_choice,
            Some(ToolChoice::Required),
            "step {step}"
        );
        assert_eq!(
            s.settings.reasoning_effort,
            Some(ReasoningEffort::High),
            "step {step}"
        );
        let fields = s.settings.openai_fields.clone().map(Value::Object);
        assert_eq!(fields, Some(json!({"seed": 7})), "step {step}");
    }
    let next = &seen[2].settings;
    assert_eq!(
        (
            &next.tool_choice,
            next.reasoning_effort,
            &next.openai_fields
        ),
        (&None, None, &None),
        "the next run has the agent's settings"
    );
}

#[test]
fn a_follow_ups_options_apply_to_its_run_only() {
    let w = World::new();
    let r = w.runner("p1");
    w.model.text("One.").text("Two.");
    w.create(&r, "tester", "first");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let given = json!({"thinkingBudget": 2048, "anthropic": {"top_k": 5}});
    block(r.send_messages(
        SESSION,
        vec![Message::user("second")],
        Some(given.clone()),
        None,
    ))
    .unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let seen = w.model.seen();
    assert_eq!(seen[0].settings.thinking_budget, None);
    assert_eq!(seen[1].settings.thinking_budget, Some(2048));
    let fields = seen[1].settings.anthropic_fields.clone().map(Value::Object);
    assert_eq!(fields, Some(json!({"top_k": 5})));
}

#[test]
fn options_the_agent_cannot_take_are_refused_and_nothing_changes() {
    let w = World::new();
    let r = w.runner("p1");
    let unknown_tool = json!({"toolChoice": {"tool": "no_such_tool"}});
    let create = CreateSession {
        options: Some(unknown_tool.clone()),
        ..create_request("tester", "hi")
    };
    match block(r.create(create)) {
        Err(RunError::Invalid(why)) => assert!(why.contains("no_such_tool"), "{why}"),
        other => panic!("{other:?}"),
    }
    let stored = block(w.store.load(SESSION)).unwrap();
    assert!(stored.is_none(), "no session was created");

    w.model.text("Hi.");
    w.create(&r, "tester", "hi");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let before = w.session();
    let follow_up = block(r.send_messages(
        SESSION,
        vec![Message::user("again")],
        Some(unknown_tool.clone()),
        None,
    ));
    assert!(
        matches!(follow_up, Err(RunError::Invalid(_))),
        "{follow_up:?}"
    );
    assert_eq!(w.session().head, before.head, "the session is unchanged");
}

#[test]
fn a_retry_or_a_fork_redoes_its_checkpoints_run_with_that_runs_options() {
    let w = World::new();
    let r = w.runner("p1");
    w.model.text("One.").text("Two.");
    let first = json!({"reasoningEffort": "high"});
    let create = CreateSession {
        options: Some(first.clone()),
        ..create_request("tester", "first")
    };
    block(r.create(create)).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let first_run = w.session().head.run.run_id;
    block(r.send_messages(SESSION, vec![Message::user("second")], None, None)).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    // Back to the first run's start (an older run: its options come from the runs).
    let checkpoints = block(w.store.checkpoints(SESSION)).unwrap();
    let start = checkpoints
        .iter()
        .find(|c| c.run_id == first_run && c.status == CheckpointStatus::Active)
        .unwrap();
    w.model.text("One again.");
    block(r.retry(SESSION, Some(&start.id), None)).unwrap();
    assert_eq!(w.session().head.run.options, Some(first.clone()));
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let redone = w.model.seen().last().unwrap().settings.reasoning_effort;
    assert_eq!(redone, Some(ReasoningEffort::High));

    // The latest run, its message edited, in a fork: the retried run's options go along.
    w.model.text("Forked.");
    let fork = block(r.fork_request(SESSION, None, "copy".into(), Some("edited".into()))).unwrap();
    assert_eq!(fork.options, Some(first.clone()));
    block(r.create(fork)).unwrap();
    assert_eq!(
        block(r.drive("copy", 10)).unwrap(),
        Progress::Idle(SessionStatus::Completed)
    );
    let forked = w.model.seen().last().unwrap().settings.reasoning_effort;
    assert_eq!(forked, Some(ReasoningEffort::High));
    // An idle copy continues no run: its first message's run has its own options.
    let idle = block(r.fork_request(SESSION, None, "idle".into(), None)).unwrap();
    assert!(idle.idle);
    assert_eq!(idle.options, None);
}
