//! `GET /v1/sessions`: the session list, read from D1 (the queryable record, as fresh as
//! replication), newest first, with the API token only; with the `schedules` feature,
//! `GET /v1/schedules`, every session's schedules, soonest fire first; with `inbox`,
//! `GET /v1/inbox`, the calls waiting on a person; with `usage`, `GET /v1/usage`, the
//! runs' tokens. The queries and their rows are the core's ([`crate::api::ListQuery`],
//! [`crate::schedule::listing`], [`crate::api::InboxQuery`], [`crate::api::UsageQuery`]).

use crate::api::{ApiError, ListQuery, SessionList, SessionSummary};
use crate::app::App;
use crate::auth::Caller;
use crate::d1::D1;
use crate::http::{RawRequest, internal, json_response};
use crate::runner::RunError;
use crate::sqlite::Record;
use worker::Env;

/// Answers `GET /v1/sessions`: a user's are the sessions they reach.
pub async fn list(
    env: &Env,
    app: &App,
    req: &RawRequest,
    caller: Option<&Caller>,
) -> Result<worker::Response, ApiError> {
    let query = ListQuery {
        caller: caller.cloned(),
        ..ListQuery::parse(&crate::api::query_pairs(&req.url()))?
    };
    let d1 = D1::new(env, app.database(), None).map_err(|e| internal("d1 binding", e))?;
    let (sql, args) = query.statement();
    let store = |e| ApiError::from(RunError::Store(e));
    let rows = d1.read(sql, args).await.map_err(store)?;
    let sessions = rows
        .iter()
        .map(SessionSummary::from_row)
        .collect::<Result<Vec<_>, _>>()
        .map_err(store)?;
    json_response(200, &SessionList::page(sessions, query.limit))
}

/// Answers `GET /v1/schedules` (the API token's only: a user gets 403).
#[cfg(feature = "schedules")]
pub async fn schedules(
    env: &Env,
    app: &App,
    req: &RawRequest,
    caller: Option<&Caller>,
) -> Result<worker::Response, ApiError> {
    if caller.is_some() {
        return Err(crate::auth::AuthError::Forbidden.into());
    }
    use crate::schedule::listing::{DuePage, DueQuery};
    let now = worker::Date::now().as_millis();
    let query = DueQuery::parse(&crate::api::query_pairs(&req.url()), now)?;
    let d1 = D1::new(env, app.database(), None).map_err(|e| internal("d1 binding", e))?;
    let (sql, args) = query.statement();
    let store = |e| ApiError::from(RunError::Store(e));
    let rows = d1.read(sql, args).await.map_err(store)?;
    json_response(200, &DuePage::from_rows(&rows, query.limit).map_err(store)?)
}

/// Answers `GET /v1/inbox`: a user's are the calls of the sessions they reach.
#[cfg(feature = "inbox")]
pub async fn inbox(
    env: &Env,
    app: &App,
    req: &RawRequest,
    caller: Option<&Caller>,
) -> Result<worker::Response, ApiError> {
    use crate::api::{InboxPage, InboxQuery};
    let query = InboxQuery {
        caller: caller.cloned(),
        ..InboxQuery::parse(&crate::api::query_pairs(&req.url()))?
    };
    let d1 = D1::new(env, app.database(), None).map_err(|e| internal("d1 binding", e))?;
    let (sql, args) = query.statement();
    let store = |e| ApiError::from(RunError::Store(e));
    let rows = d1.read(sql, args).await.map_err(store)?;
    json_response(
        200,
        &InboxPage::from_rows(&rows, query.limit).map_err(store)?,
    )
}

/// Answers `GET /v1/usage`: a user's are the runs of the sessions they reach.
#[cfg(feature = "usage")]
pub async fn usage(
    env: &Env,
    app: &App,
    req: &RawRequest,
    caller: Option<&Caller>,
) -> Result<worker::Response, ApiError> {
    use crate::api::{UsageQuery, UsageReport};
    let query = UsageQuery {
        caller: caller.cloned(),
        ..UsageQuery::parse(&crate::api::query_pairs(&req.url()))?
    };
    let d1 = D1::new(env, app.database(), None).map_err(|e| internal("d1 binding", e))?;
    let (sql, args) = query.statement();
    let store = |e| ApiError::from(RunError::Store(e));
    let rows = d1.read(sql, args).await.map_err(store)?;
    json_response(200, &UsageReport::from_rows(&query, &rows).map_err(store)?)
}
