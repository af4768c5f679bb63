//! Tools of remote MCP servers (feature `mcp`): an agent declares servers
//! ([`AgentBuilder::mcp_server`]) and each drive of a session lists their tools over
//! the Streamable HTTP transport (MCP 2025-11-25, 2025-06-18, 2025-03-26) and offers
//! them to the model next to the agent's own — named `{prefix}{tool}` (the prefix is
//! `{server}__` unless set), filtered by an allow and a deny list, each with an
//! approval policy. A tool the server marks destructive (`destructiveHint: true`, not
//! read-only) asks for approval unless the agent says otherwise; an approved call
//! waits durably like any other and runs once.
//!
//! Each session keeps its own connection to each server (initialised on first use,
//! its MCP session kept in the session's vault and initialised again when the server
//! forgets it, the tool list kept in the isolate for `tools_max_age`).
//! Credentials are headers the worker gives from its secrets ([`McpServer::bearer`]),
//! or the session's OAuth tokens ([`McpServer::oauth`], `oauth`); they are sent to the
//! server only. A server that needs the user — to connect, or to answer an
//! elicitation during a call — makes the call wait durably (`waits`), its place kept
//! in the session's vault; the user comes back from a server's authorization to the
//! worker's callback (`callback`).
//!
//! ```
//! use helix_edge_core::agent::Agent;
//! use helix_edge_core::mcp::McpServer;
//! # use helix_edge_core::provider::Transport;
//! # fn demo(transport: std::rc::Rc<dyn Transport>) -> Result<(), helix_edge_core::error::DefinitionError> {
//! let github = McpServer::new("github", "https://mcp.example.com/mcp", transport)
//!     .bearer("token from a secret")
//!     .deny(["delete_repository"])
//!     .approve_always("merge_pull_request");
//! let agent = Agent::builder("maintainer").mcp_server(github).build()?;
//! # Ok(()) }
//! ```

mod callback;
mod connection;
mod oauth;
mod rpc;
mod tools;
mod waits;

pub use callback::{Binding, CALLBACK_PATH, Callback, sign_in_url, start_link};
pub use rpc::{MAX_ANSWER_BYTES, McpError, PROTOCOL_VERSIONS};

use crate::agent::{Agent, AgentBuilder, Extension, RunTools};
use crate::error::DefinitionError;
use crate::journal::Vault;
use crate::provider::Transport;
use crate::tool::{Approval, ApprovalDecision, valid_name};
use connection::Connection;
use futures::future::join_all;
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// How long a request to a server may take unless the server's definition says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a listed tool list is used before it is read again, unless set.
pub const DEFAULT_TOOLS_MAX_AGE: Duration = Duration::from_secs(300);

/// The sessions whose connections an isolate keeps per agent (the oldest goes first).
const KEPT_SESSIONS: usize = 32;

/// An MCP server an agent uses: where it is, how to authenticate, which of its tools
/// the agent takes and which of them ask for approval.
pub struct McpServer {
    name: String,
    url: String,
    headers: Vec<(String, String)>,
    prefix: String,
    allow: Option<Vec<String>>,
    deny: Vec<String>,
    approvals: Vec<(String, Approval)>,
    timeout: Duration,
    tools_max_age: Duration,
    oauth: Option<oauth::OAuthConfig>,
    transport: Rc<dyn Transport>,
}

impl McpServer {
    /// The server `name` (used in tool names, logs and errors) at `url`, reached
    /// through `transport` (on the platform: `helix_edge::mcp::server` gives `fetch`).
    pub fn new(
        name: impl Into<String>,
        url: impl Into<String>,
        transport: Rc<dyn Transport>,
    ) -> Self {
        let name = name.into();
        Self {
            prefix: format!("{name}__"),
            name,
            url: url.into(),
            headers: Vec::new(),
            allow: None,
            deny: Vec::new(),
            approvals: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            tools_max_age: DEFAULT_TOOLS_MAX_AGE,
            oauth: None,
            transport,
        }
    }

