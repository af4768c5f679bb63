//! State as the workflow's memory, run by the pure core: results stored with
//! `_outputPath`, arguments that reference the state, and one step laid out as a plan
//! (fetch → check → store) — in dependency order, suspended durably at an approval
//! inside it, continued by another process, failed at a denial for its dependants only,
//! and refused whole when it is not a valid plan; conditional (`_when`) and scoped
//! (`_scope`) calls; a strict tool given a reference where its schema wants a number.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::chunk::ChunkBody;
use helix_edge_core::error::ToolError;
use helix_edge_core::message::{Message, ToolCall};
use helix_edge_core::runner::{Progress, Submission};
use helix_edge_core::store::{PendingKind, SessionStatus};
use helix_edge_core::testing::Scenario;
use helix_edge_core::tool::Tool;
use serde_json::{Value, json};
use support::*;

const EMPTY: fn() -> Value = || json!({ "order": null, "check": null, "stored": [] });

/// The three calls of the plan, for order `id`.
fn plan_calls(w: &World, id: &str) -> Vec<ToolCall> {
    vec![
        w.model.call("fetch_order", json!({ "id": id, "_outputPath": "/order" })),
        w.model.call(
            "check_order",
            json!({ "order_id": "$state.order.id", "total": "†state.order.total", "_outputPath": "/check" }),
        ),
        w.model.call(
            "store_order",
            json!({ "order": "$state.order", "check": "$state.check", "_outputPath": "/stored/-" }),
        ),
    ]
}

fn approve(
    r: &helix_edge_core::runner::Runner<std::rc::Rc<helix_edge_core::store::MemoryStore>>,
    id: &str,
    yes: bool,
) {
    let answer = Submission::Approval {
        tool_call_id: id.into(),
        approved: yes,
        reason: None,
    };
    block(r.submit(SESSION, answer)).unwrap();
}

#[test]
fn a_plan_without_approvals_runs_in_dependency_order_within_the_step() {
    let w = World::new();
    let r = w.runner("p1");
    let calls = plan_calls(&w, "small");
    w.model.calls(calls.clone()).text("Stored.");
    w.create(&r, "planner", "store order small");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    assert_eq!(
        w.exec.all(),
        vec![
            "fetch_order small",
            "check_order small 42.5",
            "store_order \"small\" true"
        ],
        "each once, in dependency order, with the referenced values' types kept"
    );
    let state = w.session().state;
    assert_eq!(state["order"], json!({ "id": "small", "total": 42.5 }));
    assert_eq!(state["check"], json!({ "ok": true, "orderId": "small" }));
    assert_eq!(state["stored"], json!([{ "stored": "small" }]));
    // The model is told where each result went.
    let seen = results_seen(&w, 1);
    assert_eq!(
        seen[0].2,
        json!({ "result": { "id": "small", "total": 42.5 }, "storedAt": "/order" })
    );
    assert_eq!(seen[2].2["storedAt"], "/stored/-");
    // The model's own arguments stay in its transcript; the tools got the resolved ones.
    let Message::Assistant { tool_calls, .. } = &w.model.seen()[1].messages[1] else {
        panic!("the step's message");
    };
    assert_eq!(tool_calls[1].arguments["order_id"], "$state.order.id");
    let started: Vec<Value> = w
        .chunks()
        .into_iter()
        .filter_map(|c| match c {
            ChunkBody::ToolStart { arguments, .. } => Some(arguments),
            _ => None,
        })
        .collect();
    assert_eq!(started[1], json!({ "order_id": "small", "total": 42.5 }));
    assert_consistent(&w, &EMPTY());
}

