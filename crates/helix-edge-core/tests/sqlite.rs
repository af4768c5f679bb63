//! The session object's storage (`helix_edge_core::sqlite`) on a real SQLite, natively:
//! the store and journal conformance suites, and the replication to a second SQLite
//! with the D1 schema the library ships (`crates/helix-edge/migrations`) — batches,
//! a batch sent twice, an outage, a session rebuilt from the record, an erasure.

#![cfg(not(target_arch = "wasm32"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

#[path = "support/lite.rs"]
mod lite;
#[path = "support/record.rs"]
mod record;

use futures::executor::block_on;
use helix_edge_core::host::ManualHost;
use helix_edge_core::journal::conformance;
use helix_edge_core::sqlite::{
    Db, Replica, Replicated, SqliteAttempts, SqliteStore, SqliteStreamLog, SqliteSuspension,
};
use helix_edge_core::store::{Store, StoreError, conformance as store_conformance};
use lite::Lite;
use record::LiteRecord;
use std::cell::Cell as Flag;
use std::rc::Rc;

/// One session object over its own SQLite, replicating to `d1`.
struct Object {
    local: Rc<Lite>,
    replica: Rc<Replica<LiteRecord>>,
    store: SqliteStore<LiteRecord>,
    stream: Rc<SqliteStreamLog>,
}

impl Object {
    fn new(local: Rc<Lite>, d1: &Rc<Lite>, down: &Rc<Flag<bool>>) -> Self {
        let host = Rc::new(ManualHost::new(1_000, "t"));
        let record = LiteRecord {
            db: d1.clone(),
            down: down.clone(),
        };
        let replica = Rc::new(Replica::new(local.clone(), Some(record), host.clone()));
        let store = SqliteStore::new(local.clone(), replica.clone(), 1_000);
        let stream = Rc::new(SqliteStreamLog::open(local.clone(), host).unwrap());
        store.with_stream(stream.clone());
        Self {
            local,
            replica,
            store,
            stream,
        }
    }
}

fn world() -> (Object, Rc<Lite>, Rc<Flag<bool>>) {
    let d1 = Lite::d1();
    let down = Rc::new(Flag::new(false));
    (Object::new(Lite::object(), &d1, &down), d1, down)
}

fn failures(results: &[store_conformance::CheckResult]) -> Vec<String> {
    results
        .iter()
        .filter_map(|r| r.outcome.as_ref().err().map(|e| format!("{}: {e}", r.name)))
        .collect()
}

#[test]
fn the_object_store_passes_the_store_conformance_suite_and_d1_ends_equal() {
    let (object, _d1, _) = world();
    let results = block_on(store_conformance::run(&object.store, "t"));
    assert_eq!(results.len(), 12);
    assert!(failures(&results).is_empty(), "{:#?}", failures(&results));
    let (queued_commits, queued_bytes) = object.replica.backlog();
    let replicated = block_on(object.replica.replicate());
    let Replicated::Caught { commits, sends, .. } = replicated else {
        panic!("not caught up: {replicated:?}");
    };
    assert!(commits > 10);
    // Each batch the record took is reported with its commits and bytes.
    let sends: Vec<_> = helix_edge_core::sqlite::sends(&sends).collect();
    assert!(!sends.is_empty());
    assert_eq!(sends.iter().map(|s| s.commits).sum::<u64>(), queued_commits);
    assert_eq!(sends.iter().map(|s| s.bytes).sum::<u64>(), queued_bytes);
    assert_eq!(object.replica.backlog(), (0, 0));
    for id in ["t-commit", "t-restore", "t-children", "t-pending"] {
        let (local, remote) = block_on(object.replica.dump(id)).unwrap();
        assert_eq!(local, remote, "{id}");
        assert!(local["sessions"].as_array().unwrap().len() == 1, "{id}");
    }
}

