//! `GET /v1/usage`: the tokens runs used, summed per agent, per day (UTC), per session
//! or per model, over the runs that started in a time window — read from the queryable
//! record (each run's row in D1 carries its usage, summed over its steps), so as fresh
//! as replication. The API token sees every session's runs, a user those of the
//! sessions they reach.

use super::ApiError;
use crate::auth::Caller;
use crate::model::Usage;
use crate::sqlite::{Row, int, text};
use crate::store::StoreError;
use crate::store::rows::Arg;
use crate::wire::wire_enum;
use serde::Serialize;
use std::collections::BTreeMap;

/// The most groups a report holds (a longer one says `truncated`).
pub const MAX_GROUPS: u32 = 1000;
/// The largest time a query takes (2^53 - 1: what a JSON number holds exactly).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

wire_enum! {
    /// What a report sums by.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub enum GroupBy {
        /// The session's agent.
        #[default]
        Agent = "agent",
        /// The UTC day the run started (`YYYY-MM-DD`).
        Day = "day",
        /// The session.
        Session = "session",
        /// The model that answered (a run on several models counts in each).
        Model = "model",
    }
}

/// The query of `GET /v1/usage`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UsageQuery {
    /// Only sessions of this agent.
    pub agent: Option<String>,
    /// Runs started at or after this time (ms).
    pub from: u64,
    /// Runs started before this time (ms).
    pub to: Option<u64>,
    /// What to sum by.
    pub group_by: GroupBy,
    /// Only the sessions this user reaches (set by the worker, never from the query).
    pub caller: Option<Caller>,
}

impl UsageQuery {
    /// Parses and validates the query pairs; unknown parameters are refused.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, ApiError> {
        let mut query = Self::default();
        let time = |value: &str, what: &str| {
            value
                .parse()
                .ok()
                .filter(|at| *at <= MAX_SAFE_INTEGER)
                .ok_or_else(|| {
                    ApiError::validation(format!(
                        "{what} is a time in milliseconds since the epoch."
                    ))
                })
        };
        for (key, value) in pairs {
            match key.as_str() {
                "agent" if crate::tool::valid_name(value) => query.agent = Some(value.clone()),
                "agent" => return Err(ApiError::validation("agent is not a valid agent name.")),
                "from" => query.from = time(value, "from")?,
                "to" => query.to = Some(time(value, "to")?),
                "groupBy" => {
                    let by = serde_json::from_value(serde_json::Value::String(value.clone()));
                    query.group_by = by.map_err(|_| {
                        ApiError::validation("groupBy is one of agent, day, session, model.")
                    })?;
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
        // A window that ends before it starts holds no run: its report is empty.
        Ok(query)
    }

    /// The D1 query that sums the window (one group more than the most a report holds,
    /// to know whether it was cut), with its parameters.
    pub fn statement(&self) -> (&'static str, Vec<Arg>) {
        let mut args = vec![
            Arg::text_or_null(self.agent.as_deref()),
            Arg::Int(self.from),
            Arg::Int(self.to.unwrap_or(MAX_SAFE_INTEGER)),
            Arg::Text(self.group_by.as_str().into()),
            Arg::Int(u64::from(MAX_GROUPS) + 1),
        ];
        args.extend(super::list::owner_args(self.caller.as_ref()));
        let sql = match self.group_by {
            GroupBy::Model => SELECT_MODEL_SUMS,
            _ => SELECT_SUMS,
        };
        (sql, args)
    }
}

/// The runs of the window, summed by the group's key; the owner's filter is `?6`–`?8`.
const SELECT_SUMS: &str = "SELECT CASE ?4 WHEN 'agent' THEN s.agent WHEN 'session' THEN s.id \
     ELSE strftime('%Y-%m-%d', (r.body ->> '$.startedAt') / 1000, 'unixepoch') END AS k, \
     COUNT(*), SUM(r.body ->> '$.usage.inputTokens'), SUM(r.body ->> '$.usage.outputTokens'), \
     SUM(r.body ->> '$.usage.cacheReadTokens'), SUM(r.body ->> '$.usage.cacheWriteTokens') \
     FROM runs AS r JOIN sessions AS s ON s.id = r.session_id \
     WHERE (?1 IS NULL OR s.agent = ?1) \
     AND r.body ->> '$.startedAt' >= ?2 AND r.body ->> '$.startedAt' < ?3 \
     AND (?6 = 0 OR ((?7 IS NULL OR s.head ->> '$.owner.subject' = ?7) \
     AND s.head ->> '$.owner.tenant' IS ?8)) \
     GROUP BY k ORDER BY k LIMIT ?5";

/// The runs of the window, their tokens summed by model (each run's `usageByModel`);
/// the same parameters (`?4` is `model`).
const SELECT_MODEL_SUMS: &str = "SELECT m.key AS k, \
     COUNT(*), SUM(m.value ->> '$.inputTokens'), SUM(m.value ->> '$.outputTokens'), \
     SUM(m.value ->> '$.cacheReadTokens'), SUM(m.value ->> '$.cacheWriteTokens') \
     FROM runs AS r JOIN sessions AS s ON s.id = r.session_id, \
     json_each(r.body, '$.usageByModel') AS m \
     WHERE ?4 = 'model' AND (?1 IS NULL OR s.agent = ?1) \
     AND r.body ->> '$.startedAt' >= ?2 AND r.body ->> '$.startedAt' < ?3 \
     AND (?6 = 0 OR ((?7 IS NULL OR s.head ->> '$.owner.subject' = ?7) \
     AND s.head ->> '$.owner.tenant' IS ?8)) \
     GROUP BY k ORDER BY k LIMIT ?5";

/// The tokens of one group.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageGroup {
    /// The agent, the day (`YYYY-MM-DD`), the session or the model.
    pub key: String,
    /// How many runs.
    pub runs: u64,
    /// Their tokens.
    #[serde(flatten)]
    pub usage: Usage,
}

/// Body of `GET /v1/usage`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    /// What it sums by.
    pub group_by: GroupBy,
    /// The window's start (ms).
    pub from: u64,
    /// The window's end (ms), if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<u64>,
    /// The groups, by key.
    pub groups: Vec<UsageGroup>,
    /// Every group's runs and tokens.
    pub total: UsageGroup,
    /// Whether there were more than [`MAX_GROUPS`] groups (the rest are left out, and
    /// of the total).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// With `partial=true`: the shards (D1 bindings) that could not be read, whose rows
    /// this answer lacks; empty (and not sent) when every shard answered.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_shards: Vec<String>,
}