    /// Sends header `name: value` with every request (a key from a secret, say).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers
            .push((name.into().to_ascii_lowercase(), value.into()));
        self
    }

    /// Sends `authorization: Bearer {token}` with every request.
    pub fn bearer(self, token: impl AsRef<str>) -> Self {
        let value = format!("Bearer {}", token.as_ref());
        self.header("authorization", value)
    }

    /// What the server's tool names are prefixed with for the model (`{name}__` by
    /// default); no tool of the agent's own may start with it.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Takes only these of the server's tools (by the server's names).
    pub fn allow<T: Into<String>>(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        self.allow = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Leaves out these of the server's tools (by the server's names).
    pub fn deny<T: Into<String>>(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        self.deny.extend(tools.into_iter().map(Into::into));
        self
    }

    /// Sets the approval policy of the server's tool `tool` (by the server's name),
    /// replacing what its annotations would choose.
    pub fn approval(mut self, tool: impl Into<String>, approval: Approval) -> Self {
        let tool = tool.into();
        self.approvals.retain(|(t, _)| *t != tool);
        self.approvals.push((tool, approval));
        self
    }

    /// Every call of `tool` asks for approval.
    pub fn approve_always(self, tool: impl Into<String>) -> Self {
        self.approval(tool, Approval::Always)
    }

    /// Calls of `tool` never ask, whatever the server says of it.
    pub fn approve_never(self, tool: impl Into<String>) -> Self {
        self.approval(tool, Approval::Never)
    }

    /// A call of `tool` asks when `predicate` over its arguments and the state says so
    /// (an error asks: approval fails closed).
    pub fn approve_when<D: ApprovalDecision>(
        self,
        tool: impl Into<String>,
        predicate: impl Fn(&Value, &Value) -> D + 'static,
    ) -> Self {
        let predicate = Rc::new(move |args: &Value, state: &Value| predicate(args, state).decide());
        self.approval(tool, Approval::When(predicate))
    }

    /// How long one request may take, a tool call included (default
    /// [`DEFAULT_TIMEOUT`]); a call past it is cancelled at the server.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long a session uses the tool list it read before reading it again (default
    /// [`DEFAULT_TOOLS_MAX_AGE`]; sooner when the server says it changed).
    pub fn tools_max_age(mut self, age: Duration) -> Self {
        self.tools_max_age = age;
        self
    }

    /// Connects through OAuth 2.1 where the server asks for authorization: the user
    /// is sent to its authorization server (a pending call of kind `authorization`)
    /// and comes back to `redirect_uri` — the worker's `/v1/mcp/callback` — and the
    /// session's tokens are kept in its vault (see [`crate::mcp`]). The deployment
    /// registers itself as a client there unless [`oauth_client`](Self::oauth_client)
    /// names one.
    pub fn oauth(mut self, redirect_uri: impl Into<String>) -> Self {
        self.oauth.get_or_insert_default().redirect_uri = redirect_uri.into();
        self
    }

    /// The client this deployment is at the server's authorization server (instead of
    /// registering one), with its secret for a confidential client.
    pub fn oauth_client(mut self, id: impl Into<String>, secret: Option<String>) -> Self {
        let config = self.oauth.get_or_insert_default();
        config.client_id = Some(id.into());
        config.client_secret = secret;
        self
    }

    /// The authorization server (its issuer URL) that [`oauth_client`](Self::oauth_client)'s
    /// secret is for, when it is not on the server's own origin. A secret is sent to no
    /// other: discovery that names another is refused.
    pub fn oauth_issuer(mut self, issuer: impl Into<String>) -> Self {
        self.oauth.get_or_insert_default().issuer = Some(issuer.into());
        self
    }

    /// The scope asked for (by default the one the server's challenge names, if any).
    pub fn oauth_scope(mut self, scope: impl Into<String>) -> Self {
        self.oauth.get_or_insert_default().scope = Some(scope.into());
        self
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What its tools' names start with.
    pub fn tool_prefix(&self) -> &str {
        &self.prefix
    }
}

impl AgentBuilder {
    /// Offers the tools of MCP server `server` to the agent's model, listed as each
    /// drive of a session starts (see [`crate::mcp`]).
    pub fn mcp_server(self, server: McpServer) -> Self {
        self.extend(|servers: &mut McpServers| servers.0.push(Rc::new(server)))
    }
}

/// The servers an agent declared.
#[derive(Default)]
struct McpServers(Vec<Rc<McpServer>>);

/// The MCP servers an agent declared.
struct AgentServers(Rc<[Rc<McpServer>]>);

