//! Keeps `api/openapi.json` (served at `GET /v1/openapi.json`) in line with the code:
//! the documented routes are exactly the API's routes, and every request body schema
//! agrees with the body type that parses it — what the schema requires, the parser
//! requires; what the schema forbids (unknown fields, wrong kinds), the parser rejects.
//! The end-to-end fuzzer (`tests/e2e/openapi.test.mjs`) checks the running worker.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge_core::api::{
    CreateSessionBody, ForkBody, MessageBody, OPENAPI, ROUTES, ReasonBody, RetryBody,
    ToolResultBody, parse_body,
};
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
            if method == "parameters" {
                continue;
            }
            assert!(
                ids.insert(op["operationId"].as_str().unwrap().to_string()),
                "operationId unique"
            );
            if path != "/healthz" {
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

/// Whether a create with this body is accepted (parsed and checked).
fn creates(body: &Value) -> bool {
    parse_body::<CreateSessionBody>(body.to_string().as_bytes())
        .and_then(|b| b.into_request(|| "gen".into()))
        .is_ok()
}

/// Whether a follow-up with this body is accepted.
fn follows(body: &Value) -> bool {
    parse_body::<MessageBody>(body.to_string().as_bytes())
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
        ]}),
        creates,
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
        json!({"role": "tool", "toolCallId": "c1", "toolName": "add_note", "content": 1, "isError": false, "metadata": {}}),
        |m| {
            let opener = json!({"role": "assistant", "content": "", "toolCalls": [call]});
            creates(&json!({"agent": "a", "input": "x", "messages": [opener, m]}))
        },
    );
    let [one, many] = [0, 1].map(|i| schema("SendMessage")["oneOf"][i].clone());
    agrees(
        &one,
        json!({"message": "more", "metadata": {}, "attachments": [png]}),
        follows,
    );
    agrees(&many, json!({"messages": ["a", "b"]}), follows);
    assert!(!follows(&json!({"message": "m", "state": {}})));
    agrees(
        &schema("Reason"),
        json!({"reason": "why"}),
        accepts::<ReasonBody>,
    );
    agrees(
        &schema("Retry"),
        json!({"checkpointId": "ckpt_1", "message": "edited"}),
        accepts::<RetryBody>,
    );
    agrees(
        &schema("Fork"),
        json!({"checkpointId": "ckpt_1", "sessionId": "f-1", "message": "and then?"}),
        accepts::<ForkBody>,
    );

    let [approval, client] = [0, 1].map(|i| schema("ToolResult")["oneOf"][i].clone());
    agrees(
        &approval,
        json!({"kind": "approval-response", "toolCallId": "c", "approved": true, "reason": "ok"}),
        accepts::<ToolResultBody>,
    );
    // `result` may be any JSON, so it has no wrong type; `error` is checked.
    agrees(
        &client,
        json!({"kind": "client-tool-result", "toolCallId": "c", "result": {"v": 1}, "error": "e"}),
        accepts::<ToolResultBody>,
    );
    assert!(!accepts::<ToolResultBody>(
        &json!({"kind": "other", "toolCallId": "c"})
    ));
}