impl UsageReport {
    /// The report of `query` from the rows of its statement.
    pub fn from_rows(query: &UsageQuery, rows: &[Row]) -> Result<Self, StoreError> {
        Self::merged(query, std::slice::from_ref(&rows.to_vec()))
    }

    /// The report of `query` from the rows of its statement run on each shard: a key's
    /// sums added up over the shards. A shard that had more than [`MAX_GROUPS`] groups
    /// sent the first `MAX_GROUPS + 1` keys, whole; a key after its last may lack its
    /// part, so the report stops there (and is `truncated`).
    pub fn merged(query: &UsageQuery, shards: &[Vec<Row>]) -> Result<Self, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("a usage row has no {what}"));
        let count = |row: &Row, i: usize| int(row, i).map_or(0, |n| n.max(0) as u64);
        let mut sums: BTreeMap<String, UsageGroup> = BTreeMap::new();
        let mut bound: Option<String> = None;
        for rows in shards {
            for row in rows {
                let key = text(row, 0).ok_or_else(|| corrupt("key"))?;
                let group = sums.entry(key.clone()).or_insert_with(|| UsageGroup {
                    key,
                    runs: 0,
                    usage: Usage::default(),
                });
                group.runs += count(row, 1);
                group.usage.add(&Usage {
                    input_tokens: count(row, 2),
                    output_tokens: count(row, 3),
                    cache_read_tokens: count(row, 4),
                    cache_write_tokens: count(row, 5),
                });
            }
            if rows.len() > MAX_GROUPS as usize {
                let last = rows.last().and_then(|r| text(r, 0));
                bound = match (bound, last) {
                    (Some(b), Some(l)) => Some(b.min(l)),
                    (b, l) => b.or(l),
                };
            }
        }
        let mut groups: Vec<UsageGroup> = sums
            .into_values()
            .filter(|g| bound.as_ref().is_none_or(|b| g.key <= *b))
            .collect();
        let truncated = bound.is_some() || groups.len() > MAX_GROUPS as usize;
        groups.truncate(MAX_GROUPS as usize);
        let mut total = UsageGroup {
            key: "total".into(),
            runs: 0,
            usage: Usage::default(),
        };
        for group in &groups {
            total.runs += group.runs;
            total.usage.add(&group.usage);
        }
        Ok(Self {
            group_by: query.group_by,
            from: query.from,
            to: query.to,
            groups,
            total,
            truncated,
            missing_shards: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Result<UsageQuery, ApiError> {
        let pairs: Vec<_> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        UsageQuery::parse(&pairs)
    }

    #[test]
    fn the_query_takes_its_window_and_grouping_and_refuses_anything_else() {
        let all = q(&[
            ("agent", "assistant"),
            ("from", "1795000000000"),
            ("to", "1795000000001"),
            ("groupBy", "day"),
            ("token", "t"),
        ])
        .unwrap();
        assert_eq!(all.agent.as_deref(), Some("assistant"));
        assert_eq!(
            (all.from, all.to),
            (1_795_000_000_000, Some(1_795_000_000_001))
        );
        assert_eq!(all.group_by, GroupBy::Day);
        let empty = q(&[("from", "5"), ("to", "5")]).unwrap();
        assert_eq!(
            (empty.from, empty.to),
            (5, Some(5)),
            "an empty window, not an error"
        );
        let plain = q(&[]).unwrap();
        assert_eq!(
            (plain.from, plain.to, plain.group_by),
            (0, None, GroupBy::Agent)
        );
        let (_, args) = plain.statement();
        assert_eq!(
            args[2],
            Arg::Int(MAX_SAFE_INTEGER),
            "no end: every run since `from`"
        );
        assert_eq!(args[5..], [Arg::Int(0), Arg::Null, Arg::Null]);

        for bad in [
            [("groupBy", "models")].as_slice(),
            &[("groupBy", "")],
            &[("from", "yesterday")],
            &[("from", "-1")],
            &[("to", "9007199254740992")],
            &[("agent", "no spaces")],
            &[("limit", "5")],
        ] {
            let e = q(bad).unwrap_err();
            assert_eq!((e.status, e.code), (400, "validation_error"), "{bad:?}");
        }
    }

    #[test]
    fn a_report_sums_its_groups_and_says_when_it_was_cut() {
        use crate::sqlite::Cell;
        let row = |key: &str, n: i64| {
            vec![
                Cell::Text(key.into()),
                Cell::Int(n),
                Cell::Int(10 * n),
                Cell::Int(2 * n),
                Cell::Int(n),
                Cell::Null,
            ]
        };
        let query = q(&[("groupBy", "session")]).unwrap();
        let report = UsageReport::from_rows(&query, &[row("s_a", 1), row("s_b", 3)]).unwrap();
        assert_eq!(report.total.runs, 4);
        assert_eq!(report.total.usage.input_tokens, 40);
        assert_eq!(
            report.total.usage.cache_write_tokens, 0,
            "no tokens is none"
        );
        assert!(!report.truncated);
        let sent = serde_json::to_value(&report).unwrap();
        assert_eq!(
            sent["groups"][1],
            serde_json::json!({"key": "s_b", "runs": 3, "inputTokens": 30, "outputTokens": 6,
                "cacheReadTokens": 3, "cacheWriteTokens": 0})
        );
        assert_eq!(sent["groupBy"], "session");
        assert!(sent.get("to").is_none() && sent.get("truncated").is_none());

        let many: Vec<Row> = (0..=MAX_GROUPS)
            .map(|i| row(&format!("s_{i:04}"), 1))
            .collect();
        let cut = UsageReport::from_rows(&query, &many).unwrap();
        assert!(cut.truncated);
        assert_eq!(cut.groups.len(), MAX_GROUPS as usize);
        assert_eq!(cut.total.runs, u64::from(MAX_GROUPS));

        // Over shards: a key's parts add up; past the last key a cut shard sent, a key
        // may lack its part there, so the report stops at that key.
        let other = vec![row("s_0000", 2), row("s_2000", 5)];
        let merged = UsageReport::merged(&query, &[many, other]).unwrap();
        assert!(merged.truncated);
        assert_eq!(merged.groups.len(), MAX_GROUPS as usize);
        assert_eq!(
            (merged.groups[0].key.as_str(), merged.groups[0].runs),
            ("s_0000", 3)
        );
        assert!(merged.groups.iter().all(|g| g.key.as_str() < "s_2000"));
        assert_eq!(merged.total.runs, u64::from(MAX_GROUPS) + 2);
    }
}
