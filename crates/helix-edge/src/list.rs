//! `GET /v1/sessions`: the session list, read from D1 (the queryable record, as fresh as
//! replication), newest first, with the API token only.

use crate::api::{ApiError, ListQuery, SessionList, SessionSummary};
use crate::app::App;
use crate::d1::{D1, Row, num, text};
use crate::http::{RawRequest, internal, json_response};
use crate::runner::RunError;
use crate::store::StoreError;
use worker::Env;
use worker::wasm_bindgen::JsValue;

/// One page of sessions: optional filters are `NULL` parameters.
const SELECT_PAGE: &str = "SELECT id, agent, status, version, created_at, updated_at FROM sessions \
     WHERE (?1 IS NULL OR agent = ?1) AND (?2 IS NULL OR status = ?2) AND updated_at >= ?3 \
     AND (?4 IS NULL OR updated_at < ?4 OR (updated_at = ?4 AND id < ?5)) \
     ORDER BY updated_at DESC, id DESC LIMIT ?6";

fn summary(row: &Row) -> Result<SessionSummary, StoreError> {
    let status = serde_json::from_value(serde_json::Value::String(row.text(2)?))
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(SessionSummary {
        session_id: row.text(0)?,
        agent: row.text(1)?,
        status,
        version: row.int(3)?,
        created_at: row.int(4)?,
        updated_at: row.int(5)?,
    })
}

/// Answers `GET /v1/sessions`.
pub async fn list(env: &Env, app: &App, req: &RawRequest) -> Result<worker::Response, ApiError> {
    let query = ListQuery::parse(&crate::api::query_pairs(&req.url()))?;
    let d1 = D1::new(env, app.database()).map_err(|e| internal("d1 binding", e))?;
    let optional = |v: Option<JsValue>| v.unwrap_or(JsValue::NULL);
    let status = query.status.map(|s| {
        serde_json::to_value(s)
            .ok()
            .and_then(|v| v.as_str().map(text))
    });
    let args = [
        optional(query.agent.as_deref().map(text)),
        optional(status.flatten()),
        num(query.updated_since.unwrap_or(0)),
        optional(query.cursor.as_ref().map(|c| num(c.updated_at))),
        optional(query.cursor.as_ref().map(|c| text(&c.session_id))),
        num(u64::from(query.limit) + 1),
    ];
    let rows = d1
        .read(SELECT_PAGE, &args)
        .await
        .map_err(|e| ApiError::from(RunError::Store(e)))?;
    let sessions = rows
        .iter()
        .map(summary)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ApiError::from(RunError::Store(e)))?;
    json_response(200, &SessionList::page(sessions, query.limit))
}
