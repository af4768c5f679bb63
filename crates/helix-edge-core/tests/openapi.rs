//! Keeps `api/openapi.json` (served at `GET /v1/openapi.json`) in line with the code:
//! the documented routes are exactly the API's routes, and every request body schema
//! agrees with the body type that parses it — what the schema requires, the parser
//! requires; what the schema forbids (unknown fields, wrong kinds), the parser rejects.
//! The end-to-end fuzzer (`tests/e2e/openapi.test.mjs`) checks the running worker.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge_core::api::{
    CheckpointAt, CreateSessionBody, ForkBody, MessageBody, MessagesQuery, NOT_BLANK, OPENAPI,
    ROUTES, ReasonBody, RetryBody, ToolResultBody, ValidatePlanBody, is_blank, parse_body,
};
use helix_edge_core::chat::ChatRequest;
use helix_edge_core::chunk::{Chunk, ChunkBody, StreamEvent};
use helix_edge_core::error::ErrorInfo;
use helix_edge_core::message::Message;
use helix_edge_core::provider_options::{ProviderOptions, take};
use helix_edge_core::store::{CheckpointRecord, CheckpointStatus};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::BTreeSet;

fn doc() -> Value {
    serde_json::from_str(OPENAPI).expect("api/openapi.json is JSON")
}

fn schema(name: &str) -> Value {
    doc()["components"]["schemas"][name].clone()
}

#[test]
fn the_document_lists_exactly_the_routes_of_the_api() {
    let doc = doc();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_some() {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let routes: BTreeSet<_> = ROUTES
        .iter()
        .map(|r| (r.method.to_string(), r.path.to_string()))
        .collect();
    assert_eq!(documented, routes);
}

#[test]
fn every_reference_resolves_and_every_operation_documents_errors_and_ids() {
    let doc = doc();
    let text = OPENAPI;
    let mut at = 0;
    while let Some(i) = text[at..].find("\"$ref\": \"#/") {
        let start = at + i + "\"$ref\": \"#/".len();
        let end = start + text[start..].find('"').unwrap();
        let pointer = format!("/{}", &text[start..end]);
        assert!(doc.pointer(&pointer).is_some(), "dangling $ref {pointer}");
        at = end;
    }
    let mut ids = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if method == "parameters" || method.starts_with("x-") {
                continue;
            }
            assert!(
                ids.insert(op["operationId"].as_str().unwrap().to_string()),
                "operationId unique"
            );
            // Every route needs a credential but the public ones, which say so.
            if op["security"] != serde_json::json!([]) {
                for status in ["401", "503"] {
                    assert!(
                        op["responses"].get(status).is_some(),
                        "{method} {path} documents {status}"
                    );
                }
            }
            if method == "post" {
                assert!(
                    op["responses"].get("413").is_some(),
                    "{method} {path} documents 413"
                );
            }
        }
    }
}

/// What `T`'s parser says about `body`.
fn accepts<T: DeserializeOwned>(body: &Value) -> bool {
    parse_body::<T>(body.to_string().as_bytes()).is_ok()
}

/// Whether a create with this body is accepted (its options taken, parsed and checked, as
/// the worker does).
fn creates(body: &Value) -> bool {
    let text = body.to_string();
    let Ok((_, rest)) = take(text.as_bytes()) else {
        return false;
    };
    parse_body::<CreateSessionBody>(&rest)
        .and_then(|b| b.into_request(|| "gen".into()))
        .is_ok()
}

/// Whether a follow-up with this body is accepted (as `creates`; its `whenBusy` taken as
/// the schedules' follow-up takes it).
fn follows(body: &Value) -> bool {
    let text = body.to_string();
    let Ok((_, rest)) = take(text.as_bytes()) else {
        return false;
    };
    let Ok((_, rest)) = helix_edge_core::schedule::take_when_busy(&rest) else {
        return false;
    };
    parse_body::<MessageBody>(&rest)
        .and_then(MessageBody::into_messages)
        .is_ok()
}

