//! Native micro-benchmarks of the hot paths: state patches on a large state, the
//! per-step bookkeeping of a large session, storage growth per step, provider stream
//! decoding, chunk encoding and the model request of a long transcript. `cargo bench
//! --bench hot_paths` (or `scripts/bench.sh`).
//! They report numbers; the behaviour behind them is asserted by the tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // A benchmark aborts on a broken setup.

use futures::executor::block_on;
use helix_edge_core::chunk::{Chunk, ChunkBody, StreamEvent};
use helix_edge_core::provider::Decoder;
use helix_edge_core::provider::anthropic::AnthropicDecoder;
use helix_edge_core::provider::openai::OpenAiDecoder;
use helix_edge_core::provider::sse::SseFramer;
use helix_edge_core::state::StateWriter;
use helix_edge_core::store::Store;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

#[path = "../tests/support/append_agent.rs"]
mod append_agent;
use append_agent::{big_state, create, runner};

/// min / median / p95 of per-iteration times.
struct Stats(Vec<Duration>);

impl Stats {
    fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        Self(samples)
    }
    fn at(&self, q: f64) -> Duration {
        let i = ((self.0.len() as f64 * q) as usize).min(self.0.len() - 1);
        self.0[i]
    }
    fn show(&self) -> String {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        format!(
            "min {:.1} µs, median {:.1} µs, p95 {:.1} µs ({} runs)",
            us(self.0[0]),
            us(self.at(0.5)),
            us(self.at(0.95)),
            self.0.len()
        )
    }
}

fn sample(runs: usize, mut f: impl FnMut() -> Duration) -> Stats {
    Stats::of((0..runs).map(|_| f()).collect())
}

fn timed<R>(f: impl FnOnce() -> R) -> (R, Duration) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed())
}

fn patches() {
    println!("\n## State patches (10,000-item array)\n");
    let base = Rc::new(big_state(10_000));
    let item = json!({ "id": 10_000, "title": "new", "done": false, "tags": [] });
    let mut ops = 0;
    let append = sample(2_000, || {
        let (w, d) = timed(|| {
            let mut w = StateWriter::new(base.clone());
            w.append("/items", item.clone()).unwrap();
            w
        });
        ops = w.ops().len();
        d
    });
    println!(
        "- append one item (`ctx.append`): {ops} op, {}",
        append.show()
    );
    let deep = sample(2_000, || {
        let (w, d) = timed(|| {
            let mut w = StateWriter::new(base.clone());
            w.set("/profile/settings/notify/email", json!(false))
                .unwrap();
            w
        });
        ops = w.ops().len();
        d
    });
    println!(
        "- one deep field change (`ctx.set`): {ops} op, {}",
        deep.show()
    );
    let diffed = sample(50, || {
        let (w, d) = timed(|| {
            let mut w = StateWriter::new(base.clone());
            w.update(|s| s["items"].as_array_mut().unwrap().push(item.clone()))
                .unwrap();
            w
        });
        ops = w.ops().len();
        d
    });
    println!(
        "- append through `ctx.update` (copy + diff of the whole state): {ops} op, {}",
        diffed.show()
    );
    let diffed = sample(50, || {
        let (w, d) = timed(|| {
            let mut w = StateWriter::new(base.clone());
            w.update(|s| s["profile"]["settings"]["notify"]["email"] = json!(false))
                .unwrap();
            w
        });
        ops = w.ops().len();
        d
    });
    println!(
        "- deep change through `ctx.update`: {ops} op, {}",
        diffed.show()
    );
}

