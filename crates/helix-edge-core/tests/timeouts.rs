//! Server tool timeouts: a call that runs past its tool's `timeout` (or the agent's
//! `tool_timeout`) has its signal raised and is stopped; the model sees `tool_timeout`
//! and the run goes on. Other calls of the step are not affected.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::message::Message;
use helix_edge_core::runner::Progress;
use helix_edge_core::store::SessionStatus;
use serde_json::{Value, json};
use support::*;

/// The error code and text of the tool message answering `id`.
fn tool_error(w: &World, id: &str) -> Option<(String, String)> {
    w.messages().into_iter().find_map(|m| match m {
        Message::Tool {
            tool_call_id,
            content,
            is_error: true,
            ..
        } if tool_call_id == id => Some((
            content["code"].as_str()?.to_string(),
            content["error"].as_str()?.to_string(),
        )),
        _ => None,
    })
}

#[test]
fn a_call_past_its_timeout_is_stopped_with_its_signal_raised_and_the_run_goes_on() {
    let w = World::new();
    let r = w.runner("p1");
    let slow = w.model.call("slow", json!({}));
    let stuck = w.model.call("stuck", json!({}));
    let note = w.model.call("add_note", json!({"text": "kept"}));
    w.model
        .calls(vec![slow.clone(), stuck.clone(), note.clone()])
        .text("done");
    w.create(&r, "tester", "go");
    STUCK.with_borrow_mut(Vec::clear);

    // The clock moves by the slow tool's timeout whenever the drive waits.
    let progress = drive_advancing(&w, &r, SLOW_TIMEOUT_MS, 100);
    assert_eq!(progress, Progress::Idle(SessionStatus::Completed));

    let (code, text) = tool_error(&w, &slow.id).expect("the slow call failed");
    assert_eq!(code, "tool_timeout");
    assert!(text.contains("500 ms"), "{text}");
    let (code, text) = tool_error(&w, &stuck.id).expect("the stuck call failed");
    assert_eq!(code, "tool_timeout");
    assert!(
        text.contains("30000 ms"),
        "the agent's default applies: {text}"
    );
    assert!(
        tool_error(&w, &note.id).is_none(),
        "the other call succeeded"
    );
    assert_eq!(w.session().state["notes"], json!([{"text": "kept"}]));

    let signals: Vec<bool> = STUCK.with_borrow(|s| s.iter().map(|c| c.is_aborted()).collect());
    assert_eq!(signals, [true, true], "both calls saw their signal raised");

    let timed_out: Vec<Value> = w
        .host
        .logs()
        .into_iter()
        .filter(|(e, f)| e == "tool_executed" && f["code"] == "tool_timeout")
        .map(|(_, f)| f["tool"].clone())
        .collect();
    assert_eq!(timed_out, [json!("slow"), json!("stuck")]);
}
