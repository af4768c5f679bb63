//! Recorded provider streams (`../shared/fixtures`, see its README) decode to the
//! expected text, tool calls, arguments, stop reasons and usage — through the real
//! `HttpModel` read loop, with the bytes split at every boundary (byte-at-a-time and
//! seeded random chunkings for the large files). Hand-written streams cover what the
//! recordings lack: parallel OpenAI tool calls, in-stream errors, truncation, corruption.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod fake;

use fake::recorded::{anthropic_sse, config, fixture, lines, openai_sse};
use fake::{ChunkedTransport, block};
use helix_edge_core::error::ProviderError;
use helix_edge_core::message::Message;
use helix_edge_core::model::{Delta, ModelRequest, ModelSettings, ModelTurn, StopReason};
use helix_edge_core::provider::HttpModel;
use serde_json::{Value, json};

/// Decodes `bytes` delivered as `chunks`; returns the turn and the streamed deltas.
fn decode(
    kind: &str,
    bytes: &[u8],
    cuts: &[usize],
) -> (Result<ModelTurn, ProviderError>, Vec<Delta>) {
    let mut chunks = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        chunks.push(bytes[start..cut].to_vec());
        start = cut;
    }
    let model = HttpModel::new(config(kind), ChunkedTransport::ok(chunks));
    let settings = ModelSettings::default();
    let messages = [Message::user("hi")];
    let request = ModelRequest {
        system: String::new(),
        messages: &messages,
        tools: vec![],
        settings: &settings,
        options: None,
        session_id: "s1",
        abort: Default::default(),
    };
    let mut deltas = Vec::new();
    let turn = block(helix_edge_core::model::Model::generate(
        &model,
        request,
        &mut |d| deltas.push(d),
    ));
    (turn, deltas)
}

fn seeded_cuts(len: usize, seed: u64) -> Vec<usize> {
    let mut x = seed | 1;
    let mut cuts = Vec::new();
    let mut at = 0;
    loop {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        at += 1 + (x % 97) as usize;
        if at >= len {
            return cuts;
        }
        cuts.push(at);
    }
}

/// Decodes whole, then under many splittings; every result must be identical.
fn decode_every_way(kind: &str, bytes: &[u8]) -> ModelTurn {
    let (whole, deltas) = decode(kind, bytes, &[]);
    let whole = whole.unwrap();
    let streamed: String = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        streamed, whole.text,
        "streamed text equals the assembled text"
    );
    let mut splittings: Vec<Vec<usize>> =
        (1..8).map(|s| seeded_cuts(bytes.len(), s * 7919)).collect();
    splittings.push((1..bytes.len()).collect()); // one byte at a time
    if bytes.len() <= 4_096 {
        splittings.extend((1..bytes.len()).map(|k| vec![k])); // every two-piece split
    }
    for cuts in splittings {
        let (turn, split_deltas) = decode(kind, bytes, &cuts);
        assert_eq!(
            turn.as_ref().unwrap(),
            &whole,
            "cuts {:?}…",
            &cuts[..cuts.len().min(3)]
        );
        assert_eq!(split_deltas, deltas);
    }
    whole
}

fn call(turn: &ModelTurn, i: usize) -> (&str, &str, &Value) {
    let c = &turn.tool_calls[i];
    (c.id.as_str(), c.name.as_str(), &c.arguments)
}

fn usage(turn: &ModelTurn) -> (u64, u64) {
    (turn.usage.input_tokens, turn.usage.output_tokens)
}

#[test]
fn openai_text_streams() {
    let t = decode_every_way("openai", &openai_sse("openai/openai-text.chunks.txt"));
    assert!(t.text.starts_with("**Holiday Name:** Harmony Day"));
    assert_eq!((t.stop, usage(&t)), (StopReason::EndTurn, (16, 300)));
    assert_eq!(t.model.as_deref(), Some("gpt-4.1-nano-2025-04-14"));

    let t = decode_every_way(
        "openai",
        &openai_sse("openai/azure-model-router.1.chunks.txt"),
    );
    assert_eq!(
        (t.text.as_str(), t.stop, usage(&t)),
        ("Capital of Denmark.", StopReason::EndTurn, (15, 78))
    );
    // The router's first chunk names no model; the answering one is kept.
    assert_eq!(t.model.as_deref(), Some("gpt-5-nano-2025-08-07"));

    let t = decode_every_way("openai", &openai_sse("openai/deepseek-text.chunks.txt"));
    assert!(
        t.text
            .starts_with("## **Holiday Name:** Starlight Remembran")
    );
    assert_eq!((t.stop, usage(&t)), (StopReason::MaxTokens, (13, 400)));
}

