//! End-to-end runs of the pure core at human-in-the-loop boundaries: approvals
//! (always and conditional), client tools (result, error, deadline), mixed steps, and
//! answers that are late, doubled or of the wrong kind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::chunk::{ChunkBody, RunStatus};
use helix_edge_core::host::Level;
use helix_edge_core::message::Message;
use helix_edge_core::runner::{Progress, Routed, RunError, Submission};
use helix_edge_core::store::{PendingKind, SessionStatus};
use serde_json::{Value, json};
use support::*;

fn initial() -> Value {
    json!({"notes": []})
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
    assert_eq!(suspended_reason(&w), Some("suspended_approval".into()));
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
    let runs = block(helix_edge_core::store::Store::runs(&*w.store, SESSION)).unwrap();
    assert_eq!(runs.len(), 1, "the run keeps its id through the suspension");
    assert_eq!(w.session().head.run.status, RunStatus::Completed);
    assert_consistent(&w, &initial());
}

/// `suspendedReason` as `GET /v1/sessions/{id}` shows it.
fn suspended_reason(w: &World) -> Option<String> {
    session_view(w)["suspendedReason"]
        .as_str()
        .map(String::from)
}

const DENIED: &str = "Tool call was not approved by the user";

/// A `delete_file` call denied (with `reason`, if any) and the run driven to its end:
/// the call never ran and the stream ended it as the denial. Returns the tool message the model
/// saw next.
fn denied_delete(reason: Option<&str>) -> Message {
    let w = World::new();
    let r = w.runner("p1");
    let call = w.model.call("delete_file", json!({"path": "/etc"}));
    w.model.calls(vec![call.clone()]).text("Understood.");
    w.create(&r, "tester", "delete /etc");
    drive(&r);
    answer(&r, &call.id, false, reason);
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    assert_eq!(w.exec.count("delete_file"), 0);
    assert!(w.chunks().iter().any(
        |c| matches!(c, ChunkBody::ToolEnd { success: false, error: Some(e), .. } if e == DENIED)
    ));
    assert_consistent(&w, &initial());
    w.model.seen()[1].messages[2].clone()
}

#[test]
fn a_denied_call_never_runs_and_the_model_is_told() {
    let seen = denied_delete(None);
    let Message::Tool {
        content, is_error, ..
    } = seen
    else {
        panic!()
    };
    assert!(is_error);
    assert_eq!(content, json!({"error": DENIED, "code": "tool_denied"}));
}