/// What `GET /v1/agents` shows of an agent's MCP servers: `mcpServers`, each server's
/// name and tool prefix (never its URL or headers, which may hold credentials).
pub(crate) fn agent_view(agent: &Agent) -> Option<(&'static str, Value)> {
    let AgentServers(servers) = agent.settings.get::<AgentServers>()?;
    let view = servers
        .iter()
        .map(|s| serde_json::json!({ "name": s.name, "toolPrefix": s.prefix }));
    Some(("mcpServers", view.collect()))
}

impl Extension for McpServers {
    fn order(&self) -> u8 {
        4
    }

    fn apply(self: Box<Self>, mut agent: Agent) -> Result<Agent, DefinitionError> {
        let invalid = |reason: String| DefinitionError::InvalidMcpServer {
            agent: agent.name.clone(),
            reason,
        };
        for (i, server) in self.0.iter().enumerate() {
            let name = &server.name;
            if !valid_name(name) || !valid_name(&server.prefix) {
                return Err(invalid(format!(
                    "MCP server '{name}': its name and tool prefix are 1-64 characters of A-Z, a-z, 0-9, _ and -"
                )));
            }
            if self.0[..i]
                .iter()
                .any(|s| s.name == *name || s.prefix == server.prefix)
            {
                return Err(invalid(format!(
                    "MCP server '{name}' or its prefix is declared twice"
                )));
            }
            let longer = |s: &&Rc<McpServer>| s.prefix.len() > server.prefix.len();
            if self
                .0
                .iter()
                .filter(longer)
                .any(|s| s.prefix.starts_with(&server.prefix))
            {
                return Err(invalid(format!(
                    "MCP server '{name}': its prefix '{}' starts another server's",
                    server.prefix
                )));
            }
            let redirect = server.oauth.as_ref().map(|o| o.redirect_uri.as_str());
            if redirect.is_some_and(|r| !crate::provider::secure_url(r)) {
                return Err(invalid(format!(
                    "MCP server '{name}': its OAuth redirect URI is https:// (or http:// on loopback), a URL of this worker"
                )));
            }
            if let Some(tool) = agent
                .tools
                .iter()
                .find(|t| t.name.starts_with(&server.prefix))
            {
                return Err(invalid(format!(
                    "tool '{}' starts with MCP server '{name}''s prefix '{}': its tools could collide",
                    tool.name, server.prefix
                )));
            }
        }
        let servers: Rc<[Rc<McpServer>]> = self.0.into();
        agent.settings.set(AgentServers(servers.clone()));
        let sessions = Rc::new(Sessions::default());
        let run_tools: RunTools = Rc::new(move |vault: Vault| {
            let connections = sessions.connections(vault.session_id(), &servers);
            Box::pin(listed(connections, vault))
        });
        agent.run_tools = Some(run_tools);
        Ok(agent)
    }
}

/// One session's connections, one per server.
type Connections = Rc<[Rc<Connection>]>;

/// The connections of the sessions an isolate drove lately, newest last.
#[derive(Default)]
struct Sessions(RefCell<Vec<(String, Connections)>>);

impl Sessions {
    /// Session `id`'s connections to `servers` (new ones if it has none here).
    fn connections(&self, id: &str, servers: &[Rc<McpServer>]) -> Connections {
        let mut kept = self.0.borrow_mut();
        let found = kept.iter().position(|(session, _)| session == id);
        let connections = match found.map(|at| kept.remove(at)) {
            Some((_, connections)) => connections,
            None => servers
                .iter()
                .map(|s| Rc::new(Connection::new(s.clone())))
                .collect(),
        };
        if kept.len() >= KEPT_SESSIONS {
            kept.remove(0);
        }
        kept.push((id.to_string(), connections.clone()));
        connections
    }
}

/// The tools of every server, listed together with the session's credentials from
/// `vault`; a server that cannot be listed gives none this drive, and a problem to log
/// — but for one that needs the user to connect: its stand-in `{prefix}connect`.
async fn listed(connections: Connections, vault: Vault) -> (Vec<crate::tool::Tool>, Vec<String>) {
    let lists = join_all(connections.iter().map(|c| c.tools(&vault))).await;
    let (mut tools, mut problems) = (Vec::new(), Vec::new());
    for (connection, list) in connections.iter().zip(lists) {
        match list {
            Ok(list) => {
                let (taken, left_out) = tools::tools_of(connection, &list);
                tools.extend(taken);
                problems.extend(left_out);
            }
            Err(McpError::Unauthorized { challenge, .. }) if connection.server.oauth.is_some() => {
                tools.push(tools::connect_tool(connection, challenge));
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    (tools, problems)
}
