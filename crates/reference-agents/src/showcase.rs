//! Agents that show one capability each, in the reference worker (and the end-to-end
//! suite's contracts, capabilities, thinking and traces tests):
//! - `typed`: typed state (`Tasks`) updated through the type, and a client tool whose
//!   answers must match a declared output schema (`measure`);
//! - `lister`: a typed output that is not an object (a list of strings);
//! - `thinker`: notes with extended thinking on (a thinking budget);
//! - `painter`: a tool result with a picture the model then sees (`render_chart`);
//! - `illustrator` (feature `attachment-store`): pictures too large for the transcript,
//!   kept in a bucket by reference;
//! - `observed` (feature `subagents`): an approval, a client tool and a sub-agent in one
//!   run, audited by its hooks.

use crate::add_note_tool;
use helix_edge::agent::Agent;
#[cfg(feature = "subagents")]
use helix_edge::agent::{HookContext, HookFuture, Hooks, Suspension};
use helix_edge::attachment::Attachment;
use helix_edge::error::{DefinitionError, ToolError};
#[cfg(feature = "subagents")]
use helix_edge::message::Message;
use helix_edge::model::{CacheTtl, ModelSettings};
use helix_edge::tool::{Tool, ToolContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
#[cfg(feature = "subagents")]
use serde_json::Value;
use serde_json::json;

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
        .description("Typed state (`Tasks`) updated through its type, and a client tool whose answers must match an output schema.")
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
        .description("Answers with a typed output that is not an object: a list of strings.")
        .system_prompt("You list things.")
        .output::<Vec<String>>()
        .build()
}

/// The `thinker` agent.
pub fn thinker() -> Result<Agent, DefinitionError> {
    Agent::builder("thinker")
        .description("Takes notes with extended thinking on (a thinking budget).")
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
        .description("Renders charts the model then sees: a tool result with a picture attached.")
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

#[cfg(feature = "attachment-store")]
/// Input of `render_poster`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Poster {
    /// How many base64 characters the picture has (a multiple of 4).
    size: usize,
}

#[cfg(feature = "attachment-store")]
/// The `illustrator` agent: renders posters too large for the transcript, kept in
/// `files` (the FILES bucket) by reference.
pub fn illustrator(files: helix_edge::objects::R2) -> Result<Agent, DefinitionError> {
    Agent::builder("illustrator")
        .description("Renders posters too large for the transcript, kept in a bucket by reference.")
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

#[cfg(feature = "subagents")]
/// Writes each call's outcome to `/audit` after it, and why the run waits to `/waiting`.
struct Audit;

#[cfg(feature = "subagents")]
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

#[cfg(feature = "subagents")]
/// `observed`: an approval, a client tool and a sub-agent, audited by its hooks.
pub fn observed() -> Result<Agent, DefinitionError> {
    Agent::builder("observed")
        .description("Meets every human-in-the-loop boundary in one run (an approval, a client tool, a sub-agent); its hooks keep an audit in its state.")
        .system_prompt("Delete what is asked, ask the user, research, then answer.")
        .initial_state(json!({ "audit": [], "waiting": null }))
        .tool(crate::delete_file_tool())
        .tool(Tool::client::<crate::AskUser>(
            "ask_user",
            "Ask the user a question; the client answers.",
        ))
        .tool(Tool::subagent::<crate::Research>(
            "research",
            crate::researcher()?,
        ))
        .hooks(Audit)
        .build()
}
