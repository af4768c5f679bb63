//! `GET /v1/sessions`: the session list, read from D1 (the queryable record, as fresh as
//! replication), newest first, with the API token only; with the `schedules` feature,
//! `GET /v1/schedules`, every session's schedules, soonest fire first; with `inbox`,
//! `GET /v1/inbox`, the calls waiting on a person; with `usage`, `GET /v1/usage`, the
//! runs' tokens. The queries and their rows are the core's ([`crate::api::ListQuery`],
//! [`crate::schedule::listing`], [`crate::api::InboxQuery`], [`crate::api::UsageQuery`]).
//!
//! Over several D1 databases (shards, see [`crate::app::App::database_shards`]) each query runs on
//! every shard at once and the rows are merged (newest first, or soonest, or summed, as
//! the query orders them) under the same keyset cursor: a page is complete across the
//! shards. A shard that cannot be read fails the answer with 503 `storage_unavailable`
//! naming it — or, with `partial=true`, is left out and named in `missingShards` —
//! never a silently short page.

use crate::api::{ApiError, ListQuery, SessionList, SessionSummary, query_pairs, take_partial};
use crate::auth::Caller;
use crate::d1::{D1, read_each};
use crate::host::Level;
use crate::http::{RawRequest, internal, json_response};
use crate::runner::RunError;
use crate::setup::Setup;
use crate::sqlite::Row;
use crate::store::StoreError;
use crate::store::rows::Arg;
use crate::worker_host::log;
use futures::future::LocalBoxFuture;
use worker::Env;

/// The rows of one query on every shard, and the shards left out (with `partial`).
struct Read {
    rows: Vec<Vec<Row>>,
    missing: Vec<String>,
}

/// The query pairs of `req` without `partial`, and whether it was `true`.
fn pairs_of(req: &RawRequest) -> Result<(Vec<(String, String)>, bool), ApiError> {
    let mut pairs = query_pairs(&req.url());
    let partial = take_partial(&mut pairs)?;
    Ok((pairs, partial))
}

/// Runs `sql` on every shard at once. A shard whose schema is behind fails the answer as
/// it always did; one that cannot be read fails it with `storage_unavailable`, or is
/// left out when the caller asked for `partial` answers.
fn read<'a>(
    setup: &'a Setup,
    env: &'a Env,
    (sql, args): (&'a str, Vec<Arg>),
    partial: bool,
) -> LocalBoxFuture<'a, Result<Read, ApiError>> {
    Box::pin(read_shards(setup, env, sql, args, partial))
}

async fn read_shards(
    setup: &Setup,
    env: &Env,
    sql: &str,
    args: Vec<Arg>,
    partial: bool,
) -> Result<Read, ApiError> {
    let fault = crate::object::d1_fault(env);
    let mut shards = Vec::with_capacity(setup.shards.len());
    for shard in &setup.shards {
        shards.push(D1::new(env, shard, fault.clone()).map_err(|e| internal("d1 binding", e))?);
    }
    let mut read = Read {
        rows: Vec::new(),
        missing: Vec::new(),
    };
    for (shard, rows) in setup
        .shards
        .iter()
        .zip(read_each(&shards, sql, &args).await)
    {
        match rows {
            Ok(rows) => read.rows.push(rows),
            Err(e @ StoreError::SchemaOutdated { .. }) => return Err(RunError::Store(e).into()),
            Err(e) => {
                let fields = serde_json::json!({ "shard": shard, "error": e.to_string() });
                log(Level::Warn, "shard_unavailable", fields);
                read.missing.push(shard.clone());
            }
        }
    }
    if !read.missing.is_empty() && !partial {
        return Err(ApiError::storage_unavailable(&read.missing));
    }
    Ok(read)
}

fn store(e: StoreError) -> ApiError {
    RunError::Store(e).into()
}

/// Answers `GET /v1/sessions`: a user's are the sessions they reach.
pub async fn list(
    setup: &Setup,
    env: &Env,
    req: &RawRequest,
    caller: Option<&Caller>,
) -> Result<worker::Response, ApiError> {
    let (pairs, partial) = pairs_of(req)?;
    let query = ListQuery {
        caller: caller.cloned(),
        ..ListQuery::parse(&pairs)?
    };
    let read = read(setup, env, query.statement(), partial).await?;
    let rows = read.rows.iter().flatten().map(SessionSummary::from_row);
    let all = rows.collect::<Result<Vec<_>, _>>().map_err(store)?;
    let page = SessionList::merged(vec![all], query.limit);
    json_response(
        200,
        &SessionList {
            missing_shards: read.missing,
            ..page
        },
    )
}

/// Answers `GET /v1/schedules` (the API token's only: a user gets 403).
#[cfg(feature = "schedules")]
pub async fn schedules(
    setup: &Setup,
    env: &Env,
    req: &RawRequest,
    caller: Option<&Caller>,
) -> Result<worker::Response, ApiError> {
    if caller.is_some() {
        return Err(crate::auth::AuthError::Forbidden.into());
    }
    use crate::schedule::listing::{DuePage, DueQuery};
    let now = worker::Date::now().as_millis();
    let (pairs, partial) = pairs_of(req)?;
    let query = DueQuery::parse(&pairs, now)?;
    let read = read(setup, env, query.statement(), partial).await?;
    let page = DuePage::merged(&read.rows, query.limit).map_err(store)?;
    json_response(
        200,
        &DuePage {
            missing_shards: read.missing,
            ..page
        },
    )
}

/// Answers `GET /v1/inbox`: a user's are the calls of the sessions they reach.
#[cfg(feature = "inbox")]
pub async fn inbox(
    setup: &Setup,
    env: &Env,
    req: &RawRequest,
    caller: Option<&Caller>,
) -> Result<worker::Response, ApiError> {
    use crate::api::{InboxPage, InboxQuery};
    let (pairs, partial) = pairs_of(req)?;
    let query = InboxQuery {
        caller: caller.cloned(),
        ..InboxQuery::parse(&pairs)?
    };
    let read = read(setup, env, query.statement(), partial).await?;
    let page = InboxPage::merged(&read.rows, query.limit).map_err(store)?;
    json_response(
        200,
        &InboxPage {
            missing_shards: read.missing,
            ..page
        },
    )
}

/// Answers `GET /v1/usage`: a user's are the runs of the sessions they reach.
#[cfg(feature = "usage")]
pub async fn usage(
    setup: &Setup,
    env: &Env,
    req: &RawRequest,
    caller: Option<&Caller>,
) -> Result<worker::Response, ApiError> {
    use crate::api::{UsageQuery, UsageReport};
    let (pairs, partial) = pairs_of(req)?;
    let query = UsageQuery {
        caller: caller.cloned(),
        ..UsageQuery::parse(&pairs)?
    };
    let read = read(setup, env, query.statement(), partial).await?;
    let report = UsageReport::merged(&query, &read.rows).map_err(store)?;
    json_response(
        200,
        &UsageReport {
            missing_shards: read.missing,
            ..report
        },
    )
}
