//! Files a tool gives with its result (`ToolContext::attach`): kept on the tool message
//! in the transcript, checked (a bad one fails the call, a failed call keeps none), and
//! sent to each provider in its own form — inside Anthropic's `tool_result`, and after
//! the step's tool messages as a user message for Chat Completions, whose tool messages
//! take text only; a provider that cannot read them is told of them in text.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::attachment::{Attachment, AttachmentKind};
use helix_edge_core::error::ToolError;
use helix_edge_core::message::{Message, ToolCall};
use helix_edge_core::model::{ModelRequest, ModelSettings};
use helix_edge_core::provider::ProviderConfig;
use helix_edge_core::runner::Progress;
use helix_edge_core::store::SessionStatus;
use helix_edge_core::testing::{Scenario, drive};
use helix_edge_core::tool::{MAX_TOOL_ATTACHMENT_BYTES, Tool};
use serde::Deserialize;
use serde_json::{Value, json};

const PNG: &str = "iVBORw0KGgo=";

#[derive(Deserialize, schemars::JsonSchema)]
struct Chart {
    /// What to draw: `ok`, `bad`, `many`, `huge` or `fail`.
    kind: String,
}

fn painter() -> Agent {
    Agent::builder("painter")
        .system_prompt("You draw.")
        .tool(Tool::new(
            "render_chart",
            "Render a chart.",
            |i: Chart, ctx| async move {
                match i.kind.as_str() {
                    "ok" => {
                        ctx.attach(Attachment::image("image/png", PNG).named("chart.png"))?;
                        ctx.attach(Attachment::at_url(
                            AttachmentKind::File,
                            "application/pdf",
                            "https://e.x/r.pdf",
                        ))?;
                    }
                    "bad" => ctx.attach(Attachment::image("image/tiff", PNG))?,
                    "many" => {
                        for _ in 0..11 {
                            ctx.attach(Attachment::at_url(
                                AttachmentKind::Image,
                                "image/png",
                                "https://e.x/p.png",
                            ))?;
                        }
                    }
                    "huge" => {
                        let data = "A".repeat(MAX_TOOL_ATTACHMENT_BYTES / 2);
                        ctx.attach(Attachment::file("text/plain", data.clone()))?;
                        ctx.attach(Attachment::file("text/plain", data.clone()))?;
                        ctx.attach(Attachment::file("text/plain", "AAAA"))?;
                    }
                    _ => {
                        ctx.attach(Attachment::image("image/png", PNG))?;
                        return Err(ToolError::failed("the chart broke"));
                    }
                }
                Ok::<_, ToolError>(json!({ "drawn": i.kind }))
            },
        ))
        .build()
        .unwrap()
}

/// The tool messages of the transcript, after a step calling `render_chart` with each
/// of `kinds`.
fn run(kinds: &[&str]) -> (Scenario, Vec<Message>) {
    let w = Scenario::new(Agents::new().with(painter()).unwrap());
    let r = w.runner("p1");
    let calls = kinds
        .iter()
        .map(|k| w.model.call("render_chart", json!({ "kind": k })))
        .collect();
    w.model.calls(calls).text("Drawn.");
    w.create(&r, "painter", "draw");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let tools = w
        .messages()
        .into_iter()
        .filter(|m| matches!(m, Message::Tool { .. }))
        .collect();
    (w, tools)
}

fn attachments_of(m: &Message) -> (&Value, bool, &[Attachment]) {
    match m {
        Message::Tool {
            content,
            is_error,
            attachments,
            ..
        } => (content, *is_error, attachments),
        _ => panic!("a tool message"),
    }
}

#[test]
fn a_tools_files_stay_with_its_result_and_reach_the_model() {
    let (w, tools) = run(&["ok"]);
    let (content, is_error, attachments) = attachments_of(&tools[0]);
    assert_eq!((content, is_error), (&json!({ "drawn": "ok" }), false));
    assert_eq!(
        serde_json::to_value(attachments).unwrap(),
        json!([
            { "type": "image", "mediaType": "image/png", "data": PNG, "name": "chart.png" },
            { "type": "file", "mediaType": "application/pdf", "url": "https://e.x/r.pdf" }
        ])
    );
    // The model's next call has them; the stored message reads back the same.
    let seen = &w.model.seen()[1].messages;
    assert!(seen.contains(&tools[0]));
    let stored = serde_json::to_value(&tools[0]).unwrap();
    assert_eq!(
        serde_json::from_value::<Message>(stored.clone()).unwrap(),
        tools[0]
    );
    assert_eq!(stored["attachments"][0]["name"], "chart.png");
}

