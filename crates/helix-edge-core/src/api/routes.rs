//! The route table of the HTTP API: every route once, as `(method, path template,
//! operation)`. A request is parsed into a typed [`Route`] here, in pure code; the
//! worker's router, the session's Durable Object and the OpenAPI sync test all read the
//! same table, so a route cannot exist in one place and not in another.

use super::ApiError;
use crate::auth::valid_session_id;

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `GET /healthz`.
    Healthz,
    /// `GET /v1/openapi.json`.
    OpenApi,
    /// `GET /v1/agents`.
    ListAgents,
    /// `POST /v1/sessions`.
    CreateSession,
    /// `GET /v1/sessions`: the session list, from D1.
    ListSessions,
    /// `GET /v1/sessions/{id}`.
    GetSession,
    /// `DELETE /v1/sessions/{id}`: the session, its children and their storage.
    DeleteSession,
    /// `GET /v1/sessions/{id}/messages`.
    ListMessages,
    /// `POST /v1/sessions/{id}/messages`.
    SendMessage,
    /// `GET /v1/sessions/{id}/stream`.
    Stream,
    /// `POST /v1/sessions/{id}/tool-results`.
    SubmitToolResult,
    /// `POST /v1/sessions/{id}/interrupt`.
    Interrupt,
    /// `POST /v1/sessions/{id}/resume`.
    Resume,
    /// `POST /v1/sessions/{id}/abort`.
    Abort,
    /// `GET /v1/sessions/{id}/runs`.
    ListRuns,
    /// `GET /v1/sessions/{id}/runs/{runId}/spans`: the run's OpenTelemetry spans.
    ListSpans,
    /// `GET /v1/sessions/{id}/checkpoints`.
    ListCheckpoints,
    /// `GET /v1/sessions/{id}/checkpoints/{checkpointId}`: the session as it was there.
    GetCheckpoint,
    /// `POST /v1/sessions/{id}/retry`.
    Retry,
    /// `POST /v1/sessions/{id}/fork`.
    Fork,
    /// `POST /v1/sessions/{id}/plans/validate`: a plan checked, nothing run.
    ValidatePlan,
    /// `POST /v1/sessions/{id}/schedules`: a run the session starts on its own, later.
    CreateSchedule,
    /// `GET /v1/sessions/{id}/schedules`.
    ListSchedules,
    /// `DELETE /v1/sessions/{id}/schedules/{scheduleId}`.
    DeleteSchedule,
    /// `GET /v1/schedules`: every session's schedules, soonest fire first, from D1.
    ListAllSchedules,
    /// `GET /v1/inbox`: the calls waiting on a person across sessions, from D1.
    Inbox,
    /// `GET /v1/usage`: the runs' tokens, summed, from D1.
    Usage,
    /// `GET /v1/auth/oidc`: the deployment's OpenID Connect provider, for a page's
    /// sign-in (public).
    OidcProvider,
    /// `POST /v1/auth/oidc/token`: a page's sign-in code exchanged for the ID token
    /// (public).
    OidcToken,
    /// `GET /v1/mcp/callback`: where the user comes back from an MCP server's
    /// authorization (public: its `state` and the flow's cookie are the credential).
    McpCallback,
    /// `GET /v1/sessions/{id}/authorize`: an MCP server's authorization started by
    /// whoever may answer it — a redirect to the server's sign-in, and the flow's cookie.
    McpAuthorize,
    /// `GET /v1/sessions/{id}/notifications`: the notifications the session's waiting
    /// calls sent, and how each delivery stands.
    ListNotifications,
    /// `GET /v1/decisions/{token}`: a decision link's page — the call, and a button that
    /// decides (public: the signed link is the credential; opening it decides nothing).
    DecisionPage,
    /// `POST /v1/decisions/{token}`: the decision a link carries, made.
    Decide,
    /// `POST /v1/chat`: the AI SDK's chat transport (the chat id is the session id).
    Chat,
    /// `GET /v1/chat/{id}/stream`: the chat transport's resume.
    ChatStream,
}

/// One route: a method, a path template (`{id}` is a session id, another `{…}` the id of
/// an item of the session) and its operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSpec {
    /// `GET`, `POST` or `DELETE`.
    pub method: &'static str,
    /// The path, with `{id}` where the session id goes.
    pub path: &'static str,
    /// What it does.
    pub operation: Operation,
}