#[test]
fn openai_reasoning_becomes_thinking() {
    let t = decode_every_way(
        "openai",
        &openai_sse("openai/deepseek-reasoning.chunks.txt"),
    );
    assert!(
        t.text
            .starts_with("The word \"strawberry\" contains three \"r\"")
    );
    assert!(!t.thinking[0].content.is_empty());
    assert_eq!((t.stop, usage(&t)), (StopReason::EndTurn, (18, 219)));

    let t = decode_every_way("openai", &openai_sse("openai/groq-reasoning.chunks.txt"));
    assert!(
        t.thinking[0].content.len() > 1000,
        "Groq's `reasoning` field"
    );
    assert_eq!((t.stop, usage(&t)), (StopReason::EndTurn, (17, 1107)));
}

#[test]
fn openai_tool_calls_assemble_from_every_fragment_style() {
    let weather_sf = json!({"location": "San Francisco"});
    let t = decode_every_way(
        "openai",
        &openai_sse("openai/issue-15789-step-1.chunks.txt"),
    );
    assert_eq!(t.text, "PRE_TOOL");
    assert_eq!(
        call(&t, 0),
        ("call_NZa7xqfefoaMI2YYHowVXVlU", "weather", &json!({}))
    );
    assert_eq!((t.stop, usage(&t)), (StopReason::ToolUse, (58, 12)));

    let t = decode_every_way(
        "openai",
        &openai_sse("openai/deepseek-tool-call.chunks.txt"),
    );
    assert_eq!(
        call(&t, 0),
        ("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", &weather_sf)
    );
    assert_eq!(usage(&t), (339, 83));

    let t = decode_every_way("openai", &openai_sse("openai/groq-tool-call.chunks.txt"));
    assert_eq!(call(&t, 0), ("tk85n1k4m", "weather", &json!({})));
    assert_eq!((t.stop, usage(&t)), (StopReason::ToolUse, (210, 15)));

    let t = decode_every_way("openai", &openai_sse("openai/alibaba-tool-call.chunks.txt"));
    assert_eq!(
        call(&t, 0),
        ("call_eee11723464a4b9eb8cee71d", "weather", &weather_sf),
        "'' ids never overwrite"
    );
    assert_eq!(usage(&t), (295, 22));

    let t = decode_every_way("openai", &openai_sse("openai/mistral-tool-call.chunks.txt"));
    assert_eq!(
        call(&t, 0),
        ("gSIMJiOkT", "weather", &weather_sf),
        "no index key"
    );
    assert_eq!(usage(&t), (124, 22));

    let t = decode_every_way(
        "openai",
        &openai_sse("openai/mistral-incremental-tool-call.chunks.txt"),
    );
    let query = json!({"query": "current Berlin weather"});
    assert_eq!(
        call(&t, 0),
        ("chatcmpl-tool-9f149c74c42f265b", "webSearchTool", &query),
        "'' names never overwrite"
    );
    assert_eq!((t.stop, usage(&t)), (StopReason::ToolUse, (171, 14)));

    let t = decode_every_way(
        "openai",
        &fixture("openai/anthropic-fallback-tool-call.sse"),
    );
    assert_eq!(t.text, "Reading it.");
    assert_eq!(
        call(&t, 0),
        ("toolu_sanitized", "read_file", &json!({"path": "a.txt"})),
        "index starts at 1"
    );
    assert_eq!(t.tool_calls.len(), 1);
}

#[test]
fn openai_parallel_tool_calls_interleave_by_index() {
    let chunks = [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"add_note","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"add_note","arguments":"{\"te"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"text\":\"x\"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"","function":{"name":"","arguments":"xt\":\"y\"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":3}}}"#,
    ];
    let mut sse: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    sse.push_str("data: [DONE]\n\n");
    let t = decode_every_way("openai", sse.as_bytes());
    assert_eq!(call(&t, 0), ("a", "add_note", &json!({"text": "x"})));
    assert_eq!(call(&t, 1), ("b", "add_note", &json!({"text": "y"})));
    assert_eq!((usage(&t), t.usage.cache_read_tokens), ((5, 7), 3));
}

