//! The test flavour's agent (feature `test-flavour`, never deployed) for the end-to-end
//! suite's fault injection.
//!
//! `ledger` has `add_note` and `record`, which needs approval and reports each execution
//! to `LEDGER_URL` (the test's mock server) before it answers. The report is the
//! durable record outside the worker that lets a test killing the worker at random
//! count how often each approved call really ran. Its `track` notes a label, then
//! reports it: while the mock holds the report, the note is a live write of a running
//! tool.

use helix_edge::agent::Agent;
use helix_edge::error::{DefinitionError, ToolError};
use helix_edge::tool::{Tool, ToolContext};
use reference_agents::add_note_tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;
use worker::{Fetch, Headers, Method, Request, RequestInit};

/// Input of `record`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// What to record.
    pub label: String,
}

/// Reports the call `ctx` of a tool with `label` to the ledger at `url`.
async fn report_call(url: &str, ctx: &ToolContext, label: &str) -> Result<(), ToolError> {
    let body =
        json!({ "session": ctx.session_id(), "toolCallId": ctx.tool_call_id(), "label": label });
    report(url, &body).await
}

/// Posts `body` to the ledger at `url`.
async fn report(url: &str, body: &Value) -> Result<(), ToolError> {
    let failed = |e: worker::Error| ToolError::failed(format!("the ledger is unreachable: {e}"));
    let headers = Headers::new();
    headers
        .set("content-type", "application/json")
        .map_err(failed)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(body.to_string().into()));
    let request = Request::new_with_init(url, &init).map_err(failed)?;
    let response = Fetch::Request(request).send().await.map_err(failed)?;
    match response.status_code() {
        200..=299 => Ok(()),
        status => Err(ToolError::failed(format!("the ledger answered {status}"))),
    }
}

/// The `ledger` agent, reporting to `url`.
pub fn ledger(url: String) -> Result<Agent, DefinitionError> {
    let (lookup_url, close_url, track_url) = (url.clone(), url.clone(), url.clone());
    Agent::builder("ledger")
        .description("Test agent: notes, an approved tool that records each execution outside the worker, and a finish that reports too.")
        .system_prompt("You record things.")
        .initial_state(json!({ "notes": [] }))
        .tool(add_note_tool())
        .tool(
            Tool::new("record", "Record a label (approval always).", move |input: Record, ctx: ToolContext| {
                let url = url.clone();
                async move {
                    report_call(&url, &ctx, &input.label).await?;
                    Ok::<_, ToolError>(json!({ "recorded": input.label }))
                }
            })
            .approval_always(),
        )
        .tool({
            let url = close_url;
            Tool::new("close", "Finish the run with a label (reported too).", move |input: Record, ctx: ToolContext| {
                let url = url.clone();
                async move {
                    report_call(&url, &ctx, &input.label).await?;
                    Ok::<_, ToolError>(json!({ "closed": input.label }))
                }
            })
            .finish_with()
        })
        .tool({
            let url = track_url;
            Tool::new("track", "Note a label, then report it.", move |input: Record, ctx: ToolContext| {
                let url = url.clone();
                async move {
                    ctx.append("/notes", json!({ "text": input.label }))?;
                    report_call(&url, &ctx, &input.label).await?;
                    Ok::<_, ToolError>(json!({ "tracked": input.label }))
                }
            })
        })
        .tool(
            Tool::new("lookup", "Report a label, giving up after a second.", move |input: Record, ctx: ToolContext| {
                let url = lookup_url.clone();
                async move {
                    let body = json!({ "session": ctx.session_id(), "label": input.label });
                    report(&url, &body).await?;
                    Ok::<_, ToolError>(json!({ "found": input.label }))
                }
            })
            .timeout(Duration::from_secs(1)),
        )
        .build()
}

/// `agents` with `ledger`, when the suite gives it its `LEDGER_URL`.
pub fn add(
    agents: helix_edge::agent::Agents,
    ledger_url: Option<String>,
) -> Result<helix_edge::agent::Agents, DefinitionError> {
    match ledger_url {
        Some(url) => agents.with(ledger(url)?),
        None => Ok(agents),
    }
}
