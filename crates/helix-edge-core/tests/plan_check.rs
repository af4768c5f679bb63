//! Checking a plan without running it (`Runner::validate_plan`, served as `POST
//! …/plans/validate`): every problem reported at once — an unknown tool, a cycle, a
//! reference to a place nothing has, a place the schema lacks, refused meta-arguments,
//! arguments that do not fit — and, for a valid plan, the rounds it would run in;
//! nothing runs and nothing changes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::memory::check::{PlanReport, PlannedCall};
use helix_edge_core::runner::Progress;
use helix_edge_core::store::SessionStatus;
use serde_json::{Value, json};
use support::*;

fn calls(plan: Value) -> Vec<PlannedCall> {
    serde_json::from_value(plan).unwrap()
}

/// A planner session at rest, and the report on `plan` for it.
fn check_on(w: &World, plan: Value) -> PlanReport {
    let r = w.runner("p1");
    w.model.text("Hello.");
    w.create(&r, "planner", "hi");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let before = (w.session().state, w.messages().len());
    let report = block(r.validate_plan(SESSION, &calls(plan))).unwrap();
    assert!(w.exec.all().is_empty(), "nothing ran");
    assert_eq!(
        (w.session().state, w.messages().len()),
        before,
        "nothing changed"
    );
    report
}

