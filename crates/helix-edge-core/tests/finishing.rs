//! A step's finishing calls (`finish_with`, `__finish__`) wait for the calls of the
//! same step that a person or a client answers: the step suspends, and the resumption
//! runs the finish after the answers (a denial included), seeing every write; the
//! transcript and the stream show that order, across a restart too.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::chunk::ChunkBody;
use helix_edge_core::message::Message;
use helix_edge_core::runner::{Progress, Submission};
use helix_edge_core::store::SessionStatus;
use serde_json::{Value, json};
use support::*;

fn initial() -> Value {
    json!({"notes": []})
}

/// The order of the step's tool results in the transcript, by tool name.
fn result_order(w: &World) -> Vec<String> {
    w.messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_name, .. } => Some(tool_name.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_finish_waits_for_the_steps_approval_then_runs_after_it_seeing_every_write() {
    // Approved, with the resumption in another process (a restart between).
    let w = World::new();
    let r = w.runner("p1");
    let finish = w.model.call("finish", json!({"text": "bye"}));
    let delete = w.model.call("delete_file", json!({"path": "/tmp/x"}));
    let note = w.model.call("add_note", json!({"text": "n"}));
    w.model.calls(vec![finish.clone(), delete.clone(), note]);
    w.create(&r, "tester", "x");
    assert!(matches!(drive(&r), Progress::Suspended { .. }));
    assert_eq!(
        w.exec.count("finish"),
        0,
        "the finish waits for the approval"
    );
    let s = w.session();
    assert_eq!(
        s.head.status,
        SessionStatus::Active,
        "suspended: active with a pending call"
    );
    assert_eq!(s.head.output, None);
    assert_eq!(w.pending().len(), 1);

    approve(&r, &delete.id, true);
    let restarted = w.runner("p2");
    assert_eq!(drive(&restarted), Progress::Idle(SessionStatus::Completed));
    assert_eq!(w.exec.all(), ["delete_file /tmp/x", "finish"]);
    assert_eq!(
        w.session().head.output,
        Some(json!({"final": "bye", "notesSeen": 1}))
    );
    assert_eq!(result_order(&w), ["add_note", "delete_file", "finish"]);
    let starts: Vec<String> = w
        .chunks()
        .into_iter()
        .filter_map(|c| match c {
            ChunkBody::ToolEnd { tool_name, .. } => Some(tool_name),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        ["add_note", "delete_file", "finish"],
        "the stream shows the order"
    );
    assert_eq!(w.model.seen().len(), 1, "no further model call");
    assert_consistent(&w, &initial());
}

#[test]
fn a_denial_is_a_result_like_any_other_and_the_finish_then_runs() {
    let w = World::new();
    let r = w.runner("p1");
    let finish = w.model.call("finish", json!({"text": "done anyway"}));
    let delete = w.model.call("delete_file", json!({"path": "/tmp/y"}));
    w.model.calls(vec![finish, delete.clone()]);
    w.create(&r, "tester", "x");
    assert!(matches!(drive(&r), Progress::Suspended { .. }));
    answer(&r, &delete.id, false, Some("keep it"));
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(w.exec.all(), ["finish"], "the denied call never ran");
    assert_eq!(
        w.session().head.output,
        Some(json!({"final": "done anyway", "notesSeen": 0}))
    );
    let denied = w.messages().into_iter().find_map(|m| match m {
        Message::Tool {
            tool_call_id,
            is_error: true,
            content,
            ..
        } if tool_call_id == delete.id => Some(content),
        _ => None,
    });
    assert!(denied.is_some_and(|c| c.to_string().contains("keep it")));
    assert_eq!(result_order(&w), ["delete_file", "finish"]);
    assert_consistent(&w, &initial());
}

#[test]
fn a_finish_waits_for_a_client_tool_in_its_step() {
    let w = World::new();
    let r = w.runner("p1");
    let finish = w.model.call("finish", json!({"text": "asked"}));
    let ask = w.model.call("ask_user", json!({"question": "ok?"}));
    w.model.calls(vec![finish, ask.clone()]);
    w.create(&r, "tester", "x");
    assert!(matches!(drive(&r), Progress::Suspended { .. }));
    assert_eq!(w.exec.count("finish"), 0);
    block(r.submit(
        SESSION,
        Submission::ClientResult {
            tool_call_id: ask.id.clone(),
            outcome: Ok(json!("yes")),
        },
    ))
    .unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(w.exec.all(), ["finish"]);
    assert_eq!(result_order(&w), ["ask_user", "finish"]);
    assert_consistent(&w, &initial());
}

#[test]
fn a_structured_output_waits_for_the_steps_approval_too() {
    let exec = Executions::default();
    let agents = world_agents(&exec).with(researcher().unwrap()).unwrap();
    let scenario = Scenario::new(agents);
    let r = scenario.runner("p1");
    let done = scenario
        .model
        .call("__finish__", json!({"summary": "cleaned up"}));
    let delete = scenario
        .model
        .call("delete_file", json!({"path": "/tmp/z"}));
    scenario.model.calls(vec![done, delete.clone()]);
    scenario.create(&r, "researcher", "{\"topic\": \"cleanup\"}");
    assert!(matches!(drive(&r), Progress::Suspended { .. }));
    assert_eq!(scenario.session().head.output, None, "not finished yet");
    answer(&r, &delete.id, true, None);
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let session = scenario.session();
    assert_eq!(session.head.output, Some(json!({"summary": "cleaned up"})));
    let order: Vec<String> = scenario
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_name, .. } => Some(tool_name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["delete_file", "__finish__"]);
}