const fn r(method: &'static str, path: &'static str, operation: Operation) -> RouteSpec {
    RouteSpec {
        method,
        path,
        operation,
    }
}

/// Every route of the API, in the order the OpenAPI document lists them.
pub const ROUTES: &[RouteSpec] = &[
    r("GET", "/healthz", Operation::Healthz),
    r("GET", "/v1/openapi.json", Operation::OpenApi),
    r("GET", "/v1/agents", Operation::ListAgents),
    r("GET", "/v1/sessions", Operation::ListSessions),
    r("POST", "/v1/sessions", Operation::CreateSession),
    r("GET", "/v1/sessions/{id}", Operation::GetSession),
    r("DELETE", "/v1/sessions/{id}", Operation::DeleteSession),
    r("GET", "/v1/sessions/{id}/messages", Operation::ListMessages),
    r("POST", "/v1/sessions/{id}/messages", Operation::SendMessage),
    r("GET", "/v1/sessions/{id}/stream", Operation::Stream),
    r(
        "POST",
        "/v1/sessions/{id}/tool-results",
        Operation::SubmitToolResult,
    ),
    r("POST", "/v1/sessions/{id}/interrupt", Operation::Interrupt),
    r("POST", "/v1/sessions/{id}/resume", Operation::Resume),
    r("POST", "/v1/sessions/{id}/abort", Operation::Abort),
    r("GET", "/v1/sessions/{id}/runs", Operation::ListRuns),
    r(
        "GET",
        "/v1/sessions/{id}/runs/{runId}/spans",
        Operation::ListSpans,
    ),
    r(
        "GET",
        "/v1/sessions/{id}/checkpoints",
        Operation::ListCheckpoints,
    ),
    r(
        "GET",
        "/v1/sessions/{id}/checkpoints/{checkpointId}",
        Operation::GetCheckpoint,
    ),
    r("POST", "/v1/sessions/{id}/retry", Operation::Retry),
    r("POST", "/v1/sessions/{id}/fork", Operation::Fork),
    r(
        "POST",
        "/v1/sessions/{id}/plans/validate",
        Operation::ValidatePlan,
    ),
    r(
        "GET",
        "/v1/sessions/{id}/schedules",
        Operation::ListSchedules,
    ),
    r(
        "POST",
        "/v1/sessions/{id}/schedules",
        Operation::CreateSchedule,
    ),
    r(
        "DELETE",
        "/v1/sessions/{id}/schedules/{scheduleId}",
        Operation::DeleteSchedule,
    ),
    r("GET", "/v1/schedules", Operation::ListAllSchedules),
    r("GET", "/v1/inbox", Operation::Inbox),
    r("GET", "/v1/usage", Operation::Usage),
    r("GET", "/v1/auth/oidc", Operation::OidcProvider),
    r("POST", "/v1/auth/oidc/token", Operation::OidcToken),
    r("GET", "/v1/mcp/callback", Operation::McpCallback),
    r(
        "GET",
        "/v1/sessions/{id}/authorize",
        Operation::McpAuthorize,
    ),
    r(
        "GET",
        "/v1/sessions/{id}/notifications",
        Operation::ListNotifications,
    ),
    r("GET", "/v1/decisions/{token}", Operation::DecisionPage),
    r("POST", "/v1/decisions/{token}", Operation::Decide),
    r("POST", "/v1/chat", Operation::Chat),
    r("GET", "/v1/chat/{id}/stream", Operation::ChatStream),
];

/// A request matched to its route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route<'a> {
    /// What it asks for.
    pub operation: Operation,
    /// The session it is about (validated), for `/v1/sessions/{id}…` routes.
    pub session: Option<&'a str>,
    /// The item of the session it is about (as given), for routes with one.
    pub item: Option<&'a str>,
}

impl Operation {
    /// Whether it needs credentials (everything but `GET /healthz`, SPEC §2, a page's
    /// sign-in, which comes before the caller has any, and an MCP server's callback,
    /// whose state is its credential).
    pub fn authenticated(self) -> bool {
        !matches!(
            self,
            Operation::Healthz
                | Operation::OidcProvider
                | Operation::OidcToken
                | Operation::McpCallback
                | Operation::DecisionPage
                | Operation::Decide
        )
    }
}

