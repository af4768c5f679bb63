//! The `demo` model drives the reference `assistant` agent with no key and no network:
//! each intent of SPEC §6 reaches the right tool, and the run ends in text.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge::agent::Agents;
use helix_edge::demo::DemoModel;
use helix_edge::host::ManualHost;
use helix_edge::journal::MemoryJournal;
use helix_edge::message::Message;
use helix_edge::model::OneModel;
use helix_edge::runner::{CreateSession, Progress, Runner, RunnerConfig, Submission};
use helix_edge::store::{MemoryStore, PendingKind, SessionStatus, Store};
use reference_agents::assistant;
use serde_json::{Value, json};
use std::rc::Rc;

fn run(message: &str) -> (Runner<Rc<MemoryStore>>, Rc<MemoryStore>, Progress) {
    run_as("assistant", message)
}

fn run_as(agent: &str, message: &str) -> (Runner<Rc<MemoryStore>>, Rc<MemoryStore>, Progress) {
    let store = Rc::new(MemoryStore::new());
    let agents = Agents::new().with(assistant().unwrap()).unwrap();
    let agents = agents.with(reference_agents::orders().unwrap()).unwrap();
    let runner = Runner::new(
        store.clone(),
        agents,
        Rc::new(OneModel(Rc::new(DemoModel::default()))),
        Rc::new(MemoryJournal::new()),
        Rc::new(ManualHost::new(1_795_314_660_000, "")),
        RunnerConfig::new("demo"),
    );
    let create = CreateSession::new("d", agent, message);
    futures::executor::block_on(runner.create(create)).unwrap();
    let progress = futures::executor::block_on(runner.drive("d", 20)).unwrap();
    (runner, store, progress)
}

fn transcript(store: &MemoryStore) -> Vec<Message> {
    futures::executor::block_on(store.messages("d", 0, 100)).unwrap()
}

fn state(store: &MemoryStore) -> Value {
    futures::executor::block_on(store.load("d"))
        .unwrap()
        .unwrap()
        .state
}

fn last_text(store: &MemoryStore) -> String {
    match transcript(store).last() {
        Some(Message::Assistant { content, .. }) => content.clone(),
        other => panic!("expected a final answer, got {other:?}"),
    }
}

#[test]
fn notes_are_added_in_parallel_and_the_answer_reports_them() {
    let (_, store, progress) = run("note buy milk; note call mum");
    assert_eq!(progress, Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        state(&store),
        json!({"notes": [{"text": "buy milk"}, {"text": "call mum"}]})
    );
    assert!(
        last_text(&store).starts_with("Done. add_note returned {\"count\":1}"),
        "{}",
        last_text(&store)
    );
}

#[test]
fn the_time_comes_from_the_host_clock() {
    let (_, store, _) = run("what time is it?");
    assert_eq!(
        last_text(&store),
        r#"Done. get_time returned {"now":"2026-11-22T02:31:00.000Z"}."#
    );
}

#[test]
fn deleting_a_file_waits_for_approval() {
    let (runner, store, progress) = run("delete /tmp/x");
    assert!(matches!(progress, Progress::Suspended { .. }));
    let head = futures::executor::block_on(store.load("d"))
        .unwrap()
        .unwrap()
        .head;
    assert_eq!(head.pending[0].kind, PendingKind::Approval);
    assert_eq!(head.pending[0].arguments, json!({"path": "/tmp/x"}));
    let approve = Submission::Approval {
        tool_call_id: head.pending[0].tool_call_id.clone(),
        approved: true,
        reason: None,
    };
    futures::executor::block_on(runner.submit("d", approve)).unwrap();
    assert_eq!(
        futures::executor::block_on(runner.drive("d", 20)).unwrap(),
        Progress::Idle(SessionStatus::Completed)
    );
    assert_eq!(
        last_text(&store),
        r#"Done. delete_file returned {"deleted":"/tmp/x"}."#
    );
}

#[test]
fn email_needs_approval_only_above_three_recipients() {
    let (_, store, progress) = run("email a@x.io, b@x.io about lunch");
    assert_eq!(progress, Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        last_text(&store),
        r#"Done. send_email returned {"sent":2}."#
    );
    let (_, _, progress) = run("email a@x.io,b@x.io,c@x.io,d@x.io about lunch");
    assert!(matches!(progress, Progress::Suspended { .. }));
}

#[test]
fn asking_the_user_hands_a_client_tool_to_the_client_with_a_deadline() {
    let (_, store, progress) = run("ask me something");
    let head = futures::executor::block_on(store.load("d"))
        .unwrap()
        .unwrap()
        .head;
    assert_eq!(
        progress,
        Progress::Suspended {
            next_deadline: head.pending[0].deadline
        }
    );
    assert_eq!(head.pending[0].kind, PendingKind::Client);
    assert_eq!(head.pending[0].deadline, Some(1_795_314_660_000 + 300_000));
}

#[test]
fn anything_else_gets_help_text() {
    let (_, store, progress) = run("hello");
    assert_eq!(progress, Progress::Idle(SessionStatus::Completed));
    assert!(last_text(&store).contains("note buy milk"));
}

#[test]
fn an_order_is_processed_as_a_plan_through_the_state() {
    let (_, store, progress) = run_as("orders", "process order 1001");
    assert_eq!(progress, Progress::Idle(SessionStatus::Completed));
    let state = state(&store);
    assert_eq!(
        state["order"],
        json!({"id": "1001", "customer": "Ada", "total": 42.5})
    );
    assert_eq!(state["check"], json!({"orderId": "1001", "ok": true}));
    assert_eq!(
        state["archive"],
        json!([{"orderId": "1001", "total": 42.5}])
    );
    assert!(
        last_text(&store).contains("store_order returned"),
        "{}",
        last_text(&store)
    );
}

#[test]
fn a_large_order_s_plan_waits_for_the_check_s_approval() {
    let (runner, store, progress) = run_as("orders", "process order 1002");
    assert_eq!(
        progress,
        Progress::Suspended {
            next_deadline: None
        }
    );
    let head = futures::executor::block_on(store.load("d"))
        .unwrap()
        .unwrap()
        .head;
    assert_eq!(head.pending.len(), 1);
    assert_eq!(head.pending[0].tool_name, "check_order");
    assert_eq!(
        head.pending[0].arguments,
        json!({"orderId": "1002", "total": 250.0})
    );
    assert_eq!(
        state(&store)["archive"],
        json!([]),
        "the store waits for the check"
    );

    let approval = Submission::Approval {
        tool_call_id: head.pending[0].tool_call_id.clone(),
        approved: true,
        reason: None,
    };
    futures::executor::block_on(runner.submit("d", approval)).unwrap();
    let progress = futures::executor::block_on(runner.drive("d", 20)).unwrap();
    assert_eq!(progress, Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        state(&store)["archive"],
        json!([{"orderId": "1002", "total": 250.0}])
    );
}
