//! The helix-edge reference worker: a worker built on helix-edge exactly as a user's is
//! (its agents, and `helix_edge::worker!`), serving the reference agents of SPEC §6 on
//! the built-in `demo` model when no LLM key is configured. The demo, the end-to-end
//! tests and the benchmarks run against it.
//!
//! # Map of the crate
//! - The reference agents (`assistant`, `coordinator` with its `researcher` sub-agent)
//!   and their typed tools are the `reference-agents` crate (`crates/reference-agents`),
//!   tested natively: this crate is a cdylib only, as a user's worker is.
//! - `connector` (feature `dev-agents`, wasm only): with MCP_SERVER_URL set, an agent
//!   with the tools of that MCP server.
//! - `test_agents` (feature `test-routes`, wasm only): the `ledger` agent the
//!   end-to-end suite's fault injection counts executions with, `typed` and `lister`
//!   for typed state, tool output schemas and typed output, and the agents of
//!   thinking, tool attachments and attachments kept in R2.
//! - The worker itself (wasm only): the agents this deployment hosts, given its
//!   environment, and the entry and `SessionObject` class from `helix_edge::worker!`.

#[cfg(all(feature = "dev-agents", target_arch = "wasm32"))]
mod connector;
#[cfg(all(feature = "test-routes", target_arch = "wasm32"))]
mod test_agents;

#[cfg(target_arch = "wasm32")]
mod hosted {
    use helix_edge::agent::Agents;
    use helix_edge::error::DefinitionError;
    use reference_agents::{ASK_USER_DEADLINE, reference_agents};
    use worker::Env;

    /// A var, if set and not empty.
    fn var(env: &Env, name: &str) -> Option<String> {
        env.var(name)
            .ok()
            .map(|v| v.to_string())
            .filter(|v| !v.is_empty())
    }

    /// Adds agents of a build's feature.
    type Extra = fn(Agents, &Env) -> Result<Agents, DefinitionError>;

    /// The agents of this build beyond the reference ones: the demo agents with
    /// `dev-agents`, the test agents in the test build.
    const EXTRAS: &[Extra] = &[
        #[cfg(feature = "dev-agents")]
        crate::connector::add,
        #[cfg(feature = "dev-agents")]
        |agents, env| {
            let agents = agents.with(reference_agents::orders()?)?;
            let agents = agents
                .with(reference_agents::team()?)?
                .with(reference_agents::dispatcher()?)?
                .with(reference_agents::secretary()?)?
                .with(reference_agents::treasurer()?)?;
            // Its skills are the `skills/` folder of the FILES bucket, when it is bound.
            let Ok(files) = env.bucket("FILES") else {
                return Ok(agents);
            };
            let skills =
                helix_edge::skill::StoredSkills::new(helix_edge::objects::R2(files), "skills/");
            agents.with(reference_agents::librarian("librarian", skills)?)
        },
        #[cfg(feature = "test-routes")]
        |agents, env| {
            let files = env.bucket("FILES").ok().map(helix_edge::objects::R2);
            let kv = env.kv("KV").ok().map(helix_edge::objects::Kv);
            crate::test_agents::add(agents, var(env, "LEDGER_URL"), files, kv)
        },
    ];

    /// The reference agents (`ASK_USER_DEADLINE_MS` sets `ask_user`'s deadline) and the
    /// build's extras.
    fn agents(env: &Env) -> Result<Agents, DefinitionError> {
        let deadline = var(env, "ASK_USER_DEADLINE_MS").and_then(|v| v.parse().ok());
        let deadline = deadline.map_or(ASK_USER_DEADLINE, std::time::Duration::from_millis);
        let agents = reference_agents(deadline)?;
        EXTRAS
            .iter()
            .try_fold(agents, |agents, add| add(agents, env))
    }

    helix_edge::worker!(agents);
}
