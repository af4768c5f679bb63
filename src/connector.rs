//! `connector` (with MCP_SERVER_URL set): an assistant with the tools of that MCP
//! server, named `{MCP_SERVER_NAME}__…` (`remote` unless set), with MCP_SERVER_TOKEN
//! sent as its bearer token. The tools the server marks destructive ask for approval.

use helix_edge::agent::{Agent, Agents};
use helix_edge::error::DefinitionError;
use worker::Env;

/// A secret (or a var, locally), if set and not empty.
fn secret(env: &Env, name: &str) -> Option<String> {
    let found = env.secret(name).map(|v| v.to_string());
    let found = found.or_else(|_| env.var(name).map(|v| v.to_string()));
    found.ok().filter(|v| !v.is_empty())
}

/// `agents` with `connector`, when MCP_SERVER_URL is set.
pub fn add(agents: Agents, env: &Env) -> Result<Agents, DefinitionError> {
    let Some(url) = secret(env, "MCP_SERVER_URL") else {
        return Ok(agents);
    };
    let name = secret(env, "MCP_SERVER_NAME").unwrap_or_else(|| "remote".into());
    let mut server = helix_edge::mcp::server(name, url);
    if let Some(token) = secret(env, "MCP_SERVER_TOKEN") {
        server = server.bearer(token);
    }
    let agent = Agent::builder("connector")
        .description("An assistant with the tools of the MCP server at MCP_SERVER_URL.")
        .system_prompt("You help the user, using your tools when they help.")
        .mcp_server(server)
        .build()?;
    agents.with(agent)
}
