//! The worker entry as a worker's `fetch` runs it, in wasm under Node: answers without
//! a Durable Object behind them (health, auth, routing, agents, the console's files).

#![cfg(target_arch = "wasm32")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge::App;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::wasm_bindgen_test;
use worker::{Context, Env, Method, Request, RequestInit};

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
    use helix_edge::agent::Agent;
    use helix_edge::tool::Tool;
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Path {
        #[allow(dead_code)]
        path: String,
    }
    App::new(|_: &Env| {
        let run =
            |_: Path, _| async { Ok::<_, helix_edge::error::ToolError>(serde_json::json!({})) };
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
        helix_edge::agent::Agents::new().with(agent)
    })
}

/// Every call reads its own environment: the isolate's cached setup is dropped first.
async fn call(env: Env, method: Method, path: &str) -> (u16, serde_json::Value) {
    helix_edge::forget_environment();
    let mut init = RequestInit::new();
    init.with_method(method);
    let req = Request::new_with_init(&format!("http://localhost{path}"), &init).unwrap();
    let mut resp = helix_edge::fetch(req.try_into().unwrap(), env, test_context(), test_app())
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
        helix_edge::auth::session_token("k3y", "s.1", 1_000).unwrap(),
        "s.1:1000:2925710cbce8ddb9eb1bed9dcf32aa5fdf33b4f8ddeca69f69878814f54b966b"
    );
    assert_eq!(
        helix_edge::runner::child_session_id("parent", "call_1"),
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

/// The console's files (feature `console`), served before any route or credential.
#[cfg(feature = "console")]
#[wasm_bindgen_test]
async fn the_console_is_served_with_the_headers_of_its_headers_file() {
    for (path, kind, start) in [
        ("/", "text/html", "<!doctype html>"),
        ("/console.js", "text/javascript", ""),
        ("/console.css", "text/css", ""),
    ] {
        helix_edge::forget_environment();
        let req = Request::new(&format!("http://localhost{path}"), Method::Get).unwrap();
        let mut resp = helix_edge::fetch(
            req.try_into().unwrap(),
            env_with(&[]),
            test_context(),
            test_app(),
        )
        .await
        .unwrap();
        assert_eq!(resp.status_code(), 200, "{path}");
        let h = resp.headers();
        assert!(h.get("content-type").unwrap().unwrap().starts_with(kind));
        let csp = h.get("content-security-policy").unwrap().unwrap();
        assert!(
            csp.starts_with("default-src 'none'; script-src 'self';"),
            "{csp}"
        );
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(
            h.get("x-content-type-options").unwrap().as_deref(),
            Some("nosniff")
        );
        assert_eq!(
            h.get("referrer-policy").unwrap().as_deref(),
            Some("no-referrer")
        );
        assert_eq!(h.get("cache-control").unwrap().as_deref(), Some("no-cache"));
        let body = resp.text().await.unwrap();
        assert!(body.to_ascii_lowercase().starts_with(start), "{path}");
    }
    for (method, path) in [(Method::Post, "/"), (Method::Get, "/index.html")] {
        let (status, _) = call(env_with(&[]), method, path).await;
        assert!(status >= 400, "{path} is not the console's");
    }
}
