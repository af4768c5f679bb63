//! The queries across sessions over a record spread on several databases (shards): each
//! session replicated to the shard `shard_of` gives it, the query run on every shard and
//! the rows merged — the session list, the inbox and usage equal to what one database
//! holding every session answers, page after page, with interleaved times and ties.

#![cfg(not(target_arch = "wasm32"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

#[path = "support/lite.rs"]
mod lite;
#[path = "support/record.rs"]
mod record;
#[path = "support/replicated.rs"]
mod replicated;

use helix_edge_core::api::{
    InboxPage, InboxQuery, ListQuery, SessionList, SessionSummary, UsageQuery, UsageReport,
};
use helix_edge_core::model::Usage;
use helix_edge_core::sqlite::{Db, Row};
use helix_edge_core::store::PendingKind;
use helix_edge_core::store::shards::shard_of;
use lite::Lite;
use replicated::*;
use std::rc::Rc;

const SHARDS: usize = 4;

/// The same 24 sessions on four shards and on one database: three agents, runs started
/// on three days, updated at times that repeat (ties broken by id), each waiting on one
/// or two calls whose waits also tie.
fn world() -> (Vec<Rc<Lite>>, Rc<Lite>) {
    let shards: Vec<Rc<Lite>> = (0..SHARDS).map(|_| Lite::d1()).collect();
    let one = Lite::d1();
    const DAY: u64 = 86_400_000;
    for n in 0..24u64 {
        let id = format!("s_{n:02}");
        let mut head = head(
            &id,
            ["assistant", "researcher", "coordinator"][n as usize % 3],
        );
        head.updated_at = 1_000 + (n % 5) * 10;
        head.run.started_at = 1_700_000_000_000 + (n % 3) * DAY;
        head.run.usage = Usage {
            input_tokens: 10 + n,
            output_tokens: n,
            ..Usage::default()
        };
        head.pending = (0..1 + n % 2)
            .map(|k| {
                call(
                    &format!("c{n}_{k}"),
                    "delete_file",
                    PendingKind::Approval,
                    100 + n % 4,
                )
            })
            .collect();
        replicated(&shards[shard_of(&id, SHARDS)], head.clone());
        replicated(&one, head);
    }
    for (i, shard) in shards.iter().enumerate() {
        let held = shard.query("SELECT COUNT(*) FROM sessions", &[]).unwrap();
        assert!(
            matches!(held[0][0], helix_edge_core::sqlite::Cell::Int(n) if n > 0),
            "shard {i} holds sessions"
        );
    }
    (shards, one)
}

fn pairs(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// The rows of `sql` on each database.
fn on_each(
    dbs: &[Rc<Lite>],
    statement: &(&str, Vec<helix_edge_core::store::rows::Arg>),
) -> Vec<Vec<Row>> {
    dbs.iter()
        .map(|db| db.query(statement.0, &statement.1).unwrap())
        .collect()
}

/// Every page of the session list, `limit` at a time, over `dbs`.
fn list_pages(dbs: &[Rc<Lite>], limit: u32) -> Vec<String> {
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut given = vec![("limit", limit.to_string())];
        given.extend(cursor.clone().map(|c| ("cursor", c)));
        let query = ListQuery::parse(&pairs(&given)).unwrap();
        let shards = on_each(dbs, &query.statement());
        let rows = shards.iter().map(|rows| {
            rows.iter()
                .map(SessionSummary::from_row)
                .collect::<Result<Vec<_>, _>>()
                .unwrap()
        });
        let page = SessionList::merged(rows.collect(), query.limit);
        assert!(page.sessions.len() <= limit as usize);
        listed.extend(page.sessions.iter().map(|s| s.session_id.clone()));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return listed,
        }
    }
}

/// Every page of the inbox, `limit` at a time, over `dbs`.
fn inbox_pages(dbs: &[Rc<Lite>], limit: u32) -> Vec<(String, String)> {
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut given = vec![("limit", limit.to_string())];
        given.extend(cursor.clone().map(|c| ("cursor", c)));
        let query = InboxQuery::parse(&pairs(&given)).unwrap();
        let page = InboxPage::merged(&on_each(dbs, &query.statement()), query.limit).unwrap();
        assert!(page.items.len() <= limit as usize);
        listed.extend(
            page.items
                .iter()
                .map(|i| (i.session_id.clone(), i.tool_call_id.clone())),
        );
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return listed,
        }
    }
}

#[test]
fn the_list_across_shards_is_the_list_of_one_database_page_after_page() {
    let (shards, one) = world();
    let whole = list_pages(&[one], 100);
    assert_eq!(whole.len(), 24);
    for limit in [1, 3, 5, 7, 100] {
        assert_eq!(list_pages(&shards, limit), whole, "limit {limit}");
    }
}

#[test]
fn the_inbox_across_shards_is_the_inbox_of_one_database_page_after_page() {
    let (shards, one) = world();
    let whole = inbox_pages(&[one], 100);
    assert_eq!(
        whole.len(),
        36,
        "24 sessions, half of them waiting on two calls"
    );
    for limit in [1, 4, 9, 100] {
        assert_eq!(inbox_pages(&shards, limit), whole, "limit {limit}");
    }
}

#[test]
fn usage_across_shards_adds_up_to_the_usage_of_one_database() {
    let (shards, one) = world();
    for group_by in ["agent", "day", "session", "model"] {
        let query = UsageQuery::parse(&pairs(&[("groupBy", group_by.to_string())])).unwrap();
        let merged = UsageReport::merged(&query, &on_each(&shards, &query.statement())).unwrap();
        let single = UsageReport::merged(
            &query,
            &on_each(std::slice::from_ref(&one), &query.statement()),
        )
        .unwrap();
        assert_eq!(merged, single, "by {group_by}");
        assert!(!merged.truncated);
    }
    let query = UsageQuery::parse(&pairs(&[("groupBy", "agent".into())])).unwrap();
    let report = UsageReport::merged(&query, &on_each(&shards, &query.statement())).unwrap();
    assert_eq!(report.groups.len(), 3);
    assert_eq!(report.total.runs, 24);
    assert_eq!(
        report.total.usage.input_tokens,
        (0..24).map(|n| 10 + n).sum::<u64>()
    );
}
