//! Calls another session answers: a sub-agent's child session here, a session of an
//! agent of another deployment, or an operation on a persistent child (a companion
//! tool). The tool only says which ([`ChildCall`]): the runner's kinds of outside work
//! carry them out, and the agent registry resolves a sub-agent's agent by its name.

use super::companion::CompanionOp;
use super::{Execution, Tool};
use serde_json::Value;
use std::rc::Rc;
use std::time::Duration;

/// How a call that another session answers runs.
#[derive(Debug, Clone)]
pub enum ChildCall {
    /// A child session of the agent named `agent`, in this deployment.
    SubAgent {
        /// The child's agent (registered with the parent).
        agent: String,
        /// How long the child may take before it is aborted.
        timeout: Duration,
    },
    /// A session of an agent of another deployment.
    Remote {
        /// The remote agent.
        remote: Rc<RemoteAgent>,
        /// How long the remote session may take before it is aborted.
        timeout: Duration,
    },
    /// An operation on the agent's persistent children (a companion tool).
    Companion(CompanionOp),
}

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

/// A tool whose calls another session answers ([`Tool::remote_subagent`]; a sub-agent
/// tool wraps one).
#[derive(Clone, Debug)]
pub struct ChildTool(pub(crate) Tool);

impl ChildTool {
    /// Abort the child and fail the call after `timeout` (default 10 minutes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        if let Execution::Child(
            ChildCall::SubAgent { timeout: t, .. } | ChildCall::Remote { timeout: t, .. },
        ) = &mut self.0.execution
        {
            *t = timeout;
        }
        self
    }
}

impl Tool {
    /// A tool whose calls `call` says how to run, with `input_schema`.
    pub(crate) fn child(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        call: ChildCall,
    ) -> Self {
        Self::with_execution(name, description, input_schema, Execution::Child(call))
    }

    /// How another session answers its calls, for such a tool.
    pub fn child_call(&self) -> Option<&ChildCall> {
        match &self.execution {
            Execution::Child(call) => Some(call),
            _ => None,
        }
    }
}