#[test]
fn an_approval_inside_a_plan_suspends_it_and_another_process_continues_it() {
    let w = World::new();
    let r = w.runner("p1");
    let calls = plan_calls(&w, "big");
    w.model.calls(calls.clone()).text("Stored.");
    w.create(&r, "planner", "store order big");
    assert_eq!(
        drive(&r),
        Progress::Suspended {
            next_deadline: None
        }
    );

    // The fetch ran; the check waits for a person, with its resolved input; the store
    // waits for the check and has no result yet.
    assert_eq!(w.exec.all(), vec!["fetch_order big"]);
    let s = w.session();
    assert_eq!(s.head.pending.len(), 1);
    let pending = &s.head.pending[0];
    assert_eq!(
        (pending.tool_call_id.as_str(), pending.kind),
        (calls[1].id.as_str(), PendingKind::Approval)
    );
    assert_eq!(
        pending.arguments,
        json!({ "order_id": "big", "total": 250.0 })
    );
    assert_eq!(pending.output_path.as_deref(), Some("/check"));
    assert_eq!(
        s.state["order"]["total"], 250.0,
        "the fetch's result is durable"
    );
    let ended: Vec<String> = w
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ended, vec![calls[0].id.clone()]);

    // Another process (the first one is gone) takes the approval and finishes the plan.
    let r2 = w.runner("p2");
    approve(&r2, &calls[1].id, true);
    assert_eq!(drive(&r2), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.exec.all(),
        vec![
            "fetch_order big",
            "check_order big 250",
            "store_order \"big\" true"
        ],
        "each call ran once"
    );
    let state = w.session().state;
    assert_eq!(state["stored"], json!([{ "stored": "big" }]));
    let seen = results_seen(&w, 1);
    let ids: Vec<&str> = seen.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        vec![
            calls[0].id.as_str(),
            calls[1].id.as_str(),
            calls[2].id.as_str()
        ]
    );
    assert!(seen.iter().all(|(_, error, _)| !error));
    assert_consistent(&w, &EMPTY());
}

#[test]
fn a_denial_fails_the_calls_that_depend_on_it_and_keeps_the_others() {
    let w = World::new();
    let r = w.runner("p1");
    let mut calls = plan_calls(&w, "big");
    calls.push(w.model.call("echo", json!({ "x": "$state.order" })));
    w.model.calls(calls.clone()).text("Not stored.");
    w.create(&r, "planner", "store order big");
    drive(&r);
    approve(&r, &calls[1].id, false);
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    assert_eq!(w.exec.all(), vec!["fetch_order big"]);
    let seen = results_seen(&w, 1);
    let by_id = |id: &str| seen.iter().find(|(i, _, _)| i == id).cloned().unwrap();
    assert!(!by_id(&calls[0].id).1, "the fetch's result stays");
    assert_eq!(by_id(&calls[1].id).2["code"], "tool_denied");
    let store = by_id(&calls[2].id);
    assert!(store.1);
    assert_eq!(store.2["code"], "tool_dependency_failed");
    assert!(
        store.2["error"].as_str().unwrap().contains(&calls[1].id),
        "{}",
        store.2
    );
    // A tool that takes no references gets the text as it is.
    assert_eq!(by_id(&calls[3].id).2, json!({ "x": "$state.order" }));
    let state = w.session().state;
    assert_eq!(state["order"]["id"], "big");
    assert_eq!(
        (state["check"].clone(), state["stored"].clone()),
        (Value::Null, json!([]))
    );
    assert_consistent(&w, &EMPTY());
}

