//! Typed contracts of an agent: typed state (defaults, a create's `input.state` checked
//! against the type, typed reads and updates in tools), typed output of any shape,
//! declared tool output schemas (server results and client results), strict tools and
//! `strict_output` marked for the provider, and `stop_when`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::chunk::ChunkBody;
use helix_edge_core::error::ToolError;
use helix_edge_core::message::Message;
use helix_edge_core::runner::{Progress, RunError, Submission};
use helix_edge_core::store::{SessionStatus, Store};
use helix_edge_core::tool::Tool;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use support::*;

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
struct Board {
    notes: Vec<String>,
    count: u32,
}

#[derive(Deserialize, JsonSchema)]
struct Pin {
    text: String,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Weather {
    celsius: f64,
}

fn world_with(agent: Agent) -> World {
    let mut w = World::new();
    w.agents = Agents::new().with(agent).unwrap();
    w
}

fn board_agent() -> Agent {
    Agent::builder("board")
        .state::<Board>()
        .tool(Tool::new("pin", "d", |i: Pin, ctx| async move {
            ctx.update_as(|b: &mut Board| {
                b.notes.push(i.text);
                b.count += 1;
            })?;
            let board: Board = ctx.state_as()?;
            Ok::<_, ToolError>(json!({ "pinned": board.count }))
        }))
        .build()
        .unwrap()
}

fn create_with_state(w: &World, state: Value) -> Result<(), RunError> {
    let r = w.runner("p1");
    let mut request = create_request("board", "go");
    request.state = state.as_object().cloned();
    block(r.create(request)).map(drop)
}

#[test]
fn typed_state_starts_from_the_default_and_tools_update_it_through_the_type() {
    let w = world_with(board_agent());
    let r = w.runner("p1");
    create_with_state(&w, json!({"extra": "kept"})).unwrap();
    assert_eq!(
        w.session().state,
        json!({"notes": [], "count": 0, "extra": "kept"})
    );
    w.model
        .calls(vec![w.model.call("pin", json!({"text": "a"}))])
        .calls(vec![w.model.call("pin", json!({"text": "b"}))])
        .text("done");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.session().state,
        json!({"notes": ["a", "b"], "count": 2, "extra": "kept"}),
        "keys the type does not know are kept"
    );
    let Message::Tool { content, .. } = &w.messages()[4] else {
        panic!("the second pin's result")
    };
    assert_eq!(content, &json!({"pinned": 2}), "typed reads see the update");
    assert_eq!(
        patch_paths(&w),
        ["/count", "/notes/-", "/count", "/notes/-"]
    );
    assert_consistent(&w, &json!({"notes": [], "count": 0, "extra": "kept"}));
}

#[test]
fn a_create_whose_state_breaks_the_type_is_refused_naming_the_field() {
    let w = world_with(board_agent());
    let err = create_with_state(&w, json!({"count": "many"})).unwrap_err();
    assert!(matches!(err, RunError::Invalid(_)), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("input.state"), "{message}");
    assert!(message.contains("/count"), "{message}");
    assert!(
        block(w.store.load(SESSION)).unwrap().is_none(),
        "nothing was created"
    );
    create_with_state(&w, json!({"count": 3})).unwrap();
    assert_eq!(w.session().state["count"], 3);
}

#[test]
fn a_typed_state_that_is_not_an_object_is_refused_at_definition() {
    let err = Agent::builder("bad")
        .state::<Vec<u8>>()
        .build()
        .unwrap_err();
    assert!(matches!(
        err,
        helix_edge_core::error::DefinitionError::StateNotAnObject(_)
    ));
}

#[test]
fn typed_outputs_of_any_shape_come_through_finish_or_a_text_that_parses_into_them() {
    let lister = || {
        Agent::builder("lister")
            .output::<Vec<String>>()
            .build()
            .unwrap()
    };
    let spec = lister().tool_specs().pop().unwrap();
    assert_eq!(spec.name, "__finish__");
    assert_eq!(spec.input_schema["required"], json!(["output"]));
    assert_eq!(spec.input_schema["properties"]["output"]["type"], "array");

    let w = world_with(lister());
    let r = w.runner("p1");
    w.model.output(json!({"output": ["a", "b"]}));
    w.create(&r, "lister", "list");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(w.session().head.output, Some(json!(["a", "b"])));

    // A text answer that parses into the schema is the output; prose gets a nudge.
    let w = world_with(lister());
    let r = w.runner("p1");
    w.model.text("Here you go.").text(" [\"x\"] ");
    w.create(&r, "lister", "list");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(w.session().head.output, Some(json!(["x"])));
    assert_eq!(w.session().head.run.nudges, 1);

    // A JSON text that does not match is not taken.
    let w = world_with(lister());
    let r = w.runner("p1");
    w.model.text("[1, 2]").output(json!({"output": []}));
    w.create(&r, "lister", "list");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(w.session().head.output, Some(json!([])));
    assert_eq!(w.session().head.run.nudges, 1);
}

