//! Content that would not fit D1's rows (2 MB each) is refused with a clear error
//! before anything is written, and never wedges a session: an oversized tool result
//! becomes an error the model can act on, a client's is refused with no state change,
//! and a state that outgrows its row fails the run with `content_too_large` while
//! every committed step stays intact. Runs over the D1 store's write plan.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use futures::executor::block_on;
use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::error::ToolError;
use helix_edge_core::host::ManualHost;
use helix_edge_core::journal::MemoryJournal;
use helix_edge_core::message::{MAX_TOOL_RESULT_BYTES, Message};
use helix_edge_core::model::OneModel;
use helix_edge_core::runner::{
    CreateSession, Progress, RunError, Runner, RunnerConfig, Submission,
};
use helix_edge_core::scripted::ScriptedModel;
use helix_edge_core::store::rows::{MAX_PATCH_BYTES, MAX_ROW_BYTES, PlannedStore};
use helix_edge_core::store::{SessionStatus, Store, StoreError};
use helix_edge_core::tool::{Tool, ToolContext};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::rc::Rc;
use support::agents::AskUser;

#[derive(Deserialize, JsonSchema)]
struct Size {
    bytes: usize,
}

/// `grow` appends a string of `bytes` to `/blobs`; `big` answers one of `bytes` (and
/// also writes to the state, which must then be discarded).
fn agent() -> Agent {
    Agent::builder("limits")
        .system_prompt("Test limits.")
        .initial_state(json!({ "blobs": [] }))
        .tool(Tool::new(
            "grow",
            "Grow the state.",
            |input: Size, ctx: ToolContext| async move {
                ctx.append("/blobs", json!("x".repeat(input.bytes)))?;
                Ok::<_, ToolError>(json!({ "ok": true }))
            },
        ))
        .tool(Tool::new(
            "big",
            "Answer big.",
            |input: Size, ctx: ToolContext| async move {
                ctx.append("/blobs", json!("small"))?;
                Ok::<_, ToolError>(json!({ "data": "y".repeat(input.bytes) }))
            },
        ))
        .tool(Tool::client::<AskUser>("ask_user", "Ask the user."))
        .build()
        .unwrap()
}

fn world() -> (
    Runner<Rc<PlannedStore>>,
    Rc<PlannedStore>,
    Rc<ScriptedModel>,
) {
    let (store, model) = (Rc::new(PlannedStore::new()), Rc::new(ScriptedModel::new()));
    let runner = Runner::new(
        store.clone(),
        Agents::new().with(agent()).unwrap(),
        Rc::new(OneModel(model.clone())),
        Rc::new(MemoryJournal::new()),
        Rc::new(ManualHost::new(1_800_000_000_000, "limits")),
        RunnerConfig::new("limits"),
    );
    (runner, store, model)
}

fn create(runner: &Runner<Rc<PlannedStore>>, id: &str) {
    block_on(runner.create(CreateSession::new(id, "limits", "go"))).unwrap();
}

fn messages(store: &PlannedStore, id: &str) -> Vec<Message> {
    block_on(store.messages(id, 0, 1_000)).unwrap()
}

#[test]
fn an_oversized_tool_result_is_an_error_the_model_sees_and_its_writes_are_dropped() {
    let (runner, store, model) = world();
    let call = model.call("big", json!({ "bytes": MAX_TOOL_RESULT_BYTES + 1 }));
    model.calls(vec![call]).text("I will ask for less.");
    create(&runner, "s");
    block_on(runner.drive("s", 10)).unwrap();

    let loaded = block_on(store.load("s")).unwrap().unwrap();
    assert_eq!(loaded.head.status, SessionStatus::Completed);
    assert_eq!(
        loaded.state,
        json!({ "blobs": [] }),
        "a failed call writes nothing"
    );
    let Message::Tool {
        content, is_error, ..
    } = &messages(&store, "s")[2]
    else {
        panic!("the tool message");
    };
    assert!(is_error);
    assert_eq!(content["code"], "tool_result_too_large");
    assert!(content["error"].as_str().unwrap().contains("ask for less"));
    // What the model saw on its next call.
    assert_eq!(model.seen()[1].messages[2], messages(&store, "s")[2]);
}

