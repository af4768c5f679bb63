//! The agents a deployment serves, with the children of their sub-agent tools.

use super::Agent;
use crate::error::DefinitionError;
use std::rc::Rc;

/// The agents a deployment serves, by name.
#[derive(Clone, Default)]
pub struct Agents {
    /// Each agent, and whether it was added as the child of a sub-agent tool (such an
    /// entry gives way to an agent registered under its name).
    agents: Vec<(Rc<Agent>, bool)>,
    /// The agents it offers but cannot run until something is configured.
    unconfigured: Vec<Unconfigured>,
}

/// An agent a deployment offers but cannot run until something is configured (a var,
/// a secret or a binding): listed by `GET /v1/agents` with what it needs, and every
/// request that would run it answers 503 `agent_not_configured` naming that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unconfigured {
    /// Its name.
    pub name: String,
    /// What it does, once configured.
    pub description: String,
    /// What to set: `REMOTE_AGENT_URL`, or `the FILES bucket binding`.
    pub needs: String,
}

impl Agents {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an agent, and the agents its sub-agent tools run that are not registered yet
    /// (child sessions look them up by name). An agent registered under a name already
    /// taken is refused, unless the name was only taken by a sub-agent's child.
    pub fn with(mut self, agent: Agent) -> Result<Self, DefinitionError> {
        if self.needs(&agent.name).is_some() {
            return Err(DefinitionError::DuplicateAgent(agent.name));
        }
        match self.agents.iter().position(|(a, _)| a.name == agent.name) {
            Some(at) if self.agents[at].1 => {
                self.agents.remove(at);
            }
            Some(_) => return Err(DefinitionError::DuplicateAgent(agent.name)),
            None => {}
        }
        let children = agent.child_agents();
        self.agents.push((Rc::new(agent), false));
        for child in children {
            self.add_child(child);
        }
        Ok(self)
    }

    /// Registers a sub-agent tool's child (and its own children) unless the name is taken.
    fn add_child(&mut self, child: Rc<Agent>) {
        if self.get(&child.name).is_some() {
            return;
        }
        let grandchildren = child.child_agents();
        self.agents.push((child, true));
        for grandchild in grandchildren {
            self.add_child(grandchild);
        }
    }

    /// Offers agent `name` (`description`) as one that needs `needs` configured before it
    /// runs: what a worker registers instead of an agent whose var, secret or binding is
    /// missing, so that asking for it says what to set rather than that it does not
    /// exist.
    pub fn unconfigured(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        needs: impl Into<String>,
    ) -> Result<Self, DefinitionError> {
        let name = name.into();
        if self.get(&name).is_some() || self.needs(&name).is_some() {
            return Err(DefinitionError::DuplicateAgent(name));
        }
        let (description, needs) = (description.into(), needs.into());
        self.unconfigured.push(Unconfigured {
            name,
            description,
            needs,
        });
        Ok(self)
    }

    /// What agent `name` needs configured, if it is offered but cannot run yet.
    pub fn needs(&self, name: &str) -> Option<&str> {
        let found = self.unconfigured.iter().find(|u| u.name == name);
        found.map(|u| u.needs.as_str())
    }

    /// The agents offered but not configured, in the order added.
    pub fn unconfigured_agents(&self) -> &[Unconfigured] {
        &self.unconfigured
    }

    /// The agent called `name`.
    pub fn get(&self, name: &str) -> Option<Rc<Agent>> {
        self.agents
            .iter()
            .find(|(a, _)| a.name == name)
            .map(|(a, _)| a.clone())
    }

    /// All agents, in the order added.
    pub fn iter(&self) -> impl Iterator<Item = &Agent> {
        self.agents.iter().map(|(a, _)| a.as_ref())
    }

    /// The name of the first sub-agent tool of these agents, if they have one (a
    /// worker built without sub-agents refuses such agents).
    pub fn subagent_tool(&self) -> Option<&str> {
        self.iter()
            .flat_map(Agent::tools)
            .find(|t| t.subagent_of().is_some() || t.companion_op().is_some())
            .map(|t| t.name())
    }
}
