//! `GET /v1/schedules` (API token only): the schedules of every session, soonest fire
//! first, read from the queryable record ([`super::record`]), so as fresh as the objects'
//! sends. `dueBefore` keeps the fires due before a time (`now` for the ones due now),
//! `agent` one agent's sessions; `cursor` and `limit` page.

use super::when::format_time;
use crate::api::ApiError;
use crate::sqlite::{Row, int, text};
use crate::store::StoreError;
use crate::store::rows::Arg;
use serde::Serialize;
use serde_json::{Map, Value};

/// Default page size.
pub const DEFAULT_LIMIT: u32 = 50;

/// Where a page starts: after the fire last listed (by time, then session and schedule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    next_fire_ms: u64,
    session_id: String,
    schedule_id: String,
}

impl Cursor {
    /// The opaque form clients send back: `{ms}:{session}:{schedule}` (a session id has
    /// no `:`).
    pub fn encode(&self) -> String {
        format!(
            "{}:{}:{}",
            self.next_fire_ms, self.session_id, self.schedule_id
        )
    }

    /// Reads an opaque cursor.
    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, ':');
        let (ms, session, schedule) = (parts.next()?, parts.next()?, parts.next()?);
        let valid = crate::auth::valid_session_id(session) && !schedule.is_empty();
        valid.then_some(())?;
        Some(Self {
            next_fire_ms: ms.parse().ok()?,
            session_id: session.into(),
            schedule_id: schedule.into(),
        })
    }
}

/// The query of `GET /v1/schedules`.
#[derive(Debug, Clone, PartialEq)]
pub struct DueQuery {
    /// Only fires due before this time (ms).
    pub due_before: Option<u64>,
    /// Only sessions of this agent.
    pub agent: Option<String>,
    /// Continue after this fire.
    pub cursor: Option<Cursor>,
    /// Page size.
    pub limit: u32,
}

impl DueQuery {
    /// Reads the query's `(name, value)` pairs at `now_ms` (`dueBefore=now`); 400 naming
    /// what is wrong.
    pub fn parse(pairs: &[(String, String)], now_ms: u64) -> Result<Self, ApiError> {
        let mut query = Self {
            due_before: None,
            agent: None,
            cursor: None,
            limit: DEFAULT_LIMIT,
        };
        for (key, value) in pairs {
            match key.as_str() {
                "dueBefore" if value == "now" => query.due_before = Some(now_ms + 1),
                "dueBefore" => {
                    let at = super::civil::parse_rfc3339(value).map_err(|e| {
                        let why = format!("dueBefore: not `now` or an RFC 3339 time ({e}).");
                        ApiError::validation(why)
                    })?;
                    // Before 1970 nothing is due.
                    query.due_before = Some(at.max(0) as u64);
                }
                "agent" if crate::tool::valid_name(value) => query.agent = Some(value.clone()),
                "agent" => return Err(ApiError::validation("agent is not a valid agent name.")),
                "cursor" => {
                    let cursor = Cursor::decode(value)
                        .ok_or_else(|| ApiError::validation("cursor is not one this API gave."))?;
                    query.cursor = Some(cursor);
                }
                "limit" => query.limit = crate::api::page_size(value)?,
                "token" => {}
                other => {
                    let message = format!("Unknown query parameter '{other}'.");
                    return Err(ApiError::validation(message));
                }
            }
        }
        Ok(query)
    }

    /// The D1 query that reads the page (one row more, to know whether another follows),
    /// with its parameters; optional filters are `NULL`.
    pub fn statement(&self) -> (&'static str, Vec<Arg>) {
        // An aborted session's schedules never fire: left out as soon as D1 has the abort.
        const SELECT_PAGE: &str = "SELECT s.session_id, s.schedule_id, s.agent, s.next_fire_at, \
            s.body FROM schedules s JOIN sessions x ON x.id = s.session_id \
            WHERE x.status != 'aborted' AND (?1 IS NULL OR s.next_fire_at < ?1) \
            AND (?2 IS NULL OR s.agent = ?2) AND (?3 IS NULL OR s.next_fire_at > ?3 \
            OR (s.next_fire_at = ?3 AND (s.session_id > ?4 \
            OR (s.session_id = ?4 AND s.schedule_id > ?5)))) \
            ORDER BY s.next_fire_at, s.session_id, s.schedule_id LIMIT ?6";
        let cursor = self.cursor.as_ref();
        let args = vec![
            self.due_before.map_or(Arg::Null, Arg::Int),
            Arg::text_or_null(self.agent.as_deref()),
            cursor.map_or(Arg::Null, |c| Arg::Int(c.next_fire_ms)),
            Arg::text_or_null(cursor.map(|c| c.session_id.as_str())),
            Arg::text_or_null(cursor.map(|c| c.schedule_id.as_str())),
            Arg::Int(u64::from(self.limit) + 1),
        ];
        (SELECT_PAGE, args)
    }
}

/// Body of `GET /v1/schedules`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DuePage {
    /// The page: each schedule's view with its `sessionId` and `agent`, soonest first.
    pub schedules: Vec<Value>,
    /// Where the next page starts, if there may be one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// With `partial=true`: the shards (D1 bindings) that could not be read, whose rows
    /// this answer lacks; empty (and not sent) when every shard answered.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_shards: Vec<String>,
}

