//! Remote sub-agents (feature `remote-subagents`): a tool whose calls run an agent of
//! another helix-edge deployment, reached over its public HTTP API with a URL and a
//! token the deployment's vars name ([`RemoteAgent`]).
//!
//! ```
//! use helix_edge_core::tool::{RemoteAgent, Tool};
//! # use schemars::JsonSchema;
//! # #[derive(JsonSchema)] struct Task { task: String }
//! let remote = RemoteAgent::new("assistant")
//!     .url_var("REMOTE_AGENT_URL")
//!     .token_var("REMOTE_AGENT_TOKEN");
//! let tool: Tool = Tool::remote_subagent::<Task>("ask_remote", "Ask the remote assistant", remote)
//!     .timeout(std::time::Duration::from_secs(120))
//!     .into();
//! assert_eq!(tool.remote_of().unwrap().agent(), "assistant");
//! ```

use super::child::{ChildCall, ChildTool, RemoteAgent};
use super::{Tool, schema_of};
use schemars::JsonSchema;
use std::rc::Rc;

impl Tool {
    /// A remote sub-agent tool: each call creates a session of `remote`'s agent on its
    /// deployment, with the call's arguments (typed input `I`, JSON text) as its first
    /// message, and waits for it without holding a connection. The call's result is
    /// the remote session's output, or `{"text": …}` with its last answer when its
    /// agent has no structured output.
    pub fn remote_subagent<I: JsonSchema>(
        name: impl Into<String>,
        description: impl Into<String>,
        remote: RemoteAgent,
    ) -> ChildTool {
        let call = ChildCall::Remote {
            remote: Rc::new(remote),
            timeout: super::DEFAULT_SUBAGENT_TIMEOUT,
        };
        ChildTool(Tool::child(name, description, schema_of::<I>(), call))
    }
}
