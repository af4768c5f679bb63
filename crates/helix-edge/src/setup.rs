//! What a worker reads from its environment, once per isolate: the agents (built by the
//! app's function), the auth configuration, the model providers, and the tunables. The
//! environment of an isolate does not change while it lives, and building agents (their
//! tools' JSON Schemas) or reading vars costs CPU on every request that repeats it.

use crate::agent::Agents;
use crate::api::ApiError;
use crate::app::App;
use crate::auth::AuthConfig;
use crate::error::DefinitionError;
use crate::http::internal;
use crate::llm::FetchTransport;
use crate::provider::ConfiguredModels;
use crate::sqlite::DEFAULT_BACKLOG_COMMITS;
use crate::worker_host::config_value;
use std::cell::RefCell;
use std::rc::Rc;
use worker::Env;

/// Heartbeat interval of SSE streams (SPEC: at least every 15 s); `SSE_PING_MS` overrides.
const PING_EVERY_MS: u64 = 15_000;

/// The worker's configuration, as this isolate read it.
pub struct Setup {
    /// The agents the app hosts.
    pub agents: Agents,
    /// How requests are authenticated.
    pub auth: AuthConfig,
    /// The model providers.
    pub models: Rc<ConfiguredModels<FetchTransport>>,
    /// How many commits may wait for D1 before a session refuses more (`D1_BACKLOG_COMMITS`).
    pub backlog_commits: u64,
    /// The SSE heartbeat interval (`SSE_PING_MS`).
    pub ping_ms: u64,
    /// The D1 bindings of the record's shards (`DATABASE_SHARDS`, else the app's), the
    /// first first; never empty.
    pub shards: Vec<String>,
    /// Whether the record keeps the sessions' index only (`D1_REPLICA=index`; `full`,
    /// the default, keeps their transcripts too).
    pub index_only: bool,
}

thread_local! {
    static SETUP: RefCell<Option<Rc<Setup>>> = const { RefCell::new(None) };
}

impl Setup {
    /// This isolate's configuration, read on first use.
    pub fn get(env: &Env, app: &App) -> Result<Rc<Setup>, ApiError> {
        if let Some(setup) = SETUP.with_borrow(|s| s.clone()) {
            return Ok(setup);
        }
        crate::worker_host::start(env);
        let number = |name: &str, default: u64| {
            config_value(env, name)
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let setup = Rc::new(Setup {
            agents: app
                .agents(env)
                .and_then(without_subagents)
                .map_err(|e| internal("agents", e))?,
            auth: AuthConfig::new(
                config_value(env, "API_TOKEN"),
                config_value(env, "ALLOW_UNAUTHENTICATED"),
            ),
            models: Rc::new(crate::llm::models(env)),
            backlog_commits: number("D1_BACKLOG_COMMITS", DEFAULT_BACKLOG_COMMITS),
            ping_ms: number("SSE_PING_MS", PING_EVERY_MS),
            shards: shards(config_value(env, "DATABASE_SHARDS"), app)?,
            index_only: match config_value(env, "D1_REPLICA").as_deref().map(str::trim) {
                None | Some("" | "full") => false,
                Some("index") => true,
                Some(other) => {
                    return Err(internal(
                        "D1_REPLICA",
                        format!("is full or index, not '{other}'"),
                    ));
                }
            },
        });
        SETUP.set(Some(setup.clone()));
        Ok(setup)
    }

    /// Forgets this isolate's configuration: tests that call the entry with different
    /// environments share one isolate.
    pub fn forget() {
        SETUP.set(None);
    }
}

/// The record's shards: the bindings `DATABASE_SHARDS` names (comma-separated), else
/// the app's; a name given twice is a configuration error.
fn shards(named: Option<String>, app: &App) -> Result<Vec<String>, ApiError> {
    let named: Vec<String> = named
        .iter()
        .flat_map(|list| list.split(','))
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(String::from)
        .collect();
    let shards = match named.is_empty() {
        true => app
            .databases()
            .iter()
            .map(|name| name.to_string())
            .collect(),
        false => named,
    };
    if let Some(twice) = (shards.iter().enumerate()).find(|(i, name)| shards[..*i].contains(name)) {
        return Err(internal(
            "DATABASE_SHARDS",
            format!("names {} twice", twice.1),
        ));
    }
    Ok(shards)
}

impl Setup {
    /// The shard a session without a mark is on: the first.
    pub fn first_shard(&self) -> &str {
        self.shards.first().map_or("DB", String::as_str)
    }

    /// The shard of a new root session `root_id`.
    pub fn shard_for(&self, root_id: &str) -> &str {
        let at = crate::store::shards::shard_of(root_id, self.shards.len());
        self.shards
            .get(at)
            .map_or(self.first_shard(), String::as_str)
    }
}

/// Whether this build runs child sessions (helix-edge's feature `subagents`).
const CHILDREN_BUILT: bool = cfg!(feature = "subagents");

/// `agents`, unless one of their tools is a sub-agent tool and this worker was built
/// without the `subagents` feature (its calls could never run).
fn without_subagents(agents: Agents) -> Result<Agents, DefinitionError> {
    if !CHILDREN_BUILT && let Some(tool) = agents.subagent_tool() {
        return Err(DefinitionError::SubAgentsNotBuilt(tool.to_string()));
    }
    Ok(agents)
}
