//! `GET /v1/sessions`: the query (filters by agent and status, updated since, a cursor
//! and a page size) and the page it answers, newest first. The list is read from D1,
//! the queryable record, so it is as fresh as replication (normally well under a
//! second behind the sessions' objects).

use super::ApiError;
use crate::auth::Caller;
use crate::sqlite::{Row, int, text};
use crate::store::rows::Arg;
use crate::store::{Owner, SessionStatus, StoreError};
use serde::Serialize;

/// Default page size.
pub const DEFAULT_LIMIT: u32 = 20;
/// Largest page size.
pub const MAX_LIMIT: u32 = 100;
/// The largest time a query takes (2^53 - 1: what a JSON number holds exactly).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Where a page starts: after the session last listed (by update time, then id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// Its update time (ms).
    pub updated_at: u64,
    /// Its id.
    pub session_id: String,
}

impl Cursor {
    /// The opaque form clients send back.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.updated_at, self.session_id)
    }

    /// Reads an opaque cursor.
    pub fn decode(text: &str) -> Option<Self> {
        let (updated, id) = text.split_once('.')?;
        let digits = !updated.is_empty() && updated.bytes().all(|b| b.is_ascii_digit());
        if !digits || !crate::auth::valid_session_id(id) {
            return None;
        }
        Some(Self {
            updated_at: updated.parse().ok()?,
            session_id: id.to_string(),
        })
    }
}

/// A list's `limit`: a page size from 1 to [`MAX_LIMIT`].
pub fn page_size(value: &str) -> Result<u32, ApiError> {
    value
        .parse()
        .ok()
        .filter(|n| (1..=MAX_LIMIT).contains(n))
        .ok_or_else(|| ApiError::validation("limit must be between 1 and 100."))
}

/// The query of `GET /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ListQuery {
    /// Only sessions of this agent.
    pub agent: Option<String>,
    /// Only sessions in this status.
    pub status: Option<SessionStatus>,
    /// Only sessions updated at or after this time (ms).
    pub updated_since: Option<u64>,
    /// Continue after this session.
    pub cursor: Option<Cursor>,
    /// Page size.
    pub limit: u32,
    /// Only sessions this user owns (their `sub`), among those the caller reaches.
    pub owner: Option<String>,
    /// Only the sessions this user reaches (set by the worker, never from the query).
    pub caller: Option<Caller>,
}

impl ListQuery {
    /// Parses and validates the query pairs; unknown parameters are refused.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, ApiError> {
        let mut query = Self {
            limit: DEFAULT_LIMIT,
            ..Self::default()
        };
        for (key, value) in pairs {
            match key.as_str() {
                "agent" if crate::tool::valid_name(value) => query.agent = Some(value.clone()),
                "agent" => return Err(ApiError::validation("agent is not a valid agent name.")),
                "status" => {
                    let status = serde_json::from_value(serde_json::Value::String(value.clone()));
                    query.status = Some(status.map_err(|_| {
                        ApiError::validation(
                            "status is one of active, interrupted, completed, failed, aborted.",
                        )
                    })?);
                }
                "updatedSince" => {
                    let at = value
                        .parse()
                        .ok()
                        .filter(|at| *at <= MAX_SAFE_INTEGER)
                        .ok_or_else(|| {
                            ApiError::validation(
                                "updatedSince is a time in milliseconds since the epoch.",
                            )
                        })?;
                    query.updated_since = Some(at);
                }
                "cursor" => {
                    let cursor = Cursor::decode(value)
                        .ok_or_else(|| ApiError::validation("cursor is not one this API gave."))?;
                    query.cursor = Some(cursor);
                }
                "limit" => query.limit = page_size(value)?,
                "owner" if (1..=256).contains(&value.len()) => query.owner = Some(value.clone()),
                "owner" => {
                    return Err(ApiError::validation(
                        "owner is a user's subject: 1 to 256 bytes.",
                    ));
                }
                // The credential of `EventSource` clients may come as a query parameter.
                "token" => {}
                other => {
                    return Err(ApiError::validation(format!(
                        "Unknown query parameter '{other}'."
                    )));
                }
            }
        }
        Ok(query)
    }
}

