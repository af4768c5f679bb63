//! The reference agents of SPEC §6, used by the demo, the tests and the benchmarks.
//! `assistant` starts from `{"notes": []}` with five tools covering every kind of call:
//! plain server tools, an always-approved one, a conditionally approved one and a
//! client-executed one with a deadline. `coordinator` delegates to `researcher` through
//! the sub-agent tool `research`; each call runs a child session. `orders` ([`orders`],
//! feature `orders`) wires its tools through its state: results stored with
//! `_outputPath`, arguments that reference them, a whole fetch → check → store plan in
//! one step. `team` ([`team`],
//! feature `persistent-children`) leads researcher helpers that are persistent children.
//! `dispatcher` ([`dispatcher`], feature `remote-subagents`) hands tasks to the
//! `assistant` of another deployment. `librarian` ([`librarian`], feature `skill-store`)
//! writes with skills kept in a store, read as each run starts. `secretary`
//! ([`secretary`], feature `schedules`) schedules runs of its own conversation.
//! `treasurer` ([`treasurer`]) pays invoices that a `finance` approver other than the
//! requester approves. [`settings`]: the vars and bindings these agents read.

pub mod settings;

#[cfg(feature = "remote-subagents")]
mod dispatcher;
#[cfg(feature = "skill-store")]
mod librarian;
#[cfg(feature = "orders")]
mod orders;
#[cfg(feature = "schedules")]
mod secretary;
mod showcase;
#[cfg(feature = "persistent-children")]
mod team;
mod treasurer;

#[cfg(feature = "orders")]
pub use orders::{
    APPROVAL_OVER, Check, CheckOrder, FetchOrder, Order, OrdersState, StoreOrder, Stored, orders,
};

#[cfg(feature = "remote-subagents")]
pub use dispatcher::{REMOTE_TASK_TIMEOUT, RemoteTask, dispatcher};
#[cfg(feature = "skill-store")]
pub use librarian::{Note, Publish, librarian};
#[cfg(feature = "schedules")]
pub use secretary::secretary;
#[cfg(feature = "attachment-store")]
pub use showcase::illustrator;
#[cfg(feature = "subagents")]
pub use showcase::observed;
pub use showcase::{Measured, PIXEL_PNG, Task, Tasks, lister, painter, thinker, typed};
#[cfg(feature = "persistent-children")]
pub use team::team;
pub use treasurer::{PAYMENT_APPROVER_ROLE, PayInvoice, treasurer};

use helix_edge::agent::{Agent, Agents};
use helix_edge::error::{DefinitionError, ToolError};
use helix_edge::host::rfc3339;
use helix_edge::tool::{ApprovalTool, ServerTool, Tool, ToolContext};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;

/// The default deadline of `ask_user`.
pub const ASK_USER_DEADLINE: Duration = Duration::from_secs(300);

/// Input of `add_note`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddNote {
    /// The note's text.
    pub text: String,
}

/// Input of `get_time`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetTime {}

/// Input of `delete_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteFile {
    /// The file to delete.
    pub path: String,
}

/// Input of `send_email`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendEmail {
    /// Recipients.
    pub to: Vec<String>,
    /// Subject line.
    pub subject: String,
    /// Body text.
    pub body: String,
}

/// Input of `ask_user`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskUser {
    /// The question to put to the user.
    pub question: String,
}

async fn add_note(input: AddNote, ctx: ToolContext) -> Result<Value, ToolError> {
    ctx.append("/notes", json!({ "text": input.text }))?;
    let count = ctx
        .read(|s| s["notes"].as_array().map_or(0, Vec::len))
        .unwrap_or_default();
    Ok(json!({ "count": count }))
}

/// `add_note`: appends `{"text"}` to `/notes`; answers `{"count": n}`.
pub fn add_note_tool() -> ServerTool {
    Tool::new(
        "add_note",
        "Add a note to the session's list of notes.",
        add_note,
    )
}

/// `delete_file`: approval always; answers `{"deleted": path}`.
pub fn delete_file_tool() -> ApprovalTool {
    Tool::new(
        "delete_file",
        "Delete a file. A human must approve every call.",
        |input: DeleteFile, _| async move { Ok::<_, ToolError>(json!({ "deleted": input.path })) },
    )
    .approval_always()
}

/// Input of `research`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Research {
    /// What to research.
    pub topic: String,
}

