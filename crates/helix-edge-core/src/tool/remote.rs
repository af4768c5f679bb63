//! Remote sub-agents (feature `remote-subagents`): a tool whose calls run an agent of
//! another helix-edge deployment, reached over its public HTTP API with a URL and a
//! token the deployment's vars name.
//!
//! ```
//! use helix_edge_core::tool::{RemoteAgent, Tool};
//! # use schemars::JsonSchema;
//! # #[derive(JsonSchema)] struct Task { task: String }
//! let remote = RemoteAgent::new("assistant")
//!     .url_var("REMOTE_AGENT_URL")
//!     .token_var("REMOTE_AGENT_TOKEN");
//! let tool: Tool = Tool::remote_subagent::<Task>("ask_remote", "Ask the remote assistant", remote)
//!     .timeout(std::time::Duration::from_secs(120))
//!     .into();
//! assert_eq!(tool.remote_of().unwrap().agent(), "assistant");
//! ```

use super::builders::SubAgentTool;
use super::{Execution, Tool, schema_of};
use schemars::JsonSchema;
use std::rc::Rc;

/// The var naming a remote deployment's base URL, unless a tool names another.
pub const DEFAULT_URL_VAR: &str = "REMOTE_AGENT_URL";
/// The var (a secret, in production) holding the token for it, unless a tool names
/// another.
pub const DEFAULT_TOKEN_VAR: &str = "REMOTE_AGENT_TOKEN";

/// An agent hosted by another helix-edge deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteAgent {
    agent: String,
    url_var: String,
    token_var: String,
}

impl RemoteAgent {
    /// The remote deployment's agent `agent`, reached through the vars
    /// [`DEFAULT_URL_VAR`] and [`DEFAULT_TOKEN_VAR`].
    pub fn new(agent: impl Into<String>) -> Self {
        Self {
            agent: agent.into(),
            url_var: DEFAULT_URL_VAR.into(),
            token_var: DEFAULT_TOKEN_VAR.into(),
        }
    }

    /// The var holding the remote's base URL (e.g. `https://agents.example.com`).
    pub fn url_var(mut self, name: impl Into<String>) -> Self {
        self.url_var = name.into();
        self
    }

    /// The var or secret holding the bearer token the remote accepts (its
    /// `API_TOKEN`); an unset or empty var sends no credentials.
    pub fn token_var(mut self, name: impl Into<String>) -> Self {
        self.token_var = name.into();
        self
    }

    /// The remote agent's name.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The var holding the base URL.
    pub fn url_name(&self) -> &str {
        &self.url_var
    }

    /// The var holding the token.
    pub fn token_name(&self) -> &str {
        &self.token_var
    }
}

impl Tool {
    /// A remote sub-agent tool: each call creates a session of `remote`'s agent on its
    /// deployment, with the call's arguments (typed input `I`, JSON text) as its first
    /// message, and waits for it without holding a connection. The call's result is
    /// the remote session's output, or `{"text": …}` with its last answer when its
    /// agent has no structured output.
    pub fn remote_subagent<I: JsonSchema>(
        name: impl Into<String>,
        description: impl Into<String>,
        remote: RemoteAgent,
    ) -> SubAgentTool {
        let execution = Execution::Remote {
            remote: Rc::new(remote),
            timeout: super::DEFAULT_SUBAGENT_TIMEOUT,
        };
        SubAgentTool(Tool::with_execution(
            name,
            description,
            schema_of::<I>(),
            execution,
        ))
    }

    /// For remote sub-agent tools: the remote agent.
    pub fn remote_of(&self) -> Option<&Rc<RemoteAgent>> {
        match &self.execution {
            Execution::Remote { remote, .. } => Some(remote),
            _ => None,
        }
    }
}
