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
