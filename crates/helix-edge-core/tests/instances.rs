//! Instancing (`_forEach`): one call run once per item of an array — in parallel, each
//! instance decided for approval on its own arguments, an approval inside one
//! suspending the plan durably while the others' results are kept, another process
//! running the rest once; two instances waiting at once, each answered on its own; the
//! results gathered in item order under the output path.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

mod support;

use helix_edge_core::message::{Message, ToolCall};
use helix_edge_core::runner::Progress;
use helix_edge_core::store::{PendingKind, SessionStatus};
use serde_json::{Value, json};
use support::*;

const EMPTY: fn() -> Value = || json!({ "order": null, "check": null, "stored": [] });

/// The tool messages the model saw in its `n`th call: call id and content.
fn seen_results(w: &World, n: usize) -> Vec<(String, Value)> {
    results_seen(w, n)
        .into_iter()
        .map(|(id, _, content)| (id, content))
        .collect()
}

/// Fetch three orders (one call, three instances), check each (the large one needs an
/// approval), store what the checks say.
fn batch(w: &World) -> Vec<ToolCall> {
    vec![
        w.model.call(
            "fetch_order",
            json!({ "id": "†item", "_forEach": ["a", "big", "c"], "_outputPath": "/order" }),
        ),
        w.model.call(
            "check_order",
            json!({ "order_id": "†item.id", "total": "†item.total", "_forEach": "†state.order", "_outputPath": "/check" }),
        ),
        w.model.call(
            "store_order",
            json!({ "order": "$state.order.1", "check": "$state.check.1", "_outputPath": "/stored/-" }),
        ),
    ]
}

#[test]
fn a_call_runs_once_per_item_and_its_results_are_gathered_in_item_order() {
    let w = World::new();
    let r = w.runner("p1");
    let call = w.model.call(
        "fetch_order",
        json!({ "id": "†item", "_forEach": ["a", "big", "c"], "_outputPath": "/order" }),
    );
    w.model.calls(vec![call.clone()]).text("Fetched.");
    w.create(&r, "planner", "fetch three");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert_eq!(
        w.exec.all(),
        vec!["fetch_order a", "fetch_order big", "fetch_order c"]
    );
    let orders = json!([
        { "id": "a", "total": 42.5 },
        { "id": "big", "total": 250.0 },
        { "id": "c", "total": 42.5 }
    ]);
    assert_eq!(
        w.session().state["order"],
        orders,
        "gathered, in item order"
    );
    // The model reads one result for its one call; the instances' are in the transcript.
    let seen = seen_results(&w, 1);
    assert_eq!(
        seen,
        vec![(
            call.id.clone(),
            json!({ "result": orders, "storedAt": "/order" })
        )]
    );
    let instances: Vec<(String, Option<String>)> = w
        .messages()
        .iter()
        .filter(|m| m.instance_of().is_some())
        .map(|m| match m {
            Message::Tool { tool_call_id, .. } => {
                (tool_call_id.clone(), m.instance_of().map(String::from))
            }
            _ => unreachable!(),
        })
        .collect();
    let ids: Vec<String> = (0..3).map(|k| format!("{}#{k}", call.id)).collect();
    assert_eq!(
        instances,
        ids.iter()
            .map(|id| (id.clone(), Some(call.id.clone())))
            .collect::<Vec<_>>()
    );
    assert_consistent(&w, &EMPTY());
}

#[test]
fn an_approval_inside_one_instance_suspends_the_plan_and_another_process_runs_the_rest_once() {
    let w = World::new();
    let r = w.runner("p1");
    let calls = batch(&w);
    w.model.calls(calls.clone()).text("Stored.");
    w.create(&r, "planner", "check three");
    assert_eq!(
        drive(&r),
        Progress::Suspended {
            next_deadline: None
        }
    );
    // Two checks ran; the large order's waits for a person, on its own arguments.
    assert_eq!(
        w.exec.all(),
        vec![
            "fetch_order a",
            "fetch_order big",
            "fetch_order c",
            "check_order a 42.5",
            "check_order c 42.5"
        ]
    );
    let pending = w.session().head.pending;
    assert_eq!(pending.len(), 1);
    let waiting = &pending[0];
    assert_eq!(
        (waiting.tool_call_id.as_str(), waiting.kind),
        (format!("{}#1", calls[1].id).as_str(), PendingKind::Approval)
    );
    assert_eq!(
        waiting.arguments,
        json!({ "order_id": "big", "total": 250.0 })
    );
    assert_eq!(
        w.session().state["check"],
        Value::Null,
        "nothing gathered yet"
    );

    // Another process takes the approval: only the waiting instance runs, then the
    // gathered checks are stored and the store runs.
    let r2 = w.runner("p2");
    approve(&r2, &waiting.tool_call_id, true);
    assert_eq!(drive(&r2), Progress::Idle(SessionStatus::Completed));
    let exec = w.exec.all();
    assert_eq!(
        &exec[5..],
        &["check_order big 250", "store_order \"big\" true"],
        "each instance once"
    );
    let state = w.session().state;
    assert_eq!(
        state["check"],
        json!([
            { "ok": true, "orderId": "a" },
            { "ok": true, "orderId": "big" },
            { "ok": true, "orderId": "c" }
        ]),
        "in item order, whatever order they ran in"
    );
    assert_eq!(state["stored"], json!([{ "stored": "big" }]));
    let seen = seen_results(&w, 1);
    let ids: Vec<&str> = seen.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, vec![&calls[0].id, &calls[1].id, &calls[2].id]);
    assert_consistent(&w, &EMPTY());
}

