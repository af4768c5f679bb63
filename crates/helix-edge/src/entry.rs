//! The Workers platform shell (wasm only): the fetch entry point and router, the
//! `SessionObject` Durable Object, the D1 store, the stream journal and the model
//! transport. It translates between `worker::` types and the pure core; it holds no
//! agent logic of its own.
//!
//! The router authenticates (SPEC §2, fail-closed), enforces the body limit, validates
//! session ids, and forwards every session route to the session's Durable Object
//! (`idFromName(sessionId)`). It never answers 5xx for bad client input.

use crate::agent::Agents;
use crate::api::{ApiError, CreateSessionBody, HEALTHZ_BODY, parse_body};
use crate::app::App;
use crate::auth::{AuthConfig, SESSION_TOKEN_TTL_SECS, authorize, session_token, valid_session_id};
use crate::host::Level;
use crate::object::SESSION_HEADER;
use crate::worker_host::{config_value, log, random_hex};
use serde_json::json;
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::web_sys;
use worker::{Env, Headers, Method, Response, Result, js_sys};

/// Request bodies above this size answer 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The platform's request as it comes, without `worker::Request`'s conversion: that
/// reads the request's `cf` object, which the runtime builds on first access, and
/// helix-edge has no use for it (~0.1 ms of CPU per request in `wrangler dev`, and a
/// smaller bundle).
type RawRequest = web_sys::Request;

/// The worker entry as a function: routes one request of the API (and answers 404 for
/// anything else). Never fails for client input: every error becomes a JSON body.
pub async fn fetch(req: RawRequest, env: Env, app: App) -> Result<Response> {
    // Panics reset the whole isolate; at least make them visible in the logs.
    console_error_panic_hook::set_once();
    crate::worker_host::init_log_level(&env);
    match dispatch(req, &env, &app).await {
        Ok(resp) => Ok(resp),
        Err(err) => error(&err),
    }
}

async fn dispatch(
    req: RawRequest,
    env: &Env,
    app: &App,
) -> std::result::Result<Response, ApiError> {
    let url = req.url();
    let path_and_query = crate::api::path_and_query(&url);
    let path = path_and_query
        .split('?')
        .next()
        .unwrap_or(path_and_query)
        .to_string();
    let method = Method::from(req.method());
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method.clone(), segments.as_slice()) {
        (Method::Get, ["healthz"]) => {
            return json(200, HEALTHZ_BODY).map_err(|e| internal("healthz", e));
        }
        (_, ["healthz"]) => return Err(ApiError::method_not_allowed(method.as_ref(), &path)),
        _ => {}
    }
    let session = match segments.as_slice() {
        ["v1", "sessions", id, ..] if !id.is_empty() => Some(*id),
        _ => None,
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
    let config = AuthConfig::new(
        config_value(env, "API_TOKEN"),
        config_value(env, "ALLOW_UNAUTHENTICATED"),
    );
    let now_secs = worker::Date::now().as_millis() / 1000;
    authorize(
        &config,
        credential(&req, &url).as_deref(),
        session,
        now_secs,
    )?;

    match (method.clone(), segments.as_slice()) {
        #[cfg(feature = "test-routes")]
        (Method::Post, ["__test", "conformance"]) => conformance(env, app).await,
        #[cfg(feature = "test-routes")]
        (Method::Post, ["__test", "floor", id]) if valid_session_id(id) => {
            call_object(
                env,
                app.sessions(),
                id,
                Method::Post,
                "/__test/floor",
                None,
                None,
            )
            .await
        }
        (Method::Get, ["v1", "agents"]) => agents(env, app),
        (Method::Get, ["v1", "openapi.json"]) => {
            json(200, crate::api::OPENAPI).map_err(|e| internal("openapi", e))
        }
        (_, ["v1", "openapi.json"]) => Err(ApiError::method_not_allowed(method.as_ref(), &path)),
        (Method::Post, ["v1", "sessions"]) => {
            let body = read_body(&req).await?;
            create(env, app, &config, body).await
        }
        (_, ["v1", "agents"]) | (_, ["v1", "sessions"]) => {
            Err(ApiError::method_not_allowed(method.as_ref(), &path))
        }
        (_, ["v1", "sessions", id]) | (_, ["v1", "sessions", id, _]) => {
            let body = if method == Method::Post {
                Some(read_body(&req).await?)
            } else {
                None
            };
            forward(env, app, id, &req, method, path_and_query, body).await
        }
        _ => Err(ApiError::route_not_found(&path)),
    }
}