#[test]
fn a_denial_s_reason_reaches_the_model() {
    let seen = denied_delete(Some("  not today  "));
    let Message::Tool { content, .. } = seen else {
        panic!()
    };
    assert_eq!(
        content,
        json!({"error": DENIED, "code": "tool_denied", "reason": "not today"})
    );
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
            helix_edge_core::chunk::Executor::Client,
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
        assert_eq!(suspended_reason(&w), Some("suspended_client_tool".into()));
        match case {
            "result" => block(r.submit(
                SESSION,
                Submission::ClientResult {
                    tool_call_id: ask.id.clone(),
                    outcome: Ok(json!({"url": "u"})),
                },
            ))
            .map(|routed| assert_eq!(routed, Routed::Here))
            .unwrap(),
            "error" => block(r.submit(
                SESSION,
                Submission::ClientResult {
                    tool_call_id: ask.id.clone(),
                    outcome: Err("no camera".into()),
                },
            ))
            .map(|routed| assert_eq!(routed, Routed::Here))
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

/// The events of recorded log lines, in order.
fn event_names(logs: &[(String, Value)]) -> Vec<&str> {
    logs.iter().map(|(name, _)| name.as_str()).collect()
}

#[test]
fn runs_log_model_calls_tools_and_waits_without_arguments() {
    let w = World::new();
    let r = w.runner("p1");
    let call = w.model.call("delete_file", json!({"path": "/secret/path"}));
    w.model.calls(vec![call.clone()]).text("done");
    w.create(&r, "tester", "delete it");
    drive(&r);
    w.host.advance(1_500);
    approve(&r, &call.id, true);
    drive(&r);
    let logs = w.host.logs();
    assert_eq!(
        event_names(&logs),
        [
            "run_started",
            "model_call",
            "run_suspended",
            "tool_call_suspended",
            "tool_call_submitted",
            "run_resumed",
            "tool_executed",
            "model_call",
            "run_completed"
        ]
    );
    let model = &logs[1].1;
    assert_eq!(
        (model["session"].as_str(), model["inputTokens"].as_u64()),
        (Some(SESSION), Some(10))
    );
    assert_eq!(
        (logs[3].1["tool"].as_str(), logs[3].1["kind"].as_str()),
        (Some("delete_file"), Some("approval"))
    );
    let submitted = &logs[4].1;
    assert_eq!(
        (
            submitted["outcome"].as_str(),
            submitted["waitedMs"].as_u64()
        ),
        (Some("approved"), Some(1_500)),
        "the human took 1.5 s to approve"
    );
    assert_eq!(
        logs[5].1["waitedMs"], 1_500,
        "time spent waiting on the human"
    );
    assert_eq!(
        (logs[6].1["tool"].as_str(), logs[6].1["success"].as_bool()),
        (Some("delete_file"), Some(true))
    );
    let text = serde_json::to_string(&logs).unwrap();
    assert!(
        !text.contains("/secret/path"),
        "logs never carry tool arguments"
    );
    // The default level keeps a run's boundaries; the run's end has its token usage.
    let info = w.host.logs_at(Level::Info);
    assert_eq!(
        event_names(&info),
        [
            "run_started",
            "run_suspended",
            "tool_call_suspended",
            "tool_call_submitted",
            "run_resumed",
            "run_completed"
        ]
    );
    let end = &info[5].1;
    assert_eq!(
        (end["runSteps"].as_u64(), end["inputTokens"].as_u64()),
        (Some(2), Some(20)),
        "two model calls of 10 input tokens each"
    );
    assert!(w.host.logs_at(Level::Warn).is_empty(), "nothing failed");
}

#[test]
fn runs_record_each_steps_usage_and_each_calls_wait() {
    use helix_edge_core::api::RunView;
    use helix_edge_core::store::Store;
    let w = World::new();
    let r = w.runner("p1");
    let call = w.model.call("delete_file", json!({"path": "/x"}));
    w.model.calls(vec![call.clone()]).text("done");
    w.create(&r, "tester", "delete it");
    drive(&r);
    w.host.advance(2_250);
    approve(&r, &call.id, true);
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    let tool_message = w
        .messages()
        .into_iter()
        .find_map(|m| match m {
            Message::Tool { metadata, .. } => metadata,
            _ => None,
        })
        .expect("the approved call's result");
    assert_eq!(tool_message["waitedMs"], 2_250);

    let checkpoints = block(w.store.checkpoints(SESSION)).unwrap();
    let runs = block(w.store.runs(SESSION)).unwrap();
    let view = serde_json::to_value(RunView::new(runs[0].clone(), &checkpoints)).unwrap();
    let steps = view["steps"].as_array().unwrap();
    assert_eq!(
        steps
            .iter()
            .map(|s| (s["step"].as_u64(), s["stopReason"].as_str()))
            .collect::<Vec<_>>(),
        [(Some(1), Some("tool_use")), (Some(2), Some("end_turn"))],
        "one entry per model step, in order"
    );
    assert_eq!(steps[1]["usage"]["inputTokens"], 10);
    assert_eq!(view["usage"]["inputTokens"], 20, "the run's total");
    assert_eq!(
        view["waits"],
        json!([{
            "toolCallId": call.id,
            "toolName": "delete_file",
            "kind": "approval",
            "waitedMs": 2_250,
            "outcome": "approved"
        }])
    );
    let step_checkpoint = steps[0]["checkpointId"].as_str().unwrap();
    assert!(
        checkpoints.iter().any(|c| c.id == step_checkpoint),
        "a step names the checkpoint it made"
    );
}

#[test]
fn an_approval_nobody_decides_by_its_deadline_is_denied_and_the_model_is_told() {
    use helix_edge_core::agent::{Agent, Agents};
    use helix_edge_core::error::ToolError;
    use helix_edge_core::host::Host;
    use helix_edge_core::testing::Scenario;
    use helix_edge_core::tool::Tool;
    use std::time::Duration;

    let wire = Tool::new("wire", "Send money.", |_: Value, _| async {
        Ok::<_, ToolError>(json!({"wired": true}))
    })
    .approval_always()
    .approval_deadline(Duration::from_secs(60));
    let agent = Agent::builder("payer").system_prompt("t").tool(wire);
    let agents = Agents::new().with(agent.build().unwrap()).unwrap();
    let w = World {
        scenario: Scenario::new(agents),
        exec: Default::default(),
    };
    let r = w.runner("p1");
    let call = w.model.call("wire", json!({}));
    w.model
        .calls(vec![call.clone()])
        .text("It was not approved in time.");
    let since = w.host.now_ms();
    w.create(&r, "payer", "pay");
    let Progress::Suspended {
        next_deadline: Some(deadline),
    } = drive(&r)
    else {
        panic!("suspended until the approval's deadline")
    };
    assert_eq!(deadline, since + 60_000);
    assert_eq!(w.session().head.pending[0].deadline, Some(deadline));
    w.host.advance(59_999);
    assert!(
        matches!(drive(&r), Progress::Suspended { .. }),
        "not yet due"
    );
    w.host.advance(1);
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let (id, is_error, content) = results_seen(&w, 1).remove(0);
    assert_eq!((id.as_str(), is_error), (call.id.as_str(), true));
    assert_eq!(
        content["reason"],
        "Nobody decided within the approval's deadline (60 s)."
    );
    assert_eq!(
        content["error"],
        "Tool call was not approved before its deadline"
    );
    let tool = w
        .messages()
        .into_iter()
        .find(|m| matches!(m, Message::Tool { .. }))
        .unwrap();
    let Message::Tool { metadata, .. } = tool else {
        unreachable!()
    };
    assert_eq!(
        metadata.unwrap()["decidedBy"],
        json!({"subject": "deadline"})
    );
    // A decision after the deadline is refused: the denial stands.
    let late = block(r.submit(
        SESSION,
        Submission::Approval {
            tool_call_id: call.id.clone(),
            approved: true,
            reason: None,
        },
    ));
    assert_eq!(late, Err(RunError::AlreadyResolved(call.id.clone())));
    assert_consistent(&w, &json!({}));
}