/// For an object schema: a complete valid body is accepted; dropping any field the
/// schema requires is rejected, dropping an optional one is not; an unknown field is
/// rejected when the schema forbids additional properties; every property given the
/// wrong JSON type is rejected. `accepts` says what the server does with a body.
fn agrees(schema: &Value, valid: Value, accepts: impl Fn(&Value) -> bool) {
    assert!(accepts(&valid), "valid body rejected: {valid}");
    let required: BTreeSet<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for key in valid.as_object().unwrap().keys() {
        let mut without = valid.clone();
        without.as_object_mut().unwrap().remove(key);
        assert_eq!(
            accepts(&without),
            !required.contains(key.as_str()),
            "dropping '{key}' from {valid}: the schema says required = {}",
            required.contains(key.as_str())
        );
    }
    for key in schema["properties"].as_object().unwrap().keys() {
        assert!(
            valid.get(key).is_some(),
            "the sample covers documented property '{key}'"
        );
    }
    if schema["additionalProperties"] == json!(false) {
        let mut extra = valid.clone();
        extra["unexpected"] = json!(1);
        assert!(!accepts(&extra), "unknown field accepted: {extra}");
    }
    for (key, prop) in schema["properties"].as_object().unwrap() {
        let wrong = match prop.get("type").and_then(Value::as_str) {
            Some("string") => json!(12),
            Some("boolean") => json!("yes"),
            Some("object") => json!("not an object"),
            Some("integer") => json!("1"),
            Some("array") => json!("not a list"),
            _ => continue,
        };
        let mut bad = valid.clone();
        bad[key] = wrong;
        assert!(!accepts(&bad), "wrong type for '{key}' accepted: {bad}");
    }
}

