//! `GET /v1/inbox`: the calls waiting on a person across sessions — approvals, the
//! calls a client answers, and the connections and input calls ask for — newest first, read from the queryable record (each
//! session's head in D1 carries its pending calls), so as fresh as replication. The
//! filters are an agent, a tool and a kind; `cursor` and `limit` page. A sub-agent's
//! call waits on its child, not on a person, and is never listed.

use super::{ApiError, DEFAULT_LIMIT, page_size};
use crate::auth::Caller;
use crate::sqlite::{Row, text};
use crate::store::rows::Arg;
use crate::store::{Approvers, PendingCall, PendingKind, StoreError};
use serde::Serialize;
use serde_json::Value;

/// Where a page starts: after the call last listed (by the time it began waiting, then
/// session and call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxCursor {
    since: u64,
    session_id: String,
    tool_call_id: String,
}

impl InboxCursor {
    /// The opaque form clients send back: `{ms}:{session}:{call}` (a session id has no
    /// `:`; a call id may).
    pub fn encode(&self) -> String {
        format!("{}:{}:{}", self.since, self.session_id, self.tool_call_id)
    }

    /// Reads an opaque cursor.
    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.splitn(3, ':');
        let (ms, session, call) = (parts.next()?, parts.next()?, parts.next()?);
        let digits = !ms.is_empty() && ms.bytes().all(|b| b.is_ascii_digit());
        (digits && crate::auth::valid_session_id(session) && !call.is_empty()).then_some(())?;
        Some(Self {
            since: ms.parse().ok()?,
            session_id: session.into(),
            tool_call_id: call.into(),
        })
    }
}

/// The query of `GET /v1/inbox`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InboxQuery {
    /// Only sessions of this agent.
    pub agent: Option<String>,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only calls of this kind.
    pub kind: Option<PendingKind>,
    /// Continue after this call.
    pub cursor: Option<InboxCursor>,
    /// Page size.
    pub limit: u32,
    /// Only the sessions this user reaches (set by the worker, never from the query).
    pub caller: Option<Caller>,
}