#[test]
fn an_invalid_plan_runs_nothing_and_names_each_problem() {
    let w = World::new();
    let r = w.runner("p1");
    let calls = vec![
        // A cycle: each reads what the other stores.
        w.model.call(
            "check_order",
            json!({ "order_id": "$state.order.id", "total": 1, "_outputPath": "/check" }),
        ),
        w.model.call(
            "fetch_order",
            json!({ "id": "$state.check.orderId", "_outputPath": "/order" }),
        ),
        // A place the state does not have.
        w.model.call(
            "store_order",
            json!({ "order": "$state.orders", "check": {}, "_outputPath": "/stored/-" }),
        ),
    ];
    w.model.calls(calls.clone()).text("I see.");
    w.create(&r, "planner", "go");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    assert!(w.exec.all().is_empty(), "nothing ran");
    let seen = results_seen(&w, 1);
    assert_eq!(seen.len(), 3);
    let error = seen[0].2["error"].as_str().unwrap().to_string();
    assert!(seen.iter().all(|(_, is_error, c)| *is_error
        && c["code"] == "tool_plan_invalid"
        && c["error"] == error.as_str()));
    assert!(
        error.contains(&format!(
            "call {} (store_order) reads /orders, which the state schema does not have",
            calls[2].id
        )),
        "{error}"
    );
    assert!(
        error.contains(&format!(
            "call {} (check_order), call {} (fetch_order) depend on each other in a cycle",
            calls[0].id, calls[1].id
        )),
        "{error}"
    );
    assert_eq!(w.session().state, EMPTY());
}

#[test]
fn a_reference_to_nothing_and_a_refused_output_path_are_input_errors() {
    let w = World::new();
    let r = w.runner("p1");
    let calls = vec![
        w.model
            .call("fetch_order", json!({ "id": "$state.order.id" })),
        w.model.call(
            "store_order",
            json!({ "order": {}, "check": {}, "_outputPath": "/order" }),
        ),
        w.model.call(
            "fetch_order",
            json!({ "id": "a", "_outputPath": "/stored/-" }),
        ),
    ];
    w.model.calls(calls).text("I see.");
    w.create(&r, "planner", "go");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    assert_eq!(w.exec.all(), vec!["fetch_order a"]);
    let seen = results_seen(&w, 1);
    assert_eq!(seen[0].2["code"], "tool_input_invalid");
    assert!(
        seen[0].2["error"].as_str().unwrap().contains(
            "state reference '$state.order.id' points at nothing (no value at /order/id)"
        )
    );
    assert_eq!(seen[1].2["code"], "tool_input_invalid");
    assert!(
        seen[1].2["error"]
            .as_str()
            .unwrap()
            .contains("'/order' is not one of the paths this tool may write: /stored/-")
    );
    // Any path the schema has may be chosen when the tool offers them all.
    assert_eq!(seen[2].2["storedAt"], "/stored/-");
    assert_eq!(
        w.session().state["stored"],
        json!([{ "id": "a", "total": 42.5 }])
    );
}

#[test]
fn the_model_sees_the_output_path_property_and_the_state_as_guidance() {
    let w = World::new();
    let r = w.runner("p1");
    w.model.text("Hello.");
    w.create(&r, "planner", "hi");
    drive(&r);
    let request = &w.model.seen()[0];
    assert!(
        request.system.contains("\"†state.path.to.value\""),
        "{}",
        request.system
    );
    assert!(
        request.system.contains("\"stored\""),
        "the state schema is given: {}",
        request.system
    );
    let specs = planner(&w.exec).tool_specs();
    let schema_of = |name: &str| {
        specs
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .input_schema
            .clone()
    };
    let fetch = schema_of("fetch_order");
    assert_eq!(
        fetch["properties"]["_outputPath"]["enum"],
        json!(["/check", "/order", "/stored", "/stored/-"])
    );
    assert_eq!(
        schema_of("store_order")["properties"]["_outputPath"]["enum"],
        json!(["/stored/-"])
    );
    assert!(schema_of("echo")["properties"].get("_outputPath").is_none());
    // Every call of a planning agent may be conditional and scoped.
    for tool in ["fetch_order", "echo"] {
        let properties = &schema_of(tool)["properties"];
        assert_eq!(properties["_when"]["type"], "string", "{tool}");
        assert_eq!(properties["_scope"]["type"], "string", "{tool}");
    }
    assert!(request.system.contains("`_when`"), "{}", request.system);
}

