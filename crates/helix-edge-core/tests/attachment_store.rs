//! Large tool attachments kept in a store (`AgentBuilder::attachment_store`; objects in
//! memory here, R2 on the platform): a tool attaches a file over the inline limits, the
//! transcript keeps a `stored:` reference, the store keeps the data, and every model
//! call gets it back inline; a reference whose object is gone fails the model call
//! with a clear error; the raised limits still hold.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::attachment::Attachment;
use helix_edge_core::attachment_store::{INLINE_UP_TO, MAX_STORED_ATTACHMENT_BYTES};
use helix_edge_core::message::Message;
use helix_edge_core::runner::Progress;
use helix_edge_core::store::SessionStatus;
use helix_edge_core::testing::{MemoryObjects, Scenario, block, drive, drive_advancing};
use helix_edge_core::tool::Tool;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize, schemars::JsonSchema)]
struct Render {
    /// Base64 characters of the image to attach.
    size: usize,
}

/// `render` attaches an image of `size` base64 characters and a small one.
fn painter(objects: Option<&MemoryObjects>) -> Agent {
    let tool = Tool::new("render", "Render.", |i: Render, ctx| async move {
        ctx.attach(Attachment::image("image/png", "A".repeat(i.size)).named("big.png"))?;
        ctx.attach(Attachment::image("image/png", "iVBORw0KGgo="))?;
        Ok::<_, helix_edge_core::error::ToolError>(json!({ "rendered": true }))
    });
    let builder = Agent::builder("painter")
        .system_prompt("You draw.")
        .tool(tool);
    match objects {
        Some(objects) => builder.attachment_store(objects.clone()),
        None => builder,
    }
    .build()
    .unwrap()
}

fn scenario(objects: Option<&MemoryObjects>) -> Scenario {
    Scenario::new(Agents::new().with(painter(objects)).unwrap())
}

/// The attachments of the tool messages in `messages`.
fn tool_attachments(messages: &[Message]) -> Vec<Attachment> {
    messages
        .iter()
        .flat_map(|m| match m {
            Message::Tool { attachments, .. } => attachments.clone(),
            _ => Vec::new(),
        })
        .collect()
}

#[test]
fn a_large_attachment_is_kept_in_the_store_and_sent_inline_to_each_model_call() {
    let objects = MemoryObjects::default();
    let s = scenario(Some(&objects));
    let r = s.runner("p1");
    let size = 1_400_000; // over the inline limits: 1 MiB of base64, 512 KiB decoded
    let call = s.model.call("render", json!({ "size": size }));
    s.model.calls(vec![call.clone()]).text("Drawn.");
    s.create(&r, "painter", "draw");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    let kept = tool_attachments(&s.messages());
    let key = format!("attachments/{}/{}/0", s.session().head.id, call.id);
    assert_eq!(
        kept[0].url.as_deref(),
        Some(format!("stored:{key}").as_str())
    );
    assert_eq!(
        (kept[0].data.as_ref(), kept[0].name.as_deref()),
        (None, Some("big.png"))
    );
    assert_eq!(
        kept[1].data.as_deref(),
        Some("iVBORw0KGgo="),
        "small ones stay inline"
    );
    assert!(kept[1].data.as_ref().unwrap().len() <= INLINE_UP_TO);
    assert_eq!(objects.text(&key).map(|t| t.len()), Some(size));

    let sent = tool_attachments(&s.model.seen()[1].messages);
    assert_eq!(
        sent[0].data.as_ref().map(String::len),
        Some(size),
        "read back inline"
    );
    assert_eq!(sent[0].url, None);
    assert_eq!(sent[1], kept[1]);

    // The object is gone: the next model call fails, saying which attachment.
    objects.delete(&key);
    s.model.text("again");
    block(r.send_message(helix_edge_core::testing::SESSION, "more".into())).unwrap();
    let progress = drive_advancing(&s.host, &r, 60_000, 20);
    assert_eq!(progress, Progress::Idle(SessionStatus::Failed));
    let error = s.session().head.run.error.unwrap();
    assert!(
        error
            .message
            .contains(&format!("stored attachment '{key}' could not be read")),
        "{error:?}"
    );
}

#[test]
fn the_limits_are_raised_only_with_a_store_and_still_hold() {
    for (objects, size, refused) in [
        (None, 1_400_000, "at most 524288 bytes"),
        (
            Some(MemoryObjects::default()),
            MAX_STORED_ATTACHMENT_BYTES / 3 * 4 + 8,
            "at most 10485760 bytes",
        ),
    ] {
        let s = scenario(objects.as_ref());
        let r = s.runner("p1");
        s.model
            .calls(vec![s.model.call("render", json!({ "size": size }))])
            .text("No.");
        s.create(&r, "painter", "draw");
        assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
        let Message::Tool {
            content,
            is_error: true,
            attachments,
            ..
        } = &s.messages()[2]
        else {
            panic!("the call failed");
        };
        assert!(
            content["error"].as_str().unwrap().contains(refused),
            "{content}"
        );
        assert!(attachments.is_empty());
        assert!(
            objects.is_none_or(|o| o.all_keys().is_empty()),
            "nothing kept"
        );
    }
}