impl InboxQuery {
    /// Parses and validates the query pairs; unknown parameters are refused.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, ApiError> {
        let mut query = Self {
            limit: DEFAULT_LIMIT,
            ..Self::default()
        };
        let name = |value: &String, what: &str| {
            crate::tool::valid_name(value)
                .then(|| value.clone())
                .ok_or_else(|| ApiError::validation(format!("{what} is not a valid name.")))
        };
        for (key, value) in pairs {
            match key.as_str() {
                "agent" => query.agent = Some(name(value, "agent")?),
                "tool" => query.tool = Some(name(value, "tool")?),
                "kind" => {
                    let kind = serde_json::from_value(Value::String(value.clone()));
                    query.kind = Some(kind.ok().filter(|k| *k != PendingKind::Child).ok_or_else(
                        || {
                            ApiError::validation(
                                "kind is one of approval, client, authorization, elicitation.",
                            )
                        },
                    )?);
                }
                "cursor" => {
                    let cursor = InboxCursor::decode(value)
                        .ok_or_else(|| ApiError::validation("cursor is not one this API gave."))?;
                    query.cursor = Some(cursor);
                }
                "limit" => query.limit = page_size(value)?,
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

    /// The D1 query that reads the page (one row more than the page, to know whether
    /// another follows), with its parameters. Only heads with pending calls are read
    /// (the `sessions_waiting` index holds just those).
    pub fn statement(&self) -> (&'static str, Vec<Arg>) {
        let cursor = self.cursor.as_ref();
        let mut args = vec![
            Arg::text_or_null(self.agent.as_deref()),
            Arg::text_or_null(self.tool.as_deref()),
            Arg::text_or_null(self.kind.map(PendingKind::as_str)),
            cursor.map_or(Arg::Null, |c| Arg::Int(c.since)),
            Arg::text_or_null(cursor.map(|c| c.session_id.as_str())),
            Arg::text_or_null(cursor.map(|c| c.tool_call_id.as_str())),
            Arg::Int(u64::from(self.limit) + 1),
        ];
        args.extend(super::list::owner_args(self.caller.as_ref()));
        args.extend(roles_arg(self.caller.as_ref()));
        (SELECT_PAGE, args)
    }
}

/// The roles of `caller` (`?11`, a JSON array; `NULL` for none) and their own tenant
/// (`?12`): the approvals that need a role they hold, across their tenant, are in their
/// inbox too.
fn roles_arg(caller: Option<&Caller>) -> [Arg; 2] {
    match caller.filter(|c| !c.roles.is_empty()) {
        None => [Arg::Null, Arg::Null],
        Some(c) => [
            Arg::Text(serde_json::to_string(&c.roles).unwrap_or_default()),
            Arg::text_or_null(c.user.tenant.as_deref()),
        ],
    }
}

/// One page of waiting calls: each pending call of each waiting head is a row (SQLite's
/// `json_each`); optional filters are `NULL` parameters. A user sees the calls of the
/// sessions they reach and the approvals their roles decide (a session no user owns is
/// the API token's alone).
const SELECT_PAGE: &str = "SELECT s.id, s.agent, p.value FROM sessions AS s, \
     json_each(s.head, '$.pending') AS p \
     WHERE json_array_length(s.head, '$.pending') > 0 \
     AND p.value ->> 'kind' <> 'child' \
     AND (?1 IS NULL OR s.agent = ?1) AND (?2 IS NULL OR p.value ->> 'toolName' = ?2) \
     AND (?3 IS NULL OR p.value ->> 'kind' = ?3) \
     AND (?8 = 0 OR ((?9 IS NULL OR s.head ->> '$.owner.subject' = ?9) \
     AND s.head ->> '$.owner.tenant' IS ?10) \
     OR (?11 IS NOT NULL AND s.head ->> '$.owner.subject' IS NOT NULL \
     AND s.head ->> '$.owner.tenant' IS ?12 \
     AND p.value ->> '$.approvers.role' IN (SELECT value FROM json_each(?11)))) \
     AND (?4 IS NULL OR (p.value ->> 'since', s.id, p.value ->> 'toolCallId') < (?4, ?5, ?6)) \
     ORDER BY p.value ->> 'since' DESC, s.id DESC, p.value ->> 'toolCallId' DESC LIMIT ?7";

/// One call of the inbox.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxItem {
    /// The session that waits.
    pub session_id: String,
    /// Its agent.
    pub agent: String,
    /// The call.
    pub tool_call_id: String,
    /// Its tool.
    pub tool_name: String,
    /// Its arguments.
    pub arguments: Value,
    /// Who answers it.
    pub kind: PendingKind,
    /// When the run began waiting on it (ms).
    pub waiting_since: u64,
    /// When the answer is due (ms), for the calls that have a deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<u64>,
    /// For an approval that needs a role: who may decide it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvers: Option<Approvers>,
    /// For a call that asked mid-call: what the user is shown (`authorizeUrl`, or
    /// `message` and `requestedSchema`, with the `server`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
}

impl InboxItem {
    /// A row of [`InboxQuery::statement`]'s query.
    pub fn from_row(row: &Row) -> Result<Self, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("an inbox call has no {what}"));
        let call: PendingCall = serde_json::from_str(&text(row, 2).ok_or_else(|| corrupt("call"))?)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(Self {
            session_id: text(row, 0).ok_or_else(|| corrupt("session"))?,
            agent: text(row, 1).ok_or_else(|| corrupt("agent"))?,
            tool_call_id: call.tool_call_id,
            tool_name: call.tool_name,
            arguments: call.arguments,
            kind: call.kind,
            waiting_since: call.since,
            deadline: call.deadline,
            approvers: call.approvers,
            request: crate::tool::wait::shown(call.request.as_ref()),
        })
    }
}

/// Body of `GET /v1/inbox`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxPage {
    /// The page, newest first.
    pub items: Vec<InboxItem>,
    /// Where the next page starts, if there may be one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// With `partial=true`: the shards (D1 bindings) that could not be read, whose rows
    /// this answer lacks; empty (and not sent) when every shard answered.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_shards: Vec<String>,
}

