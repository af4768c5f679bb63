//! The Workers platform shell (wasm only): the fetch entry point, routing, and the
//! `SessionObject` Durable Object. It translates between `worker::` types and the pure
//! core; it holds no agent logic of its own.

mod llm;
mod session_object;

use crate::api::{ApiError, HEALTHZ_BODY};
use worker::{Context, Env, Method, Request, Response, Result, event};

#[event(start)]
fn start() {
    // Panics reset the whole isolate; at least make them visible in the logs.
    console_error_panic_hook::set_once();
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    route(req, env).await
}

/// Routes one request. Never fails for client input: every error becomes a JSON body.
pub async fn route(req: Request, _env: Env) -> Result<Response> {
    let path = req.path();
    match (req.method(), path.as_str()) {
        (Method::Get, "/healthz") => json(200, HEALTHZ_BODY),
        (method, "/healthz") => error(&ApiError::method_not_allowed(method.as_ref(), &path)),
        _ => error(&ApiError::route_not_found(&path)),
    }
}

/// A JSON response with the given status.
fn json(status: u16, body: &str) -> Result<Response> {
    let mut resp = Response::ok(body)?.with_status(status);
    resp.headers_mut().set("content-type", "application/json")?;
    Ok(resp)
}

/// The JSON error response of an [`ApiError`].
fn error(err: &ApiError) -> Result<Response> {
    json(err.status, &err.body())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_bindgen::JsCast;
    use wasm_bindgen_test::wasm_bindgen_test;

    fn no_env() -> Env {
        js_sys::Object::new().unchecked_into()
    }

    async fn call(method: Method, path: &str) -> (u16, serde_json::Value) {
        let req = Request::new(&format!("http://localhost{path}"), method).unwrap();
        let mut resp = route(req, no_env()).await.unwrap();
        let ct = resp.headers().get("content-type").unwrap();
        assert_eq!(ct.as_deref(), Some("application/json"));
        (resp.status_code(), resp.json().await.unwrap())
    }

    #[wasm_bindgen_test]
    async fn healthz_answers_ok_true() {
        let (status, body) = call(Method::Get, "/healthz").await;
        assert_eq!(status, 200);
        assert_eq!(body, serde_json::json!({"ok": true}));
    }

    #[wasm_bindgen_test]
    async fn unknown_path_is_a_json_404() {
        let (status, body) = call(Method::Get, "/nope").await;
        assert_eq!(status, 404);
        assert_eq!(body["error"]["code"], "not_found");
    }

    #[wasm_bindgen_test]
    async fn wrong_method_on_healthz_is_a_json_405() {
        let (status, body) = call(Method::Post, "/healthz").await;
        assert_eq!(status, 405);
        assert_eq!(body["error"]["code"], "method_not_allowed");
    }
}