#[test]
fn an_oversized_client_result_is_refused_and_changes_nothing() {
    let (runner, store, model) = world();
    let call = model.call("ask_user", json!({ "question": "?" }));
    let id = call.id.clone();
    model.calls(vec![call]).text("Thanks.");
    create(&runner, "s");
    block_on(runner.drive("s", 10)).unwrap();
    let before = block_on(store.load("s")).unwrap().unwrap();

    let huge = Submission::ClientResult {
        tool_call_id: id.clone(),
        outcome: Ok(json!("z".repeat(MAX_TOOL_RESULT_BYTES))),
    };
    let err = block_on(runner.submit("s", huge)).unwrap_err();
    assert!(
        matches!(
            err,
            RunError::Store(StoreError::TooLarge {
                what: "tool result",
                ..
            })
        ),
        "{err:?}"
    );
    assert_eq!(helix_edge_core::api::ApiError::from(err).status, 413);
    assert_eq!(
        block_on(store.load("s")).unwrap().unwrap(),
        before,
        "nothing stored"
    );

    // The call is still open for a proper answer.
    let fine = Submission::ClientResult {
        tool_call_id: id,
        outcome: Ok(json!("blue")),
    };
    block_on(runner.submit("s", fine)).unwrap();
    block_on(runner.drive("s", 10)).unwrap();
    assert_eq!(
        block_on(store.load("s")).unwrap().unwrap().head.status,
        SessionStatus::Completed
    );
}

#[test]
fn a_state_that_outgrows_its_row_fails_the_run_and_keeps_every_committed_step() {
    let (runner, store, model) = world();
    // 400 kB per step: the snapshot that folds the patches in would pass 1.9 MB.
    for _ in 0..10 {
        let call = model.call("grow", json!({ "bytes": 400_000 }));
        model.calls(vec![call]);
    }
    create(&runner, "s");
    let progress = block_on(runner.drive("s", 20)).unwrap();
    assert_eq!(progress, Progress::Idle(SessionStatus::Failed));

    let loaded = block_on(store.load("s")).unwrap().unwrap();
    let error = loaded.head.run.error.clone().expect("the run's error");
    assert_eq!(error.code, "content_too_large");
    assert!(
        error.message.contains(&MAX_ROW_BYTES.to_string()),
        "{}",
        error.message
    );
    let steps = loaded.state["blobs"].as_array().unwrap().len();
    assert!((4..10).contains(&steps), "{steps} steps committed");
    assert_eq!(loaded.head.step_count as usize, steps);
    // Every committed step is whole: its assistant message and its tool result.
    assert_eq!(messages(&store, "s").len(), 1 + 2 * steps);
    assert!(
        store.bytes_written().iter().all(|&b| b < 2 * MAX_ROW_BYTES),
        "no write near the limit was sent"
    );
    // The failure was not retried: the model was not called again after it.
    assert_eq!(model.seen().len(), steps + 1);
}

#[test]
fn a_step_changing_more_than_the_patch_limit_fails_the_run_before_writing() {
    let (runner, store, model) = world();
    let call = model.call("grow", json!({ "bytes": MAX_PATCH_BYTES + 1 }));
    model.calls(vec![call]);
    create(&runner, "s");
    let writes = store.bytes_written().len();
    block_on(runner.drive("s", 5)).unwrap();

    let loaded = block_on(store.load("s")).unwrap().unwrap();
    assert_eq!(loaded.head.status, SessionStatus::Failed);
    let error = loaded.head.run.error.unwrap();
    assert_eq!(error.code, "content_too_large");
    assert!(
        error.message.starts_with("The state change is"),
        "{}",
        error.message
    );
    assert_eq!(loaded.state, json!({ "blobs": [] }));
    assert_eq!(
        messages(&store, "s").len(),
        1,
        "the failed step left nothing"
    );
    assert_eq!(
        store.bytes_written().len(),
        writes + 1,
        "only the failure was written"
    );
}
