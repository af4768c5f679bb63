//! Retention's queries and statements against the D1 schema the library ships: which
//! sessions a run compacts or erases (ended ones, past the cutoff, oldest first, in
//! batches that pick up what is left), what compaction leaves (the session's row and
//! runs), and that a compacted session is not rebuilt from the record it no longer
//! fills; a record that keeps the index only (`D1_REPLICA=index`) is never sent more.

#![cfg(not(target_arch = "wasm32"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

#[path = "support/lite.rs"]
mod lite;
#[path = "support/record.rs"]
mod record;
#[path = "support/replicated.rs"]
mod replicated;

use futures::executor::block_on;
use helix_edge_core::host::ManualHost;
use helix_edge_core::sqlite::{Db, Owned, Replica, SqliteStore, text};
use helix_edge_core::store::SessionStatus;
use helix_edge_core::store::retention::{Retention, compaction};
use helix_edge_core::store::{ParentRef, Store};
use lite::Lite;
use record::LiteRecord;
use replicated::*;
use std::cell::Cell as Flag;
use std::rc::Rc;

const DAY: u64 = 86_400_000;
const NOW: u64 = 400 * DAY;

/// Sessions on one record: ended 40 and 10 days ago (a root with a child, a failure, an
/// abort), one still waiting from long ago, one completed today.
fn world() -> Rc<Lite> {
    let d1 = Lite::d1();
    let at = |id: &str, status: SessionStatus, days_ago: u64| {
        let mut h = head(id, "assistant");
        h.status = status;
        h.updated_at = NOW - days_ago * DAY;
        h
    };
    replicated(&d1, at("old-done", SessionStatus::Completed, 40));
    let mut child = at("old-done-child", SessionStatus::Completed, 40);
    child.parent = Some(ParentRef {
        session_id: "old-done".into(),
        tool_call_id: "call_1".into(),
        root_id: "old-done".into(),
    });
    replicated(&d1, child);
    replicated(&d1, at("old-failed", SessionStatus::Failed, 40));
    replicated(&d1, at("recent-aborted", SessionStatus::Aborted, 10));
    replicated(&d1, at("old-waiting", SessionStatus::Active, 90));
    replicated(&d1, at("today", SessionStatus::Completed, 0));
    d1
}