#[test]
fn request_body_schemas_agree_with_the_parsers() {
    let png =
        json!({"type": "image", "mediaType": "image/png", "data": "iVBORw0KGgo=", "name": "p.png"});
    let call = json!({"id": "c1", "name": "add_note", "arguments": {"text": "x"}});
    let create = |input: Value| json!({"agent": "assistant", "input": input});
    agrees(
        &schema("CreateSession"),
        json!({"agent": "assistant", "sessionId": "s-1", "input": "hi", "messages": [
            {"role": "user", "content": "earlier"}
        ], "providerOptions": {"reasoningEffort": "low"}}),
        creates,
    );
    // The runner reads a run's options (with its agent) before anything changes.
    agrees(
        &schema("ProviderOptions"),
        json!({"toolChoice": {"tool": "add_note"}, "reasoningEffort": "high", "thinkingBudget": 2048,
               "openai": {"seed": 1}, "anthropic": {"top_k": 5}}),
        |v| ProviderOptions::read(v).is_ok(),
    );
    for choice in ["auto", "required", "none"] {
        let body = json!({"agent": "a", "input": "hi", "providerOptions": {"toolChoice": choice}});
        assert!(creates(&body), "{choice}");
    }
    assert!(
        !creates(&json!({"agent": "a", "input": {"message": "hi", "providerOptions": {}}})),
        "providerOptions go at the top of a create, not in its input"
    );
    agrees(
        &schema("InputOne"),
        json!({"message": "m", "metadata": {"hidden": true}, "attachments": [png], "state": {"k": 1}}),
        |v| creates(&create(v.clone())),
    );
    agrees(
        &schema("InputMany"),
        json!({"messages": ["a", {"message": "b"}], "state": {"k": 1}}),
        |v| creates(&create(v.clone())),
    );
    agrees(
        &schema("UserMessage")["oneOf"][1],
        json!({"message": "m", "metadata": {}, "attachments": [png]}),
        |v| creates(&create(json!([v]))),
    );
    // Exactly one of `data` and `url` (the schema's oneOf): with no url, data is required
    // (and `url` is checked on its own below).
    let mut attachment = schema("Attachment");
    assert_eq!(
        attachment["oneOf"],
        json!([{"required": ["data"]}, {"required": ["url"]}])
    );
    attachment["required"]
        .as_array_mut()
        .unwrap()
        .push(json!("data"));
    attachment["properties"]
        .as_object_mut()
        .unwrap()
        .remove("url");
    let attached = |v: &Value| creates(&create(json!({"message": "m", "attachments": [v]})));
    agrees(&attachment, png.clone(), attached);
    let mut both = png.clone();
    both["url"] = json!("https://e.x/p.png");
    assert!(!attached(&both), "data and url together are refused");
    let mut by_url = png.clone();
    by_url.as_object_mut().unwrap().remove("data");
    by_url["url"] = json!("https://e.x/p.png");
    assert!(attached(&by_url));
    let mut tiff = png.clone();
    tiff["mediaType"] = json!("image/tiff");
    assert!(!attached(&tiff), "the image media types are enumerated");
    let [user, assistant, tool] = [0, 1, 2].map(|i| schema("HistoryMessage")["oneOf"][i].clone());
    let history = |m: &Value| creates(&json!({"agent": "a", "input": "x", "messages": [m]}));
    agrees(
        &user,
        json!({"role": "user", "content": "u", "attachments": [png], "metadata": {}}),
        history,
    );
    agrees(
        &assistant,
        json!({"role": "assistant", "content": "a", "toolCalls": [], "thinking": [], "metadata": {}}),
        history,
    );
    agrees(
        &tool,
        json!({"role": "tool", "toolCallId": "c1", "toolName": "add_note", "content": 1, "isError": false, "attachments": [png], "metadata": {}}),
        |m| {
            let opener = json!({"role": "assistant", "content": "", "toolCalls": [call]});
            creates(&json!({"agent": "a", "input": "x", "messages": [opener, m]}))
        },
    );
    // A tool message's attachments are checked as a user message's.
    let opener = json!({"role": "assistant", "content": "", "toolCalls": [call]});
    let tool_with = |a: &Value| json!({"role": "tool", "toolCallId": "c1", "toolName": "add_note", "content": 1, "attachments": [a]});
    assert!(!creates(
        &json!({"agent": "a", "input": "x", "messages": [opener.clone(), tool_with(&tiff)]})
    ));
    assert!(creates(
        &json!({"agent": "a", "input": "x", "messages": [opener, tool_with(&by_url)]})
    ));
    let [one, many] = [0, 1].map(|i| schema("SendMessage")["oneOf"][i].clone());
    agrees(
        &one,
        json!({"message": "more", "metadata": {}, "attachments": [png], "providerOptions": {}, "whenBusy": "enqueue"}),
        follows,
    );
    agrees(
        &many,
        json!({"messages": ["a", "b"], "providerOptions": {"thinkingBudget": 4096}, "whenBusy": "merge"}),
        follows,
    );
    assert!(!follows(&json!({"message": "m", "state": {}})));
    assert!(!follows(&json!({"message": "m", "whenBusy": "later"})));
    agrees(
        &schema("Reason"),
        json!({"reason": "why"}),
        accepts::<ReasonBody>,
    );
    // A retry and a fork say one message (with its metadata and attachments), several,
    // or nothing.
    let retries = |body: &Value| {
        serde_json::from_value::<RetryBody>(body.clone()).is_ok_and(|b| b.into_parts().is_ok())
    };
    let forks = |body: &Value| {
        serde_json::from_value::<ForkBody>(body.clone())
            .is_ok_and(|b| b.into_parts(|| "gen".into()).is_ok())
    };
    // Each form is checked as that form: accepted, and saying what the form says (without
    // its required field the body is another form, the one that says nothing).
    fn as_form<'a>(
        form: &'static str,
        parses: &'a dyn Fn(&Value) -> bool,
    ) -> impl Fn(&Value) -> bool + 'a {
        move |b: &Value| parses(b) && b.get(form).is_some()
    }
    let [one, many, none] = [0, 1, 2].map(|i| schema("Retry")["oneOf"][i].clone());
    agrees(
        &one,
        json!({"checkpointId": "ckpt_1", "message": "edited", "metadata": {"k": 1}, "attachments": [png]}),
        as_form("message", &retries),
    );
    agrees(
        &many,
        json!({"checkpointId": "ckpt_1", "messages": ["a", {"message": "b"}]}),
        as_form("messages", &retries),
    );
    agrees(&none, json!({"checkpointId": "ckpt_1"}), retries);
    let [one, many, none] = [0, 1, 2].map(|i| schema("Fork")["oneOf"][i].clone());
    agrees(
        &one,
        json!({"checkpointId": "ckpt_1", "sessionId": "f-1", "message": "and then?", "metadata": {}, "attachments": [png]}),
        as_form("message", &forks),
    );
    agrees(
        &many,
        json!({"checkpointId": "c", "sessionId": "f-1", "messages": ["a"]}),
        as_form("messages", &forks),
    );
    agrees(
        &none,
        json!({"checkpointId": "c", "sessionId": "f-1"}),
        forks,
    );
    for wrong in [
        json!({"message": "m", "messages": ["a"]}),
        json!({"attachments": [png]}),
        json!({"metadata": {}}),
        json!({"message": "  "}),
        json!({"messages": []}),
        json!({"messages": ["a"], "metadata": {}}),
    ] {
        assert!(!retries(&wrong), "{wrong}");
        assert!(!forks(&wrong), "{wrong}");
    }
    assert!(
        retries(&json!({"message": " ", "attachments": [png]})),
        "an attachment says something"
    );
    assert!(
        !retries(&json!({"sessionId": "f-1"})),
        "a retry stays in its session"
    );

    let [approval, client] = [0, 1].map(|i| schema("ToolResult")["oneOf"][i].clone());
    agrees(
        &approval,
        json!({"kind": "approval-response", "toolCallId": "c", "approved": true, "reason": "ok",
               "decidedBy": {"subject": "u-1", "tenant": "t-1"}}),
        accepts::<ToolResultBody>,
    );
    // `result` may be any JSON, so it has no wrong type; `error` is checked. They are
    // exclusive (`not: {required: [result, error]}`): each is checked without the other.
    let submits = |body: &Value| {
        serde_json::from_value::<ToolResultBody>(body.clone())
            .is_ok_and(|b| b.into_submission().is_ok())
    };
    assert_eq!(client["not"], json!({"required": ["result", "error"]}));
    for (only, sample) in [
        (
            "result",
            json!({"kind": "client-tool-result", "toolCallId": "c", "result": {"v": 1}}),
        ),
        (
            "error",
            json!({"kind": "client-tool-result", "toolCallId": "c", "error": "e"}),
        ),
    ] {
        let mut one = client.clone();
        let other = if only == "result" { "error" } else { "result" };
        one["properties"].as_object_mut().unwrap().remove(other);
        agrees(&one, sample, submits);
    }
    let both = json!({"kind": "client-tool-result", "toolCallId": "c", "result": 1, "error": "e"});
    assert!(!submits(&both), "result and error together are refused");
    assert!(!accepts::<ToolResultBody>(
        &json!({"kind": "other", "toolCallId": "c"})
    ));

    let chats = |body: &Value| ChatRequest::parse(body.to_string().as_bytes()).is_ok();
    let said = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}], "metadata": {}});
    agrees(
        &schema("ChatRequest"),
        json!({"id": "chat-1", "agent": "assistant", "trigger": "submit-message", "messageId": "m1",
               "providerOptions": {"toolChoice": "none"}, "whenBusy": "enqueue", "messages": [said]}),
        chats,
    );
    agrees(&schema("UiMessage"), said.clone(), |m| {
        chats(&json!({"id": "chat-1", "messages": [m]}))
    });
    assert!(!chats(
        &json!({"id": "chat-1", "trigger": "regenerate-message", "messages": [said]})
    ));
}