#[test]
fn a_server_result_that_breaks_the_declared_output_schema_is_a_tool_error() {
    let agent = Agent::builder("weather")
        .tool(
            Tool::new("get_weather", "d", |i: Pin, _| async move {
                Ok::<_, ToolError>(if i.text == "bad" {
                    json!({"celsius": "warm"})
                } else {
                    json!({"celsius": 21.5})
                })
            })
            .output::<Weather>(),
        )
        .build()
        .unwrap();
    let w = world_with(agent);
    let r = w.runner("p1");
    w.model.calls(vec![
        w.model.call("get_weather", json!({"text": "bad"})),
        w.model.call("get_weather", json!({"text": "good"})),
    ]);
    w.model.text("ok");
    w.create(&r, "weather", "x");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let results: Vec<(Value, bool)> = w
        .messages()
        .into_iter()
        .filter_map(|m| match m {
            Message::Tool {
                content, is_error, ..
            } => Some((content, is_error)),
            _ => None,
        })
        .collect();
    assert!(results[0].1);
    assert_eq!(results[0].0["code"], "tool_output_invalid");
    let error = results[0].0["error"].as_str().unwrap();
    assert!(error.contains("/celsius"), "{error}");
    assert_eq!(results[1], (json!({"celsius": 21.5}), false));
}

#[test]
fn a_client_result_that_breaks_the_declared_output_schema_is_refused_and_the_call_stays_open() {
    let agent = Agent::builder("asker")
        .tool(Tool::client::<Pin>("measure", "d").output::<Weather>())
        .build()
        .unwrap();
    let w = world_with(agent);
    let r = w.runner("p1");
    let call = w.model.call("measure", json!({"text": "t"}));
    w.model.calls(vec![call.clone()]).text("ok");
    w.create(&r, "asker", "x");
    assert!(matches!(drive(&r), Progress::Suspended { .. }));
    let submit = |result: Value| {
        block(r.submit(
            SESSION,
            Submission::ClientResult {
                tool_call_id: call.id.clone(),
                outcome: Ok(result),
            },
        ))
    };
    let err = submit(json!({"celsius": "hot"})).unwrap_err();
    assert!(matches!(err, RunError::ResultInvalid(_)), "{err:?}");
    assert_eq!(
        helix_edge_core::error::Coded::code(&err),
        "tool_output_invalid"
    );
    assert_eq!(w.session().head.pending.len(), 1, "still pending");
    submit(json!({"celsius": 3})).unwrap();
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
}

#[test]
fn strict_tools_and_strict_output_are_marked_for_the_provider() {
    let agent = Agent::builder("s")
        .tool(Tool::client::<Pin>("loose", "d"))
        .tool(Tool::client::<Pin>("tight", "d").strict())
        .output::<Weather>()
        .strict_output()
        .build()
        .unwrap();
    let strict: Vec<(String, bool)> = agent
        .tool_specs()
        .into_iter()
        .map(|s| (s.name, s.strict))
        .collect();
    assert_eq!(
        strict,
        [
            ("loose".to_string(), false),
            ("tight".to_string(), true),
            ("__finish__".to_string(), true)
        ]
    );
}

#[test]
fn stop_when_ends_the_run_after_the_step_it_matches() {
    let agent = |output: bool| {
        let mut b = Agent::builder("stopper")
            .initial_state(json!({"notes": []}))
            .tool(support::agents::add_note_tool())
            .stop_when(|step| {
                step.tool_calls.iter().any(|c| c.name == "add_note")
                    && step.state["notes"].as_array().is_some_and(|n| n.len() >= 2)
            });
        if output {
            b = b.output::<Weather>();
        }
        b.build().unwrap()
    };
    let w = world_with(agent(false));
    let r = w.runner("p1");
    let note = |t: &str| w.model.call("add_note", json!({ "text": t }));
    w.model
        .calls(vec![note("a")])
        .calls(vec![note("b")])
        .text("never");
    w.create(&r, "stopper", "x");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(w.model.seen().len(), 2, "stopped after the second step");
    assert_eq!(w.model.remaining(), 1);
    assert!(matches!(
        w.chunks().last(),
        Some(ChunkBody::RunFinished { .. })
    ));

    let w = world_with(agent(true));
    let r = w.runner("p1");
    let note = |t: &str| w.model.call("add_note", json!({ "text": t }));
    w.model.calls(vec![note("a"), note("b")]);
    w.create(&r, "stopper", "x");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Failed));
    assert_eq!(w.session().head.error.unwrap().code, "output_missing");
}
