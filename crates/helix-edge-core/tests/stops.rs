//! Answers that end with an error stop reason (scripted): they never complete a run as
//! a success, their tool calls never run, and only a cut-off answer of an agent that
//! owes an output is nudged, within the nudge budget.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::chunk::{ChunkBody, StreamEvent};
use helix_edge_core::message::Message;
use helix_edge_core::model::{ModelTurn, StopReason};
use helix_edge_core::runner::Progress;
use helix_edge_core::store::SessionStatus;
use serde_json::json;
use support::*;

/// Runs `agent` until it stops; the error code it failed with.
fn failure(w: &World, agent: &str) -> (String, bool, String) {
    let r = w.runner("p1");
    w.create(&r, agent, "go");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Failed));
    let error = w.session().head.error.unwrap();
    let streamed = matches!(
        w.journal.events().last(),
        Some(StreamEvent::Fail { error: e }) if e.code == error.code
    );
    assert!(streamed, "the stream ends with the same failure");
    (error.code, error.retryable, error.message)
}

#[test]
fn every_error_stop_reason_fails_the_run_with_its_own_code() {
    let cases = [
        (StopReason::Refusal, "provider_refused", false),
        (
            StopReason::ContentFilter,
            "provider_content_filtered",
            false,
        ),
        (StopReason::MaxTokens, "provider_max_tokens", false),
        (StopReason::Error, "provider_stop_error", true),
        (StopReason::Unknown, "provider_stop_unknown", false),
    ];
    for (stop, code, retryable) in cases {
        let w = World::new();
        w.model.stopped("partial answer", stop, None);
        let (got, got_retryable, _) = failure(&w, "tester");
        assert_eq!((got.as_str(), got_retryable), (code, retryable), "{stop:?}");
        let Message::Assistant { content, .. } = &w.messages()[1] else {
            panic!("the answer is kept")
        };
        assert_eq!(content, "partial answer");
        assert_eq!(w.model.seen().len(), 1, "no further model call");
    }
}

#[test]
fn a_refusal_carries_the_providers_explanation() {
    let w = World::new();
    w.model
        .stopped("", StopReason::Refusal, Some("It asks for malware."));
    let (_, _, message) = failure(&w, "tester");
    assert_eq!(message, "The model refused to answer: It asks for malware.");
}

#[test]
fn tool_calls_of_an_answer_that_stopped_in_error_never_run() {
    let w = World::new();
    let note = w.model.call("add_note", json!({"text": "x"}));
    let delete = w.model.call("delete_file", json!({"path": "/a"}));
    w.model.turn(ModelTurn {
        tool_calls: vec![note, delete],
        stop: StopReason::ContentFilter,
        ..ModelTurn::default()
    });
    let (code, _, _) = failure(&w, "tester");
    assert_eq!(code, "provider_content_filtered");
    assert!(w.exec.all().is_empty());
    assert_eq!(w.session().state, json!({"notes": []}), "no state change");
    assert!(
        w.session().head.pending.is_empty(),
        "no approval is asked for"
    );
    assert!(
        !w.chunks()
            .iter()
            .any(|c| matches!(c, ChunkBody::ToolStart { .. })),
        "no tool starts"
    );
    assert_consistent(&w, &json!({"notes": []}));
}

#[test]
fn a_cut_off_answer_owing_an_output_is_nudged_within_the_budget() {
    let w = World::new();
    let r = w.runner("p1");
    w.model.stopped("{\"summ", StopReason::MaxTokens, None);
    w.model.output(json!({"summary": "ok"}));
    w.create(&r, "summarizer", "go");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(w.session().head.output, Some(json!({"summary": "ok"})));
    let seen = w.model.seen();
    assert!(
        matches!(seen[1].messages.last(), Some(Message::User { content, .. }) if content.contains("cut off"))
    );

    // Cut off every time: the nudges run out, and the run fails as cut off.
    let w = World::new();
    for _ in 0..3 {
        w.model.stopped("{\"summ", StopReason::MaxTokens, None);
    }
    let (code, _, _) = failure(&w, "summarizer");
    assert_eq!(code, "provider_max_tokens");
    assert_eq!(w.model.seen().len(), 3, "two nudges, then the failure");

    // A refusal is never nudged, even when an output is owed.
    let w = World::new();
    w.model.stopped("no", StopReason::Refusal, None);
    assert_eq!(failure(&w, "summarizer").0, "provider_refused");
    assert_eq!(w.model.seen().len(), 1);
}