/// `Authorization: Bearer <t>`, or `?token=<t>` (EventSource cannot set headers).
fn credential(req: &RawRequest, url: &str) -> Option<String> {
    let header = req.headers().get("authorization").ok().flatten();
    if let Some(token) = header.as_deref().and_then(|h| h.strip_prefix("Bearer ")) {
        return Some(token.trim().to_string());
    }
    crate::api::query_pairs(url)
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
}

async fn read_body(req: &RawRequest) -> std::result::Result<Vec<u8>, ApiError> {
    let too_large = || {
        ApiError::client(
            413,
            "payload_too_large",
            "Request bodies are limited to 1 MiB.",
        )
    };
    let declared = req
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(too_large());
    }
    let unreadable = |_| ApiError::client(400, "invalid_body", "The body could not be read.");
    let buffer = req.array_buffer().map_err(unreadable)?;
    let buffer = JsFuture::from(buffer).await.map_err(unreadable)?;
    let body = js_sys::Uint8Array::new(&buffer).to_vec();
    if body.len() > MAX_BODY_BYTES {
        return Err(too_large());
    }
    Ok(body)
}

/// The agents this worker hosts.
pub(crate) fn hosted_agents(env: &Env, app: &App) -> std::result::Result<Agents, ApiError> {
    app.agents(env).map_err(|e| internal("agents", e))
}

fn agents(env: &Env, app: &App) -> std::result::Result<Response, ApiError> {
    let agents = hosted_agents(env, app)?;
    let list: Vec<_> = agents
        .iter()
        .map(|a| {
            let tools: Vec<_> = a
                .tools()
                .iter()
                .map(|t| {
                    let approval = match t.approval() {
                        crate::tool::Approval::Never => "never",
                        crate::tool::Approval::Always => "always",
                        crate::tool::Approval::When(_) => "conditional",
                    };
                    let executor = if t.is_client() { "client" } else { "server" };
                    json!({ "name": t.name(), "description": t.description(), "approval": approval, "executor": executor })
                })
                .collect();
            json!({ "name": a.name(), "description": a.description(), "tools": tools })
        })
        .collect();
    json(200, &json!({ "agents": list }).to_string()).map_err(|e| internal("agents", e))
}

/// Test-only (feature `test-routes`): the store conformance suite against this D1, with
/// the store keeping session images, reading everything, and (in a Durable Object, as
/// sessions run) keeping creates in the object's outbox.
#[cfg(feature = "test-routes")]
async fn conformance(env: &Env, app: &App) -> std::result::Result<Response, ApiError> {
    let mut results = Vec::new();
    for (mode, store) in [
        (
            "images",
            crate::d1::D1Store::new(
                env.d1(app.database())
                    .map_err(|e| internal("d1 binding", e))?,
            ),
        ),
        (
            "uncached",
            crate::d1::D1Store::uncached(
                env.d1(app.database())
                    .map_err(|e| internal("d1 binding", e))?,
            ),
        ),
    ] {
        results.extend(conformance_results(&store, mode).await);
    }
    let object = format!("conformance-{}", random_hex(6));
    let path = "/__test/conformance";
    let mut resp =
        call_object(env, app.sessions(), &object, Method::Post, path, None, None).await?;
    let text = resp.text().await.map_err(|e| internal("conformance", e))?;
    let outbox: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| internal("conformance", e))?;
    if let Some(more) = outbox["results"].as_array() {
        results.extend(more.iter().cloned());
    }
    json(200, &json!({ "results": results }).to_string()).map_err(|e| internal("conformance", e))
}

/// Runs the store conformance suite against `store` on fresh session ids, each result
/// named after `mode`.
#[cfg(feature = "test-routes")]
pub(crate) async fn conformance_results(
    store: &crate::d1::D1Store,
    mode: &str,
) -> Vec<serde_json::Value> {
    let prefix = format!("conformance-{mode}-{}", random_hex(6));
    let results = crate::store::conformance::run(store, &prefix).await;
    let result = |r: crate::store::conformance::CheckResult| {
        let name = format!("{mode}: {}", r.name);
        json!({ "name": name, "ok": r.outcome.is_ok(), "error": r.outcome.err() })
    };
    results.into_iter().map(result).collect()
}

