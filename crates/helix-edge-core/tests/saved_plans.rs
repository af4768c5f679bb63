//! Saved plans, run by the pure core: the `planner`'s `store-order` (fetch → check →
//! store, its order id an input) re-run by name through `run_plan` — its calls join the
//! step with the input put in and run in dependency order; an approval inside it
//! suspends the step and another process finishes it, each call run once; wrong inputs
//! add nothing and answer the problem; run with `_scope`, the plan works in that part
//! of the state; and the definition rules.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::agent::{Agent, Agents, SavedPlan};
use helix_edge_core::message::Message;
use helix_edge_core::runner::{Progress, Submission};
use helix_edge_core::store::{PendingKind, SessionStatus};
use helix_edge_core::testing::Scenario;
use helix_edge_core::tool::Tool;
use serde_json::{Value, json};
use support::*;

/// The `run_plan` call the model makes, and the ids of the calls it adds.
fn run_plan(w: &World, inputs: Value) -> (helix_edge_core::message::ToolCall, Vec<String>) {
    let call = w.model.call(
        "run_plan",
        json!({ "name": "store-order", "inputs": inputs }),
    );
    let ids = ["fetch", "check", "store"].map(|s| format!("{}_{s}", call.id));
    (call, ids.to_vec())
}

#[test]
fn a_saved_plan_runs_by_name_with_its_input_in_dependency_order() {
    let w = World::new();
    let r = w.runner("p1");
    let (call, ids) = run_plan(&w, json!({ "orderId": "small" }));
    w.model.calls(vec![call.clone()]).text("Stored.");
    w.create(&r, "planner", "store order small");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    assert_eq!(
        w.exec.all(),
        [
            "fetch_order small",
            "check_order small 42.5",
            "store_order \"small\" true"
        ]
    );
    let state = w.session().state;
    assert_eq!(state["stored"], json!([{ "stored": "small" }]));
    // The step's message holds the call and the calls it added, as laid out.
    let Message::Assistant { tool_calls, .. } = &w.model.seen()[1].messages[1] else {
        panic!("the step's message");
    };
    let names: Vec<(&str, &str)> = tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str()))
        .collect();
    let expected = [
        (call.id.as_str(), "run_plan"),
        (ids[0].as_str(), "fetch_order"),
        (ids[1].as_str(), "check_order"),
        (ids[2].as_str(), "store_order"),
    ];
    assert_eq!(names, expected);
    assert_eq!(
        tool_calls[1].arguments,
        json!({ "id": "small", "_outputPath": "/order" })
    );
    assert_eq!(
        tool_calls[2].arguments["order_id"], "$state.order.id",
        "state references stay"
    );
    let seen = results_seen(&w, 1);
    assert_eq!(seen[0].2, json!({ "plan": "store-order", "calls": ids }));
    assert_eq!(seen.len(), 4);
    assert_consistent(&w, &json!({ "order": null, "check": null, "stored": [] }));
}

#[test]
fn an_approval_inside_a_saved_plan_suspends_it_and_another_process_finishes_it() {
    let w = World::new();
    let r = w.runner("p1");
    let (call, ids) = run_plan(&w, json!({ "orderId": "big" }));
    w.model.calls(vec![call]).text("Stored.");
    w.create(&r, "planner", "store order big");
    assert_eq!(
        drive(&r),
        Progress::Suspended {
            next_deadline: None
        }
    );
    assert_eq!(w.exec.all(), ["fetch_order big"]);
    let pending = &w.session().head.pending;
    assert_eq!(
        (pending[0].tool_call_id.as_str(), pending[0].kind),
        (ids[1].as_str(), PendingKind::Approval)
    );

    let r2 = w.runner("p2");
    let answer = Submission::Approval {
        tool_call_id: ids[1].clone(),
        approved: true,
        reason: None,
    };
    block(r2.submit(SESSION, answer)).unwrap();
    assert_eq!(drive(&r2), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.exec.all(),
        [
            "fetch_order big",
            "check_order big 250",
            "store_order \"big\" true"
        ],
        "each call once"
    );
}

