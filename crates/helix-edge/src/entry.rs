//! The worker entry: routes each request through the API's route table
//! ([`crate::api::route`]), authenticates it (SPEC §2, fail-closed), enforces the body
//! limit, and forwards every session route to the session's Durable Object
//! (`idFromName(sessionId)`). It never answers 5xx for bad client input.

use crate::api::{AgentsView, ApiError, CreateSessionBody, HEALTHZ_BODY, Operation, parse_body};
use crate::app::App;
use crate::auth::authorize;
#[cfg(feature = "chat")]
use crate::chat::ChatRequest;
use crate::http::{
    ObjectRequest, RawRequest, call_object, error, header, internal, json, json_response, read_body,
};
use crate::object::CREATE_PATH;
use crate::setup::Setup;
use crate::worker_host::random_hex;
use worker::{Context, Env, Method, Response, Result};

/// The worker entry as a function, for workers that add routes of their own in front of
/// helix-edge's: serves the API and answers 404 for anything else. Never fails for
/// client input: every error becomes a JSON body.
pub async fn fetch(req: RawRequest, env: Env, ctx: Context, app: App) -> Result<Response> {
    // Panics reset the whole isolate; at least make them visible in the logs.
    console_error_panic_hook::set_once();
    match dispatch(req, &env, &ctx, &app).await {
        Ok(resp) => Ok(resp),
        Err(err) => error(&err),
    }
}