#[test]
fn the_journal_parts_pass_their_conformance_suites() {
    let host = Rc::new(ManualHost::new(1_000, "t"));
    let stream = SqliteStreamLog::open(Lite::object(), host.clone()).unwrap();
    let attempts = SqliteAttempts::new(Lite::object(), host);
    let suspension = SqliteSuspension::new(Lite::object());
    let all = [
        conformance::stream_log(&stream),
        conformance::step_attempts(&attempts),
        conformance::suspension(&suspension),
    ]
    .concat();
    assert!(failures(&all).is_empty(), "{:#?}", failures(&all));
    assert_eq!(all.len(), 12);
}

/// An object's storage that counts its reads of the outbox.
struct Counted {
    lite: Rc<Lite>,
    outbox_reads: Flag<u32>,
}

impl Db for Counted {
    fn query(
        &self,
        sql: &str,
        args: &[helix_edge_core::store::rows::Arg],
    ) -> Result<Vec<helix_edge_core::sqlite::Row>, String> {
        if sql.starts_with("SELECT seq, session_id") {
            self.outbox_reads.set(self.outbox_reads.get() + 1);
        }
        self.lite.query(sql, args)
    }

    fn atomically(&self, statements: &[helix_edge_core::sqlite::Owned]) -> Result<(), String> {
        self.lite.atomically(statements)
    }
}

#[test]
fn a_replication_reads_the_outbox_only_while_its_count_says_commits_wait() {
    let d1 = Lite::d1();
    let local = Rc::new(Counted {
        lite: Lite::object(),
        outbox_reads: Flag::new(0),
    });
    let host = Rc::new(ManualHost::new(1_000, "t"));
    let record = LiteRecord {
        db: d1.clone(),
        down: Rc::new(Flag::new(false)),
    };
    let replica = Rc::new(Replica::new(local.clone(), Some(record), host.clone()));
    let store = SqliteStore::new(local.clone(), replica.clone(), 1_000);
    store.with_stream(Rc::new(SqliteStreamLog::open(local.clone(), host).unwrap()));
    let reads = || local.outbox_reads.get();
    for prefix in ["t", "u"] {
        let results = block_on(store_conformance::run(&store, prefix));
        assert!(failures(&results).is_empty(), "{:#?}", failures(&results));
        let before = reads();
        let caught = block_on(replica.replicate());
        assert!(
            matches!(caught, Replicated::Caught { commits, .. } if commits > 10),
            "{caught:?}"
        );
        // One read per batch sent; none once the count says the outbox is empty.
        assert_eq!(reads() - before, 1, "{prefix}");
        let before = reads();
        let again = block_on(replica.replicate());
        assert!(
            matches!(again, Replicated::Caught { commits: 0, .. }),
            "{again:?}"
        );
        assert_eq!(reads(), before);
        assert_eq!(replica.backlog(), (0, 0));
    }
    // What the count skipped was indeed sent: D1 holds every session as the object does.
    for id in ["t-commit", "u-commit", "u-children"] {
        let (local, remote) = block_on(replica.dump(id)).unwrap();
        assert_eq!(local, remote, "{id}");
    }
}

#[test]
fn an_answer_stored_by_an_earlier_process_stands_against_a_second_one() {
    use helix_edge_core::journal::Suspension;
    use helix_edge_core::store::{Answer, AnswerOutcome};
    let local = Lite::object();
    let approval = |approved| Answer::Approval {
        approved,
        reason: None,
        answered_at: 7,
        decided_by: None,
    };
    let before = SqliteSuspension::new(local.clone());
    assert_eq!(
        before.answer("s", "c", &approval(true)).unwrap(),
        AnswerOutcome::Stored
    );
    // A new process knows nothing of it but what its storage says.
    let after = SqliteSuspension::new(local.clone());
    assert_eq!(
        after.answer("s", "c", &approval(false)).unwrap(),
        AnswerOutcome::AlreadyAnswered(approval(true))
    );
    assert_eq!(after.find_answer("s", "c").unwrap(), Some(approval(true)));
    assert_eq!(
        after.answer("s", "d", &approval(false)).unwrap(),
        AnswerOutcome::Stored
    );
    assert_eq!(before.find_answer("s", "d").unwrap(), Some(approval(false)));
}

