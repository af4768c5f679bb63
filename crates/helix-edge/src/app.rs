//! [`App`]: what a worker tells helix-edge about itself — the agents it hosts (built
//! from the environment, so tools can capture secrets and bindings) and the names of
//! its Durable Object and D1 bindings. The worker entry and the `SessionObject` both
//! take it; [`worker!`](crate::worker) wires it up.

use crate::agent::Agents;
use crate::error::DefinitionError;
use std::rc::Rc;
use worker::Env;

/// Builds a worker's agents from its environment.
pub type AgentsFn = dyn Fn(&Env) -> Result<Agents, DefinitionError>;

/// A helix-edge worker's configuration.
///
/// ```ignore
/// fn agents(env: &Env) -> Result<Agents, DefinitionError> { /* … */ }
/// helix_edge::worker!(App::new(agents).database_binding("SESSIONS_DB"));
/// ```
#[derive(Clone)]
pub struct App {
    agents: Rc<AgentsFn>,
    sessions: &'static str,
    database: &'static str,
}

impl App {
    /// An app hosting the agents `agents` builds, with the default bindings
    /// (`SESSIONS`, `DB`).
    pub fn new(agents: impl Fn(&Env) -> Result<Agents, DefinitionError> + 'static) -> Self {
        Self {
            agents: Rc::new(agents),
            sessions: "SESSIONS",
            database: "DB",
        }
    }

    /// The Durable Object namespace binding of the `SessionObject` class (default
    /// `SESSIONS`).
    pub fn sessions_binding(mut self, name: &'static str) -> Self {
        self.sessions = name;
        self
    }

    /// The D1 database binding (default `DB`).
    pub fn database_binding(mut self, name: &'static str) -> Self {
        self.database = name;
        self
    }

    /// The agents, built for `env`.
    pub fn agents(&self, env: &Env) -> Result<Agents, DefinitionError> {
        (self.agents)(env)
    }

    /// The Durable Object binding's name.
    pub fn sessions(&self) -> &'static str {
        self.sessions
    }

    /// The D1 binding's name.
    pub fn database(&self) -> &'static str {
        self.database
    }
}

/// What [`worker!`](crate::worker) and [`session_object!`](crate::session_object)
/// accept: an [`App`], or just the function that builds the agents.
pub trait IntoApp {
    /// The app.
    fn into_app(self) -> App;
}

impl IntoApp for App {
    fn into_app(self) -> App {
        self
    }
}

impl<F> IntoApp for F
where
    F: Fn(&Env) -> Result<Agents, DefinitionError> + 'static,
{
    fn into_app(self) -> App {
        App::new(self)
    }
}
