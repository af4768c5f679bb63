//! Test-only routes (feature `test-routes`, never in a production bundle), authenticated
//! like the API:
//! - `POST /__test/conformance`: the store conformance suite against a session object's
//!   SQLite, and the journal suites there;
//! - `POST /__test/floor/{id}`: the benchmark's floor, the least a session request can
//!   do — reach its object, make one D1 write, answer;
//! - `POST /__test/replica/{id}`: replicates the session to D1 and compares every row of
//!   the object's storage with D1's (the replication invariant), with the lags seen;
//! - `POST /__test/forget/{id}`: deletes the object's storage, as a lost namespace would.

use crate::api::ApiError;
use crate::app::App;
use crate::http::{ObjectRequest, RawRequest, call_object, internal, json_response};
use crate::storage::Sql;
use crate::worker_host::random_hex;
use serde_json::json;
use worker::{Env, Response};

/// The object's floor route.
pub const FLOOR_PATH: &str = "/__test/floor";
/// The object's conformance route.
pub const CONFORMANCE_PATH: &str = "/__test/conformance";
/// The object's replica check.
pub const REPLICA_PATH: &str = "/__test/replica";
/// The object's storage loss.
pub const FORGET_PATH: &str = "/__test/forget";

type Answer = Result<Response, ApiError>;

/// The worker's test routes; `None` for every other request.
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
    let target = match (method, rest.split_once('/')) {
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

/// Names each check result `{part}: {check}`.
fn results(
    part: &str,
    checks: Vec<crate::store::conformance::CheckResult>,
) -> Vec<serde_json::Value> {
    let result = |r: crate::store::conformance::CheckResult| {
        let name = format!("{part}: {}", r.name);
        json!({ "name": name, "ok": r.outcome.is_ok(), "error": r.outcome.err() })
    };
    checks.into_iter().map(result).collect()
}

/// The object's side of the conformance route: the store suite against a store in this
/// (fresh) object's SQLite, replicating nowhere, and the journal suites on the same
/// SQLite.
pub async fn object_conformance(sql: &Sql) -> Answer {
    use crate::journal::conformance;
    use crate::replica::Replica;
    use crate::storage::{ObjectStore, SqlAttempts, SqlStreamLog, SqlSuspension};
    use std::rc::Rc;
    let replica = Rc::new(Replica::new(sql.clone(), None));
    let store = ObjectStore::new(sql.clone(), replica, u64::MAX);
    let prefix = format!("conformance-{}", random_hex(6));
    let mut all = results(
        "store",
        crate::store::conformance::run(&store, &prefix).await,
    );
    let stream = SqlStreamLog::open(sql.clone()).map_err(|e| internal("stream", e))?;
    all.extend(results(
        "journal stream log",
        conformance::stream_log(&stream),
    ));
    let attempts = SqlAttempts(sql.clone());
    all.extend(results(
        "journal step attempts",
        conformance::step_attempts(&attempts),
    ));
    let suspension = SqlSuspension::new(sql.clone());
    all.extend(results(
        "journal suspension",
        conformance::suspension(&suspension),
    ));
    json_response(200, &json!({ "results": all }))
}