/// The `researcher` agent of SPEC §6: output `{"summary": string}` through `__finish__`;
/// its one tool, `delete_file`, needs approval (a human-in-the-loop boundary inside a child).
pub fn researcher() -> Result<Agent, DefinitionError> {
    Agent::builder("researcher")
        .description("Researches a topic and reports a summary.")
        .system_prompt(
            "You are a researcher. The user message is a JSON object with a topic. Research it, then call __finish__ \
             with {\"summary\": \"...\"}. Use delete_file only when the topic asks for a file to be deleted.",
        )
        .output_schema(json!({
            "type": "object",
            "properties": { "summary": { "type": "string" } },
            "required": ["summary"],
            "additionalProperties": false
        }))
        .tool(delete_file_tool())
        .build()
}

#[cfg(feature = "subagents")]
/// The `coordinator` agent of SPEC §6: notes, and `research`, a sub-agent tool running
/// `researcher` whose result is the child's output.
pub fn coordinator() -> Result<Agent, DefinitionError> {
    Agent::builder("coordinator")
        .description("Coordinates research: delegates topics to researcher sub-agents and keeps notes.")
        .system_prompt(
            "You coordinate research. Call research once per topic (calls in one step run in parallel), keep notes \
             with add_note, and answer with what the researchers found.",
        )
        .initial_state(json!({ "notes": [] }))
        .tool(add_note_tool())
        .tool(
            Tool::subagent::<Research>("research", researcher()?)
                .with_description("Research a topic with a researcher sub-agent; returns {\"summary\"}."),
        )
        .build()
}

/// The `assistant` agent with `ask_user`'s deadline set to `ask_deadline`.
pub fn assistant_with_deadline(ask_deadline: Duration) -> Result<Agent, DefinitionError> {
    assistant_with_deadlines(ask_deadline, None)
}

/// The `assistant` agent with `ask_user`'s deadline set to `ask_deadline`, and, if
/// given, `delete_file`'s approvals denied when nobody decides within `approval_deadline`.
pub fn assistant_with_deadlines(
    ask_deadline: Duration,
    approval_deadline: Option<Duration>,
) -> Result<Agent, DefinitionError> {
    let delete_file = match approval_deadline {
        Some(deadline) => delete_file_tool().approval_deadline(deadline),
        None => delete_file_tool(),
    };
    Agent::builder("assistant")
        .description("A helpful assistant that keeps notes, tells the time, deletes files, sends email and asks questions.")
        .system_prompt(
            "You are a helpful assistant. Use the tools when they help: add_note to remember things, get_time for \
             the current time, delete_file to delete files (a human approves), send_email to send email (a human \
             approves when there are more than 3 recipients), and ask_user when you need the user's input.",
        )
        .initial_state(json!({ "notes": [] }))
        .tool(add_note_tool())
        .tool(Tool::new("get_time", "Get the current time (RFC 3339, UTC).", |_: GetTime, ctx: ToolContext| async move {
            Ok::<_, ToolError>(json!({ "now": rfc3339(ctx.now_ms()) }))
        }))
        .tool(delete_file)
        .tool(
            Tool::new(
                "send_email",
                "Send an email. A human approves emails to more than 3 recipients.",
                |input: SendEmail, _| async move { Ok::<_, ToolError>(json!({ "sent": input.to.len() })) },
            )
            .approval_when(|input: &SendEmail, _| input.to.len() > 3),
        )
        .tool(
            Tool::client::<AskUser>("ask_user", "Ask the user a question; the client answers.")
                .deadline(ask_deadline),
        )
        .build()
}

/// The `assistant` agent of SPEC §6.
pub fn assistant() -> Result<Agent, DefinitionError> {
    assistant_with_deadline(ASK_USER_DEADLINE)
}

/// The reference agents of SPEC §6 (`coordinator` and `researcher` with feature
/// `subagents`); the demonstration agents are registered on their own.
pub fn reference_agents(ask_deadline: Duration) -> Result<Agents, DefinitionError> {
    reference_agents_with(ask_deadline, None)
}

/// [`reference_agents`], the `assistant`'s `delete_file` approvals denied when nobody
/// decides within `approval_deadline` (if given).
pub fn reference_agents_with(
    ask_deadline: Duration,
    approval_deadline: Option<Duration>,
) -> Result<Agents, DefinitionError> {
    let assistant = assistant_with_deadlines(ask_deadline, approval_deadline)?;
    let agents = Agents::new().with(assistant)?;
    #[cfg(feature = "subagents")]
    let agents = agents.with(coordinator()?)?;
    Ok(agents)
}