#[test]
fn a_valid_plan_reports_the_rounds_it_would_run_in() {
    let w = World::new();
    let report = check_on(
        &w,
        json!([
            { "id": "fetch", "name": "fetch_order", "arguments": { "id": "big", "_outputPath": "/order" } },
            { "id": "check", "name": "check_order", "arguments": { "order_id": "†state.order.id", "total": "$state.order.total", "_outputPath": "/check", "_when": "†state.order.total > 100" } },
            { "id": "store", "name": "store_order", "arguments": { "order": "$state.order", "check": "$state.check", "_outputPath": "/stored/-" } },
            { "name": "echo", "arguments": { "x": 1 } }
        ]),
    );
    assert_eq!(report.problems, vec![]);
    assert!(report.valid);
    assert_eq!(
        report.rounds,
        vec![vec!["fetch", "c4"], vec!["check"], vec!["store"]]
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let w = World::new();
    let report = check_on(
        &w,
        json!([
            // A cycle: each reads what the other stores.
            { "id": "a", "name": "check_order", "arguments": { "order_id": "$state.order.id", "total": 1, "_outputPath": "/check" } },
            { "id": "b", "name": "fetch_order", "arguments": { "id": "$state.check.orderId", "_outputPath": "/order" } },
            // A tool the agent does not have.
            { "id": "c", "name": "delete_order", "arguments": {} },
            // A place the schema lacks, and a reference nothing gives.
            { "id": "d", "name": "store_order", "arguments": { "order": "$state.orders", "check": "$state.stored.0" } },
            // A malformed reference, a malformed condition, a refused output path.
            { "id": "e", "name": "fetch_order", "arguments": { "id": "$state..x" } },
            { "id": "f", "name": "fetch_order", "arguments": { "id": "x", "_when": "$state.order = 1" } },
            { "id": "g", "name": "store_order", "arguments": { "order": {}, "check": {}, "_outputPath": "/order" } },
            // Arguments that do not fit the tool: a number where a string goes (a
            // reference would do anywhere).
            { "id": "h", "name": "fetch_order", "arguments": { "id": 7 } }
        ]),
    );
    assert!(!report.valid);
    let found: Vec<(&str, Vec<String>)> = report
        .problems
        .iter()
        .map(|p| (p.code, p.calls.clone()))
        .collect();
    let ids = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for expected in [
        ("unknown_tool", ids(&["c"])),
        ("reference_to_nothing", ids(&["d"])),
        ("reference_malformed", ids(&["e"])),
        ("input_invalid", ids(&["f"])),
        ("input_invalid", ids(&["g"])),
        ("input_invalid", ids(&["h"])),
        ("unknown_path", ids(&["d"])),
        ("cycle", ids(&["a", "b"])),
    ] {
        assert!(found.contains(&expected), "{expected:?} in {found:?}");
    }
    assert_eq!(found.len(), 8, "{found:?}");
    let message = |code: &str, call: &str| {
        report
            .problems
            .iter()
            .find(|p| p.code == code && p.calls == [call])
            .unwrap()
            .message
            .clone()
    };
    assert!(
        message("unknown_tool", "c").contains("'delete_order', which is not a tool of this agent")
    );
    assert_eq!(
        message("reference_to_nothing", "d"),
        "d reads /stored/0, which the state does not have now and no call of the plan writes"
    );
    assert_eq!(
        message("unknown_path", "d"),
        "d reads /orders, which the state schema does not have"
    );
    assert!(message("input_invalid", "f").contains("has no operator"));
    assert!(
        message("input_invalid", "g")
            .contains("'/order' is not one of the paths this tool may write")
    );
    assert!(
        message("input_invalid", "h").contains("fetch_order"),
        "{}",
        message("input_invalid", "h")
    );
    assert!(
        report.rounds.is_empty(),
        "a plan with a cycle has no rounds"
    );
}

#[test]
fn a_reference_the_state_has_now_or_an_earlier_call_writes_is_fine() {
    let w = World::new();
    let report = check_on(
        &w,
        json!([
            // /stored is [] now; its first item is what this call appends.
            { "name": "store_order", "arguments": { "order": "$state.stored", "check": {}, "_outputPath": "/stored/-" } },
            { "name": "check_order", "arguments": { "order_id": "x", "total": "$state.stored.0.total" } }
        ]),
    );
    assert_eq!(report.problems, vec![]);
    assert_eq!(report.rounds, vec![vec!["c1"], vec!["c2"]]);

    // A scope must be a place below the root.
    let w = World::new();
    let scoped = check_on(
        &w,
        json!([{ "name": "check_order", "arguments": { "order_id": "x", "total": 1, "_scope": "/" } }]),
    );
    let codes: Vec<&str> = scoped.problems.iter().map(|p| p.code).collect();
    assert_eq!(codes, ["input_invalid"]);
    assert!(
        scoped.problems[0]
            .message
            .contains("_scope '/' is not a place in the state")
    );
}

#[test]
fn the_model_checks_a_plan_with_the_validate_plan_tool_before_it_runs_it() {
    let w = World::new();
    let r = w.runner("p1");
    let plan = json!([
        { "id": "fetch", "name": "fetch_order", "arguments": { "id": "a", "_outputPath": "/order" } },
        { "id": "check", "name": "check_order", "arguments": { "order_id": "$state.check.orderId", "total": "$state.order.total" } }
    ]);
    let ask = w.model.call("validate_plan", json!({ "calls": plan }));
    w.model
        .calls(vec![ask.clone()])
        .text("The plan needs fixing.");
    w.create(&r, "planner", "plan it");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert!(w.exec.all().is_empty(), "nothing of the plan ran");
    let seen = &w.model.seen()[1].messages;
    let result = seen
        .iter()
        .find_map(|m| match m {
            helix_edge_core::message::Message::Tool {
                tool_call_id,
                content,
                is_error: false,
                ..
            } if *tool_call_id == ask.id => Some(content.clone()),
            _ => None,
        })
        .expect("the report, as the tool's result");
    assert_eq!(result["valid"], false);
    assert_eq!(
        result["problems"],
        json!([{
            "code": "reference_to_nothing",
            "calls": ["check"],
            "message": "check reads /check/orderId, which the state does not have now and no call of the plan writes"
        }])
    );
    assert_eq!(result["rounds"], json!([["fetch"], ["check"]]));
}

#[test]
fn an_id_given_to_two_calls_is_a_problem_of_the_plan() {
    let w = World::new();
    let report = check_on(
        &w,
        json!([
            { "id": "x", "name": "echo", "arguments": {} },
            { "id": "x", "name": "echo", "arguments": {} },
            { "id": "x", "name": "echo", "arguments": {} }
        ]),
    );
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert_eq!(
        (report.problems[0].code, report.problems[0].message.as_str()),
        ("duplicate_id", "the id 'x' names more than one call")
    );
}

#[test]
fn an_instanced_call_is_checked_with_its_items() {
    let w = World::new();
    let report = check_on(
        &w,
        json!([
            { "id": "fetch", "name": "fetch_order", "arguments": { "id": "†item", "_forEach": ["a", "b"], "_outputPath": "/order" } },
            // An item reference stands in for a number; the items are what the fetch writes.
            { "id": "check", "name": "check_order", "arguments": { "order_id": "†item.id", "total": "†item.total", "_forEach": "†state.order" } },
            // Items nothing gives.
            { "id": "again", "name": "fetch_order", "arguments": { "id": "†item", "_forEach": "†state.check.items" } }
        ]),
    );
    let found: Vec<(&str, Vec<String>)> = report
        .problems
        .iter()
        .map(|p| (p.code, p.calls.clone()))
        .collect();
    assert_eq!(
        found,
        vec![("reference_to_nothing", vec!["again".to_string()])]
    );
    assert_eq!(report.rounds, vec![vec!["fetch", "again"], vec!["check"]]);
}
