//! Test-only routes (feature `test-routes`, never in a production bundle), authenticated
//! like the API (the session object's side is `object::testing`):
//! - `POST /__test/conformance`: the store conformance suite against a session object's
//!   SQLite, and the journal suites there;
//! - `POST /__test/floor/{id}`: the benchmark's floor, the least a session request can
//!   do — reach its object, make one D1 write, answer;
//! - `POST /__test/crossings/{id}`, `GET …/{id}/stream`, `POST …/{id}/approve`: the
//!   benchmark's crossings floor, a HITL cycle's platform crossings (object hops, SQLite
//!   and D1 writes, streamed model calls, an SSE stream) without helix-edge's work;
//! - `POST /__test/replica/{id}`: replicates the session to D1 and compares every row of
//!   the object's storage with D1's (the replication invariant), with the lags seen;
//! - `POST /__test/forget/{id}`: deletes the object's storage, as a lost namespace would;
//! - `PUT` / `DELETE /__test/objects/{key}`: writes or deletes an object of the `FILES`
//!   R2 bucket (the reference worker's: skills kept in a store are edited with it);
//!   `PUT /__test/kv/{key}` writes a value of its `KV` namespace.

use crate::api::ApiError;
use crate::app::App;
use crate::http::{ObjectRequest, RawRequest, call_object};
use crate::worker_host::random_hex;
use worker::{Env, Method, Response};

/// The object's floor route.
pub const FLOOR_PATH: &str = "/__test/floor";
/// The object's crossings floor: the create.
pub const CROSSINGS_PATH: &str = "/__test/crossings";
/// The object's crossings floor: the stream.
pub const CROSSINGS_STREAM_PATH: &str = "/__test/crossings/stream";
/// The object's crossings floor: the approval.
pub const CROSSINGS_APPROVE_PATH: &str = "/__test/crossings/approve";
/// The object's conformance route.
pub const CONFORMANCE_PATH: &str = "/__test/conformance";
/// The object's replica check.
pub const REPLICA_PATH: &str = "/__test/replica";
/// The object's storage loss.
pub const FORGET_PATH: &str = "/__test/forget";

type Answer = Result<Response, ApiError>;

/// The worker's test routes; `None` for every other request.
pub async fn route(req: &RawRequest, path: &str, env: &Env, app: &App) -> Option<Answer> {
    let rest = path.strip_prefix("/__test/")?;
    let method = req.method();
    let config = crate::auth::AuthConfig::new(
        crate::worker_host::config_value(env, "API_TOKEN"),
        crate::worker_host::config_value(env, "ALLOW_UNAUTHENTICATED"),
    );
    let token = crate::http::header(req, "authorization")
        .and_then(|h| h.strip_prefix("Bearer ").map(str::to_string));
    let now = worker::Date::now().as_millis() / 1000;
    if let Err(e) = crate::auth::authorize(&config, token.as_deref(), None, now) {
        return Some(Err(e.into()));
    }
    if let Some(key) = rest.strip_prefix("objects/") {
        return Some(object(req, env, &method, key).await);
    }
    if let (Some(key), "PUT") = (rest.strip_prefix("kv/"), method.as_str()) {
        return Some(kv_value(req, env, key).await);
    }
    if let Some(crossing) = rest.strip_prefix("crossings/") {
        return Some(crossings(env, app, method.as_str(), crossing).await);
    }
    let target = match (method.as_str(), rest.split_once('/')) {
        ("POST", None) if rest == "conformance" => {
            Some((format!("conformance-{}", random_hex(6)), CONFORMANCE_PATH))
        }
        ("POST", Some((name, id))) if crate::auth::valid_session_id(id) => match name {
            "floor" => Some((id.to_string(), FLOOR_PATH)),
            "replica" => Some((id.to_string(), REPLICA_PATH)),
            "forget" => Some((id.to_string(), FORGET_PATH)),
            _ => None,
        },
        _ => None,
    };
    let Some((id, object_path)) = target else {
        return Some(Err(ApiError::route_not_found(path)));
    };
    let request = ObjectRequest::post(object_path, Vec::new());
    Some(call_object(env, app.sessions(), &id, request).await)
}

/// The crossings floor's requests (`{id}`, `{id}/stream`, `{id}/approve`), to the object.
async fn crossings(env: &Env, app: &App, method: &str, rest: &str) -> Answer {
    let (id, step) = rest.split_once('/').unwrap_or((rest, ""));
    let (method, path) = match (method, step) {
        ("POST", "") => (Method::Post, CROSSINGS_PATH),
        ("GET", "stream") => (Method::Get, CROSSINGS_STREAM_PATH),
        ("POST", "approve") => (Method::Post, CROSSINGS_APPROVE_PATH),
        _ => return Err(ApiError::route_not_found(rest)),
    };
    if !crate::auth::valid_session_id(id) {
        return Err(ApiError::route_not_found(rest));
    }
    let request = ObjectRequest {
        method,
        path,
        last_event_id: None,
        user: None,
        session_token: false,
        traceparent: None,
        body: None,
        stream: false,
    };
    call_object(env, app.sessions(), id, request).await
}

/// Writes (`PUT`, the body) or deletes (`DELETE`) `key` of the `FILES` bucket.
async fn object(req: &RawRequest, env: &Env, method: &str, key: &str) -> Answer {
    let failed = |e: worker::Error| crate::http::internal("FILES bucket", e);
    let bucket = env.bucket("FILES").map_err(failed)?;
    match method {
        "PUT" => {
            let body = crate::http::read_body(req).await?;
            bucket.put(key, body).execute().await.map_err(failed)?;
        }
        "DELETE" => bucket.delete(key).await.map_err(failed)?,
        _ => return Err(ApiError::route_not_found(key)),
    }
    Response::empty()
        .map(|r| r.with_status(204))
        .map_err(failed)
}

/// Writes `key` of the `KV` namespace (the body).
async fn kv_value(req: &RawRequest, env: &Env, key: &str) -> Answer {
    let failed = |e: String| crate::http::internal("KV namespace", e);
    let kv = env.kv("KV").map_err(|e| failed(e.to_string()))?;
    let body = crate::http::read_body(req).await?;
    let put = kv
        .put_bytes(key, &body)
        .map_err(|e| failed(e.to_string()))?;
    put.execute().await.map_err(|e| failed(e.to_string()))?;
    Response::empty()
        .map(|r| r.with_status(204))
        .map_err(|e| failed(e.to_string()))
}
