//! Runs whose model answers are recorded provider streams that end in an error stop
//! reason: a refusal fails the run with the provider's explanation, a cut-off answer is
//! nudged only when the agent owes an output. The real `HttpModel` reads the bytes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod fake;

use fake::recorded::{anthropic_sse, config};
use fake::{Answer, ChunkedTransport, block};
use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::chunk::{RunStatus, StreamEvent};
use helix_edge_core::host::ManualHost;
use helix_edge_core::journal::MemoryJournal;
use helix_edge_core::message::Message;
use helix_edge_core::model::OneModel;
use helix_edge_core::provider::HttpModel;
use helix_edge_core::runner::{CreateSession, Progress, Runner, RunnerConfig};
use helix_edge_core::store::{Loaded, MemoryStore, SessionStatus, Store};
use serde_json::json;
use std::rc::Rc;

const OUTPUT_OK: &str = "event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"__finish__\",\"input\":{}}}\n\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"summary\\\":\\\"short\\\"}\"}}\n\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: message_delta\n\
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n\
event: message_stop\n\
data: {\"type\":\"message_stop\"}\n\n";

fn plain() -> Agent {
    Agent::builder("plain").system_prompt("p").build().unwrap()
}

fn summarizer() -> Agent {
    Agent::builder("summarizer")
        .system_prompt("s")
        .output_schema(json!({
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"]
        }))
        .build()
        .unwrap()
}

/// Runs `agent` on Anthropic answers `streams` (one per model call) to its end.
fn run(agent: Agent, streams: Vec<Vec<u8>>) -> (Loaded, Vec<Message>, Vec<StreamEvent>) {
    let name = agent.name().to_string();
    let answers = streams
        .into_iter()
        .map(|s| Answer::Http(200, vec![], vec![Ok(s)]))
        .collect();
    let model = HttpModel::new(config("anthropic"), ChunkedTransport::new(answers));
    let store = Rc::new(MemoryStore::new());
    let journal = Rc::new(MemoryJournal::new());
    let runner = Runner::new(
        store.clone(),
        Agents::new().with(agent).unwrap(),
        Rc::new(OneModel(Rc::new(model))),
        journal.clone(),
        Rc::new(ManualHost::new(1_795_000_000_000, "")),
        RunnerConfig::new("p1"),
    );
    block(runner.create(CreateSession::new("s1", name, "hi"))).unwrap();
    let progress = block(runner.drive("s1", 10)).unwrap();
    let loaded = block(store.load("s1")).unwrap().unwrap();
    assert_eq!(progress, Progress::Idle(loaded.head.status));
    let messages = block(store.messages("s1", 0, 100)).unwrap();
    (loaded, messages, journal.events())
}

#[test]
fn a_recorded_refusal_fails_the_run_with_the_providers_explanation() {
    let (s, messages, events) = run(
        plain(),
        vec![anthropic_sse("anthropic/anthropic-refusal.chunks.txt")],
    );
    assert_eq!(s.head.status, SessionStatus::Failed);
    assert_eq!(s.head.run.status, RunStatus::Failed);
    let error = s.head.error.unwrap();
    assert_eq!(error.code, "provider_refused");
    assert!(!error.retryable);
    assert!(
        error.message.contains("violative cyber content"),
        "{}",
        error.message
    );
    assert!(
        matches!(&messages[1], Message::Assistant { metadata: Some(m), .. } if m["stopReason"] == "refusal"),
        "the answer is kept, with its stop reason: {messages:?}"
    );
    assert!(matches!(
        events.last(),
        Some(StreamEvent::Fail { error }) if error.code == "provider_refused"
    ));
}

#[test]
fn a_recorded_cut_off_fails_a_plain_agent_but_nudges_one_that_owes_an_output() {
    let cut = || anthropic_sse("anthropic/anthropic-issue-5942-cache-read.chunks.txt");
    let (s, _, _) = run(plain(), vec![cut()]);
    assert_eq!(s.head.error.unwrap().code, "provider_max_tokens");

    let (s, messages, _) = run(summarizer(), vec![cut(), OUTPUT_OK.as_bytes().to_vec()]);
    assert_eq!(s.head.status, SessionStatus::Completed);
    assert_eq!(s.head.output, Some(json!({"summary": "short"})));
    assert_eq!(s.head.run.nudges, 1);
    assert!(
        matches!(&messages[2], Message::User { content, metadata: Some(_), .. } if content.contains("cut off")),
        "{messages:?}"
    );
}
