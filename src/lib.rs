//! The helix-edge reference worker: a worker built on helix-edge exactly as a user's is
//! (its agents, and `helix_edge::worker!`), with every capability helix-edge offers on
//! (each a cargo feature of this crate, all in `default`), serving the reference agents
//! of SPEC §6 on the built-in `demo` model when no LLM key is configured. The demo, the
//! end-to-end tests and the benchmarks run against what `wrangler deploy` uploads.
//!
//! # Map of the crate
//! - The agents and their typed tools are the `reference-agents` crate
//!   (`crates/reference-agents`), tested natively: this crate is a cdylib only, as a
//!   user's worker is. SPEC §6's `assistant`, `coordinator` and `researcher`; one
//!   agent per capability beside them (`orders`, `team`, `dispatcher`, `librarian`,
//!   `secretary`, `treasurer`, `typed`, `lister`, `thinker`, `painter`, `illustrator`,
//!   `observed`).
//! - `connector` (feature `mcp`, wasm only): the agent with the tools of the MCP server
//!   at MCP_SERVER_URL.
//! - The worker itself (wasm only): the agents this deployment hosts, given its
//!   environment, and the entry and `SessionObject` class from `helix_edge::worker!`.
//! - The test flavour (feature `test-flavour`, `tests/flavour/`): the `ledger` agent of
//!   the end-to-end suite's fault injection. Never deployed.

#[cfg(all(feature = "mcp", target_arch = "wasm32"))]
mod connector;
#[cfg(all(feature = "test-flavour", target_arch = "wasm32"))]
#[path = "../tests/flavour/agents.rs"]
mod flavour;

#[cfg(target_arch = "wasm32")]
mod hosted {
    use helix_edge::agent::Agents;
    use helix_edge::error::DefinitionError;
    use reference_agents::{ASK_USER_DEADLINE, reference_agents_with};
    use worker::Env;

    /// A var, if set and not empty.
    fn var(env: &Env, name: &str) -> Option<String> {
        env.var(name)
            .ok()
            .map(|v| v.to_string())
            .filter(|v| !v.is_empty())
    }

    /// `agents` with `agent`, or — when `missing` names what it needs and this
    /// deployment lacks — with `agent` offered as not configured: asking for it answers
    /// 503 naming what to set.
    #[allow(dead_code, reason = "used by the agents of some features")]
    fn needing(
        agents: Agents,
        agent: helix_edge::agent::Agent,
        missing: Option<&str>,
    ) -> Result<Agents, DefinitionError> {
        match missing {
            None => agents.with(agent),
            Some(needs) => agents.unconfigured(agent.name(), agent.description(), needs),
        }
    }

    /// Whether var or secret `name` is set (not empty).
    #[allow(dead_code, reason = "used by the agents of some features")]
    fn is_set(env: &Env, name: &str) -> bool {
        let secret = env.secret(name).map(|s| s.to_string());
        secret
            .or_else(|_| env.var(name).map(|v| v.to_string()))
            .is_ok_and(|v| !v.trim().is_empty())
    }

    /// Adds the agents of a capability.
    type Add = fn(Agents, &Env) -> Result<Agents, DefinitionError>;

    /// The agents beyond SPEC §6's, one line per capability they show.
    const CAPABILITY_AGENTS: &[Add] = &[
        |agents, _| {
            use reference_agents::{lister, painter, thinker, treasurer, typed};
            agents
                .with(typed()?)?
                .with(lister()?)?
                .with(thinker()?)?
                .with(painter()?)?
                .with(treasurer()?)
        },
        #[cfg(feature = "subagents")]
        |agents, _| agents.with(reference_agents::observed()?),
        #[cfg(feature = "plans")]
        |agents, _| agents.with(reference_agents::orders()?),
        #[cfg(feature = "persistent-children")]
        |agents, _| agents.with(reference_agents::team()?),
        #[cfg(feature = "remote-subagents")]
        |agents, env| {
            let missing = (!is_set(env, "REMOTE_AGENT_URL"))
                .then_some("REMOTE_AGENT_URL (the other deployment's base URL) and REMOTE_AGENT_TOKEN (its API token)");
            needing(agents, reference_agents::dispatcher()?, missing)
        },
        #[cfg(feature = "schedules")]
        |agents, _| agents.with(reference_agents::secretary()?),
        #[cfg(feature = "mcp")]
        crate::connector::add,
        #[cfg(feature = "skill-store")]
        |agents, env| {
            use helix_edge::objects::{Kv, R2};
            use helix_edge::skill::StoredSkills;
            use reference_agents::librarian;
            // Skills under `skills/` of the FILES bucket, and of the KV namespace.
            let agents = match env.bucket("FILES") {
                Ok(files) => agents.with(librarian(
                    "librarian",
                    StoredSkills::new(R2(files), "skills/"),
                )?)?,
                Err(_) => agents,
            };
            match env.kv("KV") {
                Ok(kv) => agents.with(librarian(
                    "librarian-kv",
                    StoredSkills::new(Kv(kv), "skills/"),
                )?),
                Err(_) => Ok(agents),
            }
        },
        #[cfg(feature = "attachment-store")]
        |agents, env| match env.bucket("FILES") {
            Ok(files) => agents.with(reference_agents::illustrator(helix_edge::objects::R2(
                files,
            ))?),
            Err(_) => Ok(agents),
        },
        #[cfg(feature = "test-flavour")]
        |agents, env| crate::flavour::add(agents, var(env, "LEDGER_URL")),
    ];

    /// The reference agents (`ASK_USER_DEADLINE_MS` sets `ask_user`'s deadline,
    /// `APPROVAL_DEADLINE_MS` one for `delete_file`'s approvals) and the capabilities'
    /// agents.
    fn agents(env: &Env) -> Result<Agents, DefinitionError> {
        let millis = |name| var(env, name).and_then(|v| v.parse().ok());
        let millis = |name| millis(name).map(std::time::Duration::from_millis);
        let deadline = millis("ASK_USER_DEADLINE_MS").unwrap_or(ASK_USER_DEADLINE);
        let agents = reference_agents_with(deadline, millis("APPROVAL_DEADLINE_MS"))?;
        CAPABILITY_AGENTS
            .iter()
            .try_fold(agents, |agents, add| add(agents, env))
    }

    helix_edge::worker!(agents);
}
