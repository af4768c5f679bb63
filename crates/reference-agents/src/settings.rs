//! The reference worker's own settings, beside helix-edge's
//! ([`helix_edge::settings::SETTINGS`]): what its agents read. The book's configuration
//! reference lists both (the worker's `tests/configuration.rs` keeps it so).

use helix_edge::settings::{Kind, Setting};

/// The vars, secrets and bindings the reference worker's agents read.
pub const SETTINGS: &[Setting] = &[
    Setting::new(
        "ASK_USER_DEADLINE_MS",
        Kind::Var,
        "300000",
        "",
        "The `assistant`'s `ask_user` deadline.",
    ),
    Setting::new(
        "APPROVAL_DEADLINE_MS",
        Kind::Var,
        "",
        "",
        "When set: the `assistant`'s `delete_file` approvals nobody decides within it are denied ([Notify and decide](notify.md#deadlines)).",
    ),
    Setting::new(
        "FILES",
        Kind::Binding,
        "",
        "",
        "The R2 bucket `librarian` reads skills from and `illustrator` keeps posters in (without it they answer 503 `agent_not_configured`).",
    ),
    Setting::new(
        "KV",
        Kind::Binding,
        "",
        "",
        "The KV namespace `librarian-kv` reads skills from.",
    ),
    Setting::new(
        "MCP_SERVER_URL",
        Kind::Var,
        "",
        "",
        "The MCP server whose tools `connector` has ([MCP](mcp.md#the-reference-workers-connector)).",
    ),
    Setting::new(
        "MCP_SERVER_NAME",
        Kind::Var,
        "remote",
        "",
        "The prefix of its tools' names.",
    ),
    Setting::new(
        "MCP_SERVER_TOKEN",
        Kind::Secret,
        "",
        "",
        "A bearer token sent to it.",
    ),
    Setting::new(
        "MCP_SERVER_OAUTH",
        Kind::Var,
        "false",
        "",
        "`true`: connect through the server's OAuth.",
    ),
    Setting::new(
        "MCP_SERVER_CLIENT_ID",
        Kind::Var,
        "",
        "",
        "A client registered with the server's authorization server beforehand.",
    ),
    Setting::new(
        "MCP_SERVER_CLIENT_SECRET",
        Kind::Secret,
        "",
        "",
        "That client's secret: sent only to the authorization server it is for.",
    ),
    Setting::new(
        "MCP_SERVER_OAUTH_ISSUER",
        Kind::Var,
        "the MCP server's origin",
        "",
        "The authorization server that secret is for.",
    ),
];
