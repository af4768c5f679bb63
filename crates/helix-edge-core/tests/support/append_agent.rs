//! A session that grows by one appended item per step, for the storage-growth test and
//! the native benchmarks: an agent whose model always calls `add_item`, over the D1
//! store's write plan ([`PlannedStore`]), which records the bytes every commit sends.

use futures::executor::block_on;
use futures::future::LocalBoxFuture;
use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::error::{ProviderError, ToolError};
use helix_edge_core::host::ManualHost;
use helix_edge_core::journal::MemoryJournal;
use helix_edge_core::message::ToolCall;
use helix_edge_core::model::{Delta, Model, ModelRequest, ModelTurn, OneModel, StopReason};
use helix_edge_core::runner::{CreateSession, Runner, RunnerConfig};
use helix_edge_core::store::rows::PlannedStore;
use helix_edge_core::tool::{Tool, ToolContext};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::rc::Rc;

/// `{"items": [...items objects], "profile": {...}}`.
pub fn big_state(items: usize) -> Value {
    let items: Vec<Value> = (0..items)
        .map(|i| json!({ "id": i, "title": format!("item {i}"), "done": i % 3 == 0, "tags": ["a", "b"] }))
        .collect();
    json!({ "items": items, "profile": { "settings": { "theme": "light", "notify": { "email": true } } } })
}

#[derive(Deserialize, JsonSchema)]
struct AddItem {
    title: String,
}

/// Always asks for one `add_item` call: a run that never ends by itself.
struct AddForever;

impl Model for AddForever {
    fn generate<'a>(
        &'a self,
        request: ModelRequest<'a>,
        _on_delta: &'a mut dyn FnMut(Delta),
    ) -> LocalBoxFuture<'a, Result<ModelTurn, ProviderError>> {
        let n = request.messages.len();
        Box::pin(async move {
            Ok(ModelTurn {
                tool_calls: vec![ToolCall {
                    id: format!("call-{n}"),
                    name: "add_item".into(),
                    arguments: json!({ "title": format!("item at {n}") }),
                }],
                stop: StopReason::ToolUse,
                ..ModelTurn::default()
            })
        })
    }
}

pub fn runner() -> Runner<PlannedStore> {
    let agent = Agent::builder("bench")
        .system_prompt("Add items.")
        .initial_state(json!({ "items": [] }))
        .max_steps(100_000)
        .tool(Tool::new(
            "add_item",
            "Add an item.",
            |input: AddItem, ctx: ToolContext| async move {
                ctx.append("/items", json!({ "title": input.title }))?;
                Ok::<_, ToolError>(json!({ "ok": true }))
            },
        ))
        .build()
        .unwrap();
    Runner::new(
        PlannedStore::new(),
        Agents::new().with(agent).unwrap(),
        Rc::new(OneModel(Rc::new(AddForever))),
        Rc::new(MemoryJournal::new()),
        Rc::new(ManualHost::new(1_800_000_000_000, "bench")),
        RunnerConfig::new("bench"),
    )
}

pub fn create(runner: &Runner<PlannedStore>, id: &str, items: usize) {
    let mut state = Map::new();
    state.insert("items".into(), big_state(items)["items"].take());
    block_on(runner.create(CreateSession {
        state: Some(state),
        ..CreateSession::new(id, "bench", "go")
    }))
    .unwrap();
}