#[test]
fn a_bad_attachment_fails_the_call_and_a_failed_call_keeps_none() {
    let (_, tools) = run(&["bad", "many", "huge", "fail"]);
    let errors: Vec<String> = tools
        .iter()
        .map(|m| {
            let (content, is_error, attachments) = attachments_of(m);
            assert!(is_error && attachments.is_empty(), "{m:?}");
            content["error"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(
        errors[0].contains("attachment refused: an image's mediaType must be one of"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].contains("attachment refused: a call gives at most 10 attachments"),
        "{}",
        errors[1]
    );
    assert!(
        errors[2].contains(
            "inline attachments hold at most 1048576 bytes of base64 in all; pass a url instead"
        ),
        "{}",
        errors[2]
    );
    assert!(errors[3].contains("the chart broke"), "{}", errors[3]);
}

/// A step's transcript: two calls, the first giving an image and a PDF link.
fn transcript() -> Vec<Message> {
    let call = |id: &str| ToolCall {
        id: id.into(),
        name: "render_chart".into(),
        arguments: json!({}),
    };
    let mut drawn = Message::tool_result(&call("c1"), json!({ "drawn": 1 }));
    if let Message::Tool { attachments, .. } = &mut drawn {
        *attachments = vec![
            Attachment::image("image/png", PNG),
            Attachment::at_url(AttachmentKind::File, "application/pdf", "https://e.x/r.pdf")
                .named("r.pdf"),
        ];
    }
    vec![
        Message::user("draw"),
        Message::Assistant {
            content: String::new(),
            tool_calls: vec![call("c1"), call("c2")],
            thinking: vec![],
            metadata: None,
        },
        drawn,
        Message::tool_result(&call("c2"), json!({ "drawn": 2 })),
        Message::assistant_text("Drawn."),
    ]
}

fn body(vars: &[(&str, &str)]) -> Value {
    let config = ProviderConfig::from_vars(|k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    })
    .unwrap();
    let messages = transcript();
    let settings = ModelSettings::default();
    let request = ModelRequest {
        system: String::new(),
        messages: &messages,
        tools: vec![],
        settings: &settings,
        options: None,
        session_id: "s1",
        abort: Default::default(),
    };
    serde_json::from_str(&config.request(&request).body).unwrap()
}

#[test]
fn each_provider_gets_a_tools_files_in_its_own_form() {
    let openai = body(&[("LLM_PROVIDER", "openai"), ("LLM_API_KEY", "k")]);
    let roles: Vec<&str> = openai["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "tool", "user", "assistant"]
    );
    assert_eq!(
        openai["messages"][2]["content"], r#"{"drawn":1}"#,
        "tool messages stay text"
    );
    assert_eq!(
        openai["messages"][4]["content"],
        json!([
            { "type": "text", "text": "Files from the result of render_chart (call c1):" },
            { "type": "image_url", "image_url": { "url": format!("data:image/png;base64,{PNG}") } },
            { "type": "text", "text": "[Attachment: r.pdf (application/pdf) at https://e.x/r.pdf]" }
        ])
    );

    let anthropic = body(&[("LLM_PROVIDER", "anthropic"), ("LLM_API_KEY", "k")]);
    let results = &anthropic["messages"][2]["content"];
    assert_eq!(
        results[0],
        json!({ "type": "tool_result", "tool_use_id": "c1", "content": [
            { "type": "text", "text": r#"{"drawn":1}"# },
            { "type": "image", "source": { "type": "base64", "media_type": "image/png", "data": PNG } },
            { "type": "document", "title": "r.pdf", "source": { "type": "url", "url": "https://e.x/r.pdf" } }
        ]})
    );
    assert_eq!(results[1]["content"], r#"{"drawn":2}"#);

    // A model that reads no images is told of them beside the result.
    let blind = body(&[
        ("LLM_PROVIDER", "openai"),
        ("LLM_API_KEY", "k"),
        ("LLM_CAPABILITIES", "-images,-documents"),
    ]);
    assert_eq!(
        blind["messages"][2]["content"],
        json!({ "result": { "drawn": 1 }, "attachments": [
            "[Attachment: a file (image/png), not readable by this model]",
            "[Attachment: r.pdf (application/pdf) at https://e.x/r.pdf]"
        ]})
        .to_string()
    );
    assert_eq!(
        blind["messages"].as_array().unwrap().len(),
        5,
        "no files message"
    );
}