#[test]
fn a_batch_sent_again_after_a_crash_is_dropped_by_its_guard_and_nothing_is_written_twice() {
    let (object, d1, _) = world();
    let results = block_on(store_conformance::run(&object.store, "t"));
    assert!(failures(&results).is_empty());
    // The outbox as it was before the replication: the process dies before dropping it.
    let outbox: Vec<(String, i64, String, i64, i64)> = {
        let mut stmt = object
            .local
            .0
            .prepare("SELECT session_id, version, batch, bytes, committed_at FROM replica_outbox ORDER BY seq")
            .unwrap();
        stmt.query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    assert!(block_on(object.replica.replicate()) != Replicated::Busy);
    let messages = d1.count("SELECT COUNT(*) FROM messages");
    for (session, version, batch, bytes, at) in &outbox {
        object
            .local
            .0
            .execute(
                "INSERT INTO replica_outbox (session_id, version, batch, bytes, committed_at) VALUES (?, ?, ?, ?, ?)",
                rusqlite::params![session, version, batch, bytes, at],
            )
            .unwrap();
    }
    object.replica.recount();
    assert_eq!(object.replica.backlog().0, outbox.len() as u64);
    let again = block_on(object.replica.replicate());
    assert!(
        matches!(again, Replicated::Caught { commits: 0, .. }),
        "{again:?}"
    );
    assert_eq!(object.replica.backlog(), (0, 0));
    assert_eq!(d1.count("SELECT COUNT(*) FROM messages"), messages);
}

#[test]
fn an_outage_backs_off_never_blocks_a_commit_and_catches_up() {
    let (object, d1, down) = world();
    let results = block_on(store_conformance::run(&object.store, "t"));
    assert!(failures(&results).is_empty());
    down.set(true);
    let retries: Vec<u64> = (0..3)
        .map(|_| match block_on(object.replica.replicate()) {
            Replicated::Failed { retry_ms, .. } => retry_ms,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(retries, [1_000, 2_000, 4_000]);
    // The session goes on while D1 is down: its commits wait in the outbox.
    let loaded = block_on(object.store.load("t-commit")).unwrap().unwrap();
    let mut head = loaded.head.clone();
    head.updated_at += 1;
    let commit = helix_edge_core::store::Commit {
        head,
        truncate_messages_to: None,
        messages: Vec::new(),
        state: helix_edge_core::store::StateChange::None,
        checkpoint: None,
        clear_interrupt: false,
        subsessions: Vec::new(),
    };
    let version = block_on(object.store.commit("t-commit", loaded.head.version, commit));
    assert_eq!(version, Ok(loaded.head.version + 1));
    let waiting = object.replica.backlog().0;
    assert!(waiting > 10, "{waiting}");
    assert_eq!(d1.count("SELECT COUNT(*) FROM sessions"), 0);
    down.set(false);
    let caught = block_on(object.replica.replicate());
    assert!(matches!(caught, Replicated::Caught { commits, .. } if commits == waiting));
    let held = d1.count("SELECT version FROM sessions WHERE id = 't-commit'");
    assert_eq!(held as u64, loaded.head.version + 1);
}

#[test]
fn a_session_lost_with_the_objects_storage_is_rebuilt_from_d1() {
    let (object, d1, down) = world();
    let results = block_on(store_conformance::run(&object.store, "t"));
    assert!(failures(&results).is_empty());
    block_on(object.replica.replicate());
    let before = block_on(object.store.load("t-commit")).unwrap().unwrap();
    let messages = block_on(object.store.messages("t-commit", 0, 100)).unwrap();
    // A new object over empty storage (the old one's is gone), reaching the same D1.
    let fresh = Object::new(Lite::object(), &d1, &down);
    let after = block_on(fresh.store.load("t-commit")).unwrap().unwrap();
    assert_eq!(after, before);
    assert_eq!(
        block_on(fresh.store.messages("t-commit", 0, 100)).unwrap(),
        messages
    );
    assert_eq!(block_on(fresh.store.load("nobody")).unwrap(), None);
    let (local, remote) = block_on(fresh.replica.dump("t-commit")).unwrap();
    assert_eq!(local, remote);
    assert!(fresh.stream.last_seq() == 0, "the stream starts over");
}

#[test]
fn an_erasure_removes_the_session_from_both_and_waits_for_d1() {
    let (object, d1, down) = world();
    let results = block_on(store_conformance::run(&object.store, "t"));
    assert!(failures(&results).is_empty());
    block_on(object.replica.replicate());
    let rows = |id: &str| {
        d1.count(&format!(
            "SELECT COUNT(*) FROM messages WHERE session_id = '{id}'"
        ))
    };
    assert!(rows("t-pages") > 0);
    down.set(true);
    let refused = block_on(object.store.delete("t-pages"));
    assert!(refused.is_err(), "D1 down: nothing is erased");
    assert!(block_on(object.store.load("t-pages")).unwrap().is_some());
    down.set(false);
    block_on(object.store.delete("t-pages")).unwrap();
    assert_eq!(rows("t-pages"), 0);
    assert_eq!(block_on(object.store.load("t-pages")).unwrap(), None);
    assert!(block_on(object.store.load("t-commit")).unwrap().is_some());
}

#[test]
fn the_session_list_reads_d1_newest_first_with_filters_and_a_cursor() {
    use helix_edge_core::api::{ListQuery, SessionList, SessionSummary};
    let (object, d1, _) = world();
    let results = block_on(store_conformance::run(&object.store, "t"));
    assert!(failures(&results).is_empty());
    block_on(object.replica.replicate());
    let list = |pairs: &[(&str, &str)]| {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let query = ListQuery::parse(&pairs).unwrap();
        let (sql, args) = query.statement();
        let rows = d1.query(sql, &args).unwrap();
        let rows: Vec<SessionSummary> = rows
            .iter()
            .map(|r| SessionSummary::from_row(r).unwrap())
            .collect();
        SessionList::page(rows, query.limit)
    };
    let all = list(&[("limit", "100")]);
    let stored = d1.count("SELECT COUNT(*) FROM sessions") as usize;
    assert_eq!(all.sessions.len(), stored);
    assert!(
        all.sessions
            .windows(2)
            .all(|w| (w[0].updated_at, &w[0].session_id) >= (w[1].updated_at, &w[1].session_id)),
        "newest first"
    );
    // Page through two at a time: every session once, in the same order.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut pairs = vec![("limit", "2")];
        if let Some(c) = cursor.as_deref() {
            pairs.push(("cursor", c));
        }
        let page = list(&pairs);
        seen.extend(page.sessions.iter().map(|s| s.session_id.clone()));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let ids: Vec<String> = all.sessions.iter().map(|s| s.session_id.clone()).collect();
    assert_eq!(seen, ids);
    let active = list(&[("status", "active"), ("limit", "100")]);
    assert!(!active.sessions.is_empty());
    assert!(
        active
            .sessions
            .iter()
            .all(|s| s.status == helix_edge_core::store::SessionStatus::Active)
    );
    assert!(list(&[("agent", "nobody")]).sessions.is_empty());
}

#[test]
fn without_d1_commits_still_queue_and_replication_names_the_missing_binding() {
    let local = Lite::object();
    let host = Rc::new(ManualHost::new(1_000, "t"));
    let replica = Rc::new(Replica::<LiteRecord>::new(local.clone(), None, host));
    let store = SqliteStore::new(local, replica.clone(), u64::MAX);
    let results = block_on(store_conformance::run(&store, "t"));
    assert!(failures(&results).is_empty(), "{:#?}", failures(&results));
    assert!(replica.backlog().0 > 10);
    match block_on(replica.replicate()) {
        Replicated::Failed { error, .. } => assert_eq!(
            error,
            StoreError::Backend("the D1 binding is missing".into())
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_childs_relay_cursor_sends_each_confirmed_chunk_once_and_a_parent_appends_each_once() {
    use helix_edge_core::chunk::StreamEvent;
    use helix_edge_core::journal::StreamLog;
    let host = Rc::new(ManualHost::new(1_000, "t"));
    let child = SqliteStreamLog::open(Lite::object(), host.clone()).unwrap();
    let event = |n: u64| StreamEvent::Fail {
        error: helix_edge_core::error::ErrorInfo {
            code: format!("e{n}"),
            message: String::new(),
            retryable: false,
        },
    };
    // Three chunks confirmed by a commit, one staged whose commit has not landed.
    for n in 0..3 {
        child.emit(helix_edge_core::chunk::StreamEvent::Chunk(
            helix_edge_core::chunk::Chunk {
                session_id: "k".into(),
                agent_type: "a".into(),
                run_id: "r".into(),
                step: None,
                timestamp: n,
                body: helix_edge_core::chunk::ChunkBody::RunStarted { turn: 1 },
            },
        ));
    }
    child.emit(event(0));
    child.confirm(0);
    child.stage("c1", 2, vec![event(1)]);
    let (upto, chunks) = child.unrelayed(2);
    assert_eq!((upto, chunks.len()), (2, 2), "at most the batch");
    child.mark_relayed(upto);
    let (upto, rest) = child.unrelayed(500);
    assert_eq!(upto, 4, "up to what is confirmed");
    assert_eq!(rest.len(), 1, "chunks only: the `fail` stays the child's");
    child.mark_relayed(upto);
    assert_eq!(child.unrelayed(500), (4, Vec::new()));
    // The parent takes a relay, then the same relay again (a retry): each chunk once.
    let parent = SqliteStreamLog::open(Lite::object(), host).unwrap();
    let all: Vec<(u64, String)> = chunks.into_iter().chain(rest).collect();
    parent.append_relayed("k", &all);
    parent.append_relayed("k", &all);
    assert_eq!(parent.last_seq(), 3);
    assert_eq!(parent.relayed_from("k"), 3);
    let recovered = parent.recover(0, "none");
    assert_eq!(
        recovered.torn_from, None,
        "relayed chunks count as confirmed"
    );
}

#[test]
fn a_drive_borrows_the_kept_transcript_and_only_its_latest_comes_back() {
    let (object, d1, down) = world();
    let results = block_on(store_conformance::run(&object.store, "t"));
    assert!(failures(&results).is_empty());
    let durable = |object: &Object, count| {
        // Another object over the same storage reads the tables, never a kept image.
        let fresh = Object::new(object.local.clone(), &d1, &down);
        block_on(fresh.store.messages("t-commit", 0, count)).unwrap()
    };
    let loaded = block_on(object.store.load("t-commit")).unwrap().unwrap();
    let count = loaded.head.message_count;
    assert!(count > 0);
    let mut transcript = block_on(object.store.lend_transcript("t-commit", count)).unwrap();
    assert_eq!(transcript, durable(&object, count));

    // A commit while it is lent, then the drive's copy (with the commit's message) back.
    let said = helix_edge_core::message::Message::user("one more");
    let mut head = loaded.head.clone();
    head.message_count += 1;
    let commit = helix_edge_core::store::Commit {
        head,
        truncate_messages_to: None,
        messages: vec![said.clone()],
        state: helix_edge_core::store::StateChange::None,
        checkpoint: None,
        clear_interrupt: false,
        subsessions: Vec::new(),
    };
    let version = block_on(object.store.commit("t-commit", loaded.head.version, commit)).unwrap();
    transcript.push(said);
    object
        .store
        .give_back("t-commit", version, transcript.clone());
    assert_eq!(durable(&object, count + 1), transcript);
    let lent = block_on(object.store.lend_transcript("t-commit", count + 1)).unwrap();
    assert_eq!(lent, transcript);

    // One given back as of an older version (or of another length) is not kept.
    let wrong = vec![helix_edge_core::message::Message::user("not the transcript"); lent.len()];
    object
        .store
        .give_back("t-commit", loaded.head.version, wrong.clone());
    let mut short = lent.clone();
    short.pop();
    object.store.give_back("t-commit", version, short);
    assert_eq!(
        block_on(object.store.messages("t-commit", 0, count + 1)).unwrap(),
        transcript
    );
    object.store.give_back("t-commit", version, lent);
    assert_eq!(
        block_on(object.store.lend_transcript("t-commit", count + 1)).unwrap(),
        transcript
    );
}