/// Every pattern of text that must not be blank is [`NOT_BLANK`], and that class holds
/// exactly the characters the server counts as blank (regex dialects disagree on `\s`,
/// so the document spells them out).
#[test]
fn not_blank_patterns_match_what_the_server_counts_as_blank() {
    fn patterns(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v.as_str()) {
                        ("pattern", Some(p)) => out.push(p.to_string()),
                        _ => patterns(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| patterns(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    patterns(&doc(), &mut all);
    let blank_classes: Vec<_> = all.iter().filter(|p| p.contains("u0085")).collect();
    assert!(blank_classes.len() >= 8, "{blank_classes:?}");
    assert!(blank_classes.iter().all(|p| *p == NOT_BLANK));
    assert!(!all.iter().any(|p| p.contains("\\s") || p.contains("\\S")));

    let mut listed: Vec<char> =
        "\t\n\u{b}\u{c}\r \u{85}\u{a0}\u{1680}\u{2028}\u{2029}\u{202f}\u{205f}\u{3000}\u{feff}"
            .chars()
            .collect();
    listed.extend('\u{2000}'..='\u{200a}');
    for c in (0..=0xFFFF).filter_map(char::from_u32) {
        assert_eq!(
            is_blank(&c.to_string()),
            listed.contains(&c),
            "U+{:04X}",
            c as u32
        );
    }
}

/// Every chunk type the core can send, one of each (the match in `chunk_types_documented`
/// makes a new variant a compile error until it is added here and to the document).
fn one_of_each_chunk() -> Vec<ChunkBody> {
    use helix_edge_core::chunk::{Executor, ResyncReason, RunStatus, SuspendReason};
    use helix_edge_core::state::PatchOp;
    let call = || ("c1".to_string(), "t".to_string());
    vec![
        ChunkBody::RunStarted { turn: 1 },
        ChunkBody::TextDelta { delta: "hi".into() },
        ChunkBody::Thinking {
            content: "hm".into(),
            is_complete: true,
        },
        ChunkBody::ToolStart {
            tool_call_id: call().0,
            tool_name: call().1,
            arguments: json!({"a": 1}),
            executor: Executor::Client,
            deadline: Some(5),
        },
        ChunkBody::ToolApprovalRequest {
            tool_call_id: call().0,
            tool_name: call().1,
            arguments: json!({}),
        },
        ChunkBody::ToolEnd {
            tool_call_id: call().0,
            tool_name: call().1,
            success: false,
            result: Some(json!(1)),
            error: Some("no".into()),
            decided_by: Some(helix_edge_core::store::Owner {
                subject: "ann".into(),
                tenant: Some("acme".into()),
            }),
        },
        ChunkBody::StatePatch {
            patches: vec![
                PatchOp::Add {
                    path: "/a/-".into(),
                    value: json!(1),
                },
                PatchOp::Remove { path: "/b".into() },
                PatchOp::Replace {
                    path: "/c".into(),
                    value: json!("x"),
                },
            ],
            tool_call_id: Some(call().0),
        },
        ChunkBody::Custom {
            event_name: "e".into(),
            data: json!(null),
        },
        ChunkBody::SubagentStart {
            sub_session_id: "s-1".into(),
            tool_call_id: call().0,
        },
        ChunkBody::SubagentEnd {
            sub_session_id: "s-1".into(),
            tool_call_id: call().0,
            result: Some(json!("r")),
        },
        ChunkBody::Output {
            output: json!({"x": 1}),
        },
        ChunkBody::Error {
            code: "c".into(),
            message: "m".into(),
            recoverable: false,
        },
        ChunkBody::StepCommitted {
            checkpoint_id: "cp".into(),
        },
        ChunkBody::RunSuspended {
            reason: SuspendReason::AwaitingChildren,
            tool_call_ids: vec![call().0],
        },
        ChunkBody::RunResumed { turn: 2 },
        ChunkBody::RunInterrupted {
            reason: Some("r".into()),
        },
        ChunkBody::RunFinished {
            status: RunStatus::Completed,
        },
        #[cfg(feature = "schedules")]
        ChunkBody::MessageQueued {
            queue_id: "queued_1".into(),
            queued_run_id: "run_2".into(),
            position: 1,
            policy: "enqueue".into(),
            schedule_id: Some("schedule_1".into()),
        },
        #[cfg(feature = "schedules")]
        ChunkBody::MessageMerged {
            queue_id: "queued_1".into(),
            queued_run_id: "run_2".into(),
            merged: 1,
            schedule_id: None,
        },
        ChunkBody::StreamResync {
            checkpoint_id: "cp".into(),
            step_count: 1,
            message_count: 2,
            from_sequence: 3,
            reason: ResyncReason::CrashRecovery,
        },
    ]
}

/// `value` has every property `schema` (an object schema, `allOf` flattened) requires,
/// no property it does not declare, and the `const`/`enum` values it prescribes.
fn conforms(doc: &Value, schema: &Value, value: &Value) -> Result<(), String> {
    let resolve = |s: &Value| match s.get("$ref").and_then(Value::as_str) {
        Some(r) => doc.pointer(&r["#".len()..]).cloned().unwrap(),
        None => s.clone(),
    };
    let schema = resolve(schema);
    let parts: Vec<Value> = match schema.get("allOf") {
        Some(all) => all.as_array().unwrap().iter().map(resolve).collect(),
        None => vec![schema],
    };
    let obj = value
        .as_object()
        .ok_or(format!("{value} is not an object"))?;
    let mut declared = BTreeSet::new();
    for part in &parts {
        for key in part["required"].as_array().into_iter().flatten() {
            let key = key.as_str().unwrap();
            if !obj.contains_key(key) {
                return Err(format!("{value} lacks required {key}"));
            }
        }
        for (key, prop) in part["properties"].as_object().into_iter().flatten() {
            declared.insert(key.clone());
            let Some(v) = obj.get(key) else { continue };
            let prop = resolve(prop);
            if prop.get("const").is_some_and(|c| c != v) {
                return Err(format!("{key} of {value} is not {}", prop["const"]));
            }
            if let Some(allowed) = prop["enum"].as_array()
                && !allowed.contains(v)
            {
                return Err(format!("{key} of {value} is not one of {allowed:?}"));
            }
            if let (Some(items), Some(array)) = (prop.get("items"), v.as_array())
                && items.get("$ref").is_some()
            {
                for item in array {
                    conforms(doc, items, item)?;
                }
            }
        }
    }
    match obj.keys().find(|k| !declared.contains(*k)) {
        Some(extra) => Err(format!("{value} has undocumented {extra}")),
        None => Ok(()),
    }
}

#[test]
fn chunk_types_are_documented_exactly_as_they_are_sent() {
    let doc = doc();
    let stream = schema("StreamChunk");
    let mapping = stream["discriminator"]["mapping"].as_object().unwrap();
    let bodies = one_of_each_chunk();
    let mut sent = BTreeSet::new();
    for body in bodies {
        // Exhaustive, so that a new chunk type does not compile until it has a sample.
        let step = match &body {
            ChunkBody::ToolStart { .. }
            | ChunkBody::ToolEnd { .. }
            | ChunkBody::StatePatch { .. } => Some(1),
            ChunkBody::RunStarted { .. }
            | ChunkBody::TextDelta { .. }
            | ChunkBody::Thinking { .. }
            | ChunkBody::ToolApprovalRequest { .. }
            | ChunkBody::Custom { .. }
            | ChunkBody::SubagentStart { .. }
            | ChunkBody::SubagentEnd { .. }
            | ChunkBody::Output { .. }
            | ChunkBody::Error { .. }
            | ChunkBody::StepCommitted { .. }
            | ChunkBody::RunSuspended { .. }
            | ChunkBody::RunResumed { .. }
            | ChunkBody::RunInterrupted { .. }
            | ChunkBody::RunFinished { .. }
            | ChunkBody::StreamResync { .. } => None,
            #[cfg(feature = "schedules")]
            ChunkBody::MessageQueued { .. } | ChunkBody::MessageMerged { .. } => None,
        };
        let chunk = Chunk {
            session_id: "s".into(),
            agent_type: "a".into(),
            run_id: "r".into(),
            step,
            timestamp: 1,
            body,
        };
        let value = serde_json::to_value(&chunk).unwrap();
        let ty = value["type"].as_str().unwrap().to_string();
        let documented = mapping
            .get(&ty)
            .unwrap_or_else(|| panic!("{ty} is not documented"));
        conforms(&doc, &json!({ "$ref": documented }), &value).unwrap();
        sent.insert(ty);
    }
    let documented: BTreeSet<_> = mapping.keys().cloned().collect();
    assert_eq!(
        sent, documented,
        "the document lists exactly the chunk types sent"
    );
    assert_eq!(stream["oneOf"].as_array().unwrap().len(), documented.len());

    let end = serde_json::to_value(StreamEvent::End {
        output: Some(json!(1)),
    })
    .unwrap();
    conforms(&doc, &schema("StreamEnd"), &end["data"]).unwrap();
    let error = ErrorInfo {
        code: "c".into(),
        message: "m".into(),
        retryable: false,
    };
    let fail = serde_json::to_value(StreamEvent::Fail { error }).unwrap();
    conforms(&doc, &schema("StreamFail"), &fail["data"]).unwrap();
    // A sample the check must refuse, so that it is not vacuous.
    let bad = json!({"type": "text_delta", "sessionId": "s", "agentType": "a", "runId": "r", "timestamp": 1});
    assert!(
        conforms(
            &doc,
            &json!({"$ref": "#/components/schemas/TextDeltaChunk"}),
            &bad
        )
        .is_err()
    );
}

#[test]
fn a_checkpoint_read_is_documented_as_it_is_sent() {
    let doc = doc();
    let record = CheckpointRecord {
        id: "ckpt_1".into(),
        step_count: 1,
        message_count: 2,
        timestamp: 3,
        status: CheckpointStatus::Suspended,
        run_id: "run_1".into(),
        usage: None,
        stop_reason: None,
        waits: Vec::new(),
    };
    let query = MessagesQuery {
        offset: 0,
        limit: 50,
        include_thinking: true,
    };
    let messages = vec![Message::user("hi")];
    let view = CheckpointAt::new(record, json!({"notes": []}), messages, &query);
    let sent = serde_json::to_value(&view).unwrap();
    let at = schema("CheckpointAt");
    conforms(&doc, &at, &sent).unwrap();
    // Its checkpoint is one as the list shows it (a copy in the document: a shared
    // component would be taken for a resource by link inference).
    let listed = &schema("CheckpointList")["properties"]["checkpoints"]["items"];
    let mut embedded = at["allOf"][1]["properties"]["checkpoint"].clone();
    embedded.as_object_mut().unwrap().remove("description");
    assert_eq!(&embedded, listed);
    conforms(&doc, listed, &sent["checkpoint"]).unwrap();
}

#[test]
fn a_plan_check_is_documented_as_it_is_parsed_and_answered() {
    let validates = |body: &Value| {
        parse_body::<ValidatePlanBody>(body.to_string().as_bytes())
            .and_then(ValidatePlanBody::into_calls)
            .is_ok()
    };
    let body = schema("ValidatePlan");
    agrees(&body, json!({"calls": [{"name": "t"}]}), validates);
    let call = &body["properties"]["calls"]["items"];
    agrees(
        call,
        json!({"id": "a", "name": "t", "arguments": {"x": "†state.x"}}),
        |c: &Value| validates(&json!({ "calls": [c] })),
    );
    // As many calls as the schema allows, and no more; no id twice.
    let max = body["properties"]["calls"]["maxItems"].as_u64().unwrap() as usize;
    assert_eq!(max, helix_edge_core::memory::check::MAX_CALLS);
    let calls = |n: usize| json!({ "calls": vec![json!({"name": "t"}); n] });
    assert!(validates(&calls(max)));
    assert!(!validates(&calls(max + 1)));
    assert!(!validates(&calls(0)));

    let doc = doc();
    let report = helix_edge_core::memory::check::check(
        &[],
        None,
        &json!({}),
        &[serde_json::from_value(json!({"name": "nope"})).unwrap()],
    );
    let sent = serde_json::to_value(&report).unwrap();
    assert_eq!(sent["problems"][0]["code"], "unknown_tool");
    conforms(&doc, &schema("PlanReport"), &sent).unwrap();
    let codes =
        &schema("PlanReport")["properties"]["problems"]["items"]["properties"]["code"]["enum"];
    assert_eq!(codes.as_array().unwrap().len(), 8);
}

#[test]
fn an_inbox_page_is_documented_as_it_is_sent() {
    use helix_edge_core::api::InboxPage;
    use helix_edge_core::sqlite::Cell;
    let doc = doc();
    let call = |id: &str, kind: &str, deadline: Option<u64>| {
        let mut call = json!({"toolCallId": id, "toolName": "delete_file",
            "arguments": {"path": "/x"}, "kind": kind, "since": 5});
        if let Some(at) = deadline {
            call["deadline"] = json!(at);
        }
        vec![
            Cell::Text("s_a".into()),
            Cell::Text("assistant".into()),
            Cell::Text(call.to_string()),
        ]
    };
    let rows = [call("c1", "approval", None), call("c2", "client", Some(9))];
    let page = InboxPage::from_rows(&rows, 1).unwrap();
    let sent = serde_json::to_value(&page).unwrap();
    assert_eq!(sent["nextCursor"], "5:s_a:c1");
    conforms(&doc, &schema("InboxPage"), &sent).unwrap();
    let full = InboxPage::from_rows(&rows, 2).unwrap();
    for item in serde_json::to_value(&full).unwrap()["items"]
        .as_array()
        .unwrap()
    {
        conforms(&doc, &schema("InboxItem"), item).unwrap();
    }
}

#[test]
fn a_usage_report_is_documented_as_it_is_sent() {
    use helix_edge_core::api::{UsageQuery, UsageReport};
    use helix_edge_core::sqlite::Cell;
    let doc = doc();
    let pairs = [("to".to_string(), "99".to_string())];
    let query = UsageQuery::parse(&pairs).unwrap();
    let row = vec![
        Cell::Text("assistant".into()),
        Cell::Int(2),
        Cell::Int(30),
        Cell::Int(4),
        Cell::Int(0),
        Cell::Int(0),
    ];
    let report = UsageReport::from_rows(&query, &[row]).unwrap();
    let sent = serde_json::to_value(&report).unwrap();
    conforms(&doc, &schema("UsageReport"), &sent).unwrap();
    conforms(&doc, &schema("UsageGroup"), &sent["groups"][0]).unwrap();
    conforms(&doc, &schema("UsageGroup"), &sent["total"]).unwrap();
}