/// The plan with conditional steps: the check only for a large order (it then needs an
/// approval), the store only for a small one.
fn conditional_calls(w: &World, id: &str) -> Vec<ToolCall> {
    vec![
        w.model.call("fetch_order", json!({ "id": id, "_outputPath": "/order" })),
        w.model.call(
            "check_order",
            json!({ "order_id": "$state.order.id", "total": "$state.order.total", "_outputPath": "/check",
                    "_when": "†state.order.total > 100" }),
        ),
        w.model.call(
            "store_order",
            json!({ "order": "$state.order", "check": { "auto": true }, "_outputPath": "/stored/-",
                    "_when": ["$state.order", "$state.order.total <= 100"] }),
        ),
    ]
}

#[test]
fn a_conditional_step_is_skipped_or_taken_on_the_state_the_plan_left() {
    // A small order: the check is skipped (no approval asked), the store taken.
    let w = World::new();
    let r = w.runner("p1");
    let calls = conditional_calls(&w, "small");
    w.model.calls(calls.clone()).text("Stored.");
    w.create(&r, "planner", "store order small");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.exec.all(),
        vec!["fetch_order small", "store_order \"small\" null"]
    );
    let seen = results_seen(&w, 1);
    assert_eq!(
        seen[1],
        (
            calls[1].id.clone(),
            false,
            json!({ "skipped": "skipped: its condition _when '†state.order.total > 100' does not hold" })
        ),
        "a step not taken is a result the model reads, not an error"
    );
    assert_eq!(seen[2].2["storedAt"], "/stored/-");
    let state = w.session().state;
    assert_eq!(
        state["check"],
        Value::Null,
        "the skipped call wrote nothing"
    );
    assert_eq!(state["stored"], json!([{ "stored": "small" }]));
    assert_consistent(&w, &EMPTY());

    // A large one: the check is taken (and waits for its approval, across processes);
    // the store is skipped at once, its condition decided after the fetch it reads.
    let w = World::new();
    let r = w.runner("p1");
    let calls = conditional_calls(&w, "big");
    w.model.calls(calls.clone()).text("Checked.");
    w.create(&r, "planner", "store order big");
    drive(&r);
    let pending: Vec<String> = w
        .session()
        .head
        .pending
        .iter()
        .map(|p| p.tool_call_id.clone())
        .collect();
    assert_eq!(pending, vec![calls[1].id.clone()]);
    approve(&w.runner("p2"), &calls[1].id, true);
    assert_eq!(
        drive(&w.runner("p2")),
        Progress::Idle(SessionStatus::Completed)
    );
    assert_eq!(w.exec.all(), vec!["fetch_order big", "check_order big 250"]);
    let seen = results_seen(&w, 1);
    let store = seen.iter().find(|(id, ..)| *id == calls[2].id).unwrap();
    assert_eq!(
        store.2["skipped"],
        "skipped: its condition _when '$state.order.total <= 100' does not hold"
    );
    let state = w.session().state;
    assert_eq!(state["check"], json!({ "ok": true, "orderId": "big" }));
    assert_eq!(state["stored"], json!([]));
    assert_consistent(&w, &EMPTY());
}

#[test]
fn a_malformed_condition_is_an_input_error_and_a_numeric_one_on_text_fails_the_call() {
    let w = World::new();
    let r = w.runner("p1");
    let calls = vec![
        w.model.call(
            "fetch_order",
            json!({ "id": "a", "_outputPath": "/order", "_when": "$state.x = 1" }),
        ),
        w.model
            .call("echo", json!({ "x": 1, "_when": "$state.stored > 1" })),
    ];
    w.model.calls(calls).text("I see.");
    w.create(&r, "planner", "go");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert!(w.exec.all().is_empty(), "nothing ran");
    let seen = results_seen(&w, 1);
    assert_eq!(seen[0].2["code"], "tool_input_invalid");
    let error = seen[0].2["error"].as_str().unwrap();
    assert!(
        error.contains("_when '$state.x = 1' has no operator"),
        "{error}"
    );
    assert_eq!(seen[1].2["code"], "tool_input_invalid");
    let error = seen[1].2["error"].as_str().unwrap();
    assert!(
        error.contains("compares a number, but the state holds []"),
        "{error}"
    );
    assert_eq!(w.session().state, EMPTY());
}

