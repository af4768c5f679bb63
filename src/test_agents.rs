//! Test-only agents (feature `test-routes`) for the end-to-end suite's fault injection.
//!
//! `ledger` has `add_note` and `record`, which needs approval and reports each execution
//! to `LEDGER_URL` (the test's mock server) before it answers. The report is the
//! durable record outside the worker that lets a test killing the worker at random
//! count how often each approved call really ran. Its `track` notes a label, then
//! reports it: while the mock holds the report, the note is a live write of a running
//! tool.
//!
//! `typed` has typed state (`Tasks`), a tool that updates it through the type, and a
//! client tool whose results must match a declared output schema. `lister` owes a list
//! of strings as its output (a typed output that is not an object). `thinker` takes notes
//! with extended thinking on (a thinking budget). `painter`'s `render_chart` gives the
//! model a picture with its result (a tool's attachments). `observed` meets every kind of
//! human-in-the-loop boundary in one run — `delete_file` (approval), `ask_user` (client)
//! and `research` (a sub-agent) — and its hooks keep an audit in its state (the traces'
//! and the hooks' end-to-end tests).

use helix_edge::agent::{Agent, HookContext, HookFuture, Hooks, Suspension};
use helix_edge::attachment::Attachment;
use helix_edge::error::{DefinitionError, ToolError};
use helix_edge::message::Message;
use helix_edge::model::{CacheTtl, ModelSettings};
use helix_edge::tool::{Tool, ToolContext};
use reference_agents::add_note_tool;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
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

/// The state of `typed`.
#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct Tasks {
    /// Open tasks.
    pub tasks: Vec<String>,
    /// How many were ever added.
    pub added: u32,
}

/// Input of `add_task` and `measure`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The task.
    pub title: String,
}

/// What `measure`'s client must answer.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Measured {
    /// The measurement.
    pub value: f64,
}

/// The `typed` agent.
pub fn typed() -> Result<Agent, DefinitionError> {
    Agent::builder("typed")
        .description("Test agent: typed state and a client tool with an output schema.")
        .system_prompt("You track tasks.")
        .state::<Tasks>()
        .prompt_cache(CacheTtl::OneHour)
        .tool(Tool::new(
            "add_task",
            "Add a task.",
            |input: Task, ctx: ToolContext| async move {
                ctx.update_as(|t: &mut Tasks| {
                    t.tasks.push(input.title);
                    t.added += 1;
                })?;
                Ok::<_, ToolError>(json!({ "added": ctx.state_as::<Tasks>()?.added }))
            },
        ))
        .tool(
            Tool::client::<Task>("measure", "Measure something (the client answers).")
                .output::<Measured>(),
        )
        .build()
}

/// The `lister` agent.
pub fn lister() -> Result<Agent, DefinitionError> {
    Agent::builder("lister")
        .description("Test agent: answers with a list of strings.")
        .system_prompt("You list things.")
        .output::<Vec<String>>()
        .build()
}

/// The `thinker` agent.
pub fn thinker() -> Result<Agent, DefinitionError> {
    Agent::builder("thinker")
        .description("Test agent: notes, with extended thinking on.")
        .system_prompt("You think, then take notes.")
        .initial_state(json!({ "notes": [] }))
        .model(ModelSettings {
            thinking_budget: Some(2048),
            ..Default::default()
        })
        .tool(add_note_tool())
        .build()
}

/// A 1×1 PNG, base64.
pub const PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// Input of `render_chart`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Chart {
    /// The chart's title.
    title: String,
}

/// The `painter` agent.
pub fn painter() -> Result<Agent, DefinitionError> {
    Agent::builder("painter")
        .description("Test agent: renders charts the model then sees.")
        .system_prompt("You render charts and describe them.")
        .tool(Tool::new(
            "render_chart",
            "Render a chart; the picture comes with the result.",
            |input: Chart, ctx| async move {
                ctx.attach(Attachment::image("image/png", PIXEL_PNG).named("chart.png"))?;
                Ok::<_, ToolError>(json!({ "rendered": input.title }))
            },
        ))
        .build()
}

