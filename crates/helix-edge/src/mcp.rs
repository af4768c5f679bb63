//! Tools of remote MCP servers on the platform (feature `mcp`): the core's
//! [`McpServer`], reached through the Workers `fetch` with [`server`].
//!
//! ```ignore
//! let github = helix_edge::mcp::server("github", "https://api.githubcopilot.com/mcp/")
//!     .bearer(env.secret("GITHUB_TOKEN")?.to_string())
//!     .allow(["search_issues", "create_issue"]);
//! let agent = Agent::builder("triage").mcp_server(github).build()?;
//! ```

pub use helix_edge_core::mcp::*;

/// MCP server `name` at `url`, reached through `fetch`: headers, tool filters and
/// approvals are set on what it returns.
pub fn server(name: impl Into<String>, url: impl Into<String>) -> McpServer {
    McpServer::new(name, url, std::rc::Rc::new(crate::llm::FetchTransport))
}
