//! `connector`: an assistant with the tools of the MCP server at MCP_SERVER_URL (without
//! it, offered as not configured: asking for it answers 503 naming MCP_SERVER_URL), named `{MCP_SERVER_NAME}__…` (`remote` unless set), with MCP_SERVER_TOKEN
//! sent as its bearer token — or, with MCP_SERVER_OAUTH=true, connected through the
//! server's OAuth, the user coming back to `{PUBLIC_URL}/v1/mcp/callback` (PUBLIC_URL
//! defaults to `http://127.0.0.1:8787`; MCP_SERVER_CLIENT_ID names a registered client
//! instead of registering one). The tools the server marks destructive ask for approval.

use helix_edge::agent::{Agent, Agents};
use helix_edge::error::DefinitionError;
use worker::Env;

/// A secret (or a var, locally), if set and not empty.
fn secret(env: &Env, name: &str) -> Option<String> {
    let found = env.secret(name).map(|v| v.to_string());
    let found = found.or_else(|_| env.var(name).map(|v| v.to_string()));
    found.ok().filter(|v| !v.is_empty())
}

/// What `connector` does.
const DESCRIPTION: &str = "An assistant with the tools of the MCP server at MCP_SERVER_URL.";

/// `agents` with `connector` (not configured without MCP_SERVER_URL).
pub fn add(agents: Agents, env: &Env) -> Result<Agents, DefinitionError> {
    let Some(url) = secret(env, "MCP_SERVER_URL") else {
        return agents.unconfigured(
            "connector",
            DESCRIPTION,
            "MCP_SERVER_URL (the MCP server's URL)",
        );
    };
    let name = secret(env, "MCP_SERVER_NAME").unwrap_or_else(|| "remote".into());
    let mut server = helix_edge::mcp::server(name, url);
    if let Some(token) = secret(env, "MCP_SERVER_TOKEN") {
        server = server.bearer(token);
    }
    if secret(env, "MCP_SERVER_OAUTH").is_some_and(|v| v == "true") {
        let public = secret(env, "PUBLIC_URL").unwrap_or_else(|| "http://127.0.0.1:8787".into());
        server = server.oauth(format!("{}/v1/mcp/callback", public.trim_end_matches('/')));
        if let Some(client) = secret(env, "MCP_SERVER_CLIENT_ID") {
            server = server.oauth_client(client, secret(env, "MCP_SERVER_CLIENT_SECRET"));
        }
        if let Some(issuer) = secret(env, "MCP_SERVER_OAUTH_ISSUER") {
            server = server.oauth_issuer(issuer);
        }
    }
    let agent = Agent::builder("connector")
        .description(DESCRIPTION)
        .system_prompt("You help the user, using your tools when they help.")
        .mcp_server(server)
        .build()?;
    agents.with(agent)
}