/// One page of sessions: optional filters are `NULL` parameters.
const SELECT_PAGE: &str = "SELECT id, agent, status, version, created_at, updated_at, \
     head ->> '$.owner.subject', head ->> '$.owner.tenant' FROM sessions \
     WHERE (?1 IS NULL OR agent = ?1) AND (?2 IS NULL OR status = ?2) AND updated_at >= ?3 \
     AND (?10 IS NULL OR head ->> '$.owner.subject' = ?10) \
     AND (?4 IS NULL OR updated_at < ?4 OR (updated_at = ?4 AND id < ?5)) \
     AND (?7 = 0 OR ((?8 IS NULL OR head ->> '$.owner.subject' = ?8) \
     AND head ->> '$.owner.tenant' IS ?9)) \
     ORDER BY updated_at DESC, id DESC LIMIT ?6";

/// The three parameters that keep a query to what `caller` reaches (`?7`–`?9` of the
/// list's and the inbox's queries): whether to, the subject (NULL: any of the tenant)
/// and the tenant.
pub(super) fn owner_args(caller: Option<&Caller>) -> [Arg; 3] {
    match caller.map(Caller::scope) {
        None => [Arg::Int(0), Arg::Null, Arg::Null],
        Some((subject, tenant)) => [
            Arg::Int(1),
            Arg::text_or_null(subject),
            Arg::text_or_null(tenant),
        ],
    }
}

impl ListQuery {
    /// The D1 query that reads the page (one row more than the page, to know whether
    /// another follows), with its parameters.
    pub fn statement(&self) -> (&'static str, Vec<Arg>) {
        let status = self.status.map(SessionStatus::as_str);
        let cursor = self.cursor.as_ref();
        let mut args = vec![
            Arg::text_or_null(self.agent.as_deref()),
            Arg::text_or_null(status),
            Arg::Int(self.updated_since.unwrap_or(0)),
            cursor.map_or(Arg::Null, |c| Arg::Int(c.updated_at)),
            Arg::text_or_null(cursor.map(|c| c.session_id.as_str())),
            Arg::Int(u64::from(self.limit) + 1),
        ];
        args.extend(owner_args(self.caller.as_ref()));
        args.push(Arg::text_or_null(self.owner.as_deref()));
        (SELECT_PAGE, args)
    }
}

/// One session of the list.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// Its id.
    pub session_id: String,
    /// Its agent.
    pub agent: String,
    /// Its status.
    pub status: SessionStatus,
    /// Its version (commits so far).
    pub version: u64,
    /// Creation time (ms).
    pub created_at: u64,
    /// Last commit time (ms).
    pub updated_at: u64,
    /// The user who owns it, when a user created it (feature `users`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
}

impl SessionSummary {
    /// A row of [`ListQuery::statement`]'s query.
    pub fn from_row(row: &Row) -> Result<Self, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("a listed session has no {what}"));
        let text = |i, what| text(row, i).ok_or_else(|| corrupt(what));
        let count = |i, what| {
            let n = int(row, i)
                .filter(|n| *n >= 0)
                .ok_or_else(|| corrupt(what))?;
            Ok::<u64, StoreError>(n as u64)
        };
        let status = serde_json::from_value(serde_json::Value::String(text(2, "status")?))
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(Self {
            session_id: text(0, "id")?,
            agent: text(1, "agent")?,
            status,
            version: count(3, "version")?,
            created_at: count(4, "creation time")?,
            updated_at: count(5, "update time")?,
            owner: crate::sqlite::text(row, 6).map(|subject| Owner {
                subject,
                tenant: crate::sqlite::text(row, 7),
            }),
        })
    }
}