fn ids(
    d1: &Lite,
    statement: Option<(&'static str, Vec<helix_edge_core::store::rows::Arg>)>,
) -> Vec<String> {
    let (sql, args) = statement.unwrap();
    let rows = d1.query(sql, &args).unwrap();
    rows.iter().map(|r| text(r, 0).unwrap()).collect()
}

fn compact(d1: &Lite, id: &str) {
    compact_before(d1, id, NOW);
}

/// Compacts `id` if it ended before `cutoff`.
fn compact_before(d1: &Lite, id: &str, cutoff: u64) {
    let statements: Vec<Owned> = compaction(id, cutoff)
        .into_iter()
        .map(|s| (s.sql.to_string(), s.args))
        .collect();
    d1.atomically(&statements).unwrap();
}

#[test]
fn ended_sessions_past_the_cutoff_are_picked_oldest_first_in_batches() {
    let d1 = world();
    let policy = Retention::from_vars(Some("30"), Some("30"), Some("2")).unwrap();
    // Erasure takes roots only (a child goes with its root), ended, past the cutoff.
    assert_eq!(ids(&d1, policy.to_erase(NOW)), ["old-done", "old-failed"]);
    // Compaction takes every ended session with a transcript still in the record, two at
    // a time; what is compacted is not picked again, so the next batch goes on.
    assert_eq!(
        ids(&d1, policy.to_compact(NOW)),
        ["old-done", "old-done-child"]
    );
    compact(&d1, "old-done");
    compact(&d1, "old-done-child");
    assert_eq!(ids(&d1, policy.to_compact(NOW)), ["old-failed"]);
    compact(&d1, "old-failed");
    assert!(ids(&d1, policy.to_compact(NOW)).is_empty());
    // A root with a schedule is idle between fires: never erased.
    let scheduled = "INSERT INTO schedules (session_id, schedule_id, agent, next_fire_at, body) \
                     VALUES ('old-failed', 'schedule_1', 'assistant', 0, '{}')";
    d1.atomically(&[(scheduled.to_string(), vec![])]).unwrap();
    assert_eq!(ids(&d1, policy.to_erase(NOW)), ["old-done"]);
    // Zero days: every ended session, today's too; never one that waits.
    let now = Retention::from_vars(Some("0"), None, None).unwrap();
    assert_eq!(
        ids(&d1, now.to_compact(NOW + 1)),
        ["recent-aborted", "today"]
    );
}

#[test]
fn compaction_leaves_the_row_and_the_runs_and_the_session_is_not_rebuilt_from_it() {
    let d1 = world();
    let count = |table: &str, id: &str| {
        d1.count(&format!(
            "SELECT COUNT(*) FROM {table} WHERE session_id = '{id}'"
        ))
    };
    assert!(count("messages", "old-done") > 0);
    assert!(count("checkpoints", "old-done") > 0);
    assert!(count("state_log", "old-done") > 0);
    let runs = count("runs", "old-done");
    assert!(runs > 0);
    compact(&d1, "old-done");
    assert_eq!(
        (
            count("messages", "old-done"),
            count("checkpoints", "old-done"),
            count("state_log", "old-done")
        ),
        (0, 0, 0)
    );
    assert_eq!(count("runs", "old-done"), runs, "usage stays");
    assert_eq!(
        d1.count("SELECT COUNT(*) FROM sessions WHERE id = 'old-done'"),
        1
    );
    assert!(count("messages", "old-failed") > 0, "others untouched");
    // Picked as ended before a cutoff, then started again (its row says it ended
    // later): the compaction holds back.
    compact_before(&d1, "old-failed", NOW - 50 * DAY);
    assert!(
        count("messages", "old-failed") > 0,
        "ended after the cutoff: kept"
    );

    // A new object over empty storage finds the index but no copy: not rebuilt.
    let record = LiteRecord {
        db: d1.clone(),
        down: Rc::new(Flag::new(false)),
    };
    let host = Rc::new(ManualHost::new(NOW, "t"));
    let local = Lite::object();
    let replica = Rc::new(Replica::new(local.clone(), Some(record), host));
    let store = SqliteStore::new(local, replica, 1_000);
    assert_eq!(block_on(store.load("old-done")).unwrap(), None);
    assert!(
        block_on(store.load("old-failed")).unwrap().is_some(),
        "a full copy is rebuilt"
    );

    // A compacted session that went on: the record has its new rows only (a follow-up's
    // message, the head counting it). Still no copy to rebuild from.
    let statements: Vec<Owned> = vec![
        (
            "INSERT INTO messages (session_id, seq, body) VALUES ('old-done', 1, '{\"role\":\"user\",\"content\":\"more\"}')".into(),
            vec![],
        ),
        (
            "UPDATE sessions SET head = json_set(head, '$.messageCount', 2) WHERE id = 'old-done'".into(),
            vec![],
        ),
    ];
    d1.atomically(&statements).unwrap();
    assert_eq!(block_on(store.load("old-done")).unwrap(), None);
}

#[test]
fn a_record_that_keeps_the_index_only_is_sent_no_transcript() {
    let d1 = Lite::d1();
    let record = LiteRecord {
        db: d1.clone(),
        down: Rc::new(Flag::new(false)),
    };
    let host = Rc::new(ManualHost::new(NOW, "t"));
    let local = Lite::object();
    let replica = Rc::new(Replica::new(local.clone(), Some(record), host).index_only(true));
    let store = SqliteStore::new(local, replica.clone(), 1_000);
    let results = block_on(helix_edge_core::store::conformance::run(&store, "t"));
    assert!(results.iter().all(|r| r.outcome.is_ok()), "{results:?}");
    block_on(replica.replicate());
    assert_eq!(replica.backlog().0, 0, "everything was sent");
    let count = |table: &str| d1.count(&format!("SELECT COUNT(*) FROM {table}"));
    assert!(count("sessions") > 0 && count("runs") > 0);
    assert_eq!(
        (count("messages"), count("checkpoints"), count("state_log")),
        (0, 0, 0)
    );
    // The index agrees with the object's rows of the same tables.
    let compared = block_on(replica.compare("t-commit")).unwrap();
    assert_eq!(compared["equal"], true, "{compared}");
    // The object itself has it all.
    assert!(
        !block_on(store.messages("t-commit", 0, 100))
            .unwrap()
            .is_empty()
    );
}