impl DuePage {
    /// A page of `limit` from the rows of [`DueQuery::statement`] run on each shard:
    /// merged soonest first, as the query orders them (each shard gives its first
    /// `limit + 1`, so the first `limit + 1` of all are among them).
    pub fn merged(shards: &[Vec<Row>], limit: u32) -> Result<Self, StoreError> {
        let mut rows: Vec<Row> = shards.iter().flatten().cloned().collect();
        rows.sort_unstable_by_key(|r| (int(r, 3), text(r, 0), text(r, 1)));
        Self::from_rows(&rows, limit)
    }

    /// A page of `limit` from the `rows` of [`DueQuery::statement`].
    pub fn from_rows(rows: &[Row], limit: u32) -> Result<Self, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("a listed schedule has no {what}"));
        let mut schedules = Vec::new();
        let mut last = None;
        for row in rows.iter().take(limit as usize) {
            let session = text(row, 0).ok_or_else(|| corrupt("session"))?;
            let schedule = text(row, 1).ok_or_else(|| corrupt("id"))?;
            let agent = text(row, 2).ok_or_else(|| corrupt("agent"))?;
            let at = int(row, 3)
                .filter(|n| *n >= 0)
                .ok_or_else(|| corrupt("fire time"))?;
            let body = text(row, 4).ok_or_else(|| corrupt("body"))?;
            let mut view: Map<String, Value> =
                serde_json::from_str(&body).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            view.insert("sessionId".into(), Value::String(session.clone()));
            view.insert("agent".into(), Value::String(agent));
            view.insert("nextFireAt".into(), Value::String(format_time(at as u64)));
            schedules.push(Value::Object(view));
            last = Some(Cursor {
                next_fire_ms: at as u64,
                session_id: session,
                schedule_id: schedule,
            });
        }
        let more = rows.len() > limit as usize;
        Ok(Self {
            schedules,
            next_cursor: last.filter(|_| more).map(|c| c.encode()),
            missing_shards: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::Cell;

    fn q(pairs: &[(&str, &str)]) -> Result<DueQuery, ApiError> {
        let pairs: Vec<_> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        DueQuery::parse(&pairs, 1_000)
    }

    #[test]
    fn the_query_reads_its_filters_and_refuses_what_it_does_not_know() {
        let query = q(&[("dueBefore", "now"), ("agent", "secretary"), ("limit", "5")]).unwrap();
        assert_eq!(query.due_before, Some(1_001));
        assert_eq!(query.agent.as_deref(), Some("secretary"));
        assert_eq!(query.limit, 5);
        let at = q(&[("dueBefore", "2026-11-26T09:00:00Z")]).unwrap();
        assert_eq!(at.due_before, Some(1_795_683_600_000));
        let early = q(&[("dueBefore", "1969-01-01T00:00:00Z")]).unwrap();
        assert_eq!(early.due_before, Some(0), "before 1970: nothing is due");
        // What RFC 3339 allows: lower case, fractions, a leap second, any offset.
        for time in [
            "2026-11-26t09:00:00z",
            "2026-11-26T09:00:00.123456789+05:30",
            "2016-12-31T23:59:60Z",
            "0001-01-01T00:00:00-23:59",
        ] {
            assert!(q(&[("dueBefore", time)]).is_ok(), "{time}");
        }
        for bad in [
            ("dueBefore", "tomorrow"),
            ("dueBefore", ""),
            ("limit", "0"),
            ("limit", "101"),
            ("agent", "no spaces"),
            ("cursor", "x"),
            ("status", "active"),
        ] {
            assert_eq!(q(&[bad]).unwrap_err().status, 400, "{bad:?}");
        }
    }

    #[test]
    fn a_cursor_reads_back_what_it_wrote_schedule_ids_with_colons_included() {
        let cursor = Cursor {
            next_fire_ms: 42,
            session_id: "s-1.a".into(),
            schedule_id: "schedule_call:7".into(),
        };
        assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor));
        assert_eq!(Cursor::decode("42:bad id:x"), None);
    }

    #[test]
    fn a_page_adds_the_session_and_agent_and_says_whether_another_follows() {
        let row = |session: &str, at: i64| -> Row {
            vec![
                Cell::Text(session.into()),
                Cell::Text("schedule_1".into()),
                Cell::Text("secretary".into()),
                Cell::Int(at),
                Cell::Text(r#"{"scheduleId":"schedule_1","every":60}"#.into()),
            ]
        };
        let page = DuePage::from_rows(&[row("a", 1_000), row("b", 2_000)], 1).unwrap();
        assert_eq!(page.schedules.len(), 1);
        assert_eq!(page.schedules[0]["sessionId"], "a");
        assert_eq!(page.schedules[0]["agent"], "secretary");
        assert_eq!(page.schedules[0]["every"], 60);
        assert_eq!(page.next_cursor.as_deref(), Some("1000:a:schedule_1"));
        let last = DuePage::from_rows(&[row("a", 1_000)], 1).unwrap();
        assert_eq!(last.next_cursor, None);

        // Over shards: soonest first, ties by session.
        let shards = [
            vec![row("b", 1_000), row("d", 3_000)],
            vec![row("a", 1_000), row("c", 2_000)],
        ];
        let page = DuePage::merged(&shards, 3).unwrap();
        let order: Vec<&Value> = page.schedules.iter().map(|s| &s["sessionId"]).collect();
        assert_eq!(order, ["a", "b", "c"]);
        assert_eq!(page.next_cursor.as_deref(), Some("2000:c:schedule_1"));
    }
}