async fn create(
    env: &Env,
    app: &App,
    config: &AuthConfig,
    body: Vec<u8>,
) -> std::result::Result<Response, ApiError> {
    let parsed: CreateSessionBody = parse_body(&body)?;
    let id = match &parsed.session_id {
        Some(id) if valid_session_id(id) => id.clone(),
        Some(_) => {
            return Err(ApiError::client(
                400,
                "invalid_session_id",
                "sessionId must match ^[A-Za-z0-9._-]{1,128}$.",
            ));
        }
        None => format!("s_{}", random_hex(16)),
    };
    let mut resp = call_object(
        env,
        app.sessions(),
        &id,
        Method::Post,
        "/v1/sessions",
        None,
        Some(body),
    )
    .await?;
    if resp.status_code() != 201 {
        return Ok(resp);
    }
    let mut created: serde_json::Value = resp
        .json()
        .await
        .map_err(|e| internal("create response", e))?;
    let token = match config {
        AuthConfig::Token(key) => {
            let expiry = worker::Date::now().as_millis() / 1000 + SESSION_TOKEN_TTL_SECS;
            session_token(key, &id, expiry)
        }
        _ => None,
    };
    let stream_url = match &token {
        Some(t) => format!("/v1/sessions/{id}/stream?token={t}"),
        None => format!("/v1/sessions/{id}/stream"),
    };
    created["streamUrl"] = json!(stream_url);
    created["sessionToken"] = json!(token);
    json(201, &created.to_string()).map_err(|e| internal("create", e))
}

async fn forward(
    env: &Env,
    app: &App,
    id: &str,
    req: &RawRequest,
    method: Method,
    path_and_query: &str,
    body: Option<Vec<u8>>,
) -> std::result::Result<Response, ApiError> {
    let last_event_id = req.headers().get("last-event-id").ok().flatten();
    call_object(
        env,
        app.sessions(),
        id,
        method,
        path_and_query,
        last_event_id,
        body,
    )
    .await
}

/// Sends a request to the session's Durable Object.
pub(crate) async fn call_object(
    env: &Env,
    binding: &str,
    id: &str,
    method: Method,
    path_and_query: &str,
    last_event_id: Option<String>,
    body: Option<Vec<u8>>,
) -> std::result::Result<Response, ApiError> {
    let namespace = env
        .durable_object(binding)
        .map_err(|e| internal("durable object", e))?;
    let stub = namespace
        .id_from_name(id)
        .and_then(|oid| oid.get_stub())
        .map_err(|e| internal("durable object", e))?;
    let headers = Headers::new();
    let set = |k: &str, v: &str| headers.set(k, v).map_err(|e| internal("headers", e));
    set(SESSION_HEADER, id)?;
    set("content-type", "application/json")?;
    if let Some(v) = &last_event_id {
        set("last-event-id", v)?;
    }
    let body = body.map(|b| js_sys::Uint8Array::from(b.as_slice()).into());
    let request = crate::llm::request(
        &format!("https://session{path_and_query}"),
        method.as_ref(),
        &headers,
        body,
    )
    .map_err(|e| internal("request", e))?;
    stub.fetch_with_request(request).await.map_err(|e| {
        log(
            Level::Warn,
            "object_unreachable",
            json!({ "session": id, "error": e.to_string() }),
        );
        ApiError {
            status: 503,
            code: "session_unavailable",
            message: "The session is unavailable; try again.".into(),
            retryable: true,
        }
    })
}

/// An internal failure: logged in detail, answered with a safe 500.
pub(crate) fn internal(what: &str, e: impl std::fmt::Display) -> ApiError {
    log(
        Level::Error,
        "internal_error",
        json!({ "what": what, "error": e.to_string() }),
    );
    ApiError {
        status: 500,
        code: "framework_error",
        message: "Internal error.".into(),
        retryable: true,
    }
}

/// A JSON response with the given status.
pub(crate) fn json(status: u16, body: &str) -> Result<Response> {
    let mut resp = Response::ok(body)?.with_status(status);
    resp.headers_mut().set("content-type", "application/json")?;
    Ok(resp)
}

/// The JSON error response of an [`ApiError`].
pub(crate) fn error(err: &ApiError) -> Result<Response> {
    json(err.status, &err.body())
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
            let run = |_: Path, _| async { Ok::<_, crate::error::ToolError>(json!({})) };
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
            Ok(Agents::new().with(agent))
        })
    }

    async fn call(env: Env, method: Method, path: &str) -> (u16, serde_json::Value) {
        let mut init = RequestInit::new();
        init.with_method(method);
        let req = Request::new_with_init(&format!("http://localhost{path}"), &init).unwrap();
        let mut resp = fetch(req.try_into().unwrap(), env, test_app())
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