#[test]
fn a_denied_instance_gives_its_error_in_its_place_and_the_others_stand() {
    let w = World::new();
    let r = w.runner("p1");
    let calls = batch(&w);
    w.model.calls(calls[..2].to_vec()).text("Checked.");
    w.create(&r, "planner", "check three");
    drive(&r);
    approve(&r, &format!("{}#1", calls[1].id), false);
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    let check = w.session().state["check"].clone();
    assert_eq!(check[0], json!({ "ok": true, "orderId": "a" }));
    assert_eq!(check[1]["code"], "tool_denied");
    assert_eq!(check[2], json!({ "ok": true, "orderId": "c" }));
}

#[test]
fn bad_items_fail_the_call_before_anything_runs() {
    let w = World::new();
    let r = w.runner("p1");
    let calls = vec![
        w.model.call(
            "fetch_order",
            json!({ "id": "†item", "_forEach": "$state.stored" }),
        ),
        w.model
            .call("fetch_order", json!({ "id": "†item.x", "_forEach": ["a"] })),
        w.model.call(
            "fetch_order",
            json!({ "id": "†item", "_forEach": "$state.check" }),
        ),
    ];
    w.model.calls(calls).text("I see.");
    w.create(&r, "planner", "go");
    assert_eq!(drive(&r), Progress::Idle(SessionStatus::Completed));
    assert!(w.exec.all().is_empty(), "nothing ran");
    let seen = seen_results(&w, 1);
    // An empty array is zero instances: an empty result.
    assert_eq!(seen[0].1, json!([]));
    assert_eq!(seen[1].1["code"], "tool_input_invalid");
    assert!(
        seen[1].1["error"]
            .as_str()
            .unwrap()
            .contains("item reference '†item.x' points at nothing")
    );
    assert!(
        seen[2].1["error"]
            .as_str()
            .unwrap()
            .contains("_forEach names /check, which holds null rather than an array")
    );
}

#[test]
fn two_instances_waiting_at_once_are_each_asked_and_answered_on_their_own() {
    let w = World::new();
    let r = w.runner("p1");
    let items = json!([
        { "id": "big1", "total": 250 },
        { "id": "a", "total": 1 },
        { "id": "big2", "total": 300 }
    ]);
    let call = w.model.call(
        "check_order",
        json!({ "order_id": "†item.id", "total": "†item.total", "_forEach": items, "_outputPath": "/check" }),
    );
    w.model.calls(vec![call.clone()]).text("Checked.");
    w.create(&r, "planner", "check three");
    assert!(matches!(drive(&r), Progress::Suspended { .. }));
    assert_eq!(w.exec.all(), ["check_order a 1"]);
    let waiting: Vec<(String, PendingKind)> = (w.session().head.pending.iter())
        .map(|p| (p.tool_call_id.clone(), p.kind))
        .collect();
    let (first, last) = (format!("{}#0", call.id), format!("{}#2", call.id));
    assert_eq!(
        waiting,
        [
            (first.clone(), PendingKind::Approval),
            (last.clone(), PendingKind::Approval)
        ],
        "each asked on its own arguments"
    );

    // One answer, in another process: the other still waits and nothing more runs.
    approve(&w.runner("p2"), &last, false);
    assert!(matches!(drive(&w.runner("p2")), Progress::Suspended { .. }));
    assert_eq!(w.exec.all(), ["check_order a 1"]);
    let again = helix_edge_core::runner::Submission::Approval {
        tool_call_id: last.clone(),
        approved: true,
        reason: None,
    };
    let refused = block(w.runner("p2").submit(SESSION, again)).unwrap_err();
    assert!(
        matches!(refused, helix_edge_core::runner::RunError::AlreadyResolved(ref id) if *id == last),
        "{refused:?}"
    );

    // The other answer, in a third: it runs once and the results are gathered.
    let r3 = w.runner("p3");
    approve(&r3, &first, true);
    assert_eq!(drive(&r3), Progress::Idle(SessionStatus::Completed));
    assert_eq!(w.exec.all(), ["check_order a 1", "check_order big1 250"]);
    let check = &w.session().state["check"];
    assert_eq!(check[0], json!({ "ok": true, "orderId": "big1" }));
    assert_eq!(check[1], json!({ "ok": true, "orderId": "a" }));
    assert_eq!(check[2]["code"], "tool_denied");
    assert_consistent(&w, &EMPTY());
}