fn step_bookkeeping() {
    println!("\n## One step of a session with 1,000 messages and a 10,000-item state\n");
    let runner = runner();
    create(&runner, "big", 10_000);
    // 1 user message + 2 per step (assistant call, tool result).
    block_on(runner.drive("big", 500)).unwrap();
    let messages = block_on(runner.store().messages("big", 0, u64::MAX))
        .unwrap()
        .len();
    // A drive loads the session (once per slice of steps, from the store's image); a
    // drive of zero steps measures that load alone, one of a hundred steps adds them.
    const STEPS: u32 = 100;
    let mut per_step = Vec::new();
    let mut loads = Vec::new();
    for _ in 0..30 {
        let ((), load) = timed(|| {
            block_on(runner.drive("big", 0)).unwrap();
        });
        let ((), drive) = timed(|| {
            block_on(runner.drive("big", STEPS)).unwrap();
        });
        loads.push(load);
        per_step.push(drive.saturating_sub(load) / STEPS);
    }
    let bytes = runner.store().bytes_written();
    println!("- session: {messages} messages before measuring");
    println!(
        "- load at the start of a drive (copies of the state and transcript from the image): {}",
        Stats::of(loads).show()
    );
    println!(
        "- one step, model and tool included (both trivial here): prompt, plan, merge, commit plan, journal: {}",
        Stats::of(per_step).show()
    );
    println!(
        "- the step's write set: {} bytes (the last commit)",
        bytes.last().copied().unwrap_or(0)
    );
}

fn storage_growth() {
    println!("\n## Storage growth: bytes sent to D1 per step, 200 steps\n");
    for items in [10, 10_000] {
        let runner = runner();
        create(&runner, "grow", items);
        block_on(runner.drive("grow", 200)).unwrap();
        let bytes = runner.store().bytes_written();
        let steps = &bytes[1..];
        let mean = steps.iter().sum::<usize>() as f64 / steps.len() as f64;
        println!(
            "- initial state {items} items (create: {} bytes): step 1 {} B, step 100 {} B, step 200 {} B, mean {:.0} B, max {} B",
            bytes[0],
            steps[0],
            steps[99],
            steps[199],
            mean,
            steps.iter().max().unwrap()
        );
    }
}

fn fixture(path: &str) -> Option<Vec<u8>> {
    let dir = std::env::var_os("HELIX_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"));
    std::fs::read(dir.join(path)).ok()
}

fn sse_stream(path: &str, anthropic: bool) -> Option<Vec<u8>> {
    let text = String::from_utf8(fixture(path)?).ok()?;
    let mut out = String::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if anthropic {
            let v: Value = serde_json::from_str(line).ok()?;
            out.push_str(&format!("event: {}\n", v["type"].as_str()?));
        }
        out.push_str(&format!("data: {line}\n\n"));
    }
    if !anthropic {
        out.push_str("data: [DONE]\n\n");
    }
    Some(out.into_bytes())
}

fn decode(bytes: &[u8], decoder: Box<dyn Decoder>) {
    let mut framer = SseFramer::new();
    let mut decoder = decoder;
    let (mut events, mut deltas) = (Vec::new(), Vec::new());
    for chunk in bytes.chunks(16 * 1024) {
        framer.feed(chunk, &mut events).unwrap();
        for e in events.drain(..) {
            decoder.event(&e, &mut deltas).unwrap();
        }
        deltas.clear();
    }
    decoder.finish(&mut deltas).unwrap();
}

fn decoding() {
    println!("\n## Provider stream decoding (16 KiB reads)\n");
    type MakeDecoder = fn() -> Box<dyn Decoder>;
    let cases: [(&str, bool, MakeDecoder); 2] = [
        ("openai/groq-reasoning.chunks.txt", false, || {
            Box::new(OpenAiDecoder::new())
        }),
        (
            "anthropic/anthropic-web-search-tool.1.chunks.txt",
            true,
            || Box::new(AnthropicDecoder::new()),
        ),
    ];
    for (path, anthropic, make) in cases {
        let Some(bytes) = sse_stream(path, anthropic) else {
            println!("- {path}: fixture missing (set HELIX_FIXTURES_DIR)");
            continue;
        };
        let reps = (32 * 1024 * 1024 / bytes.len()).max(1);
        let ((), d) = timed(|| (0..reps).for_each(|_| decode(&bytes, make())));
        let mb = (bytes.len() * reps) as f64 / 1e6;
        println!(
            "- {path} ({} bytes × {reps}): {:.1} MB/s",
            bytes.len(),
            mb / d.as_secs_f64()
        );
    }
}

