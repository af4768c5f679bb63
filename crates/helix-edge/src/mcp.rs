//! Tools of remote MCP servers on the platform (feature `mcp`): the core's
//! [`McpServer`], reached through the Workers `fetch` with [`server`]. On every target,
//! so that a worker crate's agents build natively for its tests; natively there is no
//! `fetch`, and a server made with [`server`] answers every request with an error
//! (give [`McpServer::new`] a transport of your own to test against a server).
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
    McpServer::new(name, url, std::rc::Rc::new(Fetch))
}

#[cfg(target_arch = "wasm32")]
use crate::llm::FetchTransport as Fetch;
#[cfg(not(target_arch = "wasm32"))]
use native::NoFetch as Fetch;

/// Natively: no `fetch`.
#[cfg(not(target_arch = "wasm32"))]
mod native {
    use crate::provider::{HttpRequest, HttpResponse, Transport, TransportError};
    use futures::future::LocalBoxFuture;
    use std::time::Duration;

    /// A transport that has no network: every request fails, saying why.
    pub struct NoFetch;

    impl Transport for NoFetch {
        fn send<'a>(
            &'a self,
            _request: &'a HttpRequest,
            _timeout: Duration,
        ) -> LocalBoxFuture<'a, Result<HttpResponse, TransportError>> {
            let why = "MCP servers are reached through the Workers runtime's fetch; natively, \
                       give McpServer::new a transport of your own";
            Box::pin(async move { Err(TransportError::Network(why.into())) })
        }

        fn sleep(&self, _wait: Duration) -> LocalBoxFuture<'_, ()> {
            Box::pin(async {})
        }

        fn now_ms(&self) -> u64 {
            0
        }

        fn random(&self) -> f64 {
            0.5
        }

        fn warn(&self, _message: &str) {}
    }
}
