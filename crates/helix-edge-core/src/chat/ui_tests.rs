//! The UI message stream's tests: session events in, the AI SDK's chunks out.

use super::UiStream;
use serde_json::{Value, json};

fn chunk(body: Value) -> Value {
    let mut chunk = json!({ "sessionId": "s", "agentType": "a", "runId": "r", "timestamp": 1 });
    chunk
        .as_object_mut()
        .expect("object")
        .extend(body.as_object().expect("object").clone());
    chunk
}

fn types(out: &[Value]) -> Vec<String> {
    out.iter()
        .map(|c| c["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The chunks of the frames `ui` makes of `events`.
fn feed(ui: &mut UiStream, events: &[(&str, Value)]) -> Vec<Value> {
    let frames: String = events.iter().map(|(e, d)| ui.frames(e, d)).collect();
    frames
        .split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| {
            let json = f.strip_prefix("data: ").expect("a data frame");
            serde_json::from_str(json).expect("JSON")
        })
        .collect()
}

#[test]
fn a_turn_up_to_an_approval_then_its_continuation() {
    let mut ui = UiStream::new("s", "m1", Vec::new());
    let out = feed(
        &mut ui,
        &[
            ("chunk", chunk(json!({"type": "run_started", "turn": 1}))),
            (
                "chunk",
                chunk(json!({"type": "thinking", "content": "hm", "isComplete": true})),
            ),
            (
                "chunk",
                chunk(json!({"type": "text_delta", "delta": "I will "})),
            ),
            (
                "chunk",
                chunk(json!({"type": "text_delta", "delta": "delete it."})),
            ),
            (
                "chunk",
                chunk(
                    json!({"type": "tool_approval_request", "toolCallId": "c1", "toolName": "delete_file", "arguments": {"path": "/x"}}),
                ),
            ),
            (
                "chunk",
                chunk(json!({"type": "state_patch", "patches": []})),
            ),
            (
                "chunk",
                chunk(json!({"type": "step_committed", "checkpointId": "k1"})),
            ),
            (
                "chunk",
                chunk(
                    json!({"type": "run_suspended", "reason": "client_tool", "toolCallIds": ["c1"]}),
                ),
            ),
            (
                "chunk",
                chunk(json!({"type": "text_delta", "delta": "never sent"})),
            ),
        ],
    );
    assert_eq!(
        types(&out),
        [
            "start",
            "start-step",
            "reasoning-start",
            "reasoning-delta",
            "reasoning-end",
            "text-start",
            "text-delta",
            "text-delta",
            "text-end",
            "tool-input-start",
            "tool-input-available",
            "tool-approval-request",
            "data-state-patch",
            "finish-step",
            "finish",
        ]
    );
    assert_eq!(out[0]["messageId"], "m1");
    assert_eq!(out[10]["input"], json!({"path": "/x"}));
    assert_eq!(out[11]["approvalId"], "c1");
    assert_eq!(out[14]["finishReason"], "tool-calls");
    assert!(ui.is_done());

    // The next response continues m1; the client has c1's part already.
    let mut ui = UiStream::new("s", "m1", vec!["c1".into()]);
    let out = feed(
        &mut ui,
        &[
            ("chunk", chunk(json!({"type": "run_resumed", "turn": 1}))),
            (
                "chunk",
                chunk(
                    json!({"type": "tool_start", "toolCallId": "c1", "toolName": "delete_file", "arguments": {}, "executor": "server"}),
                ),
            ),
            (
                "chunk",
                chunk(
                    json!({"type": "tool_end", "toolCallId": "c1", "toolName": "delete_file", "success": true, "result": {"deleted": "/x"}}),
                ),
            ),
            (
                "chunk",
                chunk(
                    json!({"type": "tool_start", "sessionId": "child", "toolCallId": "x", "toolName": "t", "arguments": {}, "executor": "server"}),
                ),
            ),
            (
                "chunk",
                chunk(json!({"type": "text_delta", "delta": "Done."})),
            ),
            ("end", json!({})),
        ],
    );
    assert_eq!(
        types(&out),
        [
            "start",
            "start-step",
            "tool-output-available",
            "text-start",
            "text-delta",
            "text-end",
            "finish-step",
            "finish",
        ]
    );
    assert_eq!(out[2]["output"], json!({"deleted": "/x"}));
    assert_eq!(out[7]["finishReason"], "stop");
}

#[test]
fn denials_errors_and_failures_have_their_own_parts() {
    let mut ui = UiStream::new("s", "m", vec!["c1".into()]);
    let denied = crate::error::ToolError::Denied.to_string();
    let out = feed(
        &mut ui,
        &[
            ("chunk", chunk(json!({"type": "run_resumed", "turn": 1}))),
            (
                "chunk",
                chunk(
                    json!({"type": "tool_end", "toolCallId": "c1", "toolName": "t", "success": false, "error": denied}),
                ),
            ),
            (
                "chunk",
                chunk(
                    json!({"type": "tool_end", "toolCallId": "c2", "toolName": "t", "success": false, "error": "boom"}),
                ),
            ),
            (
                "chunk",
                chunk(json!({"type": "custom", "eventName": "progress", "data": {"pct": 50}})),
            ),
            (
                "chunk",
                chunk(
                    json!({"type": "subagent_end", "subSessionId": "k", "toolCallId": "c3", "result": {"summary": "s"}}),
                ),
            ),
            (
                "fail",
                json!({"error": {"code": "x", "message": "It broke."}}),
            ),
        ],
    );
    assert_eq!(
        types(&out),
        [
            "start",
            "start-step",
            "tool-output-denied",
            "tool-input-start",
            "tool-input-available",
            "tool-output-error",
            "data-progress",
            "data-subagent",
            "error",
        ]
    );
    assert_eq!(out[5]["errorText"], "boom");
    assert_eq!(
        out[7]["data"],
        json!({"toolCallId": "c3", "status": "ended", "result": {"summary": "s"}})
    );
    assert_eq!(out[8]["errorText"], "It broke.");
    assert!(ui.is_done());
}

#[test]
fn nothing_shows_before_the_run_begins_and_a_suspension_on_children_goes_on() {
    let mut ui = UiStream::new("s", "m", Vec::new());
    let out = feed(
        &mut ui,
        &[
            (
                "chunk",
                chunk(json!({"type": "text_delta", "delta": "an earlier run"})),
            ),
            ("chunk", chunk(json!({"type": "run_started", "turn": 2}))),
            (
                "chunk",
                chunk(
                    json!({"type": "run_suspended", "reason": "awaiting_children", "toolCallIds": ["c"]}),
                ),
            ),
        ],
    );
    assert_eq!(types(&out), ["start"]);
    assert!(!ui.is_done());
}

/// As [`feed`], for a response awaiting its queued run.
fn feed_awaiting(ui: &mut UiStream, events: &[(&str, Value)]) -> Vec<Value> {
    let frames: String = events
        .iter()
        .map(|(e, d)| ui.pass_over(e, d).unwrap_or_else(|| ui.frames(e, d)))
        .collect();
    frames
        .split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| serde_json::from_str(&f["data: ".len()..]).expect("JSON"))
        .collect()
}

#[test]
fn a_queued_messages_response_shows_only_its_own_run() {
    let run = |id: &str, body: Value| {
        let mut c = chunk(body);
        c["runId"] = json!(id);
        c
    };
    let mut ui = UiStream::new("s", "r2", Vec::new()).awaiting("r2");
    let out = feed_awaiting(
        &mut ui,
        &[
            (
                "chunk",
                run("r1", json!({"type": "text_delta", "delta": "earlier"})),
            ),
            ("end", json!({})),
            (
                "chunk",
                run("r1", json!({"type": "run_started", "turn": 1})),
            ),
            (
                "chunk",
                run("r2", json!({"type": "run_started", "turn": 2})),
            ),
            (
                "chunk",
                run("r2", json!({"type": "text_delta", "delta": "mine"})),
            ),
            ("end", json!({})),
        ],
    );
    assert_eq!(
        types(&out),
        [
            "start",
            "start-step",
            "text-start",
            "text-delta",
            "text-end",
            "finish-step",
            "finish"
        ]
    );
    assert_eq!(out[0]["messageId"], "r2");
    assert_eq!(out[3]["delta"], "mine");
    assert!(ui.is_done());
}

#[test]
fn a_queued_message_dropped_before_its_run_ends_its_response_with_the_error() {
    let mut ui = UiStream::new("s", "r2", Vec::new()).awaiting("r2");
    let other = "Queued message queued_1 (run r9) did not start: no agent";
    let mine = "Queued message queued_2 (run r2) did not start: no agent";
    let dropped = |message: &str| {
        chunk(
            json!({"type": "error", "code": "queued_message_dropped", "message": message, "recoverable": false}),
        )
    };
    assert!(feed_awaiting(&mut ui, &[("chunk", dropped(other))]).is_empty());
    assert!(!ui.is_done(), "another message's drop is not this one's");
    let out = feed_awaiting(&mut ui, &[("chunk", dropped(mine))]);
    assert_eq!(types(&out), ["start", "data-error", "finish"]);
    assert_eq!(out[2]["finishReason"], "error");
    assert!(ui.is_done());
}
