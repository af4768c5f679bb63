//! The agent, natively (`cargo test`): helix-edge's testing kit plays the platform in
//! memory and a scripted model plays the LLM.

use helix_edge::agent::Agents;
use helix_edge::store::SessionStatus;
use helix_edge::testing::Scenario;
use serde_json::json;

fn scenario() -> Scenario {
    Scenario::new(Agents::new().with(super::assistant().unwrap()).unwrap())
}

#[test]
fn adding_runs_at_once_and_clearing_waits_for_a_human() {
    let s = scenario();
    let add = s.model.call("add_todo", json!({ "text": "buy milk" }));
    let clear = s.model.call("clear_todos", json!({}));
    s.model.calls(vec![add]).calls(vec![clear]).text("Cleared.");
    let runner = s.runner("p1");
    s.create(&runner, "assistant", "Add 'buy milk', then clear the list.");
    s.drive(&runner);
    assert_eq!(s.session().state, json!({ "todos": ["buy milk"] }));
    let pending = s.pending();
    assert_eq!(pending.len(), 1, "clearing waits for a human");
    assert_eq!(pending[0].tool_name, "clear_todos");

    s.approve(&runner, &pending[0].tool_call_id, true, None);
    s.drive(&runner);
    let session = s.session();
    assert_eq!(session.head.status, SessionStatus::Completed);
    assert_eq!(session.state, json!({ "todos": [] }));
    s.assert_consistent(&json!({ "todos": [] }));
}

#[test]
fn the_stream_replays_from_the_state_the_session_started_with() {
    let s = scenario();
    let milk = s.model.call("add_todo", json!({ "text": "buy milk" }));
    let eggs = s.model.call("add_todo", json!({ "text": "buy eggs" }));
    s.model.calls(vec![milk, eggs]).text("Added both.");
    let runner = s.runner("p1");
    s.create(&runner, "assistant", "Add milk and eggs.");
    s.drive(&runner);
    // The end, asserted as such (the two calls run in parallel, in either order)...
    let mut todos = s.session().state["todos"].clone();
    todos.as_array_mut().unwrap().sort_by_key(|t| t.to_string());
    assert_eq!(todos, json!(["buy eggs", "buy milk"]));
    // ...and the start: the stream's patches replayed from it give that end.
    s.assert_consistent(&json!({ "todos": [] }));
}
