//! Persistent children: long-lived helper agents a coordinator talks to over many turns
//! (the Helix design's persistent sub-agents). An agent declares the kinds of child it
//! may start ([`PersistentChild`]); the runtime gives it the companion tools
//! ([`crate::tool::companion`]) to start named children, message them, read their status
//! and end them. Each child is a session of its own, `{parent}-agent-{name}`, that keeps
//! its state and transcript between turns.

use super::Agent;
pub use crate::store::ChildMode;
use std::rc::Rc;

/// A kind of persistent child an agent may start: an agent, how the parent waits on it,
/// and a description the model chooses it by.
#[derive(Debug, Clone)]
pub struct PersistentChild {
    pub(crate) agent: Rc<Agent>,
    pub(crate) mode: ChildMode,
    pub(crate) description: String,
}

impl PersistentChild {
    /// A kind of child running `agent`; the description defaults to the agent's.
    pub fn new(agent: Agent, mode: ChildMode) -> Self {
        let description = agent.description.clone();
        Self {
            agent: Rc::new(agent),
            mode,
            description,
        }
    }

    /// The description the model sees in `companion__spawnAgent`.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Its agent.
    pub fn agent(&self) -> &Rc<Agent> {
        &self.agent
    }

    /// How the parent waits on it.
    pub fn mode(&self) -> ChildMode {
        self.mode
    }
}

/// The session id of the persistent child `name` of `parent_id`.
pub fn persistent_child_id(parent_id: &str, name: &str) -> String {
    format!("{parent_id}-agent-{name}")
}