#[test]
fn a_scoped_call_reads_decides_and_stores_under_its_scope() {
    let w = World::new();
    let r = w.runner("p1");
    let calls = vec![
        w.model.call("fetch_order", json!({ "id": "a", "_outputPath": "/order" })),
        // Inside /order: reads /order/id, decided on /order/total, stores /order/again.
        w.model.call(
            "fetch_order",
            json!({ "id": "†state.id", "_scope": "/order", "_when": "†state.total < 50", "_outputPath": "/again" }),
        ),
    ];
    w.model.calls(calls).text("Fetched twice.");
    w.create(&r, "planner", "go");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let seen = results_seen(&w, 1);
    assert_eq!(
        w.exec.all(),
        vec!["fetch_order a", "fetch_order a"],
        "in order: {seen:?}"
    );
    let seen = results_seen(&w, 1);
    assert_eq!(seen[1].2["storedAt"], "/order/again");
    assert_eq!(
        w.session().state["order"],
        json!({ "id": "a", "total": 42.5, "again": { "id": "a", "total": 42.5 } })
    );
    assert_consistent(&w, &EMPTY());

    // A scope the state schema does not have is refused before anything runs.
    let w = World::new();
    let r = w.runner("p1");
    let call = w
        .model
        .call("fetch_order", json!({ "id": "a", "_scope": "/nowhere" }));
    w.model.calls(vec![call]).text("I see.");
    w.create(&r, "planner", "go");
    drive(&r);
    assert!(w.exec.all().is_empty());
    let error = results_seen(&w, 1)[0].2["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        error.contains("_scope '/nowhere' names /nowhere, which the state schema does not have"),
        "{error}"
    );
}

#[test]
fn a_strict_tool_takes_a_reference_where_its_schema_wants_a_number() {
    let exec = Executions::default();
    let [fetch, ..] = order_tools(&exec, &[]);
    let e = exec.clone();
    let check: Tool = Tool::new("check_order", "d", move |i: CheckOrder, _| {
        let e = e.clone();
        async move {
            e.record(format!("check_order {} {}", i.order_id, i.total));
            Ok::<_, ToolError>(json!({ "ok": i.total < 100.0 }))
        }
    })
    .strict()
    .output_paths(Vec::<String>::new())
    .into();
    let agent = Agent::builder("strict")
        .system_prompt("plan")
        .state::<PlanState>()
        .tool(fetch)
        .tool(check)
        .build()
        .unwrap();
    // What the provider enforces while decoding: the number, or a reference.
    let specs = agent.tool_specs();
    let spec = specs.iter().find(|t| t.name == "check_order").unwrap();
    let total = &spec.input_schema["properties"]["total"]["anyOf"];
    assert_eq!(total[0]["type"], "number", "{total}");
    assert_eq!(total[1]["type"], "string", "{total}");
    let w = World {
        scenario: Scenario::new(Agents::new().with(agent).unwrap()),
        exec,
    };
    let r = w.runner("p1");
    // As a strict decoder writes it: every property present, the unused ones null.
    let unused = json!({ "_when": null, "_scope": null, "_forEach": null });
    let mut checked = json!({ "order_id": "†state.order.id", "total": "†state.order.total", "_outputPath": "/check" });
    checked
        .as_object_mut()
        .unwrap()
        .extend(unused.as_object().unwrap().clone());
    let calls = vec![
        w.model.call(
            "fetch_order",
            json!({ "id": "small", "_outputPath": "/order" }),
        ),
        w.model.call("check_order", checked),
    ];
    w.model.calls(calls).text("Checked.");
    w.create(&r, "strict", "check small");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.exec.all(),
        ["fetch_order small", "check_order small 42.5"]
    );
    assert_eq!(w.session().state["check"], json!({ "ok": true }));
}
