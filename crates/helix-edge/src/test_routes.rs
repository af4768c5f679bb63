//! Test-only routes (feature `test-routes`, never in a production bundle): the store
//! conformance suite against the deployment's D1 (and, inside a session object, with
//! creates kept in its outbox), and the benchmark's floor — the least a session request
//! can do: reach its object, make one D1 write, answer.

use crate::api::ApiError;
use crate::app::App;
use crate::d1::D1Store;
use crate::http::{ObjectRequest, RawRequest, call_object, internal, json_response};
use crate::worker_host::random_hex;
use serde_json::json;
use worker::{Env, Response};

/// The object's floor route.
pub const FLOOR_PATH: &str = "/__test/floor";
/// The object's conformance route.
pub const CONFORMANCE_PATH: &str = "/__test/conformance";

type Answer = Result<Response, ApiError>;

/// The worker's test routes: `POST /__test/conformance`, `POST /__test/floor/{id}`.
/// `None` for every other request. Authenticated like the API.
pub async fn route(
    req: &RawRequest,
    method: &str,
    path: &str,
    env: &Env,
    app: &App,
) -> Option<Answer> {
    let rest = path.strip_prefix("/__test/")?;
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
    Some(match (method, rest.split_once('/')) {
        ("POST", None) if rest == "conformance" => conformance(env, app).await,
        ("POST", Some(("floor", id))) if crate::auth::valid_session_id(id) => {
            let request = ObjectRequest::post(FLOOR_PATH, Vec::new());
            call_object(env, app.sessions(), id, request).await
        }
        _ => Err(ApiError::route_not_found(path)),
    })
}

/// The store conformance suite against this D1, with the store keeping session
/// images, reading everything, and (in a Durable Object, as sessions run) keeping
/// creates in the object's outbox.
async fn conformance(env: &Env, app: &App) -> Answer {
    let db = || {
        env.d1(app.database())
            .map_err(|e| internal("d1 binding", e))
    };
    let mut results = Vec::new();
    for (mode, store) in [
        ("images", D1Store::new(db()?)),
        ("uncached", D1Store::uncached(db()?)),
    ] {
        results.extend(conformance_results(&store, mode).await);
    }
    let object = format!("conformance-{}", random_hex(6));
    let request = ObjectRequest::post(CONFORMANCE_PATH, Vec::new());
    let mut resp = call_object(env, app.sessions(), &object, request).await?;
    let text = resp.text().await.map_err(|e| internal("conformance", e))?;
    let outbox: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| internal("conformance", e))?;
    if let Some(more) = outbox["results"].as_array() {
        results.extend(more.iter().cloned());
    }
    json_response(200, &json!({ "results": results }))
}

/// Runs the store conformance suite against `store` on fresh session ids, each result
/// named after `mode`.
pub async fn conformance_results(store: &D1Store, mode: &str) -> Vec<serde_json::Value> {
    let prefix = format!("conformance-{mode}-{}", random_hex(6));
    let results = crate::store::conformance::run(store, &prefix).await;
    let result = |r: crate::store::conformance::CheckResult| {
        let name = format!("{mode}: {}", r.name);
        json!({ "name": name, "ok": r.outcome.is_ok(), "error": r.outcome.err() })
    };
    results.into_iter().map(result).collect()
}

/// The object's side of the floor: one D1 write.
pub async fn floor(env: &Env, app: &App) -> Answer {
    let db = env
        .d1(app.database())
        .map_err(|e| internal("d1 binding", e))?;
    db.prepare("INSERT OR REPLACE INTO cas_guard (id, ok) VALUES (2, 1)")
        .run()
        .await
        .map_err(|e| internal("floor", e))?;
    json_response(200, &json!({ "ok": true }))
}

/// The object's side of the conformance route: the store suite with creates kept in
/// this object's outbox, as sessions run, and the journal suites on this (fresh)
/// object's SQLite.
pub async fn object_conformance(env: &Env, app: &App, sql: &crate::storage::Sql) -> Answer {
    use crate::journal::conformance;
    use crate::storage::{SqlAttempts, SqlStreamLog, SqlSuspension};
    let db = env
        .d1(app.database())
        .map_err(|e| internal("d1 binding", e))?;
    let store = D1Store::new(db).deferring_creates(crate::outbox::Outbox::new(sql.clone()));
    let mut results = conformance_results(&store, "outbox").await;
    let stream = SqlStreamLog::open(sql.clone()).map_err(|e| internal("stream", e))?;
    let journal = [
        ("stream log", conformance::stream_log(&stream)),
        (
            "step attempts",
            conformance::step_attempts(&SqlAttempts(sql.clone())),
        ),
        (
            "suspension",
            conformance::suspension(&SqlSuspension(sql.clone())),
        ),
    ];
    for (part, checks) in journal {
        results.extend(checks.into_iter().map(|r| {
            let name = format!("journal {part}: {}", r.name);
            json!({ "name": name, "ok": r.outcome.is_ok(), "error": r.outcome.err() })
        }));
    }
    json_response(200, &json!({ "results": results }))
}