/// What `template` captures from `path` (the session id, the item id), or `None` when
/// they do not match.
type Captured<'a> = (Option<&'a str>, Option<&'a str>);

fn capture<'a>(template: &str, path: &'a str) -> Option<Captured<'a>> {
    let (mut id, mut item) = (None, None);
    let mut parts = path.split('/');
    for expected in template.split('/') {
        let part = parts.next()?;
        match expected {
            "{id}" if !part.is_empty() => id = Some(part),
            _ if expected.starts_with('{') && !part.is_empty() => item = Some(part),
            _ if expected == part => {}
            _ => return None,
        }
    }
    parts.next().is_none().then_some((id, item))
}

/// Matches `method` and `path` (without the query) against [`ROUTES`]: 404 when no
/// path matches, 405 (with the methods it allows) when the path matches another method,
/// 400 when the session id is not of the form `^[A-Za-z0-9._-]{1,128}$`.
pub fn route<'a>(method: &str, path: &'a str) -> Result<Route<'a>, ApiError> {
    let mut allowed: Vec<&'static str> = Vec::new();
    for spec in ROUTES {
        let Some((session, item)) = capture(spec.path, path) else {
            continue;
        };
        if let Some(id) = session
            && !valid_session_id(id)
        {
            return Err(ApiError::client(
                400,
                "invalid_session_id",
                "Session ids match ^[A-Za-z0-9._-]{1,128}$.",
            ));
        }
        if spec.method == method {
            let operation = spec.operation;
            return Ok(Route {
                operation,
                session,
                item,
            });
        }
        allowed.push(spec.method);
    }
    if allowed.is_empty() {
        return Err(ApiError::route_not_found(path));
    }
    Err(ApiError::method_not_allowed(
        method,
        path,
        allowed.join(", "),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_of_the_table_parses_to_its_operation() {
        for spec in ROUTES {
            let path = spec.path.replace("{id}", "s-1");
            let path = path.replace("{checkpointId}", "item_1");
            let path = path.replace("{scheduleId}", "item_1");
            let path = path.replace("{runId}", "item_1");
            let path = path.replace("{token}", "item_1");
            let route = route(spec.method, &path).unwrap();
            assert_eq!(route.operation, spec.operation, "{} {path}", spec.method);
            let expected = spec.path.contains("{id}").then_some("s-1");
            assert_eq!(route.session, expected);
            let item = path.contains("item_1").then_some("item_1");
            assert_eq!(route.item, item);
        }
    }

    #[test]
    fn a_path_of_another_method_is_a_405_that_lists_the_allowed_methods() {
        let err = route("DELETE", "/v1/sessions/s-1/messages").unwrap_err();
        assert_eq!((err.status, err.code), (405, "method_not_allowed"));
        assert_eq!(err.allow.as_deref(), Some("GET, POST"));
        let err = route("POST", "/healthz").unwrap_err();
        assert_eq!(err.allow.as_deref(), Some("GET"));
    }

    #[test]
    fn unknown_paths_are_404_and_bad_session_ids_400() {
        for path in [
            "/",
            "/v1",
            "/v1/sessions/",
            "/v1/sessions/s/nope",
            "/v1/sessions/s/stream/x",
            "/__internal/wake",
        ] {
            assert_eq!(route("GET", path).unwrap_err().status, 404, "{path}");
        }
        let long = format!("/v1/sessions/{}", "a".repeat(129));
        for path in [
            "/v1/sessions/bad%20id",
            "/v1/sessions/a:b/runs",
            long.as_str(),
        ] {
            let err = route("GET", path).unwrap_err();
            assert_eq!(
                (err.status, err.code),
                (400, "invalid_session_id"),
                "{path}"
            );
        }
    }

    #[test]
    fn only_healthz_a_pages_sign_in_the_mcp_callback_and_decision_links_are_open() {
        let open: Vec<_> = ROUTES
            .iter()
            .filter(|s| !s.operation.authenticated())
            .map(|s| s.path)
            .collect();
        assert_eq!(
            open,
            [
                "/healthz",
                "/v1/auth/oidc",
                "/v1/auth/oidc/token",
                "/v1/mcp/callback",
                "/v1/decisions/{token}",
                "/v1/decisions/{token}"
            ]
        );
    }
}