impl InboxPage {
    /// A page of `limit` from the query's rows (one more than `limit` when another page
    /// follows).
    pub fn from_rows(rows: &[Row], limit: u32) -> Result<Self, StoreError> {
        let items = rows
            .iter()
            .map(InboxItem::from_row)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::page(items, limit))
    }

    /// A page of `limit` from the rows of the query run on each shard: merged newest
    /// first, as the query orders them. Each shard gives its first `limit + 1`, so the
    /// first `limit + 1` of all are among them; the cursor is the last call listed, so
    /// the next page asks every shard from there and nothing is skipped or repeated.
    pub fn merged(shards: &[Vec<Row>], limit: u32) -> Result<Self, StoreError> {
        let mut items = shards
            .iter()
            .flatten()
            .map(InboxItem::from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let key = |i: &InboxItem| {
            (
                i.waiting_since,
                i.session_id.clone(),
                i.tool_call_id.clone(),
            )
        };
        items.sort_unstable_by_key(|i| std::cmp::Reverse(key(i)));
        Ok(Self::page(items, limit))
    }

    /// The first `limit` of `items` (ordered), with a cursor when more follow.
    fn page(mut items: Vec<InboxItem>, limit: u32) -> Self {
        let more = items.len() > limit as usize;
        items.truncate(limit as usize);
        let next_cursor = more.then(|| items.last()).flatten().map(|last| {
            InboxCursor {
                since: last.waiting_since,
                session_id: last.session_id.clone(),
                tool_call_id: last.tool_call_id.clone(),
            }
            .encode()
        });
        Self {
            items,
            next_cursor,
            missing_shards: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Result<InboxQuery, ApiError> {
        let pairs: Vec<_> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        InboxQuery::parse(&pairs)
    }

    #[test]
    fn the_query_takes_its_filters_and_refuses_anything_else() {
        let all = q(&[
            ("agent", "assistant"),
            ("tool", "delete_file"),
            ("kind", "approval"),
            ("cursor", "1795000000001:s_a:call:1"),
            ("limit", "5"),
            ("token", "t"),
        ])
        .unwrap();
        assert_eq!(all.agent.as_deref(), Some("assistant"));
        assert_eq!(all.tool.as_deref(), Some("delete_file"));
        assert_eq!(all.kind, Some(PendingKind::Approval));
        let cursor = all.cursor.unwrap();
        assert_eq!(cursor.since, 1_795_000_000_001);
        assert_eq!(
            (cursor.session_id.as_str(), cursor.tool_call_id.as_str()),
            ("s_a", "call:1")
        );
        assert_eq!(cursor.encode(), "1795000000001:s_a:call:1");
        assert_eq!(all.limit, 5);
        assert_eq!(q(&[]).unwrap().limit, DEFAULT_LIMIT);

        for bad in [
            ("kind", "child"),
            ("kind", "nobody"),
            ("agent", "no spaces"),
            ("tool", ""),
            ("cursor", "x:s_a:c"),
            ("cursor", "1:s a:c"),
            ("cursor", "1:s_a:"),
            ("cursor", "1:s_a"),
            ("limit", "0"),
            ("limit", "101"),
            ("status", "active"),
        ] {
            let e = q(&[bad]).unwrap_err();
            assert_eq!((e.status, e.code), (400, "validation_error"), "{bad:?}");
        }
    }

    #[test]
    fn the_statement_binds_what_the_query_holds() {
        let (_, args) = q(&[]).unwrap().statement();
        assert_eq!(
            args[..6],
            [
                Arg::Null,
                Arg::Null,
                Arg::Null,
                Arg::Null,
                Arg::Null,
                Arg::Null
            ]
        );
        assert_eq!(args[6], Arg::Int(u64::from(DEFAULT_LIMIT) + 1));
        // No caller: every session's calls (`?8 = 0`).
        assert_eq!(
            args[7..],
            [Arg::Int(0), Arg::Null, Arg::Null, Arg::Null, Arg::Null]
        );
        let (_, args) = q(&[("kind", "client"), ("cursor", "7:s_b:c"), ("limit", "2")])
            .unwrap()
            .statement();
        assert_eq!(args[2], Arg::Text("client".into()));
        assert_eq!(
            args[3..7],
            [
                Arg::Int(7),
                Arg::Text("s_b".into()),
                Arg::Text("c".into()),
                Arg::Int(3)
            ]
        );
        // A user's query: their subject, their tenant.
        let caller = Caller {
            user: crate::store::Owner {
                subject: "ann".into(),
                tenant: Some("acme".into()),
            },
            tenant_wide: false,
            roles: Vec::new(),
        };
        let query = InboxQuery {
            caller: Some(caller),
            ..q(&[]).unwrap()
        };
        let (_, args) = query.statement();
        let owned = [
            Arg::Int(1),
            Arg::Text("ann".into()),
            Arg::Text("acme".into()),
        ];
        assert_eq!(args[7..10], owned);
        assert_eq!(args[10..], [Arg::Null, Arg::Null], "no roles");
        let holder = Caller {
            roles: vec!["finance".into()],
            ..query.caller.clone().unwrap()
        };
        let query = InboxQuery {
            caller: Some(holder),
            ..query
        };
        let (_, args) = query.statement();
        let roles = [Arg::Text(r#"["finance"]"#.into()), Arg::Text("acme".into())];
        assert_eq!(args[10..], roles);
    }
}
