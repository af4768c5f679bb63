//! `dispatcher`: hands tasks to the `assistant` of another helix-edge deployment (feature
//! `remote-subagents`). Its one tool, `ask_remote`, runs each task as a session there,
//! reached at the URL in `REMOTE_AGENT_URL` with the token in `REMOTE_AGENT_TOKEN`; the
//! remote's approvals are answered here, at the dispatcher's session.

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
        .description("Hands tasks to the assistant of another helix-edge deployment.")
        .system_prompt(
            "You dispatch tasks to a remote assistant. Call ask_remote once per task (calls in one step run in \
             parallel) and report what it answered.",
        )
        .tool(
            Tool::remote_subagent::<RemoteTask>(
                "ask_remote",
                "Give a task to the remote assistant (notes, time, files, email); returns its answer.",
                remote,
            )
            .timeout(REMOTE_TASK_TIMEOUT),
        )
        .build()
}