/// Input of `render_poster`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Poster {
    /// How many base64 characters the picture has (a multiple of 4).
    size: usize,
}

/// The `illustrator` agent: renders posters too large for the transcript, kept in
/// `files` (the FILES bucket) by reference.
pub fn illustrator(files: helix_edge::objects::R2) -> Result<Agent, DefinitionError> {
    Agent::builder("illustrator")
        .description("Test agent: renders posters too large to keep inline.")
        .system_prompt("You render posters and describe them.")
        .tool(Tool::new(
            "render_poster",
            "Render a poster; the picture comes with the result.",
            |input: Poster, ctx| async move {
                let picture = "A".repeat(input.size);
                ctx.attach(Attachment::image("image/png", picture).named("poster.png"))?;
                Ok::<_, ToolError>(json!({ "rendered": input.size }))
            },
        ))
        .attachment_store(files)
        .build()
}

/// Writes each call's outcome to `/audit` after it, and why the run waits to `/waiting`.
struct Audit;

impl Hooks for Audit {
    fn after_tool<'a>(&'a self, ctx: &'a HookContext, result: &'a Message) -> HookFuture<'a> {
        Box::pin(async move {
            let ok = matches!(
                result,
                Message::Tool {
                    is_error: false,
                    ..
                }
            );
            let name = ctx.call.as_ref().map(|c| c.name.clone());
            ctx.append(
                "/audit",
                json!({ "tool": name, "ok": ok, "step": ctx.step }),
            )?;
            Ok(())
        })
    }
    fn on_agent_suspended<'a>(&'a self, ctx: &'a HookContext, s: Suspension<'a>) -> HookFuture<'a> {
        Box::pin(async move {
            ctx.set("/waiting", json!(s.reason.as_str()))?;
            Ok(())
        })
    }
    fn on_agent_resumed<'a>(&'a self, ctx: &'a HookContext) -> HookFuture<'a> {
        Box::pin(async move {
            ctx.set("/waiting", Value::Null)?;
            Ok(())
        })
    }
}

/// `observed`: an approval, a client tool and a sub-agent, audited by its hooks.
fn observed() -> Result<Agent, DefinitionError> {
    Agent::builder("observed")
        .system_prompt("Delete what is asked, ask the user, research, then answer.")
        .initial_state(json!({ "audit": [], "waiting": null }))
        .tool(reference_agents::delete_file_tool())
        .tool(Tool::client::<reference_agents::AskUser>(
            "ask_user",
            "Ask the user a question; the client answers.",
        ))
        .tool(Tool::subagent::<reference_agents::Research>(
            "research",
            reference_agents::researcher()?,
        ))
        .hooks(Audit)
        .build()
}

/// `agents` with the test agents: `typed`, `lister`, `thinker`, `painter`, `observed`,
/// `ledger` when
/// the suite gives it its `LEDGER_URL`, `illustrator` when FILES is bound and
/// `librarian-kv` (the reference `librarian`, its skills under `skills/` of the KV
/// namespace) when KV is.
pub fn add(
    agents: helix_edge::agent::Agents,
    ledger_url: Option<String>,
    files: Option<helix_edge::objects::R2>,
    kv: Option<helix_edge::objects::Kv>,
) -> Result<helix_edge::agent::Agents, DefinitionError> {
    let agents = match kv {
        Some(kv) => {
            let skills = helix_edge::skill::StoredSkills::new(kv, "skills/");
            agents.with(reference_agents::librarian("librarian-kv", skills)?)?
        }
        None => agents,
    };
    let agents = match ledger_url {
        Some(url) => agents.with(ledger(url)?)?,
        None => agents,
    };
    let agents = match files {
        Some(files) => agents.with(illustrator(files)?)?,
        None => agents,
    };
    agents
        .with(typed()?)?
        .with(lister()?)?
        .with(thinker()?)?
        .with(painter()?)?
        .with(observed()?)
}
