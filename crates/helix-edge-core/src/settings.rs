//! Every variable, secret and binding a helix-edge deployment reads: one table, from
//! which the book's configuration reference is written (`docs/src/configuration.md`,
//! kept equal to [`reference`] by the reference worker's `tests/configuration.rs`,
//! which also fails when code reads a name no table lists). A worker's own agents may
//! read more; the reference worker lists its own beside these.

/// What a setting is in `wrangler.toml` and Cloudflare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A `[vars]` entry (`.dev.vars` locally).
    Var,
    /// A secret (`wrangler secret put`; `.dev.vars` locally).
    Secret,
    /// A binding (a Durable Object namespace, a D1 database, a bucket, a namespace).
    Binding,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Var => "var",
            Self::Secret => "secret",
            Self::Binding => "binding",
        }
    }
}

/// One setting.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Its name.
    pub name: &'static str,
    /// What it is.
    pub kind: Kind,
    /// Its value when it is not set (empty: none, it is off or required).
    pub default: &'static str,
    /// The cargo feature that reads it (empty: every build).
    pub feature: &'static str,
    /// What it does, in a sentence (Markdown; links relative to the book's pages).
    pub what: &'static str,
}

impl Setting {
    /// A setting: `name`, what it is, its default, the feature that reads it, what it does.
    pub const fn new(
        name: &'static str,
        kind: Kind,
        default: &'static str,
        feature: &'static str,
        what: &'static str,
    ) -> Self {
        Self {
            name,
            kind,
            default,
            feature,
            what,
        }
    }
}

const fn s(
    name: &'static str,
    kind: Kind,
    default: &'static str,
    feature: &'static str,
    what: &'static str,
) -> Setting {
    Setting::new(name, kind, default, feature, what)
}

use Kind::{Binding, Secret, Var};

