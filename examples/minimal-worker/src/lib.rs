//! A minimal helix-edge worker: one agent, `support`, whose one tool cancels an order
//! through the shop's API — each call only after a human approves it.

use helix_edge::agent::{Agent, Agents};
use helix_edge::error::{DefinitionError, ToolError};
use helix_edge::tool::Tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use worker::{Env, Fetch, Headers};

/// Input of `cancel_order`.
#[derive(Deserialize, JsonSchema)]
struct CancelOrder {
    /// The order to cancel, e.g. `A-1042`.
    order_id: String,
}

/// The agents this worker hosts, built from its environment: the tool captures the
/// orders API's URL (a var) and key (a secret).
fn agents(env: &Env) -> Result<Agents, DefinitionError> {
    let api = env
        .var("ORDERS_API_URL")
        .map(|v| v.to_string())
        .unwrap_or_default();
    let key = env.secret("ORDERS_API_KEY").map(|v| v.to_string()).ok();
    support(api, key)
}

/// The `support` agent, calling the orders API at `api` with `key`.
fn support(api: String, key: Option<String>) -> Result<Agents, DefinitionError> {
    let cancel_order = Tool::new(
        "cancel_order",
        "Cancel a customer's order. A human approves every call.",
        move |input: CancelOrder, _ctx| {
            let (api, key) = (api.clone(), key.clone());
            async move { cancel(&api, key.as_deref(), &input.order_id).await }
        },
    )
    .approval_always();
    let support = Agent::builder("support")
        .description("Customer support: cancels orders once a human approves.")
        .system_prompt(
            "You are a support agent. When a customer asks, cancel the order with cancel_order.",
        )
        .tool(cancel_order)
        .build()?;
    Agents::new().with(support)
}

/// `POST {api}/orders/{id}/cancel`; the API's JSON answer is the tool's result.
async fn cancel(api: &str, key: Option<&str>, order_id: &str) -> Result<Value, ToolError> {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if order_id.is_empty() || !order_id.chars().all(valid) {
        return Err(ToolError::InputInvalid {
            tool: "cancel_order".into(),
            reason: "order_id is letters, digits, '-' and '_'".into(),
        });
    }
    let headers = Headers::new();
    if let Some(key) = key {
        let bearer = format!("Bearer {key}");
        headers
            .set("authorization", &bearer)
            .map_err(ToolError::caused_by)?;
    }
    let url = format!("{api}/orders/{order_id}/cancel");
    let request =
        helix_edge::request(&url, "POST", &headers, None).map_err(ToolError::caused_by)?;
    let mut response = Fetch::Request(request)
        .send()
        .await
        .map_err(ToolError::caused_by)?;
    match response.status_code() {
        200..=299 => response.json().await.map_err(ToolError::caused_by),
        status => Err(ToolError::failed(format!(
            "The orders API answered {status}."
        ))),
    }
}

helix_edge::worker!(agents);

#[cfg(test)]
mod tests;
