//! The `orders` agent: state as the workflow's memory. Its three tools store their
//! results in the state (`_outputPath`) and take state references as arguments, so the
//! model lays out fetch → check → store as one plan in one step; `check_order` needs a
//! person's approval for orders over 100, which suspends the plan between its calls.
//! The demo model answers `process order 1001` (runs through) and `process order 1002`
//! (waits for the approval) with that plan. `validate_plan` lets the model check a plan
//! before it lays it out; `run_plan` re-runs the same plan saved as `process-order`,
//! with a new order id.

use helix_edge::agent::{Agent, SavedPlan};
use helix_edge::error::{DefinitionError, ToolError};
use helix_edge::tool::Tool;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The orders the demo knows: id, customer, total.
const CATALOG: &[(&str, &str, f64)] = &[("1001", "Ada", 42.5), ("1002", "Grace", 250.0)];

/// Orders over this total need a person's approval to pass the check.
pub const APPROVAL_OVER: f64 = 100.0;

/// The `orders` agent's state.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct OrdersState {
    /// The order being worked on (absent before the first fetch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Order")]
    pub order: Option<Order>,
    /// The latest check (absent before the first check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Check")]
    pub check: Option<Check>,
    /// Orders stored so far.
    pub archive: Vec<Stored>,
    /// Orders fetched together (one call run per id with `_forEach`; absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batch: Vec<Order>,
    /// Their checks, in the batch's order (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
}

/// An order, as `fetch_order` returns it. (The state's parts are inlined in its schema:
/// the model reads one schema with no `$ref`s.)
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct Order {
    /// Its id.
    pub id: String,
    /// Who placed it.
    pub customer: String,
    /// Its total.
    pub total: f64,
}

/// A check, as `check_order` returns it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline)]
pub struct Check {
    /// The order checked.
    pub order_id: String,
    /// Whether it passed.
    pub ok: bool,
}

/// An archived order, as `store_order` returns it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline)]
pub struct Stored {
    /// The order.
    pub order_id: String,
    /// Its total.
    pub total: f64,
}

/// Input of `fetch_order`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FetchOrder {
    /// The order's id.
    pub id: String,
}

/// Input of `check_order`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CheckOrder {
    /// The order's id.
    pub order_id: String,
    /// The order's total.
    pub total: f64,
}

/// Input of `store_order`: the order and its check, as the state holds them.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StoreOrder {
    /// The order's id.
    pub order_id: String,
    /// The order's total.
    pub total: f64,
    /// The id of the order that was checked.
    pub checked_id: String,
    /// Whether the check passed.
    pub passed: bool,
}

/// The `orders` agent.
pub fn orders() -> Result<Agent, DefinitionError> {
    let anywhere: [&str; 0] = [];
    Agent::builder("orders")
        .description("Fetches, checks and archives orders, wiring its tools through the state.")
        .system_prompt(
            "You process orders: fetch one, check it, then store it. Lay the three calls out \
             in one step, passing results through the state.",
        )
        .state::<OrdersState>()
        .tool(
            Tool::new(
                "fetch_order",
                "Fetch an order by id.",
                |i: FetchOrder, _| async move {
                    let (id, customer, total) = CATALOG
                        .iter()
                        .find(|(id, ..)| *id == i.id)
                        .ok_or_else(|| ToolError::failed(format!("There is no order {}", i.id)))?;
                    let order = Order {
                        id: id.to_string(),
                        customer: customer.to_string(),
                        total: *total,
                    };
                    Ok::<_, ToolError>(order)
                },
            )
            .output_paths(anywhere),
        )
        .tool(
            Tool::new(
                "check_order",
                "Check an order before it is stored. Orders over 100 need a person's approval.",
                |i: CheckOrder, _| async move {
                    Ok::<_, ToolError>(Check {
                        order_id: i.order_id,
                        ok: true,
                    })
                },
            )
            .approval_when(|i: &CheckOrder, _| i.total > APPROVAL_OVER)
            .output_paths(anywhere),
        )
        .tool(
            Tool::new(
                "store_order",
                "Archive a checked order.",
                |i: StoreOrder, _| async move {
                    if !i.passed || i.checked_id != i.order_id {
                        return Err(ToolError::failed("The order has not passed its check"));
                    }
                    Ok(Stored {
                        order_id: i.order_id,
                        total: i.total,
                    })
                },
            )
            .output_paths(["/archive/-"]),
        )
        .plan_validation()
        .saved_plan(
            SavedPlan::new("process-order", "Fetch, check and archive one order.")
                .input("orderId", "The order's id.")
                .call("fetch", "fetch_order", json!({ "id": "†input.orderId", "_outputPath": "/order" }))
                .call(
                    "check",
                    "check_order",
                    json!({ "orderId": "†state.order.id", "total": "$state.order.total", "_outputPath": "/check" }),
                )
                .call(
                    "store",
                    "store_order",
                    json!({
                        "orderId": "$state.order.id",
                        "total": "$state.order.total",
                        "checkedId": "†state.check.orderId",
                        "passed": "†state.check.ok",
                        "_outputPath": "/archive/-",
                    }),
                ),
        )
        .build()
}
