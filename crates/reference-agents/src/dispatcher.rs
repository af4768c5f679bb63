//! `dispatcher`: hands tasks to the `assistant` of another helix-edge deployment, and
//! payments to its `treasurer` (feature `remote-subagents`). Its tools, `ask_remote` and
//! `ask_treasurer`, run each task as a session there, reached at the URL in
//! `REMOTE_AGENT_URL` with the token in `REMOTE_AGENT_TOKEN`; the remote's approvals are
//! answered here, at the dispatcher's session, by the rule each call names (a payment:
//! a `finance` holder other than the session's owner).

use helix_edge::agent::Agent;
use helix_edge::error::DefinitionError;
use helix_edge::tool::{RemoteAgent, Tool};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// Input of `ask_remote`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteTask {
    /// The task, in words (the remote assistant reads it as its user's message).
    pub task: String,
}

/// How long a remote task may take.
pub const REMOTE_TASK_TIMEOUT: Duration = Duration::from_secs(300);

/// The `dispatcher` agent.
pub fn dispatcher() -> Result<Agent, DefinitionError> {
    let remote = RemoteAgent::new("assistant");
    Agent::builder("dispatcher")
        .description("Hands tasks to the assistant, and payments to the treasurer, of another helix-edge deployment.")
        .system_prompt(
            "You dispatch tasks to a remote assistant. Call ask_remote once per task (calls in one step run in \
             parallel), ask_treasurer for payments, and report what they answered.",
        )
        .tool(
            Tool::remote_subagent::<RemoteTask>(
                "ask_remote",
                "Give a task to the remote assistant (notes, time, files, email); returns its answer.",
                remote,
            )
            .timeout(REMOTE_TASK_TIMEOUT),
        )
        .tool(
            Tool::remote_subagent::<RemoteTask>(
                "ask_treasurer",
                "Give a payment to the remote treasurer (a finance approver other than the requester approves it).",
                RemoteAgent::new("treasurer"),
            )
            .timeout(REMOTE_TASK_TIMEOUT),
        )
        .build()
}