#[test]
fn wrong_inputs_add_nothing_and_the_call_says_why() {
    let w = World::new();
    let r = w.runner("p1");
    let missing = w
        .model
        .call("run_plan", json!({ "name": "store-order", "inputs": {} }));
    let extra = w.model.call(
        "run_plan",
        json!({ "name": "store-order", "inputs": { "orderId": "x", "total": 1 } }),
    );
    let unknown = w
        .model
        .call("run_plan", json!({ "name": "nope", "inputs": {} }));
    let meta = w.model.call(
        "run_plan",
        json!({ "name": "store-order", "inputs": { "orderId": "x" }, "_when": "†state.order" }),
    );
    w.model
        .calls(vec![missing, extra, unknown, meta])
        .text("Sorry.");
    w.create(&r, "planner", "store");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert!(w.exec.all().is_empty(), "nothing ran");
    let errors: Vec<String> = results_seen(&w, 1)
        .into_iter()
        .map(|(_, is_error, c)| {
            assert!(is_error);
            assert_eq!(c["code"], "tool_input_invalid");
            c["error"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(errors.len(), 4, "no call was added: {errors:?}");
    assert!(
        errors[0].contains("plan 'store-order' needs the inputs: orderId"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].contains("plan 'store-order' has no input 'total'"),
        "{}",
        errors[1]
    );
    assert!(
        errors[2].contains("there is no saved plan 'nope' (plans: store-order)"),
        "{}",
        errors[2]
    );
}

#[test]
fn saved_plans_are_checked_when_the_agent_is_built() {
    let noop: Tool = Tool::new("noop", "d", |_: serde_json::Map<String, Value>, _| async {
        Ok::<_, helix_edge_core::error::ToolError>(json!({}))
    })
    .into();
    let build = |plan: SavedPlan| {
        Agent::builder("a")
            .tool(noop.clone())
            .saved_plan(plan)
            .build()
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let plan = || SavedPlan::new("p", "d").input("x", "an x");
    assert_eq!(
        build(plan().call("s1", "noop", json!({ "v": "†input.x" }))),
        Ok(())
    );
    for (bad, why) in [
        (plan(), "must have 1-32 calls"),
        (
            SavedPlan::new("bad name", "d").call("s", "noop", json!({})),
            "its name",
        ),
        (
            plan().call("s", "other", json!({})),
            "calls 'other', which the agent does not have",
        ),
        (plan().call("s", "run_plan", json!({})), "calls 'run_plan'"),
        (
            plan()
                .call("s", "noop", json!({}))
                .call("s", "noop", json!({})),
            "step 's' is given twice",
        ),
        (plan().call("a.b", "noop", json!({})), "step 'a.b' must be"),
        (
            plan().call("s", "noop", json!({ "v": ["$input.y"] })),
            "uses input 'y'",
        ),
        (plan().call("s", "noop", json!(1)), "must be an object"),
    ] {
        let err = build(bad).unwrap_err();
        assert!(err.contains(why), "{why}: {err}");
    }
    // Its order and who writes where are checked (not the places it names: a plan
    // run with `_scope` names them under the scope).
    let exec = Executions::default();
    let [fetch, check, store] = order_tools(&exec, &[]);
    let planning = |plan: SavedPlan| {
        Agent::builder("p")
            .state::<PlanState>()
            .tool(fetch.clone())
            .tool(check.clone())
            .tool(store.clone())
            .saved_plan(plan)
            .build()
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    assert_eq!(planning(store_order_plan()), Ok(()));
    let cycle = SavedPlan::new("loop", "d")
        .call(
            "a",
            "fetch_order",
            json!({ "id": "†state.check.orderId", "_outputPath": "/order" }),
        )
        .call(
            "b",
            "check_order",
            json!({ "order_id": "†state.order.id", "total": 1, "_outputPath": "/check" }),
        );
    let err = planning(cycle).unwrap_err();
    assert!(
        err.contains("saved plan 'loop'") && err.contains("cycle"),
        "{err}"
    );
    let twice = SavedPlan::new("twice", "d")
        .call(
            "a",
            "fetch_order",
            json!({ "id": "x", "_outputPath": "/order" }),
        )
        .call(
            "b",
            "fetch_order",
            json!({ "id": "y", "_outputPath": "/order" }),
        )
        .call(
            "c",
            "check_order",
            json!({ "order_id": "†state.order.id", "total": 1 }),
        );
    let err = planning(twice).unwrap_err();
    assert!(
        err.contains("saved plan 'twice'") && err.contains("/order"),
        "{err}"
    );

    let twice = Agent::builder("a")
        .tool(noop.clone())
        .saved_plan(plan().call("s", "noop", json!({})))
        .saved_plan(plan().call("s", "noop", json!({})))
        .build()
        .unwrap_err();
    assert!(
        twice.to_string().contains("saved plan 'p': is given twice"),
        "{twice}"
    );
}

/// The state of `regional`: two regions, each shaped as the planner's state.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema, Default)]
struct Regions {
    east: PlanState,
    west: PlanState,
}

/// A world whose agent `regional` has the planner's tools (storing anywhere) and its
/// saved plan, over a state of two regions.
fn regional_world() -> World {
    let exec = Executions::default();
    let [fetch, check, store] = order_tools(&exec, &[]);
    let agent = Agent::builder("regional")
        .system_prompt("plan")
        .state::<Regions>()
        .tool(fetch)
        .tool(check)
        .tool(store)
        .saved_plan(store_order_plan())
        .build()
        .unwrap();
    let scenario = Scenario::new(Agents::new().with(agent).unwrap());
    World { scenario, exec }
}

#[test]
fn a_saved_plan_run_with_a_scope_works_in_that_part_of_the_state() {
    let w = regional_world();
    let r = w.runner("p1");
    let call = |region: &str, order: &str| {
        w.model.call(
            "run_plan",
            json!({ "name": "store-order", "inputs": { "orderId": order }, "_scope": region }),
        )
    };
    let nowhere = call("/north", "x");
    w.model
        .calls(vec![
            call("/east", "small"),
            call("†state.west", "tiny"),
            nowhere.clone(),
        ])
        .text("Stored.");
    w.create(&r, "regional", "store two orders");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));

    let state = w.session().state;
    assert_eq!(
        state["east"]["order"],
        json!({ "id": "small", "total": 42.5 })
    );
    assert_eq!(state["east"]["stored"], json!([{ "stored": "small" }]));
    assert_eq!(
        state["west"]["order"],
        json!({ "id": "tiny", "total": 42.5 })
    );
    assert_eq!(
        state["west"]["check"]["orderId"], "tiny",
        "its references read its region"
    );
    assert_eq!(state["west"]["stored"], json!([{ "stored": "tiny" }]));
    assert!(state.get("order").is_none(), "nothing at the root: {state}");
    let mut ran = w.exec.all();
    ran.sort();
    assert_eq!(
        ran,
        [
            "check_order small 42.5",
            "check_order tiny 42.5",
            "fetch_order small",
            "fetch_order tiny",
            "store_order \"small\" true",
            "store_order \"tiny\" true",
        ]
    );
    // A scope the state does not have adds nothing; the call says why.
    let seen = results_seen(&w, 1);
    assert_eq!(
        seen.len(),
        3 + 2 * 3,
        "three run_plan calls, two plans of three calls"
    );
    let refused = seen.iter().find(|(id, ..)| *id == nowhere.id).unwrap();
    assert!(refused.1);
    assert!(
        refused.2["error"]
            .as_str()
            .unwrap()
            .contains("which the state schema does not have"),
        "{}",
        refused.2
    );
    let empty = json!({ "order": null, "check": null, "stored": [] });
    assert_consistent(&w, &json!({ "east": empty, "west": empty }));
}
