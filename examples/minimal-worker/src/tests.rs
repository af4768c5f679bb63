//! The `support` agent, natively (`cargo test`): helix-edge's testing kit plays the
//! platform in memory and a scripted model plays the LLM. Nothing here reaches the
//! orders API: every call is denied or refused before it would.

use super::support;
use helix_edge::store::SessionStatus;
use helix_edge::testing::Scenario;
use serde_json::json;

fn scenario() -> Scenario {
    Scenario::new(support("https://orders.invalid".into(), None).unwrap())
}

#[test]
fn a_cancellation_waits_for_a_human_and_a_denial_reaches_the_model() {
    let s = scenario();
    let call = s
        .model
        .call("cancel_order", json!({ "order_id": "A-1042" }));
    s.model.calls(vec![call]).text("I did not cancel it.");
    let runner = s.runner("p1");
    s.create(&runner, "support", "Cancel order A-1042, please.");
    s.drive(&runner);
    let pending = s.pending();
    assert_eq!(pending.len(), 1, "the call waits for a human");
    assert_eq!(pending[0].arguments, json!({ "order_id": "A-1042" }));

    s.approve(
        &runner,
        &pending[0].tool_call_id,
        false,
        Some("not this one"),
    );
    s.drive(&runner);
    let session = s.session();
    assert_eq!(session.head.status, SessionStatus::Completed);
    s.assert_consistent(&json!({}));
}

#[test]
fn an_approved_call_with_a_malformed_order_id_fails_before_any_request() {
    let s = scenario();
    let call = s
        .model
        .call("cancel_order", json!({ "order_id": "A 1042; drop" }));
    s.model.calls(vec![call]).text("That id is not valid.");
    let runner = s.runner("p1");
    s.create(&runner, "support", "Cancel order 'A 1042; drop'.");
    s.drive(&runner);
    let id = s.pending()[0].tool_call_id.clone();
    s.approve(&runner, &id, true, None);
    s.drive(&runner);
    let error = s.messages().into_iter().find_map(|m| match m {
        helix_edge::message::Message::Tool {
            content,
            is_error: true,
            ..
        } => Some(content),
        _ => None,
    });
    let error = error.expect("the tool's error is in the transcript");
    assert!(
        error.to_string().contains("order_id is letters, digits"),
        "{error}"
    );
    assert_eq!(s.session().head.status, SessionStatus::Completed);
}
