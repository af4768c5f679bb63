//! Sub-agent tools: each call runs another agent as a child session of its own, and the
//! child's output is the call's result. The tool names the child's agent; the agent it
//! is given is registered with the parent ([`crate::agent::Agents`] resolves the name).

use super::Agent;
use crate::tool::{ChildCall, ChildTool, Tool, schema_of};
use schemars::JsonSchema;
use std::rc::Rc;
use std::time::Duration;

/// A tool that runs another agent as a child session; the child's output is the result.
#[derive(Clone, Debug)]
pub struct SubAgentTool {
    pub(crate) tool: ChildTool,
    agent: Rc<Agent>,
}

impl Tool {
    /// A sub-agent tool: each call runs `agent` as a child session of its own, with the
    /// call's arguments (typed input `I`, JSON text) as the child's first message; the
    /// child's output is the call's result. `agent` must have an output schema (checked
    /// when the parent agent is built). The description defaults to the agent's.
    pub fn subagent<I: JsonSchema>(name: impl Into<String>, agent: Agent) -> SubAgentTool {
        let call = ChildCall::SubAgent {
            agent: agent.name.clone(),
            timeout: crate::tool::DEFAULT_SUBAGENT_TIMEOUT,
        };
        let description = agent.description.clone();
        let tool = Tool::child(name, description, schema_of::<I>(), call);
        SubAgentTool {
            tool: ChildTool(tool),
            agent: Rc::new(agent),
        }
    }
}

impl SubAgentTool {
    /// Abort the child and fail the call after `timeout` (default 10 minutes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.tool = self.tool.timeout(timeout);
        self
    }

    /// Replaces the description the model sees.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.tool = self.tool.with_description(description);
        self
    }
}

/// Storing the child's output in the state (feature `plans`): the tool builders' options.
#[cfg(feature = "plans")]
impl SubAgentTool {
    /// Stores every result in the state at `path`; see [`ChildTool::output_to`].
    pub fn output_to(mut self, path: impl Into<String>) -> Self {
        self.tool = self.tool.output_to(path);
        self
    }

    /// Lets the model choose where to store a result; see [`ChildTool::output_paths`].
    pub fn output_paths<P: Into<String>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        self.tool = self.tool.output_paths(paths);
        self
    }

    /// Passes state-reference-looking arguments as they are; see
    /// [`ChildTool::no_state_refs`].
    pub fn no_state_refs(mut self) -> Self {
        self.tool = self.tool.no_state_refs();
        self
    }
}

/// What [`AgentBuilder::tool`](super::AgentBuilder::tool) takes: any tool builder, or a
/// [`SubAgentTool`], whose agent is registered with the parent.
pub trait AgentTool {
    /// The tool, and the agent its calls run, for a sub-agent tool.
    fn into_parts(self) -> (Tool, Option<Rc<Agent>>);
}

impl<T: Into<Tool>> AgentTool for T {
    fn into_parts(self) -> (Tool, Option<Rc<Agent>>) {
        (self.into(), None)
    }
}

impl AgentTool for SubAgentTool {
    fn into_parts(self) -> (Tool, Option<Rc<Agent>>) {
        (self.tool.into(), Some(self.agent))
    }
}