/// Takes `partial` out of a listing's query pairs (the lists across shards, the inbox,
/// usage and schedules take it): whether a shard that cannot be read is left out of
/// the answer (named in `missingShards`) rather than failing it.
pub fn take_partial(pairs: &mut Vec<(String, String)>) -> Result<bool, ApiError> {
    let mut partial = false;
    let mut refused = None;
    pairs.retain(|(k, v)| {
        if k != "partial" {
            return true;
        }
        match v.as_str() {
            "true" => partial = true,
            "false" => partial = false,
            _ => refused = Some(v.clone()),
        }
        false
    });
    match refused {
        Some(v) => Err(ApiError::validation(format!(
            "partial is true or false, not '{v}'."
        ))),
        None => Ok(partial),
    }
}

/// Body of `GET /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionList {
    /// The page, newest first.
    pub sessions: Vec<SessionSummary>,
    /// Where the next page starts, if there may be one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// With `partial=true`: the shards (D1 bindings) that could not be read, whose rows
    /// this answer lacks; empty (and not sent) when every shard answered.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_shards: Vec<String>,
}

impl SessionList {
    /// A page of `limit` from `rows` (read with one more than `limit`, to know whether
    /// another page follows).
    pub fn page(mut rows: Vec<SessionSummary>, limit: u32) -> Self {
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next_cursor = more
            .then(|| rows.last())
            .flatten()
            .map(|last| Cursor {
                updated_at: last.updated_at,
                session_id: last.session_id.clone(),
            })
            .map(|c| c.encode());
        Self {
            sessions: rows,
            next_cursor,
            missing_shards: Vec::new(),
        }
    }

