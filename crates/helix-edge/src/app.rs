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
/// // or the record over four databases:
/// helix_edge::worker!(App::new(agents).database_shards(["DB", "DB_1", "DB_2", "DB_3"]));
/// ```
#[derive(Clone)]
pub struct App {
    agents: Rc<AgentsFn>,
    sessions: &'static str,
    databases: Vec<&'static str>,
}

impl App {
    /// An app hosting the agents `agents` builds, with the default bindings
    /// (`SESSIONS`, `DB`).
    pub fn new(agents: impl Fn(&Env) -> Result<Agents, DefinitionError> + 'static) -> Self {
        Self {
            agents: Rc::new(agents),
            sessions: "SESSIONS",
            databases: vec!["DB"],
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
        self.databases = vec![name];
        self
    }

    /// The D1 databases the queryable record is spread over (shards), by binding: a root
    /// session's rows go to one of them, chosen by its id when it is created and kept
    /// (its children's go with it), and the lists, the inbox and usage read them all.
    /// The first holds every session created while there was one database, so it stays
    /// first; adding names later never moves a session. The var `DATABASE_SHARDS`
    /// (binding names, comma-separated) overrides this list without a rebuild. An empty
    /// list keeps the one database.
    pub fn database_shards(mut self, bindings: impl IntoIterator<Item = &'static str>) -> Self {
        let bindings: Vec<&'static str> = bindings.into_iter().collect();
        if !bindings.is_empty() {
            self.databases = bindings;
        }
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

    /// The (first) D1 binding's name.
    pub fn database(&self) -> &'static str {
        self.databases.first().copied().unwrap_or("DB")
    }

    /// The D1 bindings of the record's shards, as the app names them.
    pub fn databases(&self) -> &[&'static str] {
        &self.databases
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