async fn dispatch(
    req: RawRequest,
    env: &Env,
    ctx: &Context,
    app: &App,
) -> std::result::Result<Response, ApiError> {
    let url = req.url();
    let path_and_query = crate::api::path_and_query(&url);
    let path = path_and_query.split('?').next().unwrap_or(path_and_query);
    let method = req.method();
    #[cfg(feature = "test-routes")]
    if let Some(answer) = crate::test_routes::route(&req, &method, path, env, app).await {
        return answer;
    }
    #[cfg(feature = "console")]
    if let Some(page) = crate::console::serve(&method, path) {
        return page.map_err(|e| internal("console", e));
    }
    let setup = Setup::get(env, app)?;
    let config = &setup.auth;
    let now_secs = worker::Date::now().as_millis() / 1000;
    let credential = credential(&req);
    let route = match crate::api::route(&method, path) {
        Ok(route) => route,
        // Fail closed: a caller without credentials learns nothing about other paths.
        Err(e) if e.status != 400 && path != "/healthz" => {
            authorize(config, credential.as_deref(), None, now_secs)?;
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    if route.operation == Operation::Healthz {
        return json(200, HEALTHZ_BODY).map_err(|e| internal("healthz", e));
    }
    // A chat names its session in the body: a session token for it is accepted.
    #[cfg(feature = "chat")]
    let chat = match route.operation {
        Operation::Chat => {
            let body = read_body(&req).await?;
            let parsed = ChatRequest::parse(&body);
            Some((body, parsed))
        }
        _ => None,
    };
    #[cfg(feature = "chat")]
    let session = match &chat {
        Some((_, Ok(request))) => Some(request.id.as_str()),
        _ => route.session,
    };
    #[cfg(not(feature = "chat"))]
    let session = route.session;
    authorize(config, credential.as_deref(), session, now_secs)?;
    // The database's schema is checked in the background, once per isolate.
    if let Ok(db) = env.d1(app.database()) {
        ctx.wait_until(crate::migrations::refresh(db));
    }
    if let Some(outdated) = crate::migrations::known_outdated() {
        return Err(outdated);
    }
    match (route.operation, route.session) {
        #[cfg(feature = "openapi")]
        (Operation::OpenApi, _) => json(200, setup.openapi()).map_err(|e| internal("openapi", e)),
        #[cfg(not(feature = "openapi"))]
        (Operation::OpenApi, _) => Err(ApiError::client(
            404,
            "not_found",
            "This worker does not serve its OpenAPI document (helix-edge's `openapi` feature).",
        )),
        (Operation::ListAgents, _) => json_response(200, &AgentsView::from(&setup.agents)),
        #[cfg(feature = "chat")]
        (Operation::Chat, _) => {
            let Some((body, parsed)) = chat else {
                return Err(internal("chat", "the body was not read"));
            };
            let id = parsed?.id;
            let request = ObjectRequest::post(path, body);
            call_object(env, app.sessions(), &id, request).await
        }
        #[cfg(not(feature = "chat"))]
        (Operation::Chat | Operation::ChatStream, _) => Err(ApiError::client(
            404,
            "not_found",
            "This worker does not serve the AI SDK's chat routes (helix-edge's `chat` feature).",
        )),
        (Operation::CreateSession, _) => create(env, app, &req).await,
        (Operation::ListSessions, _) => crate::list::list(env, app, &req).await,
        (_, Some(id)) => {
            let body = match route.operation {
                Operation::SendMessage
                | Operation::SubmitToolResult
                | Operation::Interrupt
                | Operation::Resume
                | Operation::Abort
                | Operation::Retry
                | Operation::Fork => Some(read_body(&req).await?),
                _ => None,
            };
            let request = ObjectRequest {
                method: Method::from(method),
                path: path_and_query,
                last_event_id: header(&req, "last-event-id"),
                body,
            };
            call_object(env, app.sessions(), id, request).await
        }
        // The table gives every other operation a session id.
        (_, None) => Err(ApiError::route_not_found(path)),
    }
}

/// `Authorization: Bearer <t>`, or `?token=<t>` (EventSource cannot set headers).
fn credential(req: &RawRequest) -> Option<String> {
    let header = header(req, "authorization");
    if let Some(token) = header.as_deref().and_then(|h| h.strip_prefix("Bearer ")) {
        return Some(token.trim().to_string());
    }
    crate::api::query_pairs(&req.url())
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
}

/// `POST /v1/sessions`: the body is parsed and validated here, once; the session's
/// object gets the runner's request and answers the 201 itself.
async fn create(env: &Env, app: &App, req: &RawRequest) -> std::result::Result<Response, ApiError> {
    let body = read_body(req).await?;
    let parsed: CreateSessionBody = parse_body(&body)?;
    let request = parsed.into_request(|| format!("s_{}", random_hex(16)))?;
    let id = request.session_id.clone();
    let body = serde_json::to_vec(&request).map_err(|e| internal("create", e))?;
    call_object(
        env,
        app.sessions(),
        &id,
        ObjectRequest::post(CREATE_PATH, body),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_bindgen::JsCast;
    use wasm_bindgen_test::wasm_bindgen_test;
    use worker::{Request, RequestInit};

    fn env_with(vars: &[(&str, &str)]) -> Env {
        let obj = js_sys::Object::new();
        for (k, v) in vars {
            js_sys::Reflect::set(&obj, &(*k).into(), &(*v).into()).unwrap();
        }
        obj.unchecked_into()
    }

    /// A context whose `waitUntil` drops what it is given (no D1 in these tests).
    fn test_context() -> Context {
        let obj = js_sys::Object::new();
        let ignore = js_sys::Function::new_no_args("");
        js_sys::Reflect::set(&obj, &"waitUntil".into(), &ignore).unwrap();
        Context::new(obj.unchecked_into())
    }

    /// An app with one agent of every kind of tool.
    fn test_app() -> App {
        use crate::agent::Agent;
        use crate::tool::Tool;
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        struct Path {
            #[allow(dead_code)]
            path: String,
        }
        App::new(|_: &Env| {
            let run =
                |_: Path, _| async { Ok::<_, crate::error::ToolError>(serde_json::json!({})) };
            let agent = Agent::builder("assistant")
                .tool(Tool::new("a", "A.", run))
                .tool(Tool::new("b", "B.", run))
                .tool(
                    Tool::new(
                        "delete_file",
                        "Delete a file. A human must approve every call.",
                        run,
                    )
                    .approval_always(),
                )
                .tool(Tool::new("d", "D.", run).approval_when(|_: &Path, _| true))
                .tool(Tool::client::<Path>("e", "E."))
                .build()?;
            crate::agent::Agents::new().with(agent)
        })
    }

    /// Every call reads its own environment: the isolate's cached setup is dropped first.
    async fn call(env: Env, method: Method, path: &str) -> (u16, serde_json::Value) {
        Setup::forget();
        let mut init = RequestInit::new();
        init.with_method(method);
        let req = Request::new_with_init(&format!("http://localhost{path}"), &init).unwrap();
        let mut resp = fetch(req.try_into().unwrap(), env, test_context(), test_app())
            .await
            .unwrap();
        let ct = resp.headers().get("content-type").unwrap();
        assert_eq!(ct.as_deref(), Some("application/json"));
        (resp.status_code(), resp.json().await.unwrap())
    }

    /// The bundle's SHA-256 is sha2's compact implementation (`.cargo/config.toml`):
    /// tokens and child ids must be the ones every other build computes (values from
    /// Python's `hmac` and `hashlib`).
    #[wasm_bindgen_test]
    fn sha256_in_the_bundle_gives_the_standard_digests() {
        assert_eq!(
            crate::auth::session_token("k3y", "s.1", 1_000).unwrap(),
            "s.1:1000:2925710cbce8ddb9eb1bed9dcf32aa5fdf33b4f8ddeca69f69878814f54b966b"
        );
        assert_eq!(
            crate::runner::child_session_id("parent", "call_1"),
            "parent.sub-050e22e42ba5ddc7be47"
        );
    }

    #[wasm_bindgen_test]
    async fn healthz_answers_ok_true_without_credentials() {
        let (status, body) = call(env_with(&[]), Method::Get, "/healthz").await;
        assert_eq!(status, 200);
        assert_eq!(body, serde_json::json!({"ok": true}));
    }

    #[wasm_bindgen_test]
    async fn unknown_paths_are_json_404_after_auth() {
        let (status, body) = call(
            env_with(&[("ALLOW_UNAUTHENTICATED", "true")]),
            Method::Get,
            "/nope",
        )
        .await;
        assert_eq!(status, 404);
        assert_eq!(body["error"]["code"], "not_found");
    }

    #[wasm_bindgen_test]
    async fn wrong_method_on_healthz_is_a_json_405() {
        let (status, body) = call(env_with(&[]), Method::Post, "/healthz").await;
        assert_eq!(status, 405);
        assert_eq!(body["error"]["code"], "method_not_allowed");
    }

    #[wasm_bindgen_test]
    async fn auth_fails_closed() {
        let (status, body) = call(env_with(&[]), Method::Get, "/v1/agents").await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (503, Some("auth_not_configured"))
        );
        let (status, _) = call(env_with(&[("API_TOKEN", "t")]), Method::Get, "/v1/agents").await;
        assert_eq!(status, 401);
        let (status, _) = call(
            env_with(&[("API_TOKEN", "t")]),
            Method::Get,
            "/v1/sessions/bad%20id",
        )
        .await;
        assert_eq!(status, 400);
    }

    #[wasm_bindgen_test]
    async fn agents_are_listed_with_their_tools() {
        let (status, body) = call(
            env_with(&[("ALLOW_UNAUTHENTICATED", "true")]),
            Method::Get,
            "/v1/agents",
        )
        .await;
        assert_eq!(status, 200);
        let tools = &body["agents"][0]["tools"];
        assert_eq!(body["agents"][0]["name"], "assistant");
        assert_eq!(
            tools[2],
            serde_json::json!({"name": "delete_file", "description": "Delete a file. A human must approve every call.", "approval": "always", "executor": "server"})
        );
        assert_eq!(tools[3]["approval"], "conditional");
        assert_eq!(tools[4]["executor"], "client");
    }
}
