//! The `demo` model driving an agent of your own: a script's turns (an approval-gated
//! call, a client tool, a reply after the results), `/call` lines, a typed output, and
//! the answers to what it cannot follow.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge_core::agent::{Agent, Agents};
use helix_edge_core::demo::DemoModel;
use helix_edge_core::error::ProviderError;
use helix_edge_core::message::Message;
use helix_edge_core::store::SessionStatus;
use helix_edge_core::testing::{Scenario, TestRunner};
use helix_edge_core::tool::{Tool, ToolContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::rc::Rc;

/// Input of `cancel_order`.
#[derive(Deserialize, JsonSchema)]
struct CancelOrder {
    /// The order.
    order_id: String,
}

/// Input of `confirm` (the client answers).
#[derive(JsonSchema)]
#[allow(dead_code)] // Only its schema is used: the client reads the arguments.
struct Confirm {
    /// What to confirm.
    question: String,
}

/// The output of `summarizer`.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Summary {
    /// The summary.
    text: String,
}

fn agents() -> Agents {
    let orders =
        Agent::builder("orders")
            .system_prompt("You cancel orders.")
            .tool(
                Tool::new(
                    "cancel_order",
                    "Cancel an order.",
                    |i: CancelOrder, _: ToolContext| async move {
                        Ok(json!({ "cancelled": i.order_id }))
                    },
                )
                .approval_always(),
            )
            .tool(Tool::client::<Confirm>(
                "confirm",
                "Ask the user to confirm.",
            ))
            .build()
            .unwrap();
    let summarizer = Agent::builder("summarizer")
        .output::<Summary>()
        .build()
        .unwrap();
    Agents::new()
        .with(orders)
        .unwrap()
        .with(summarizer)
        .unwrap()
}

const SCRIPT: &str = r#"[
  {"user": "cancel", "calls": [{"tool": "cancel_order", "args": {"order_id": "A-1042"}}],
   "reply": "Order A-1042 is cancelled."},
  {"user": "check", "calls": [{"tool": "confirm", "args": {"question": "Sure?"}}]},
  {"user": "hello", "reply": "Hello! Ask me to cancel an order."},
  {"user": "sum up", "output": {"text": "All done."}}
]"#;

fn on_script(scenario: &Scenario, script: Option<&str>) -> TestRunner {
    scenario.runner_on("p1", Rc::new(DemoModel::with_script(script).unwrap()))
}

fn last_text(scenario: &Scenario) -> String {
    let messages = scenario.messages();
    match messages.last() {
        Some(Message::Assistant { content, .. }) => content.clone(),
        other => panic!("the last message is not the assistant's: {other:?}"),
    }
}

#[test]
fn a_script_turn_calls_an_approval_gated_tool_and_replies_after_the_result() {
    let scenario = Scenario::new(agents());
    let runner = on_script(&scenario, Some(SCRIPT));
    scenario.create(&runner, "orders", "Please cancel my order");
    scenario.drive(&runner);
    let pending = scenario.pending();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool_name, "cancel_order");
    assert_eq!(pending[0].arguments, json!({"order_id": "A-1042"}));

    scenario.approve(&runner, &pending[0].tool_call_id, true, None);
    scenario.drive(&runner);
    assert_eq!(scenario.session().head.status, SessionStatus::Completed);
    assert_eq!(last_text(&scenario), "Order A-1042 is cancelled.");
    let results: Vec<Value> = scenario
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results, vec![json!({"cancelled": "A-1042"})]);
    scenario.assert_consistent(&json!({}));
}

#[test]
fn a_client_tool_then_the_results_summary_without_a_reply() {
    let scenario = Scenario::new(agents());
    let runner = on_script(&scenario, Some(SCRIPT));
    scenario.create(&runner, "orders", "check it");
    scenario.drive(&runner);
    let pending = scenario.pending();
    assert_eq!(pending[0].tool_name, "confirm");
    scenario.answer_client(&runner, &pending[0].tool_call_id, Ok(json!("yes")));
    scenario.drive(&runner);
    assert_eq!(last_text(&scenario), "Done. confirm returned \"yes\".");
}

#[test]
fn a_reply_alone_and_a_typed_output() {
    let scenario = Scenario::new(agents());
    let runner = on_script(&scenario, Some(SCRIPT));
    scenario.create(&runner, "orders", "Hello there");
    scenario.drive(&runner);
    assert_eq!(last_text(&scenario), "Hello! Ask me to cancel an order.");
    assert_eq!(scenario.session().head.status, SessionStatus::Completed);

    let scenario = Scenario::new(agents());
    let runner = on_script(&scenario, Some(SCRIPT));
    scenario.create(&runner, "summarizer", "sum up the day");
    scenario.drive(&runner);
    let session = scenario.session();
    assert_eq!(session.head.status, SessionStatus::Completed);
    assert_eq!(session.head.output, Some(json!({"text": "All done."})));
}

#[test]
fn slash_calls_drive_any_tool_without_a_script() {
    let scenario = Scenario::new(agents());
    let runner = on_script(&scenario, None);
    scenario.create(
        &runner,
        "orders",
        "/call cancel_order {\"order_id\": \"B-7\"}",
    );
    scenario.drive(&runner);
    let pending = scenario.pending();
    assert_eq!(pending[0].arguments, json!({"order_id": "B-7"}));
    scenario.approve(&runner, &pending[0].tool_call_id, false, Some("not today"));
    scenario.drive(&runner);
    assert_eq!(scenario.session().head.status, SessionStatus::Completed);
    assert!(
        last_text(&scenario).starts_with("Done. cancel_order failed:"),
        "{}",
        last_text(&scenario)
    );
}

#[test]
fn what_it_cannot_follow_it_says_in_words() {
    let scenario = Scenario::new(agents());
    let runner = on_script(&scenario, Some(SCRIPT));
    scenario.create(&runner, "orders", "what is the weather?");
    scenario.drive(&runner);
    assert_eq!(
        last_text(&scenario),
        "The demo model's script (LLM_SCRIPT) has no turn for \"what is the weather?\": its turns \
         answer cancel, check, hello, sum up. Or call a tool with `/call <tool> {json}` (this \
         agent's tools: cancel_order, confirm)."
    );

    let scenario = Scenario::new(agents());
    let runner = on_script(&scenario, None);
    scenario.create(&runner, "orders", "/call fly {}");
    scenario.drive(&runner);
    assert_eq!(
        last_text(&scenario),
        "The demo model could not follow that: this agent has no tool `fly` (its tools: \
         cancel_order, confirm)."
    );
    assert!(scenario.pending().is_empty());
}

#[test]
fn a_script_that_does_not_parse_leaves_the_model_not_configured() {
    let Err(ProviderError::NotConfigured(why)) = DemoModel::with_script(Some("[{\"user\": 1}]"))
    else {
        panic!("a bad script was accepted");
    };
    assert!(
        why.starts_with("LLM_SCRIPT is not a list of turns"),
        "{why}"
    );
}