/// helix-edge's settings, in the order the reference lists them.
pub const SETTINGS: &[Setting] = &[
    s(
        "API_TOKEN",
        Secret,
        "",
        "",
        "Full-access bearer token; also the key that signs session tokens ([Security model](security.md)).",
    ),
    s(
        "ALLOW_UNAUTHENTICATED",
        Var,
        "false",
        "",
        "`true` opens the API without credentials: local demos only.",
    ),
    s(
        "LLM_PROVIDER",
        Var,
        "`demo` without `LLM_API_KEY`, else `openai`",
        "",
        "`openai` (any OpenAI-compatible Chat Completions API), `anthropic`, `workers-ai`, or `demo` (the built-in deterministic model).",
    ),
    s(
        "LLM_BASE_URL",
        Var,
        "the provider's",
        "",
        "The provider's base URL, e.g. `http://127.0.0.1:9000/v1` for a local server.",
    ),
    s(
        "LLM_MODEL",
        Var,
        "the provider's default",
        "",
        "The model name sent to the provider.",
    ),
    s("LLM_API_KEY", Secret, "", "", "The provider's key."),
    s(
        "LLM_CAPABILITIES",
        Var,
        "the provider's profile",
        "",
        "What the provider takes beyond its profile, or not ([capability profiles](model-providers.md)).",
    ),
    s(
        "LLM_SCRIPT",
        Var,
        "",
        "",
        "The `demo` model's script for agents of your own (JSON; [the dev model](dev-model.md)).",
    ),
    s(
        "LLM_TIMEOUT_MS",
        Var,
        "60000",
        "",
        "How long the headers and every silence between stream chunks may take.",
    ),
    s(
        "LLM_DEADLINE_MS",
        Var,
        "300000",
        "",
        "How long a whole model call may take, retries included.",
    ),
    s(
        "LLM_MAX_RETRIES",
        Var,
        "3",
        "",
        "Retries of a model call that failed retryably.",
    ),
    s(
        "CF_ACCOUNT_ID",
        Var,
        "",
        "",
        "For `workers-ai`: the account whose Workers AI is called (or give `LLM_BASE_URL`).",
    ),
    s(
        "LOG_LEVEL",
        Var,
        "info",
        "",
        "The least level of log line printed: `debug`, `info`, `warn`, `error` ([Logs](observability.md#logs)).",
    ),
    s(
        "D1_BACKLOG_COMMITS",
        Var,
        "1000",
        "",
        "Commits of a session that may wait for D1 before it answers 503 `storage_backlog`.",
    ),
    s(
        "D1_REPLICA",
        Var,
        "full",
        "",
        "What sessions send D1: `full` (everything, a copy to rebuild from) or `index` (session rows, runs and children, never transcripts; [Retention](retention.md)).",
    ),
    s(
        "DATABASE_SHARDS",
        Var,
        "the app's binding, `DB`",
        "",
        "The D1 bindings the record is spread over, comma-separated (`DB,DB_1,DB_2`); the first stays first ([Shards](shards.md)).",
    ),
    s(
        "SSE_PING_MS",
        Var,
        "15000",
        "",
        "How often an idle stream sends a `ping` comment.",
    ),
    s(
        "RETAIN_DAYS",
        Var,
        "",
        "retention",
        "Days after their end that sessions are compacted to their index in D1 by the cron trigger ([Retention](retention.md)); unset: kept whole.",
    ),
    s(
        "ERASE_AFTER_DAYS",
        Var,
        "",
        "retention",
        "Days after their end that sessions are erased; unset: never.",
    ),
    s(
        "RETENTION_BATCH",
        Var,
        "100",
        "retention",
        "Sessions per shard and action in one run of the cron trigger.",
    ),
    s(
        "JWT_ISSUER",
        Var,
        "",
        "users",
        "Your identity provider's `iss`: users' tokens are accepted when it is set ([Users](users.md)).",
    ),
    s(
        "JWT_AUDIENCE",
        Var,
        "",
        "users",
        "The `aud` users' tokens must carry.",
    ),
    s(
        "JWT_ALGORITHMS",
        Var,
        "",
        "users",
        "The algorithms accepted, comma-separated: `RS256`, `ES256`, `EdDSA`, `HS256`.",
    ),
    s(
        "JWT_JWKS_URL",
        Var,
        "",
        "users",
        "Where the provider's public keys are (https, or http on loopback), for RS256, ES256 and EdDSA.",
    ),
    s(
        "JWT_SECRET",
        Secret,
        "",
        "users",
        "The shared secret for HS256 (at least 32 bytes).",
    ),
    s(
        "JWT_TENANT_CLAIM",
        Var,
        "",
        "users",
        "The claim naming a user's tenant.",
    ),
    s(
        "JWT_TENANT_SHARING",
        Var,
        "true",
        "users",
        "Whether a tenant's users share its sessions (`false`: each keeps to their own, within the tenant).",
    ),
    s(
        "JWT_ROLES_CLAIM",
        Var,
        "",
        "users",
        "The claim listing a user's roles (approvals by role).",
    ),
    s(
        "JWT_LEEWAY_SECS",
        Var,
        "60",
        "users",
        "The clock leeway for `exp` and `nbf` (at most 300).",
    ),
    s(
        "OIDC_CLIENT_ID",
        Var,
        "",
        "users",
        "The console's sign-in through your OpenID Connect provider: its client id (set `JWT_AUDIENCE` to it).",
    ),
    s(
        "OIDC_ISSUER",
        Var,
        "`JWT_ISSUER`",
        "users",
        "The OpenID Connect provider of the console's sign-in.",
    ),
    s(
        "OIDC_CLIENT_SECRET",
        Secret,
        "",
        "users",
        "A confidential client's secret; the worker exchanges the code.",
    ),
    s(
        "OIDC_SCOPE",
        Var,
        "openid profile",
        "users",
        "The scopes the sign-in asks for.",
    ),
    s(
        "NOTIFY_WEBHOOK_URL",
        Var,
        "",
        "notify",
        "Where waiting calls' notifications are POSTed (several, comma-separated; [Notify and decide](notify.md)).",
    ),
    s(
        "NOTIFY_WEBHOOK_SECRET",
        Secret,
        "",
        "notify",
        "Signs each notification (Standard Webhooks: `whsec_<base64>` or any string).",
    ),
    s(
        "NOTIFY_WEBHOOK_FORMAT",
        Var,
        "json",
        "notify",
        "`json` (helix-edge's body) or `slack` (a message with Approve / Deny buttons).",
    ),
    s(
        "PUBLIC_URL",
        Var,
        "",
        "notify",
        "The worker's public origin: notifications' links are absolute with it (else paths); the reference's `connector` takes its OAuth callback, `{PUBLIC_URL}/v1/mcp/callback`, from it (`http://127.0.0.1:8787` when unset).",
    ),
    s(
        "DECISION_LINK_TTL_SECS",
        Var,
        "604800",
        "notify",
        "How long a decision link holds (a week).",
    ),
    s(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        Var,
        "",
        "otel",
        "Where runs' spans are sent over OTLP/HTTP (`{endpoint}/v1/traces`; [Traces](observability.md#traces)).",
    ),
    s(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        Var,
        "",
        "otel",
        "The traces URL itself, instead of the above.",
    ),
    s(
        "OTEL_EXPORTER_OTLP_HEADERS",
        Secret,
        "",
        "otel",
        "Headers sent with the spans (`key=value,…`): only over https or to loopback.",
    ),
    s(
        "OTEL_SERVICE_NAME",
        Var,
        "helix-edge",
        "otel",
        "The service's name in the spans.",
    ),
    s(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        Var,
        "false",
        "otel",
        "`true` puts prompts, arguments and results in the spans.",
    ),
    s(
        "REMOTE_AGENT_URL",
        Var,
        "",
        "remote-subagents",
        "The deployment remote sub-agents run on (the default of `RemoteAgent`; a tool may name other vars).",
    ),
    s(
        "REMOTE_AGENT_TOKEN",
        Secret,
        "",
        "remote-subagents",
        "Its `API_TOKEN`: only over https or to loopback.",
    ),
    s(
        "SESSIONS",
        Binding,
        "",
        "",
        "The Durable Object namespace of sessions (class `SessionObject`).",
    ),
    s(
        "DB",
        Binding,
        "",
        "",
        "The D1 database of the record (another name with `App::database_binding`).",
    ),
];

/// The Markdown table of `settings`: name, kind, default, feature, what.
pub fn reference(settings: &[Setting]) -> String {
    let mut out =
        String::from("| name | kind | default | feature | what it does |\n|---|---|---|---|---|\n");
    for s in settings {
        let default = match s.default {
            "" => "—".to_string(),
            d if d.contains(['`', ' ']) => d.to_string(),
            d => format!("`{d}`"),
        };
        let feature = match s.feature {
            "" => "—".to_string(),
            f => format!("`{f}`"),
        };
        out.push_str(&format!(
            "| `{}` | {} | {default} | {feature} | {} |\n",
            s.name,
            s.kind.as_str(),
            s.what
        ));
    }
    out
}