#[test]
fn openai_calls_come_out_in_index_order_whatever_order_they_start_in() {
    let chunks = [
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"c","function":{"name":"add_note","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"add_note","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"get_time","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
    ];
    let mut sse: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    sse.push_str("data: [DONE]\n\n");
    let t = decode_every_way("openai", sse.as_bytes());
    let ids: Vec<&str> = t.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(call(&t, 1), ("b", "get_time", &json!({})));
}

#[test]
fn anthropic_streams_assemble() {
    let t = decode_every_way(
        "anthropic",
        &anthropic_sse("anthropic/anthropic-text.chunks.txt"),
    );
    let hello = "Hello! I'm doing well, thank you for asking. How are you doing today? Is there anything I can help you with?";
    assert_eq!(
        (t.text.as_str(), t.stop, usage(&t)),
        (hello, StopReason::EndTurn, (12, 30))
    );
    assert_eq!(t.model.as_deref(), Some("claude-sonnet-4-5-20250929"));

    let t = decode_every_way(
        "anthropic",
        &anthropic_sse("anthropic/anthropic-json-other-tool.1.chunks.txt"),
    );
    let sf = json!({"location": "San Francisco"});
    assert_eq!(
        call(&t, 0),
        ("toolu_019Zvehfe1XQWweT1pm7okyt", "weather", &sf)
    );
    assert_eq!((t.stop, usage(&t)), (StopReason::ToolUse, (843, 28)));

    let t = decode_every_way(
        "anthropic",
        &anthropic_sse("anthropic/anthropic-tool-no-args.chunks.txt"),
    );
    assert_eq!(t.text, "I'll update the issue list for you.");
    assert_eq!(
        call(&t, 0),
        (
            "toolu_01QE1WLsSVp5hy5Q3GmGTmjP",
            "updateIssueList",
            &json!({})
        )
    );
    assert_eq!(usage(&t), (565, 48));

    let t = decode_every_way(
        "anthropic",
        &anthropic_sse("anthropic/anthropic-issue-15652-false.chunks.txt"),
    );
    let queries: Vec<&Value> = t.tool_calls.iter().map(|c| &c.arguments["query"]).collect();
    assert_eq!(queries, [&json!("alpha"), &json!("beta"), &json!("gamma")]);
    assert_eq!(usage(&t), (798, 110));

    let t = decode_every_way(
        "anthropic",
        &fixture("anthropic/issue-13057-approved-tool.1.chunks.txt"),
    );
    let title = json!({"title": "Reproduce issue 13057"});
    assert_eq!(
        call(&t, 0),
        ("toolu_01TyLXoWW1gujar8anh7KHHN", "createIssue", &title)
    );
    assert_eq!(usage(&t), (618, 59));

    let t = decode_every_way(
        "anthropic",
        &anthropic_sse("anthropic/anthropic-message-delta-input-tokens.chunks.txt"),
    );
    assert_eq!(
        (t.text.as_str(), t.stop, usage(&t)),
        ("pong", StopReason::EndTurn, (61, 2))
    );

    let t = decode_every_way(
        "anthropic",
        &anthropic_sse("anthropic/anthropic-web-search-tool.1.chunks.txt"),
    );
    assert_eq!((t.stop, usage(&t)), (StopReason::EndTurn, (15665, 795)));
    assert!(
        t.tool_calls.is_empty(),
        "server tool blocks are not client tool calls"
    );
}

#[test]
fn anthropic_thinking_keeps_its_signature() {
    let t = decode_every_way(
        "anthropic",
        &anthropic_sse("anthropic/anthropic-clear-thinking.1.chunks.txt"),
    );
    assert_eq!(
        t.thinking[0].content,
        "The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185"
    );
    assert!(
        t.thinking[0]
            .signature
            .as_deref()
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!((t.text.as_str(), usage(&t)), ("925 ÷ 5 = 185", (69, 53)));

    let t = decode_every_way(
        "anthropic",
        &anthropic_sse("anthropic/anthropic-claude-sonnet-5-reasoning-generic.chunks.txt"),
    );
    assert_eq!(
        t.thinking[0].content, "",
        "thinking withheld, signature only"
    );
    assert!(t.thinking[0].signature.is_some());
    assert!(t.text.ends_with("answer. ✅"));
    assert_eq!(usage(&t), (47, 496));
}

/// Thinking with tool use, as Anthropic documents it (`fixtures/documented`): a signed
/// thinking block, a redacted one, text and a call. The next request carries both
/// thinking blocks back byte for byte, ahead of the text and the call.
#[test]
fn anthropic_thinking_with_tool_use_goes_back_signed_and_redacted_byte_for_byte() {
    let path = "documented/anthropic-thinking-tool-use.chunks.txt";
    let t = decode_every_way("anthropic", &anthropic_sse(path));
    let events: Vec<Value> = lines(&fixture(path))
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let signature = events[5]["delta"]["signature"].as_str().unwrap();
    let redacted = events[7]["content_block"]["data"].as_str().unwrap();
    assert_eq!(t.thinking.len(), 2, "{:?}", t.thinking);
    assert_eq!(
        t.thinking[0].content,
        "The user wants the weather in Paris. I have a get_weather tool; I should call it with \
         location \"Paris, France\" — in °C."
    );
    assert_eq!(t.thinking[0].signature.as_deref(), Some(signature));
    assert_eq!(t.thinking[1].redacted.as_deref(), Some(redacted));
    assert_eq!(t.text, "I'll check the current weather in Paris for you.");
    let paris = json!({"location": "Paris, France", "unit": "celsius"});
    assert_eq!(
        call(&t, 0),
        ("toolu_01CswdEQBMshySk6Y9DFKrfq", "get_weather", &paris)
    );
    assert_eq!((t.stop, usage(&t)), (StopReason::ToolUse, (412, 157)));

    let messages = [
        Message::user("What's the weather in Paris?"),
        Message::Assistant {
            content: t.text.clone(),
            tool_calls: t.tool_calls.clone(),
            thinking: t.thinking.clone(),
            metadata: None,
        },
        Message::tool_result(&t.tool_calls[0], json!({"temperature": 18})),
    ];
    let settings = ModelSettings {
        thinking_budget: Some(2048),
        ..Default::default()
    };
    let request = ModelRequest {
        system: String::new(),
        messages: &messages,
        tools: vec![],
        settings: &settings,
        options: None,
        session_id: "s1",
        abort: Default::default(),
    };
    let body = config("anthropic").request(&request).body;
    for raw in [
        format!(r#""signature":"{signature}""#),
        format!(r#""data":"{redacted}""#),
    ] {
        assert!(body.contains(&raw), "{raw} goes back untouched: {body}");
    }
    let sent: Value = serde_json::from_str(&body).unwrap();
    let content = sent["messages"][1]["content"].as_array().unwrap();
    assert_eq!(
        content[..2],
        [
            json!({"type": "thinking", "thinking": t.thinking[0].content, "signature": signature}),
            json!({"type": "redacted_thinking", "data": redacted}),
        ],
        "the assistant turn opens with its thinking as received"
    );
    let kinds: Vec<&str> = content
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["thinking", "redacted_thinking", "text", "tool_use"]);
    assert_eq!(sent["thinking"]["budget_tokens"], 2048);
}

#[test]
fn anthropic_stop_reasons_and_cache_usage() {
    let t = decode_every_way(
        "anthropic",
        &anthropic_sse("anthropic/anthropic-issue-5942-cache-read.chunks.txt"),
    );
    assert_eq!(
        (t.text.as_str(), t.stop, usage(&t)),
        ("OK", StopReason::MaxTokens, (3, 1))
    );
    assert_eq!(t.usage.cache_read_tokens, 18639);

    let t = decode_every_way(
        "anthropic",
        &anthropic_sse("anthropic/anthropic-refusal.chunks.txt"),
    );
    assert_eq!(
        (t.text.as_str(), t.stop, usage(&t)),
        ("", StopReason::Refusal, (18, 5))
    );
    assert!(
        t.stop_detail
            .as_deref()
            .is_some_and(|d| d.starts_with("This request triggered restrictions"))
    );
}

#[test]
fn anthropic_stop_sequence_and_pause_turn_are_their_own_reasons_and_finished_answers() {
    for (reason, stop) in [
        ("end_turn", StopReason::EndTurn),
        ("stop_sequence", StopReason::StopSequence),
        ("pause_turn", StopReason::PauseTurn),
    ] {
        let sse = format!(
            "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":3,\"output_tokens\":0}}}}}}\n\n\
             event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n\
             event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"Hi\"}}}}\n\n\
             event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n\
             event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{reason}\"}},\"usage\":{{\"output_tokens\":1}}}}\n\n\
             event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
        );
        let t = decode_every_way("anthropic", sse.as_bytes());
        assert_eq!((t.text.as_str(), t.stop), ("Hi", stop), "{reason}");
        assert_eq!(t.stop.error(None), None, "{reason} is a finished answer");
    }
}

#[test]
fn an_openai_refusal_ends_the_turn_as_a_refusal_with_its_text() {
    let chunk = |delta: &str, finish: &str| {
        format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        )
    };
    let sse = [
        chunk(r#"{"role":"assistant","refusal":"I can't help"}"#, "null"),
        chunk(r#"{"refusal":" with that."}"#, "null"),
        chunk("{}", r#""stop""#),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let t = decode_every_way("openai", sse.as_bytes());
    assert_eq!(t.stop, StopReason::Refusal);
    assert_eq!(t.stop_detail.as_deref(), Some("I can't help with that."));
    assert_eq!(t.text, "", "a refusal is not answer text");
}

#[test]
fn in_stream_errors_are_classified() {
    let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
               data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\"}}\n\n";
    let (turn, _) = decode("openai", sse.as_bytes(), &[]);
    assert_eq!(
        turn,
        Err(ProviderError::Stream {
            message: "The server had an error".into(),
            retryable: true
        })
    );

    let error: Value =
        serde_json::from_slice(&fixture("anthropic/anthropic-issue-17366-error.json")).unwrap();
    let sse = format!("event: error\ndata: {error}\n\n");
    let (turn, _) = decode("anthropic", sse.as_bytes(), &[]);
    assert!(
        matches!(
            turn,
            Err(ProviderError::Stream {
                retryable: false,
                ..
            })
        ),
        "{turn:?}"
    );
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let (turn, _) = decode(
        "anthropic",
        format!("event: error\ndata: {overloaded}\n\n").as_bytes(),
        &[],
    );
    assert_eq!(
        turn,
        Err(ProviderError::Stream {
            message: "Overloaded".into(),
            retryable: true
        })
    );
}

#[test]
fn a_stream_without_its_terminal_event_is_truncated_never_done() {
    let full = openai_sse("openai/openai-text.chunks.txt");
    let text = String::from_utf8(full).unwrap();
    let cut = &text[..text.find("\"finish_reason\":\"stop\"").unwrap() - 200];
    assert_eq!(
        decode("openai", cut.as_bytes(), &[]).0,
        Err(ProviderError::Truncated)
    );

    let anthropic = anthropic_sse("anthropic/anthropic-text.chunks.txt");
    let without_stop = String::from_utf8(anthropic)
        .unwrap()
        .replace("event: message_stop", "event: x")
        .replace("\"message_stop\"", "\"x\"");
    assert_eq!(
        decode("anthropic", without_stop.as_bytes(), &[]).0,
        Err(ProviderError::Truncated)
    );
}

#[test]
fn corrupt_events_are_errors() {
    let (turn, _) = decode("openai", b"data: {\"choices\": [\n\n", &[]);
    assert!(matches!(turn, Err(ProviderError::Corrupt(_))), "{turn:?}");
    let (turn, _) = decode("anthropic", b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":4,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n", &[]);
    assert!(
        matches!(turn, Err(ProviderError::Corrupt(_))),
        "a delta for a block that never started: {turn:?}"
    );
}

#[test]
fn an_aborted_call_stops_reading_and_is_not_retried() {
    let bytes = openai_sse("openai/openai-text.chunks.txt");
    let transport = ChunkedTransport::ok(bytes.chunks(100).map(<[u8]>::to_vec).collect());
    let mut cfg = config("openai");
    cfg.max_retries = 3;
    let model = HttpModel::new(cfg, transport);
    let settings = ModelSettings::default();
    let messages = [Message::user("hi")];
    let abort = helix_edge_core::tool::AbortSignal::new();
    abort.abort();
    let request = ModelRequest {
        system: String::new(),
        messages: &messages,
        tools: vec![],
        settings: &settings,
        options: None,
        session_id: "s1",
        abort,
    };
    let turn = block(helix_edge_core::model::Model::generate(
        &model,
        request,
        &mut |_| {},
    ));
    assert!(
        matches!(turn, Err(ProviderError::Network(ref m)) if m.contains("aborted")),
        "{turn:?}"
    );
}
