//! The tagged JSON forms are read through flat records (`src/wire.rs`): every variant
//! reads back exactly what it was written as, `null` stays a value where a field holds
//! any JSON, and what does not fit its tag is refused, naming the field that is missing
//! or does not belong.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge_core::api::{CreateSessionBody, Input, ToolResultBody, parse_body};
use helix_edge_core::message::{Message, Thinking, ToolCall};
use helix_edge_core::state::PatchOp;
use helix_edge_core::store::Answer;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use std::fmt::Debug;

fn round_trips<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: T) {
    let text = serde_json::to_string(&value).unwrap();
    let back: T = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(back, value, "{text}");
}

/// The error reading `json` as `T`; panics if it was accepted.
fn refused<T: DeserializeOwned + Debug>(json: Value) -> String {
    match serde_json::from_value::<T>(json.clone()) {
        Ok(v) => panic!("{json} was accepted as {v:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_message_reads_back_as_written() {
    let metadata: Map<String, Value> = json!({"source": "test", "n": 1})
        .as_object()
        .unwrap()
        .clone();
    let call = ToolCall {
        id: "c1".into(),
        name: "add_note".into(),
        arguments: json!({"text": "x"}),
    };
    for message in [
        Message::System {
            content: "be brief".into(),
            metadata: None,
        },
        Message::User {
            content: "hi".into(),
            attachments: vec![],
            metadata: Some(metadata.clone()),
        },
        Message::User {
            content: "look".into(),
            attachments: vec![serde_json::from_value(json!({
                "type": "image", "mediaType": "image/png", "url": "https://e.x/a.png", "name": "a.png"
            })).unwrap()],
            metadata: None,
        },
        Message::assistant_text("hello"),
        Message::Assistant {
            content: String::new(),
            tool_calls: vec![call.clone()],
            thinking: vec![Thinking {
                content: "hm".into(),
                signature: Some("sig".into()),
                redacted: None,
            }],
            metadata: Some(metadata),
        },
        Message::tool_result(&call, json!({"count": 1})),
        Message::tool_result(&call, Value::Null),
        Message::tool_error(&call, "tool_denied", "no"),
    ] {
        round_trips(message);
    }
}

#[test]
fn messages_read_their_defaults_and_refuse_what_their_role_needs() {
    let bare: Message = serde_json::from_value(json!({"role": "assistant"})).unwrap();
    assert_eq!(bare, Message::assistant_text(""));
    let tool: Message = serde_json::from_value(
        json!({"role": "tool", "toolCallId": "c", "toolName": "t", "content": null}),
    )
    .unwrap();
    assert!(matches!(
        tool,
        Message::Tool {
            content: Value::Null,
            is_error: false,
            ..
        }
    ));

    assert!(refused::<Message>(json!({"role": "user"})).contains("`content`"));
    assert!(refused::<Message>(json!({"role": "user", "content": 3})).contains("`content`"));
    assert!(
        refused::<Message>(json!({"role": "tool", "toolName": "t", "content": 1}))
            .contains("`toolCallId`")
    );
    assert!(
        refused::<Message>(json!({"role": "tool", "toolCallId": "c", "toolName": "t"}))
            .contains("`content`")
    );
    assert!(refused::<Message>(json!({"role": "robot", "content": "x"})).contains("robot"));
    assert!(refused::<Message>(json!({"content": "x"})).contains("`role`"));
}

#[test]
fn every_patch_operation_reads_back_as_written() {
    for op in [
        PatchOp::Add {
            path: "/items/-".into(),
            value: json!({"a": [1, 2]}),
        },
        PatchOp::Add {
            path: "/x".into(),
            value: Value::Null,
        },
        PatchOp::Remove { path: "/x".into() },
        PatchOp::Replace {
            path: "/a/b".into(),
            value: json!(false),
        },
    ] {
        round_trips(op);
    }
    assert!(refused::<PatchOp>(json!({"op": "add", "path": "/x"})).contains("`value`"));
    assert!(refused::<PatchOp>(json!({"op": "move", "path": "/x", "from": "/y"})).contains("move"));
    assert!(refused::<PatchOp>(json!({"op": "remove"})).contains("`path`"));
}

#[test]
fn every_stored_answer_reads_back_as_written() {
    for answer in [
        Answer::Approval {
            approved: true,
            reason: None,
            answered_at: 7,
            decided_by: None,
        },
        Answer::Approval {
            approved: false,
            reason: Some("not now".into()),
            answered_at: 7,
            decided_by: Some(helix_edge_core::store::Owner {
                subject: "ann".into(),
                tenant: None,
            }),
        },
        Answer::ClientResult {
            result: json!([1, "two"]),
            answered_at: 7,
        },
        Answer::ClientResult {
            result: Value::Null,
            answered_at: 7,
        },
        Answer::ClientError {
            error: "no camera".into(),
            answered_at: 7,
        },
        Answer::Expired,
        Answer::ChildOutput {
            output: json!({"summary": "s"}),
        },
        Answer::ChildOutput {
            output: Value::Null,
        },
        Answer::ChildFailed {
            code: "subagent_failed".into(),
            error: "boom".into(),
        },
    ] {
        round_trips(answer);
    }
    assert!(refused::<Answer>(json!({"kind": "approval"})).contains("`approved`"));
    assert!(refused::<Answer>(json!({"kind": "client_result"})).contains("`result`"));
    assert!(refused::<Answer>(json!({"kind": "child_failed", "error": "e"})).contains("`code`"));
    // A child's output is stored when the child reports it; `null` is an output.
    assert!(refused::<Answer>(json!({"kind": "child_output"})).contains("`output`"));
}

fn tool_result(body: Value) -> Result<ToolResultBody, String> {
    parse_body::<ToolResultBody>(body.to_string().as_bytes()).map_err(|e| e.message)
}

#[test]
fn tool_result_bodies_take_only_the_fields_of_their_kind() {
    assert_eq!(
        tool_result(json!({"kind": "approval-response", "toolCallId": "c", "approved": false})),
        Ok(ToolResultBody::ApprovalResponse {
            tool_call_id: "c".into(),
            approved: false,
            reason: None,
            decided_by: None,
        })
    );
    // `null` is a result; `error` and `reason` are strings, as the document says.
    assert_eq!(
        tool_result(json!({"kind": "client-tool-result", "toolCallId": "c", "result": null})),
        Ok(ToolResultBody::ClientToolResult {
            tool_call_id: "c".into(),
            result: Some(Value::Null),
            error: None,
        })
    );
    for null_text in [
        json!({"kind": "client-tool-result", "toolCallId": "c", "error": null}),
        json!({"kind": "approval-response", "toolCallId": "c", "approved": true, "reason": null}),
    ] {
        assert!(tool_result(null_text.clone()).is_err(), "{null_text}");
    }
    assert_eq!(
        tool_result(json!({"kind": "client-tool-result", "toolCallId": "c", "result": [1]})),
        Ok(ToolResultBody::ClientToolResult {
            tool_call_id: "c".into(),
            result: Some(json!([1])),
            error: None,
        })
    );
    for (body, field) in [
        (
            json!({"kind": "approval-response", "toolCallId": "c", "approved": true, "result": 1}),
            "`result`",
        ),
        (
            json!({"kind": "approval-response", "toolCallId": "c", "approved": true, "error": "e"}),
            "`error`",
        ),
        (
            json!({"kind": "client-tool-result", "toolCallId": "c", "approved": true}),
            "`approved`",
        ),
        (
            json!({"kind": "client-tool-result", "toolCallId": "c", "reason": "r"}),
            "`reason`",
        ),
        (
            json!({"kind": "approval-response", "toolCallId": "c"}),
            "`approved`",
        ),
        (
            json!({"kind": "approval-response", "approved": true}),
            "`toolCallId`",
        ),
        (json!({"toolCallId": "c", "approved": true}), "`kind`"),
        // A field of the other kind is refused even as `null`.
        (
            json!({"kind": "approval-response", "toolCallId": "c", "approved": true, "result": null}),
            "`result`",
        ),
        (
            json!({"kind": "client-tool-result", "toolCallId": "c", "approved": null}),
            "expected a boolean",
        ),
        (
            json!({"kind": "client-tool-result", "toolCallId": "c", "reason": null}),
            "expected a string",
        ),
    ] {
        let error = tool_result(body.clone()).expect_err(&body.to_string());
        assert!(error.contains(field), "{body}: {error}");
    }
}

#[test]
fn a_create_input_is_a_message_an_object_or_a_list() {
    let input = |input: Value| {
        parse_body::<CreateSessionBody>(
            json!({"agent": "a", "input": input}).to_string().as_bytes(),
        )
        .map(|body| body.input)
        .map_err(|e| e.message)
    };
    assert_eq!(input(json!("hi")), Ok(Input::Text("hi".into())));
    let Ok(Input::Object(object)) = input(json!({"message": "hi", "state": {"k": 1}})) else {
        panic!("the object form was refused");
    };
    assert_eq!(object.state.as_ref().unwrap()["k"], json!(1));
    assert_eq!(
        object.into_messages("input").unwrap(),
        vec![Message::user("hi")]
    );
    assert!(
        matches!(input(json!(["hi", {"message": "there"}])), Ok(Input::List(l)) if l.len() == 2)
    );
    for wrong in [json!(1), json!([1]), json!(null), json!(true)] {
        assert!(input(wrong.clone()).is_err(), "{wrong} accepted");
    }
    assert!(
        input(json!({"message": "m", "other": 1}))
            .unwrap_err()
            .contains("other")
    );
}