fn chunk(body: ChunkBody) -> StreamEvent {
    StreamEvent::Chunk(Chunk {
        session_id: "s_0123456789abcdef".into(),
        agent_type: "assistant".into(),
        run_id: "run_0123456789abcdef01234567".into(),
        step: Some(3),
        timestamp: 1_800_000_000_000,
        body,
    })
}

fn encoding() {
    println!("\n## Chunk encoding (SSE frame: id, event, JSON data)\n");
    let cases = [
        (
            "text_delta",
            chunk(ChunkBody::TextDelta {
                delta: "Hello, wor".into(),
            }),
        ),
        (
            "state_patch (one append)",
            chunk(ChunkBody::StatePatch {
                patches: vec![helix_edge_core::state::PatchOp::Add {
                    path: "/items/-".into(),
                    value: json!({ "title": "new item", "done": false }),
                }],
                tool_call_id: None,
            }),
        ),
    ];
    for (name, event) in cases {
        let n = 200_000;
        let mut bytes = 0;
        let ((), d) = timed(|| {
            for seq in 0..n {
                let frame = format!(
                    "id: {seq}\nevent: {}\ndata: {}\n\n",
                    event.name(),
                    event.data_json()
                );
                bytes += frame.len();
            }
        });
        println!(
            "- {name}: {:.2} µs per chunk, {:.0} MB/s ({} bytes per frame)",
            d.as_secs_f64() * 1e6 / n as f64,
            bytes as f64 / 1e6 / d.as_secs_f64(),
            bytes / n
        );
    }
}

/// The model request of a session's 500th HITL turn (2,000 messages: a question, a
/// call, its result, an answer per turn), built and serialized for each provider.
fn model_requests() {
    use helix_edge_core::message::{Message, ToolCall};
    use helix_edge_core::model::{ModelRequest, ModelSettings};
    use helix_edge_core::provider::ProviderConfig;
    println!("\n## Model request, 2,000-message transcript\n");
    let mut messages = Vec::new();
    for turn in 0..500 {
        let call = ToolCall {
            id: format!("call_{turn}"),
            name: "delete_file".into(),
            arguments: json!({"path": "/tmp/bench", "recursive": false}),
        };
        messages.push(Message::user("delete /tmp/bench"));
        messages.push(Message::Assistant {
            content: String::new(),
            tool_calls: vec![call.clone()],
            thinking: Vec::new(),
            metadata: None,
        });
        messages.push(Message::tool_result(
            &call,
            json!({"deleted": "/tmp/bench"}),
        ));
        messages.push(Message::assistant_text("Deleted."));
    }
    let settings = ModelSettings::default();
    for provider in ["openai", "anthropic"] {
        let config = ProviderConfig::from_vars(|k| match k {
            "LLM_PROVIDER" => Some(provider.to_string()),
            "LLM_API_KEY" => Some("k".into()),
            _ => None,
        })
        .unwrap();
        let request = ModelRequest {
            system: "Be brief.".into(),
            messages: &messages,
            tools: vec![],
            settings: &settings,
            options: None,
            session_id: "s1",
            abort: Default::default(),
        };
        let bytes = config.request(&request).body.len();
        let stats = sample(50, || timed(|| config.request(&request)).1);
        println!("- {provider}: {bytes} bytes, {}", stats.show());
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects sections.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let on = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    println!("# helix-edge native benchmarks (release build)");
    if on("patches") {
        patches();
    }
    if on("step") {
        step_bookkeeping();
    }
    if on("storage") {
        storage_growth();
    }
    if on("decoding") {
        decoding();
    }
    if on("encoding") {
        encoding();
    }
    if on("request") {
        model_requests();
    }
}