    /// A page of `limit` from the rows each shard answered to the same query (each
    /// newest first, one more than `limit`): merged newest first (update time, then
    /// id, as the query orders them); a session lives on one shard, so it comes once. As
    /// the cursor is the last
    /// session listed, not a position, the next page asks every shard from there
    /// again and no session is skipped or repeated, whatever the shards' timestamps are.
    pub fn merged(shards: Vec<Vec<SessionSummary>>, limit: u32) -> Self {
        let mut rows: Vec<SessionSummary> = shards.into_iter().flatten().collect();
        rows.sort_unstable_by(|a, b| {
            (b.updated_at, &b.session_id).cmp(&(a.updated_at, &a.session_id))
        });
        Self::page(rows, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Result<ListQuery, ApiError> {
        let pairs: Vec<_> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ListQuery::parse(&pairs)
    }

    #[test]
    fn the_query_takes_its_filters_and_refuses_anything_else() {
        let all = q(&[
            ("agent", "assistant"),
            ("status", "completed"),
            ("updatedSince", "1795000000000"),
            ("cursor", "1795000000001.s_a.b-c"),
            ("limit", "5"),
        ])
        .unwrap();
        assert_eq!(all.agent.as_deref(), Some("assistant"));
        assert_eq!(all.status, Some(SessionStatus::Completed));
        assert_eq!(all.updated_since, Some(1_795_000_000_000));
        let cursor = all.cursor.unwrap();
        assert_eq!(
            (cursor.updated_at, cursor.session_id.as_str()),
            (1_795_000_000_001, "s_a.b-c")
        );
        assert_eq!(all.limit, 5);
        assert_eq!(q(&[]).unwrap().limit, DEFAULT_LIMIT);
        for bad in [
            ("status", "done"),
            ("limit", "0"),
            ("limit", "101"),
            ("updatedSince", "yesterday"),
            ("updatedSince", "9007199254740992"),
            ("cursor", "x.y"),
            ("cursor", "12"),
            ("agent", "no spaces"),
            ("sort", "asc"),
        ] {
            assert_eq!(q(&[bad]).unwrap_err().status, 400, "{bad:?}");
        }
    }

    #[test]
    fn a_page_names_where_the_next_one_starts_only_when_there_is_more() {
        let summary = |n: u64| SessionSummary {
            session_id: format!("s{n}"),
            agent: "a".into(),
            status: SessionStatus::Active,
            version: 1,
            created_at: n,
            updated_at: 100 - n,
            owner: None,
        };
        let page = SessionList::page((1..=3).map(summary).collect(), 2);
        assert_eq!(page.sessions.len(), 2);
        assert_eq!(page.next_cursor.as_deref(), Some("98.s2"));
        let last = SessionList::page((1..=2).map(summary).collect(), 2);
        assert_eq!(last.next_cursor, None);
        let round = Cursor::decode(&page.next_cursor.unwrap()).unwrap();
        assert_eq!(round.session_id, "s2");
    }

    /// What one shard's D1 answers to [`SELECT_PAGE`] with no filters: its sessions
    /// after `cursor`, newest first (update time, then id), one more than `limit`.
    fn shard_page(
        rows: &[SessionSummary],
        cursor: Option<&Cursor>,
        limit: u32,
    ) -> Vec<SessionSummary> {
        let after = |s: &&SessionSummary| match cursor {
            None => true,
            Some(c) => {
                s.updated_at < c.updated_at
                    || (s.updated_at == c.updated_at && s.session_id < c.session_id)
            }
        };
        let mut page: Vec<SessionSummary> = rows.iter().filter(after).cloned().collect();
        page.sort_by(|a, b| (b.updated_at, &b.session_id).cmp(&(a.updated_at, &a.session_id)));
        page.truncate(limit as usize + 1);
        page
    }

    #[test]
    fn pages_merged_across_shards_list_every_session_once_newest_first() {
        let summary = |id: String, updated_at: u64| SessionSummary {
            session_id: id,
            agent: "a".into(),
            status: SessionStatus::Active,
            version: 1,
            created_at: 0,
            updated_at,
            owner: None,
        };
        // Four shards of uneven sizes, their timestamps interleaved, with ties inside a
        // shard and across shards (and one shard empty).
        let shards: Vec<Vec<SessionSummary>> = (0..4u64)
            .map(|shard| {
                let count = [37, 0, 12, 51][shard as usize];
                (0..count)
                    .map(|n: u64| summary(format!("s{shard}-{n:02}"), 1_000 + (n * 7 + shard) % 23))
                    .collect()
            })
            .collect();
        let mut expected: Vec<SessionSummary> = shards.iter().flatten().cloned().collect();
        expected.sort_by(|a, b| (b.updated_at, &b.session_id).cmp(&(a.updated_at, &a.session_id)));
        for limit in [1, 5, 20, 100] {
            let (mut listed, mut cursor, mut pages) = (Vec::new(), None::<Cursor>, 0);
            loop {
                let answers = shards
                    .iter()
                    .map(|rows| shard_page(rows, cursor.as_ref(), limit));
                let page = SessionList::merged(answers.collect(), limit);
                assert!(page.sessions.len() <= limit as usize);
                listed.extend(page.sessions);
                pages += 1;
                match page.next_cursor {
                    Some(next) => cursor = Some(Cursor::decode(&next).unwrap()),
                    None => break,
                }
            }
            assert_eq!(
                listed, expected,
                "limit {limit}: every session once, in order"
            );
            assert_eq!(
                pages,
                expected.len().div_ceil(limit as usize).max(1),
                "limit {limit}"
            );
        }
    }

    #[test]
    fn partial_is_taken_out_of_the_query_and_must_be_true_or_false() {
        let mut pairs = vec![
            ("limit".to_string(), "5".to_string()),
            ("partial".to_string(), "true".to_string()),
        ];
        assert_eq!(take_partial(&mut pairs), Ok(true));
        assert_eq!(pairs, [("limit".to_string(), "5".to_string())]);
        assert_eq!(take_partial(&mut pairs), Ok(false));
        let mut bad = vec![("partial".to_string(), "yes".to_string())];
        let e = take_partial(&mut bad).unwrap_err();
        assert_eq!((e.status, e.code), (400, "validation_error"));
        let down = ApiError::storage_unavailable(&["DB_2".into(), "DB_3".into()]);
        assert_eq!(
            (down.status, down.code, down.retryable),
            (503, "storage_unavailable", true)
        );
        assert!(down.message.contains("DB_2, DB_3"), "{}", down.message);
    }
}
